#pragma once
// The etcd v3 API as the host uses it (issue #20): a small, blocking
// interface. Its one implementation (src/store/etcd_client.cpp) speaks etcd's
// JSON gateway through libcurl and nlohmann-json, and lives in a module of its
// own, tfbarrier-etcd.so, that only `serve --store` loads (store_module.h),
// so that `wait` never maps libcurl and its start-up does not change.
//
// Every call blocks; the host makes them from its store threads, never from
// its event loop. Each thread uses its own client (a client is not shared
// between threads), except cancel(), which any thread may call.
//
// Keys and values are bytes (the gateway's base64 is the module's business).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "error.h"

namespace tfb::store {

/// How to reach etcd: endpoints are "http://H:P" or "https://H:P". A client
/// starts at endpoints[first % size] (hosts spread over the members: each
/// gives its own first), stays with an endpoint while it answers, and moves
/// to the next one when it does not.
struct client_config {
  std::vector<std::string> endpoints;
  std::size_t first = 0;
  std::string ca, cert, key;  ///< PEM files for TLS (empty: none); cert and key for client authentication
  /// The contents of cert and key, read (and the key checked: read_tls_files)
  /// once at start; when set, libcurl gets these, not the files' paths.
  std::string cert_pem, key_pem;
  std::chrono::milliseconds timeout{5000};  ///< per request (not for watch, which lasts)
  /// A request's first try at each endpoint ends after this: a member that
  /// is frozen (SIGSTOP, a paused VM, a full disk) or behind a black-holed
  /// link accepts the connection and never answers. Only when every endpoint
  /// timed out so is each tried again, with the whole timeout (a slow
  /// cluster, not a frozen member).
  std::chrono::milliseconds attempt_timeout{1000};
  /// While a watch lasts, the member it is on is asked a cheap question this
  /// often (a serializable count of one key), and the watch moves to the next
  /// endpoint when no answer comes within attempt_timeout: a quiet watch
  /// cannot tell a frozen member from a quiet prefix. 0: never.
  std::chrono::milliseconds probe_every{1000};
  /// etcd's own authentication (issue #31 item 9): with a user, the client
  /// logs in (/v3/auth/authenticate) and sends the token on every request,
  /// logging in again once when etcd says the token is no longer valid. The
  /// password is read once at start (read_password_file); never shown.
  std::string user, password;
};

struct kv {
  std::string key, value;
  std::int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

struct event {
  enum class type { put, del } what = type::put;
  kv now;   ///< the key after the event (for del: key and mod_revision only)
  kv prev;  ///< the key before it (watch asks for prev_kv); empty key when it did not exist
};

struct compare {
  enum class target { version, create_revision, mod_revision, value } what = target::version;
  enum class op { equal, greater, less, not_equal } how = op::equal;
  std::string key;
  std::int64_t number = 0;  ///< for version and the revisions
  std::string value;        ///< for target::value
};

struct op {
  enum class type { put, del, range } what = type::put;
  std::string key, value;
  std::string range_end;  ///< del/range: end of the range ("" for one key)
  std::int64_t lease = 0; ///< put: 0 for none
};

struct txn_result {
  bool succeeded = false;
  std::int64_t revision = 0;  ///< the store's revision after the transaction (header.revision)
  /// One entry per op of the branch taken; for range ops, the keys it read.
  std::vector<std::vector<kv>> ranges;
};

/// How a watch ended.
enum class watch_end {
  cancelled,  ///< cancel() was called, or the callback returned false
  compacted,  ///< start_revision was compacted away: catch up from a snapshot
  failed,     ///< every endpoint failed or the stream broke; error says why
  interrupted,  ///< interrupt() was called: watch again from the revision reached, on a new connection
};

/// Each call that fails says why in error: store_access when it was refused
/// (by TLS at every endpoint: etcd's certificate not trusted, or this
/// client's refused or missing; or by etcd's own authentication), else
/// store_unreachable (etcd out of reach, or an answer it should not give).
class client {
 public:
  virtual ~client() = default;
  /// A lease of ttl seconds: id gets its id.
  virtual bool grant(std::int64_t ttl_seconds, std::int64_t& id, tfb::error& error) = 0;
  /// Renews a lease once: ttl gets what remains, 0 (and true) when it has expired.
  virtual bool keepalive(std::int64_t id, std::int64_t& ttl, tfb::error& error) = 0;
  virtual bool revoke(std::int64_t id, tfb::error& error) = 0;
  /// The cluster's active alarms ("NOSPACE": the space quota is exceeded and
  /// etcd takes no writes, from any tenant; "CORRUPT").
  virtual bool alarms(std::vector<std::string>& out, tfb::error& error) = 0;
  virtual bool txn(const std::vector<compare>& cmp, const std::vector<op>& success, const std::vector<op>& failure,
                   txn_result& result, tfb::error& error) = 0;
  /// Keys in [key, range_end) ("" range_end: the one key), sorted by key, at
  /// the current revision (revision gets it) or at at_revision when not 0;
  /// keys_only: without their values.
  virtual bool range(const std::string& key, const std::string& range_end, std::vector<kv>& out,
                     std::int64_t& revision, tfb::error& error, std::int64_t at_revision = 0,
                     bool keys_only = false) = 0;
  /// Watches [key, range_end) from start_revision (0: from now), with
  /// prev_kv, and calls on_events for each response that has events, in
  /// revision order, until it returns false, cancel() is called, or the
  /// stream fails. Blocks until then. The watch asks for etcd's progress
  /// notifications: on_progress(R) says that every event up to revision R
  /// has been delivered (etcd sends one when the watch has been quiet for
  /// its --experimental-watch-progress-notify-interval, 10 minutes unless
  /// set), so that a watch resumed after a break starts at R + 1, not at a
  /// revision that another tenant's compaction may have removed.
  virtual watch_end watch(const std::string& key, const std::string& range_end, std::int64_t start_revision,
                          const std::function<bool(const std::vector<event>&)>& on_events, tfb::error& error,
                          const std::function<void(std::int64_t)>& on_progress = {}) = 0;
  /// Makes a blocked call of this client return soon (watch: cancelled; others: false). Thread-safe.
  virtual void cancel() = 0;
  /// Makes a watch under way (or the next one, if none is) return
  /// interrupted within about a second: its connection may be stale (one
  /// that outlived a network cut gets nothing until TCP retransmits).
  /// Unlike cancel(), later calls work as before. Thread-safe.
  virtual void interrupt() = 0;
};

/// The end of the range of every key that starts with prefix (etcd's prefix rule).
std::string prefix_end(const std::string& prefix);

}  // namespace tfb::store

/// The module's one entry point (dlsym'd by store_module.cpp): a new client,
/// or null with error set. The module is built with the same compiler and
/// standard library as the binary, so C++ types cross the boundary.
extern "C" tfb::store::client* tfb_etcd_client_new(const tfb::store::client_config* config, std::string* error);
