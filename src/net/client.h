#pragma once
// The participant's side, behind a small interface (arrive and await the
// outcome, decide, abort, status) so that another backend can stand beside
// the TCP one. Calls block; each returns an outcome the CLI turns into output
// and an exit code (wait, decide and abort: a typed result, core/client_call.h).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "address.h"
#include "client_call.h"
#include "duration.h"
#include "exit_codes.h"
#include "protocol.h"

namespace tfb {

/// What a call ended with.
struct outcome {
  /// exit_code::ok, a verdict's code, or exit_code_of a failure's cause (failed()).
  int exit_code = 0;
  std::string out;  ///< for stdout (the chief's message), may be empty
  std::string err;  ///< for stderr: what happened and what to do, may be empty
  std::optional<proto::status_reply> status;  ///< STATUS replies
  std::vector<std::string> history;  ///< HISTORY: the ROUND and ARR lines of every page
  /// wait, decide, abort: what the call ended with, as data; the CLI says it
  /// in words and picks the exit code (cli/outcome_text.h). The three above are then empty.
  std::optional<client::call_result> result;
  /// A failure's cause (failed()); nullopt for a success or a verdict.
  std::optional<error_kind> cause;

  /// A call that failed: the code is its cause's (exit_code_of), the text goes to stderr.
  static outcome failed(error e) {
    outcome o;
    o.exit_code = exit_code_of(e.kind);
    o.cause = e.kind;
    o.err = std::move(e.text);
    return o;
  }
};

struct wait_options {
  std::optional<duration> timeout;          ///< withdraw and exit 124 after this
  std::optional<duration> progress_every;   ///< call on_progress this often
  std::function<void(const progress&)> on_progress;
  /// decide: told once when the verdict is recorded but not delivered a second later.
  std::function<void(const client::recorded&)> on_note;
  /// wait with ARRIVE decide=1 (the chief of --decide-by): the command to run
  /// through /bin/sh -c once all are here; its exit status is the verdict.
  std::string decide_by;
};

struct connect_options {
  address at;                         ///< the host's address, parsed once (settings.h host_address)
  std::string addr;                   ///< at as text ("HOST:PORT", "[v6]:PORT"), for messages
  duration connect_timeout = std::chrono::seconds(60);
  std::string client_host;            ///< this machine, for the host's logs
  std::uint32_t pid = 0;
  /// Called once when the first connection attempt fails (to start a host, say).
  std::function<void()> on_first_failure;
  /// Asked after each failed attempt that follows it: a reason to stop
  /// trying at once (a host started here that failed), or "".
  std::function<std::string()> why_no_host;
  /// wait/decide: PING the host this often; a host silent for 3 intervals is treated as lost.
  duration keepalive = std::chrono::seconds(5);
  bool quiet_reconnect = false;  ///< do not note reconnects on stderr
  /// The shared secret; when set, the host must prove it knows it (and so must we).
  std::optional<std::string> secret;
  /// Where to look for a secret if the host asks for one and none was given.
  std::string secret_path;
  /// Take a host beyond loopback that does not authenticate (auth=none);
  /// without it, such a host gets exit 77 before the request is sent.
  bool insecure = false;
  /// The prefix of the store given (--store, TFBARRIER_STORE): the host must
  /// name the same in its HELLO (client_conn.h). Empty: any host.
  std::string store;
};

/// What status --watch hands the call: where the replies go, and on a
/// terminal, the keys, resizes and a lost host.
struct watch_hooks {
  std::function<void(const proto::status_reply&)> reply;
  /// Once the host has answered, a lost host is tried again for ever (only
  /// a signal or a quitting key ends the call): told at once (failed = 0),
  /// and after each failed try, with the wait before the next.
  bool reconnect = false;
  std::function<void(const std::string& why, unsigned failed, duration next)> lost;
  int keys_fd = -1;                     ///< a terminal to read keys from; -1: none
  std::function<bool(char)> quit_key;   ///< true: this key ends the call with exit 0
  std::function<void()> resized;        ///< on SIGWINCH; null: not watched
};

class coordinator {
 public:
  virtual ~coordinator() = default;
  virtual outcome wait(const proto::arrive& a, const wait_options& o) = 0;
  /// o.timeout bounds a waiting decide: past it, exit 124 (the verdict stands).
  virtual outcome decide(const proto::decide& d, const wait_options& o) = 0;
  virtual outcome abort(const proto::abort_req& a) = 0;
  virtual outcome status(const proto::status_req& s) = 0;
  /// status --watch: STATUS now and then every `every`, on one connection,
  /// each reply to h.reply. Ends on SIGINT/SIGTERM (exit interrupted_*), a
  /// quitting key (exit 0), or with exit unreachable when the host is lost
  /// and h.reconnect is off, or was never reached. SIGINT, SIGTERM and
  /// SIGWINCH are blocked between its connections (none is lost).
  virtual outcome watch(const proto::status_req& s, duration every, const watch_hooks& h) = 0;
  /// HISTORY, every page (report, issue #21).
  virtual outcome history(const proto::history_req& h) = 0;
};

/// The TCP backend: talks docs/protocol.md to `tfbarrier serve`.
std::unique_ptr<coordinator> make_tcp_coordinator(connect_options o);

}  // namespace tfb
