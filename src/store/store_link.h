#pragma once
// A host's link to its store (issue #20, docs/store.md): loads the etcd
// module, keeps the host's lease and presence, writes its input lines in
// order (one batch in flight, fenced on its presence), and watches the
// prefix. No Asio here: the host gives a `post` that runs a function on its
// event loop, and everything the link reports arrives there.
//
// Threads: a writer (registration and batches), a keeper (the lease), a
// watcher. Each has its own etcd client; they share only what is guarded.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "error.h"
#include "store_location.h"
#include "store_name.h"
#include "follower.h"
#include "replica.h"
#include "store_client.h"

namespace tfb::store {

/// Reads the TLS files of `serve --store` once, at start (docs/store.md):
/// the CA (c.ca) must be readable; the client certificate and key (c.cert,
/// c.key) are read into c.cert_pem and c.key_pem, and the key is held to the
/// secret file's rules (docs/security.md): a regular file, not a symbolic
/// link, the user's own, that group and others cannot read. Or why not
/// (usage: a file that cannot be read; auth: a key that others could read or change).
std::optional<tfb::error> read_tls_files(client_config& c);

/// Reads the etcd user's password from path once, at start (serve
/// --store-password-file, issue #31 item 9), into out, without its final
/// newline. The file is held to the secret file's rules: a regular file,
/// not a symbolic link, the user's own, that group and others can neither
/// read nor change. Or why not (usage: cannot be read or empty; auth:
/// unsafe). Neither the error nor anything else shows the password.
std::optional<tfb::error> read_password_file(const std::string& path, std::string& out);

/// Loads tfbarrier-etcd.so (beside the binary, else in the installed
/// library directory) and makes a client; null with error.
std::unique_ptr<client> load_client(const client_config& c, std::string& error);

class link {
 public:
  struct settings {
    client_config client;
    layout keys;
    std::string self;  ///< this host's key name (host_key)
    presence me;
    std::chrono::seconds lease{10};
    const std::string* secret = nullptr;  ///< MAC every batch with it (docs/store.md, Authorization)
    /// No secret: take the prefix's key from MUNGE (PREFIX/key; the first
    /// host makes it), and MAC with it. Without either, inputs carry no MAC.
    bool munge_key = false;
    std::size_t snapshot_every = 1000;    ///< batches applied between snapshots
    /// The settings that change transitions, as this host was given them:
    /// the first host writes them into the origin record; the others run
    /// by the record's, and refuse to start when given another value.
    shared_settings shared;
    bool max_barriers_given = false, forget_after_given = false;
  };
  using catch_up = store::catch_up;  ///< follower.h
  struct callbacks {
    std::function<void(std::function<void()>)> post;          ///< run on the event loop
    std::function<void(std::vector<event>)> events;           ///< the prefix's events, in revision order
    std::function<void(catch_up)> caught_up;                  ///< first, and after a compacted revision
    std::function<void(std::int64_t rev, bool ok)> snapshot_written;
    std::function<void(std::int64_t inc)> registered;         ///< a (new) incarnation is present
    std::function<void(const std::string& why)> fenced;       ///< the presence went: re-register is under way
    std::function<void(const std::string& why)> failed;       ///< cannot go on (the host stops)
    std::function<void(const std::string& text)> log;         ///< warnings, from any thread (posted)
  };

  link(settings s, callbacks cb) : s_(std::move(s)), cb_(std::move(cb)) {}
  link(const link&) = delete;
  link& operator=(const link&) = delete;
  ~link() { stop(); }

