// The command line's app: the subcommand registry, parsing and dispatch (app.hpp).
#include "app.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "command.hpp"
#include "gs/base/error.hpp"
#include "gs/version.hpp"

namespace gs::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

namespace {
std::vector<std::string>& invocation_storage() {
  static std::vector<std::string> arguments;
  return arguments;
}
}  // namespace

const std::vector<std::string>& invocation() { return invocation_storage(); }

int run(int argc, const char* const* argv) {
  invocation_storage().assign(argv, argv + argc);
  CLI::App app{"gradscope: how gradients are distributed, and how to compress them"};
  app.set_version_flag("--version", std::string("gradscope ") + gs::kVersion);
  app.require_subcommand(1);

  auto commands = registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  std::map<CLI::App*, Runner> runners;
  for (const auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runners[sub] = c.setup(*sub);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, runner] : runners)
      if (sub->parsed()) return runner();
    return 2;
  } catch (const gs::Error& e) {
    std::fprintf(stderr, "gradscope: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradscope: internal error: %s\n", e.what());
    return 3;
  }
}

}  // namespace gs::cli
