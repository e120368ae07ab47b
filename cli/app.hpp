#pragma once
// The gradscope command line as a function: builds the CLI11 app from the subcommand registry
// (command.hpp), parses argv and runs the chosen subcommand. Errors become one line on stderr and
// an exit code: 1 for gs::Error, 2 without a subcommand or on a parse error (CLI11's codes), 3 for
// any other exception. main() calls it; the option parsers' fuzz target does too.
#include <string>
#include <vector>

namespace gs::cli {

int run(int argc, const char* const* argv);

// The arguments of the running run(), argv[0] included: for a command that hands the command line
// on unchanged to another executable (torch_forward.cpp).
const std::vector<std::string>& invocation();

}  // namespace gs::cli