  /// Loads the module, makes sure the origin exists, registers this host
  /// (blocking, with a deadline), and starts the threads; or says why not:
  /// store_access (TLS, etcd's authentication, another job's key),
  /// settings_differ (this host's settings and the store's), or store_unreachable.
  std::optional<tfb::error> start();
  /// Queues one input line (from the event loop). Lines are written in order.
  void write(std::string line);
  /// Bytes queued for etcd and not yet written.
  std::size_t backlog() const { return backlog_.load(); }
  static constexpr std::size_t max_backlog_bytes = std::size_t{64} << 20;
  /// Marks host h's incarnation inc as gone (its presence was deleted), if
  /// no host has yet: where that key lands in the log, every host withdraws
  /// its participants. presence: the presence key's last value, kept in it.
  void mark_gone(const std::string& h, std::int64_t inc, std::string presence);
  /// Writes a snapshot of the state after revision rev, then deletes what it covers.
  void write_snapshot(std::int64_t rev, std::string text);
  /// Writes this host's digest of the state after revision rev (value: seal_digest's).
  void write_digest(std::int64_t rev, std::string value);
  /// This host's state differs from the others': read the store again from
  /// its newest snapshot, as after a compacted revision (connections closed).
  void start_over();
  /// After fenced: drop what is queued (and a batch still being retried),
  /// stop renewing the lease held now, and register a new incarnation.
  void reregister();
  /// The keeper's renewals as they stand (thread-safe), for store::renew_watch
  /// (follower.h): whether this host has gone past its renew deadline while
  /// its renewals fail, and must stop acting on its own (docs/store.md,
  /// "Honest outcomes").
  renewals renewals_now() const { return {renewed_at_.load(), renewing_since_.load(), renew_failed_.load()}; }
  /// Leaves the store: revokes the lease (the presence goes with it).
  void stop();
  std::int64_t origin_revision() const { return origin_rev_; }
  /// The key that MACs this host's inputs, after start: the secret it was
  /// given, or the one MUNGE gave (settings::munge_key); null for none.
  const std::string* secret() const { return s_.secret; }
  /// After start: the settings every host of the store runs by (its origin record's).
  const shared_settings& shared() const { return s_.shared; }
  /// Batches written, for the benchmark's "etcd writes per round".
  std::uint64_t batches_written() const { return written_; }
  /// For the host's metrics (thread-safe): writes to etcd that failed, times
  /// the watch broke, and the revision of the newest event the watch received.
  std::uint64_t write_errors() const { return write_errors_.load(); }
  std::uint64_t watch_restarts() const { return watch_restarts_.load(); }
  std::int64_t received_revision() const { return received_rev_.load(); }

 private:
  std::optional<tfb::error> ensure_origin(client& c);
  std::optional<tfb::error> take_settings(std::string_view origin);
  bool check_versions(client& c, tfb::error& error);
  std::optional<tfb::error> take_sealed_key(const key_record& there);
  bool register_self(client& c, std::int64_t& lease, std::int64_t& inc, tfb::error& error);
  void writer_loop();
  void keeper_loop();
  void watcher_loop();
  /// Whether etcd's history under from (the prefix) from revision start on is compacted (then said in the log).
  bool history_compacted(const std::string& from, std::int64_t start);
  /// Watches from (the prefix) from watch_from_ on, posting its events, until the watch ends (fresh: cleared
  /// at the first response).
  watch_end watch_prefix(const std::string& from, bool& fresh, tfb::error& error);
  /// The watch broke: said in the log, at most once per 10 s (broke_since: how often since it was last said).
  void log_broken_watch(const std::string& error, unsigned& broke_since,
                        std::chrono::steady_clock::time_point& next_log);
  void janitor_loop();
  bool read_catch_up(client& c, catch_up& out, tfb::error& error);
  bool put_once(client& c, const std::string& key, const std::string& value, tfb::error& error);
  bool store_snapshot(client& c, std::int64_t rev, const std::string& text, tfb::error& error);
  void delete_covered(client& c, std::int64_t rev);
  void check_alarms(client& c);
  struct chore;
  bool write_gone(client& c, const chore& ch, tfb::error& error);
  /// Writes one batch; false when fenced (with why), retrying while etcd is unreachable.
  bool write_batch(client& c, const std::string& value, std::uint64_t seq, std::string& why);
  void log(const std::string& text) {
    cb_.post([this, text] { cb_.log(text); });
  }
  bool sleep_for(std::chrono::milliseconds d);  ///< false when stopping

