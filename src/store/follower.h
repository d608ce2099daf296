#pragma once
// What a host of a store does with the store's log (issue #31, docs/store.md):
// pure, like replica. Events in (the watch's, or a catch-up's), actions out
// (replies to deliver, host ends to mark, a fence noticed, lines to log), as
// etcd's raft library returns a Ready. No sockets, no threads, no clocks: the
// host passes its monotonic time to tick(). The rules live here once, for
// the watch and for catch-up alike, so tests can run many hosts in memory
// against a simulated etcd (tests/unit/follower_test.cpp).
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "replica.h"
#include "store_client.h"

namespace tfb::store {

/// The settings that change a transition (issue #31 item 1): the first host
/// writes them into the origin record, and every host of the prefix runs by
/// those, whatever its own command line says.
struct shared_settings {
  std::size_t max_barriers = 10000;  ///< serve --max-barriers
  millis forget_after = 600000;      ///< serve --forget-after, in ms
  bool operator==(const shared_settings&) const = default;
};
/// PREFIX/origin's value: "tfbarrier store sm=V max-barriers=N forget-after=MS".
std::string format_origin(const shared_settings& s);
/// Reads an origin record; false when it is not one. A record of state-machine
/// version 2 or older has no settings: sm says which version wrote it.
bool parse_origin(std::string_view text, int& sm, shared_settings& out);

/// The one rule for the watch and for catch-up: a key under host/, in/ or
/// gone/ takes effect once, at its first version (its create_revision), with
/// that version's value. A later version (someone put the key again, with the
/// same bytes or not) changes nothing; a key deleted and put again is a new
/// key, and the batch rules (a sequence applied once) refuse a replay.
inline bool first_version(const kv& k) { return k.version == 1; }

/// A host's presence key is put with its lease, so that it goes when the
/// host stops renewing it (issue #31 item 9). One without a lease never
/// goes: a host counted by it would keep its participants counted for good.
/// Such a key counts for nothing (warned once). catch_up_events gives this
/// lease to the presence it restores of a host that has gone since.
inline constexpr std::int64_t lease_gone = -1;
inline bool leased(const kv& k) { return k.lease != 0; }

/// What a host starts from (or starts over from, after a compacted revision):
/// the newest whole snapshot and every event after it, read at one revision
/// (docs/store.md, "Catch-up").
struct catch_up {
  std::string snapshot;       ///< the state at snap_rev ("" for none: from the empty state)
  std::int64_t snap_rev = 0;
  std::vector<event> events;  ///< after snap_rev, in revision order, as a watch would bring them
  std::int64_t revision = 0;  ///< the store's revision read; the watch goes on after it
  std::vector<kv> live;       ///< the presence keys at that revision
  bool again = false;         ///< not the first: the watch met a compacted revision
  /// The events after the snapshot come through the watch, from snap_rev + 1:
  /// etcd replays its history, deletes included, exactly as the hosts that
  /// watched live saw it (events is empty). False when that history is
  /// compacted: then events holds what the keys at revision say (below).
  bool history = false;
};
/// Catch-up's events from every key under the prefix read at one revision.
/// Each key whose version is past 1 must already hold its first version's
/// value (read at its create_revision: link::read_catch_up), so that every
/// key takes effect where and as the watch applied it: at its create_revision.
/// Sets out.events and out.live; out.snap_rev is the snapshot's revision.
void catch_up_events(const layout& keys, const std::vector<kv>& all, const std::string* secret, catch_up& out);

struct action {
  enum class kind {
    deliver,    ///< out: replies, log lines and records of applied inputs (replayed: applied once already,
                ///< so its replies only: its log lines, records and counts were delivered the first time)
    mark_gone,  ///< write host's end (incarnation inc, presence text) if nobody has yet (out: store_host_lost, counted)
    fenced,     ///< this host's own presence went: text says why
    close_all,  ///< starting over: close every connection (its participants arrive again)
    fail,       ///< cannot go on: text says why
    warn,       ///< a warning for the log
    note,       ///< an event for the log
    digest,     ///< write this host's digest (text) of the state after revision inc; state: that state's dump
    diverged,   ///< this host's state differs from another's (text says how; out: store_diverged, counted),
                ///< or inc 1: start over now
  } what = kind::note;
  output out;
  bool replayed = false;
  std::string host;
  std::int64_t inc = 0;
  std::string text;
  std::string state;  ///< digest: the dump it hashes (the keeper writes it as the snapshot at inc)
};

/// A digest key's value: "D HEX" (HEX: SHA-256 of replica::dump), and with a
/// secret " mac=HMAC" of the key and it. open_digest: false unless well formed and its MAC right.
std::string seal_digest(std::string_view key, std::string_view hex, const std::string* secret);
bool open_digest(std::string_view key, std::string_view value, const std::string* secret, std::string& hex,
                 std::string& error);

class follower {
 public:
  /// self: this host's key name; r: its replica (whose barrier_set the host serves).
  follower(layout keys, std::string self, replica& r) : keys_(std::move(keys)), self_(std::move(self)), r_(r) {}
  /// The key that MACs the prefix's inputs (null: none), once known.
  void set_secret(const std::string* secret) { secret_ = secret; }
  /// The watch's events, in revision order.
  std::vector<action> on_events(const std::vector<event>& evs);
  /// A catch-up read: load its snapshot (or the empty state when starting
  /// over without one), apply its events (or await them from the watch:
  /// catch_up::history), and mark the end of every host present in the state
  /// with no presence now.
  std::vector<action> on_catch_up(catch_up cu);
  /// The revision applied up to.
  std::int64_t applied() const { return applied_rev_; }
  /// Batches applied since the last snapshot.
  std::size_t since_snapshot() const { return since_snapshot_; }
  /// Whether this host is the one that takes snapshots and keeps time: the
  /// present host with the smallest name (every host computes the same).
  bool keeper() const;
  /// The snapshot was taken (here): count again from 0.
  void snapshot_taken() { since_snapshot_ = 0; }
  /// Every k batches of the log (replica::batches), each host writes a digest
  /// of its state, and the time keeper a snapshot of it (issue #31 item 4).
  void set_digest_every(std::uint64_t k) { digest_every_ = k == 0 ? 1 : k; }
  /// Digests compared with another host's, and found to differ.
  std::uint64_t digests_compared() const { return compared_; }
  std::uint64_t divergences() const { return diverged_; }

