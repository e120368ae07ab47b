#pragma once
// Subcommand registry. Each cli/<name>.cpp registers itself with GS_COMMAND: it adds its options
// to a CLI11 subcommand, filling a config struct owned by the library it calls, and returns the
// function that runs once parsing succeeded. main() catches gs::Error and prints one line.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace gs::cli {

using Runner = std::function<int()>;
using Setup = std::function<Runner(CLI::App& sub)>;

struct Command {
  std::string name;
  std::string help;
  int order;  // position in --help
  Setup setup;
};

std::vector<Command>& registry();

struct Registrar {
  Registrar(std::string name, std::string help, int order, Setup setup) {
    registry().push_back({std::move(name), std::move(help), order, std::move(setup)});
  }
};

}  // namespace gs::cli

#define GS_CLI_CONCAT2(a, b) a##b
#define GS_CLI_CONCAT(a, b) GS_CLI_CONCAT2(a, b)
#define GS_COMMAND(name, help, order, setup) \
  static const ::gs::cli::Registrar GS_CLI_CONCAT(gs_command_, __LINE__) { name, help, order, setup }
