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
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "replica.h"
#include "store_client.h"

namespace tfb::store {

/// Parsed `--store etcd://H1:P1,H2:P2[/PREFIX]` (the scheme says which store).
struct address {
  std::vector<std::string> endpoints;  ///< "http://H:P" (https when TLS files are given)
  std::string prefix = "/tfbarrier";
};
/// False with error (a full sentence) for a malformed store address.
bool parse_store(std::string_view text, bool tls, address& out, std::string& error);

/// Reads the TLS files of `serve --store` once, at start (docs/store.md):
/// the CA (c.ca) must be readable; the client certificate and key (c.cert,
/// c.key) are read into c.cert_pem and c.key_pem, and the key is held to the
/// secret file's rules (docs/security.md): a regular file, not a symbolic
/// link, the user's own, that group and others cannot read. 0 when all is
/// well, else the exit code (usage: a file that cannot be read; auth: a key
/// that others could read or change), with error.
int read_tls_files(client_config& c, std::string& error);

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
  };
  struct callbacks {
    std::function<void(std::function<void()>)> post;          ///< run on the event loop
    std::function<void(std::vector<event>)> events;           ///< the prefix's events, in revision order
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
  /// (blocking, with a deadline), and starts the threads. False with error.
  bool start(std::string& error);
  /// Queues one input line (from the event loop). Lines are written in order.
  void write(std::string line);
  /// After fenced: drop what is queued and register a new incarnation.
  void reregister();
  /// Leaves the store: revokes the lease (the presence goes with it).
  void stop();
  std::int64_t origin_revision() const { return origin_rev_; }
  /// After start failed: whether TLS refused it (authentication, not reach).
  bool refused_by_tls() const { return tls_refused_; }
  /// Batches written, for the benchmark's "etcd writes per round".
  std::uint64_t batches_written() const { return written_; }

 private:
  bool ensure_origin(client& c, std::string& error);
  bool check_versions(client& c, std::string& error);
  bool register_self(client& c, std::int64_t& lease, std::int64_t& inc, std::string& error);
  void writer_loop();
  void keeper_loop();
  void watcher_loop();
  /// Writes one batch; false when fenced (with why), retrying while etcd is unreachable.
  bool write_batch(client& c, const std::string& value, std::uint64_t seq, std::string& why);
  void log(const std::string& text) {
    cb_.post([this, text] { cb_.log(text); });
  }
  bool sleep_for(std::chrono::milliseconds d);  ///< false when stopping

  settings s_;
  callbacks cb_;
  std::unique_ptr<client> writer_c_, keeper_c_, watcher_c_;
  std::thread writer_, keeper_, watcher_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool reregister_ = false;
  bool stopping_ = false;
  std::atomic<std::int64_t> lease_{0}, inc_{0};
  std::atomic<std::uint64_t> written_{0};
  std::int64_t origin_rev_ = 0;
  bool tls_refused_ = false;
  std::int64_t watch_from_ = 0;  ///< watcher only
};

}  // namespace tfb::store

namespace tfb::store {

/// The door of a host with a store: an input is not applied here but
/// written to the store; every host applies it when the watch brings it
/// back (replica), so submit yields no replies. Shutting one host down is
/// not shared: the host tells its own participants itself.
class link_door final : public door {
 public:
  /// waiting(c): whether this host's connection c waits in the shared barriers.
  link_door(link& l, std::function<bool(conn_id)> waiting) : link_(l), waiting_(std::move(waiting)) {}
  bool submit(const door_input& in, output&, std::string&) override {
    if (const auto* a = std::get_if<input::arrive>(&in)) joined_.insert(a->c);
    if (const auto* d = std::get_if<input::decide>(&in)) joined_.insert(d->c);
    if (const auto* l = std::get_if<input::leave>(&in); l && l->how != departure::left) {
      // A connection that never arrived or decided (STATUS, PING), or whose
      // round released, leaves nothing to withdraw: not worth an etcd write
      // for each `tfbarrier status`, nor one per participant after a release.
      // (Should this replica lag, the write comes after the release in the
      // log, where it changes nothing.)
      if (joined_.erase(l->c) == 0 || !waiting_(l->c)) return true;
    }
    std::string line = encode(in);
    if (!line.empty()) link_.write(std::move(line));
    return true;
  }

 private:
  link& link_;
  std::function<bool(conn_id)> waiting_;
  std::unordered_set<conn_id> joined_;  ///< this host's connections that arrived or decided
};

}  // namespace tfb::store
