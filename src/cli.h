#pragma once
// The command line: parsing (with the environment passed in) apart from running.
#include "commands.h"
#include "settings.h"

namespace tfb {

enum class command_kind { none, serve, wait, decide, abort, status, config, secret };

/// What the command line asks for: one command and its options (durations
/// converted), or kind none and the exit code of what parsing already answered
/// (help and --version on stdout, a usage error on stderr).
struct parsed_command {
  command_kind kind = command_kind::none;
  int exit_code = 0;
  serve_options serve;
  wait_cmd_options wait;
  decide_options decide;
  abort_options abort;
  status_options status;
  config_options config;
  secret_options secret;
};

/// Parses argv. The options' variables (TFBARRIER_NAME, TFBARRIER_TIMEOUT, ...)
/// are read from env only, never from the process.
parsed_command parse_command_line(int argc, char** argv, const env_lookup& env);
/// Runs a parsed command; returns its exit code (that of parsing for kind none).
int run_command(const parsed_command& c);
/// Parses the command line with the process environment and runs the command. Returns the exit code.
int run_cli(int argc, char** argv);
}  // namespace tfb