  /// The time keeper's round (issue #31 item 2): mono_now is this host's
  /// monotonic clock. A barrier is idle from when this host saw it idle
  /// with its last input applied; once idle for forget_after, a forget
  /// input is returned for the host to write (once). Not the keeper: none,
  /// and what was seen is dropped (a new keeper measures from its own view).
  std::vector<input::forget> tick(millis mono_now, millis forget_after);

 private:
  void apply(const event& ev, std::vector<action>& acts);
  /// A put that is not applied (put again, or a presence without its lease): warned of. True when refused.
  bool refused(const layout::parsed& k, const event& ev, std::vector<action>& acts);
  /// A host's presence key deleted: its end is marked, and this host fenced if it is its own.
  void presence_deleted(const layout::parsed& k, const event& ev, std::vector<action>& acts);
  /// A gone key put: the host's participants of open rounds are withdrawn.
  void apply_gone(const layout::parsed& k, const event& ev, std::vector<action>& acts);
  /// An input batch put: applied to the replica, and a digest of the state every digest_every_ batches.
  void apply_input(const layout::parsed& k, const event& ev, std::vector<action>& acts);
  static void forget_records(output& out);

  layout keys_;
  std::string self_;
  replica& r_;
  const std::string* secret_ = nullptr;
  std::int64_t applied_rev_ = 0;
  std::int64_t replayed_upto_ = 0;  ///< starting over: events up to here were applied once already
  std::size_t since_snapshot_ = 0;
  struct seen {
    std::uint64_t gen = 0;
    millis last_activity = 0;
    millis since = 0;  ///< on the keeper's monotonic clock: seen idle (or last asked) then
  };
  std::map<std::pair<std::string, std::string>, seen> idle_;  ///< the keeper's view
  std::uint64_t digest_every_ = 1000;
  std::map<std::int64_t, std::string> own_;  ///< this host's last digests, by revision
  std::int64_t newest_snap_ = 0, started_from_ = -1;
  std::int64_t pending_restart_ = 0;  ///< differed from the keeper at this revision: start over from its snapshot there
  void restart_if_due(std::vector<action>& acts);
  std::uint64_t compared_ = 0, diverged_ = 0;
  std::set<std::pair<std::string, std::int64_t>> unleased_;  ///< presence keys without a lease, warned of (key, create_revision)
  void compare_digest(const layout::parsed& k, const event& ev, std::vector<action>& acts);
};

/// Bounds what waits for etcd (issue #31 item 10): with backlog bytes of
/// lines not yet written past max, new work (an arrival, a verdict, an
/// abort) is refused with BUSY, and its client tries again after a back-off;
/// a departure is always taken, so that no one who left stays counted.
/// True when in is refused (out then holds the reply).
bool refuse_when_behind(const door_input& in, std::size_t backlog, std::size_t max, output& out);

/// Issue #31 item 6: a host that cannot renew its lease must stop acting on
/// its own before etcd may expire it (as Kubernetes' leader election has a
/// renew deadline below the lease). Pure: every time is nanoseconds of one
/// monotonic clock, given by the caller (link's keeper and host.cpp's timer).
struct renewals {
  std::int64_t renewed_at = 0;      ///< when the last renewal etcd granted (or the grant) was asked
  std::int64_t renewing_since = 0;  ///< a renewal under way since then (0: none)
  bool last_failed = false;         ///< the last renewal failed (etcd out of reach)
};
/// The renew deadline of a lease: two thirds of it.
constexpr std::int64_t renew_deadline(std::int64_t lease_ns) { return lease_ns * 2 / 3; }
/// Whether the host has gone longer than deadline without a granted renewal
/// while its renewals fail: the last one failed, or one has been under way
/// for more than a third of the deadline. A host that was only stopped
/// (SIGSTOP) and renews at once when it runs again is not overdue.
bool renew_overdue(const renewals& r, std::int64_t now, std::int64_t deadline);
/// The host's periodic check (every `every`): true when it must fence
/// itself now. After a gap in the checks (this process did not run for more
/// than five periods: SIGSTOP, a starved machine) its keeper gets a third of
/// the deadline to renew, or to hear that the lease is gone, before a
/// renewal under way since then counts as failing.
class renew_watch {
 public:
  renew_watch(std::int64_t deadline, std::int64_t every) : deadline_(deadline), every_(every) {}
  bool check(std::int64_t now, const renewals& r);
  std::int64_t deadline() const { return deadline_; }

 private:
  std::int64_t deadline_, every_;
  std::int64_t last_check_ = 0, grace_until_ = 0;
  bool checked_ = false;
};

}  // namespace tfb::store
