#pragma once
namespace tfb {
/// Parses the command line and runs the subcommand. Returns the exit code.
int run_cli(int argc, char** argv);
}  // namespace tfb
