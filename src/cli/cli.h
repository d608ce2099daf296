#pragma once
// The command line (the tfb_cli library): argv to one command's options, then
// the command. Each command's options and CLI11 definition are in
// src/cli/cmd/NAME.cpp; this is the table of them and what is shared.
#include <optional>

#include "commands.h"

namespace tfb {

struct parsed_command {
  /// The command to run, or nullopt when the command line was handled
  /// already (help, --version, an error printed): then exit with `exit`.
  std::optional<command_options> options;
  int exit = 0;
};

/// Parses argv. CLI11 reads the TFBARRIER_* variables that options name
/// (--name's TFBARRIER_NAME, ...) from the process's environment; the rest
/// (address, counts, scope) are resolved when the command runs (settings.h).
/// keep_app leaves the parser undestroyed, for a process about to exit:
/// tearing CLI11's options down is a large part of a short command's run.
parsed_command parse_command_line(int argc, char** argv, bool keep_app = false);

/// Runs the command; returns its exit code.
int run_command(const command_options& options);

/// parse_command_line, then run_command. Returns the exit code.
int run_cli(int argc, char** argv);

}  // namespace tfb
