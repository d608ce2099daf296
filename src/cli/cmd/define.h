#pragma once
// What the commands' CLI11 definitions share (src/cli/cmd/*.cpp, define_*):
// validators that say what is wrong in our words, the options every client
// command takes, and the footer of examples and exit codes.
//
// CLI11 is compiled once: the tfb_cli library (cli.cpp and src/cli/cmd/*.cpp) is
// a unity build, since every translation unit that includes CLI/CLI.hpp
// constructs its own copies of CLI11's static validators when the process
// starts, `wait` included.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "commands.h"
#include "duration.h"
#include "settings.h"

namespace tfb::cmd {

/// Gives a command's options once CLI11 has parsed the command line into
/// what its definition bound: durations converted, defaults filled in.
using command_parser = std::function<command_options()>;

// One per command, in src/cli/cmd/NAME.cpp: adds the command to app.
command_parser define_serve(CLI::App& app);
command_parser define_wait(CLI::App& app);
command_parser define_decide(CLI::App& app);
command_parser define_abort(CLI::App& app);
command_parser define_status(CLI::App& app);
command_parser define_report(CLI::App& app);
command_parser define_config(CLI::App& app);
command_parser define_secret(CLI::App& app);

/// Sets the footer: the examples, then the exit code table. Built only when
/// help is printed, so that a `wait` never formats the table.
void set_footer(CLI::App* app, const char* examples);
/// The command line being parsed, for mentions().
void set_args(int argc, char** argv);
/// Whether the command line holds an argument that starts with prefix, or
/// asks for help: options that few use (wait --decide-*) are built only
/// then, since CLI11 spends some 15,000 instructions on each option it
/// builds, and `wait`'s start-up must not grow (bench/startup-cost.sh).
bool mentions(std::string_view prefix);

CLI::Validator name_validator();
CLI::Validator verdict_validator();
CLI::Validator scope_validator();
/// --message, --reason: what the wire's trailing text allows.
CLI::Validator text_validator(const char* what);
/// A duration of at least `min`; with zero_is_off, 0 is accepted too (it means none).
CLI::Validator duration_validator(duration min = duration::zero(), bool zero_is_off = false);
/// --max-connections and the like: decimal, 1 to a billion.
CLI::Validator connection_limit_validator();
/// --n and --rank, checked by settings.cpp's rules (a transform: "010" becomes "10").
void add_counts(CLI::App* sub, std::optional<std::uint32_t>& n, std::optional<std::uint32_t>& rank,
                const std::string& n_help, const std::string& rank_help);

/// The options of every client command, durations as typed until parsing succeeded.
struct common_typed {
  common_options options;
  std::string connect_timeout, keepalive;
  /// The options with the durations converted (call after a successful parse).
  common_options get() const;
};
void add_common(CLI::App* sub, common_typed& c);

/// What a client command's definition binds: its options, and the client
/// options as typed. parsed() gives the options with the durations converted.
template <class Options>
struct client_typed {
  Options o;
  common_typed common;
  Options parsed() const {
    Options out = o;
    out.common = common.get();
    return out;
  }
};

/// Converts a duration as typed ("" leaves target as it is); the validator has checked it.
void set_duration(const std::string& text, duration& target);
void set_duration(const std::string& text, std::optional<duration>& target);

}  // namespace tfb::cmd
