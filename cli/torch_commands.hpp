#pragma once
// The subcommands that need libtorch, in one table. Loading libtorch costs about half a second
// before main(), so they live in a second executable, gradscope-torch (cli/torch/, which holds
// every command), and gradscope itself never loads it: it lists these rows in --help and hands the
// whole command line to gradscope-torch next to it (torch_forward.cpp). Each file in cli/torch/
// registers with GS_TORCH_COMMAND, which takes its help and place from its row here, so both
// executables show the same text; a command without a row does not compile.
#include <array>
#include <string_view>

#include "command.hpp"

namespace gs::cli {

struct TorchCommand {
  std::string_view name;
  std::string_view help;
  int order;  // position in --help, among all commands
};

inline constexpr std::array kTorchCommands{
    TorchCommand{"demo", "Record a short Fashion-MNIST CNN training run and show what it holds", 1},
    TorchCommand{"capture", "Train a Fashion-MNIST model and record its gradients to a snapshot file", 10},
    TorchCommand{"train", "compressed (distributed) training on Fashion-MNIST", 40},
};

// The executable that runs them, found in the directory of gradscope's own.
inline constexpr std::string_view kTorchExecutable = "gradscope-torch";

// The row of `name`; evaluated while compiling, so a name missing from the table is a compile error.
consteval const TorchCommand& torch_command(std::string_view name) {
  for (const auto& c : kTorchCommands)
    if (c.name == name) return c;
  throw "a torch command needs its row in kTorchCommands (cli/torch_commands.hpp)";
}

}  // namespace gs::cli

#define GS_TORCH_COMMAND(name, setup) \
  GS_COMMAND(name, std::string(::gs::cli::torch_command(name).help), ::gs::cli::torch_command(name).order, setup)