  settings s_;
  callbacks cb_;
  std::unique_ptr<client> writer_c_, keeper_c_, watcher_c_, janitor_c_;
  std::thread writer_, keeper_, watcher_, janitor_;
  struct chore {
    std::string key, value;  ///< a gone key to write once (or a digest: digest set)
    bool digest = false;
    std::int64_t snap_rev = 0;  ///< or a snapshot (key empty)
  };
  std::deque<chore> chores_;  ///< the janitor's, under m_
  bool nospace_ = false;      ///< janitor only: etcd's NOSPACE alarm is on
  std::mutex m_;
  std::condition_variable cv_;          ///< the writer's: a line queued, reregister, stop
  std::condition_variable janitor_cv_;  ///< a chore queued, stop
  std::condition_variable stop_cv_;     ///< stop (sleep_for)
  std::deque<std::string> queue_;
  bool reregister_ = false;
  bool stopping_ = false;
  std::atomic<std::int64_t> lease_{0}, inc_{0};
  // The keeper's renewals, for renew_overdue (steady_clock nanoseconds; 0: none).
  std::atomic<std::int64_t> renewed_at_{0};     ///< when the last granted renewal (or the grant) was asked
  std::atomic<std::int64_t> renewing_since_{0}; ///< a renewal under way since then
  std::atomic<bool> renew_failed_{false};       ///< the last renewal failed (etcd out of reach)
  std::atomic<std::int64_t> abandoned_lease_{0};  ///< given up by reregister: not renewed any more
  std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> write_errors_{0}, watch_restarts_{0};
  std::atomic<std::int64_t> received_rev_{0};
  std::int64_t origin_rev_ = 0;
  std::string munge_secret_;  ///< the key from MUNGE (settings::munge_key), set before the threads start
  std::int64_t watch_from_ = 0;  ///< watcher only
  /// Bounds (issue #31 item 10). Lines queued for etcd and not yet written:
  /// past max_backlog_bytes, link_door refuses new arrivals, decisions and
  /// aborts (BUSY: their clients try again), never a departure.
  std::atomic<std::size_t> backlog_{0};
  /// Watch responses posted to the event loop and not yet applied.
  std::atomic<unsigned> posted_{0};
  static constexpr unsigned max_posted = 64;
  static constexpr std::size_t max_queued_digests = 4;
  std::atomic<bool> start_over_{false};
};

}  // namespace tfb::store

namespace tfb::store {

/// The door of a host with a store: an input is not applied here but
/// written to the store; every host applies it when the watch brings it
/// back (replica), so submit yields no replies. Shutting one host down is
/// not shared: the host tells its own participants itself.
class link_door final : public door {
 public:
  explicit link_door(link& l) : link_(l) {}
  bool submit(const door_input& in, output& out, std::string&) override {
    if (refuse_when_behind(in, link_.backlog(), link::max_backlog_bytes, out)) return true;
    if (const auto* a = std::get_if<input::arrive>(&in)) joined_.insert(a->c);
    if (const auto* d = std::get_if<input::decide>(&in)) joined_.insert(d->c);
    if (const auto* l = std::get_if<input::leave>(&in)) {
      // A connection that never arrived or decided (STATUS, PING), or whose
      // arrival was applied and has ended (settled), leaves nothing to
      // withdraw: not worth an etcd write for each `tfbarrier status`, nor
      // for each participant closing after its RELEASE. One whose ARRIVE is
      // written but not applied yet (still being written, or not back from
      // the watch) is always written: without the departure after it the
      // dead participant would count for good. An explicit LEAVE has a reply,
      // so it is always written; a close after it changes nothing.
      bool joined = joined_.erase(l->c) != 0;
      if (!joined && l->how != departure::left) return true;
    }
    std::string line = encode(in);
    if (!line.empty()) link_.write(std::move(line));
    return true;
  }
  /// Connection c got a reply of the applied log and waits no more: its
  /// ARRIVE or DECIDE (one per connection, host_conn) was applied and has
  /// ended, so its departure would change nothing.
  void settled(conn_id c) { joined_.erase(c); }
  /// The log brought back an applied step (follower's deliver action): its
  /// output goes to the host through on_applied. A connection it answers
  /// that waits no more (waiting false) is settled.
  void applied(output& out, const std::function<bool(conn_id)>& waiting) {
    for (const auto& e : out.sends)
      if (!waiting(e.to)) settled(e.to);
    hand_back(out);
  }

 private:
  link& link_;
  std::unordered_set<conn_id> joined_;  ///< this host's connections that arrived or decided
};

}  // namespace tfb::store
