// gradscope: the command-line front end. Thin: every subcommand parses into a library's config
// struct and calls it (app.cpp). Errors become one line on stderr and a non-zero exit.
#include "app.hpp"
#include "device_failure.hpp"
#include "gs/base/allocator.hpp"

int main(int argc, char** argv) {
  gs::tune_allocator();
  gs::cli::arm_fault_injection_from_environment();
  return gs::cli::run(argc, argv);
}
