#pragma once
// One options struct and one run_* function per command (src/cli/cmd/NAME.cpp).
// The command line (cli.h) parses into these; each run_* returns an exit code.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "duration.h"

namespace tfb {

struct common_options {
  std::optional<std::string> addr;
  std::optional<std::string> scope;
  std::optional<std::string> store;  ///< status, decide, abort: --store (else TFBARRIER_STORE)
  std::optional<duration> connect_timeout;  ///< default 60s; status: 10s

  std::optional<duration> keepalive;  ///< TFBARRIER_KEEPALIVE (default 5s)
  std::optional<std::string> secret_file;  ///< --secret-file / TFBARRIER_SECRET_FILE
  bool quiet = false;
  bool insecure = false;  ///< --insecure (TFBARRIER_INSECURE is read with the other settings)
};

struct serve_options {
  std::string listen;  ///< empty: resolved like a participant's address
  bool daemon = false;
  std::optional<std::string> log_file;
  std::optional<duration> idle_exit;
  duration forget_after = std::chrono::hours(1);
  bool quiet = false;
  std::optional<std::string> state_dir;
  std::size_t max_connections = 0;
  std::size_t max_per_address = 16384;
  std::size_t max_barriers = 65536;
  /// Given on the command line: with a store, a host given a value other than
  /// the store's refuses to start; one not given takes the store's (issue #31).
  bool forget_after_given = false, max_barriers_given = false;
  std::optional<std::string> secret_file;
  bool insecure = false;
  bool no_munge = false;
  bool self_started = false;
  std::optional<std::string> metrics;             ///< --metrics HOST:PORT: serve GET /metrics there
  std::optional<std::string> metrics_token_file;  ///< required beyond loopback: Authorization: Bearer
  std::optional<std::string> metrics_textfile;    ///< write the metrics to this file every few seconds
  std::size_t history = 1'000'000;          ///< --history N: arrival records kept (0: none)
  std::optional<std::string> history_file;  ///< --history-file (default: beside the log)
  std::optional<std::string> store;         ///< --store etcd://H:P[,H:P...][/PREFIX] (docs/store.md)
  std::optional<std::string> store_ca, store_cert, store_key;  ///< TLS to the store
  /// etcd's own authentication (issue #31 item 9): the user, and the file of its password.
  std::optional<std::string> store_user, store_password_file;
  duration store_lease = std::chrono::seconds(10);              ///< --store-lease
  std::size_t store_snapshot_every = 1000;                       ///< --store-snapshot-every
};

struct secret_options {
  std::optional<std::string> file;
  bool force = false;
};

struct wait_cmd_options {
  common_options common;
  std::string name;
  std::optional<std::uint32_t> n, rank;
  bool chief = false;
  std::optional<duration> timeout;
  std::optional<duration> progress;  ///< default: 1s on a terminal, 30s otherwise
  std::string decide_by;                    ///< --decide-by CMD: the chief runs it for the verdict
  std::optional<duration> decide_timeout;   ///< --decide-timeout: abort when CMD runs past it
  std::optional<duration> decide_within;    ///< --decide-within: abort when no verdict comes within it
};

struct decide_options {
  common_options common;
  std::string verdict;
  std::string name;  ///< empty: the one round that awaits a verdict
  std::string message;
  bool no_wait = false;
  std::optional<std::uint32_t> n, rank;
  std::optional<duration> timeout;  ///< give up waiting for delivery (the verdict stands)
};

struct abort_options {
  common_options common;
  std::string name;
  std::string reason;
};

struct status_options {
  common_options common;
  std::string name;
  bool json = false;
  bool all_scopes = false;
  std::optional<duration> watch;  ///< --watch [INTERVAL]: redraw every INTERVAL until interrupted
};

struct report_options {
  common_options common;
  std::string name;  ///< a glob; "": every barrier
  std::uint64_t last = 0;
  std::optional<std::string> file;
  bool json = false, csv = false, all_scopes = false;
  std::optional<std::string> svg;
  /// Runs (issue #32 item 2): the newest unless all_runs, or run names one.
  bool all_runs = false;
  std::optional<std::string> run;
};

struct config_options {
  common_options common;
  std::optional<std::uint32_t> n, rank;
  bool json = false;
};

/// What the command line asked for: one command's options.
using command_options = std::variant<serve_options, wait_cmd_options, decide_options, abort_options, status_options,
                                     report_options, config_options, secret_options>;

int run_serve(const serve_options& o);
int run_wait(const wait_cmd_options& o);
int run_decide(const decide_options& o);
int run_abort(const abort_options& o);
int run_status(const status_options& o);
int run_config(const config_options& o);
int run_secret(const secret_options& o);
int run_report(const report_options& o);

/// Prints "tfbarrier: error: TEXT" on stderr.
void print_error(const std::string& text);

}  // namespace tfb
