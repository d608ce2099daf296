#pragma once
// `tfbarrier serve`: the rendezvous host. One io_context, one thread
// (host.cpp; MUNGE calls alone run on a few threads of their own); a connection's protocol is host_conn.h's, the barrier rules
// barrier.h's, reached through door.h.
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "address.h"
#include "duration.h"
#include "error.h"
#include "store_location.h"

namespace tfb {

struct host_options {
  /// Where to listen, parsed once: serve sets it (--listen, else the address a participant would use).
  given_address listen;
  std::optional<duration> idle_exit;  ///< leave when no barrier was active this long
  duration forget_after = std::chrono::hours(1);  ///< forget idle barriers (and aborts) after this
  duration handshake_timeout = std::chrono::seconds(10);
  bool quiet = false;                 ///< log only warnings, not every arrival
  std::optional<std::string> state_dir;  ///< journal verdicts and releases here (flushed before acknowledging)
  std::size_t max_connections = 0;    ///< 0: as many as the file-descriptor limit allows
  std::size_t max_per_address = 16384;  ///< connections from one peer address
  std::size_t max_barriers = 65536;    ///< barriers held at once (barrier_set::limit)
  /// With a store these two are the store's (its origin record): a host given
  /// another value on its command line refuses to start (exit 2).
  bool forget_after_given = false, max_barriers_given = false;
  std::optional<std::string> secret;  ///< shared secret: every client must authenticate (docs/security.md)
  bool munge = false;                 ///< MUNGE: every client must be this host's uid (docs/security.md)
  /// --insecure: no secret and no MUNGE, and anyone who can connect is served.
  /// Without it, a host with neither serves its own uid only: the kernel says
  /// who owns each connection's other end (sock_diag), before its HELLO is read.
  bool insecure = false;
  bool self_started = false;          ///< started by a participant: losing the race for the port is fine
  std::optional<given_address> metrics_listen;  ///< serve GET /metrics there (--metrics, docs/monitoring.md)
  std::optional<std::string> metrics_token;     ///< required as "Authorization: Bearer TOKEN" when set
  std::optional<std::string> metrics_textfile;  ///< write the metrics there every few seconds, atomically
  std::size_t history = 1'000'000;    ///< arrival records kept (serve --history; 0: none), history.h
  std::optional<std::string> history_file;  ///< where they are written (serve --history-file); none: memory only
  bool history_file_default = false;        ///< history_file is the default one: if it cannot be used, warn only
  /// A store shared by many hosts (docs/store.md): none, the default, keeps the barriers here.
  std::optional<store::store_location> store;  ///< --store, parsed once by serve (store_location.h)
  std::string store_ca, store_cert, store_key;
  std::string store_cert_pem, store_key_pem;  ///< their contents, read (the key checked) by serve at start
  std::string store_user, store_password;     ///< etcd's authentication: the password read by serve at start
  duration store_lease = std::chrono::seconds(10);
  std::size_t store_snapshot_every = 1000;  ///< batches between snapshots
  /// No secret: the store's inputs are MACed with a key shared through MUNGE
  /// (store_link.h settings::munge_key); serve decides (cmd/serve.cpp).
  bool store_munge = false;
  std::string node;  ///< this machine's node name: the store names this host NODE:PORT
  std::FILE* log = stderr;
  /// Called once the address is bound, before anything is accepted or reported:
  /// what must not happen for a host that never listens (writing a new secret
  /// file). Returns nullopt to go on, or why not.
  std::function<std::optional<error>()> on_bound;
  /// Called once listening, with the real address ("127.0.0.1:40123").
  std::function<void(const std::string& addr)> on_listening;
  /// Called once the metrics endpoint listens, with its real address.
  std::function<void(const std::string& addr)> on_metrics_listening;
};

/// Runs the host until SIGINT/SIGTERM (or idle exit). Returns why it could
/// not start (a full sentence), or why it stopped (the store failed: the log
/// has said why, the text is empty); nullopt when it ran and stopped as asked,
/// or another participant's host won the race for the port.
std::optional<error> run_host(const host_options& o);

}  // namespace tfb
