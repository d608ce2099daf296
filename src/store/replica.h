#pragma once
// A host's copy of the barriers shared through a store (issue #20,
// docs/store.md): pure, like barrier_set. Every host of one store applies
// the same events (the store's log, in revision order) to its replica and so
// holds the same barriers. An event is a host's presence appearing or
// vanishing, or a batch of inputs (door.h) that a host wrote.
//
// Inputs name a participant by the connection id on its own host; here it
// becomes a global identity (host, incarnation, connection), and a replica
// id for the barrier_set that is given in log order, so the same on every
// host. Applying yields replies for everyone: the replica keeps those for
// this host's own connections (under their own ids) and drops the rest.
//
// Nothing here reads a clock: an input carries the time its host read,
// and a withdrawal takes the time of the last input applied.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "barrier.h"
#include "door.h"

namespace tfb::store {

/// The rules' version: every host of a store must run the same (a host of
/// another version is refused), since they must all reach the same state.
// 2: a batch applied once per sequence (replays refused); 3: forgetting by
// the time keeper's input (no wall clock), settings in the origin record.
// 4: a chief that decides on its connection (ARRIVE decide=1), decide deadlines (input E).
constexpr int state_machine_version = 4;

/// The keys under a store's prefix.
struct layout {
  std::string prefix;  ///< "/tfbarrier", no trailing slash
  std::string origin() const { return prefix + "/origin"; }
  /// Which key MACs the prefix's inputs (key_record): written once, by the first host.
  std::string key() const { return prefix + "/key"; }
  std::string hosts() const { return prefix + "/host/"; }
  std::string host(std::string_view h) const { return hosts() + std::string(h); }
  std::string inputs() const { return prefix + "/in/"; }
  /// A host's incarnation has gone (its presence was deleted): its participants are withdrawn here.
  std::string gones() const { return prefix + "/gone/"; }
  std::string gone(std::string_view h, std::int64_t inc) const;
  /// A snapshot of the whole state after revision R: a marker and its chunks.
  std::string snaps() const { return prefix + "/snap/"; }
  /// A host's digest of the replicated state after revision R (issue #31 item 4).
  std::string digests() const { return prefix + "/digest/"; }
  std::string digest(std::int64_t rev, std::string_view h) const;
  std::string snap(std::int64_t rev) const;
  std::string snap_chunk(std::int64_t rev, std::size_t i) const;
  std::string input(std::string_view h, std::int64_t inc, std::uint64_t seq) const;
  /// What follows the prefix is one of ours: {kind, host, incarnation} for in/ and host/ keys.
  struct parsed {
    enum class kind { origin, host, input, gone, snap, snap_chunk, digest, other } what = kind::other;
    std::string host;
    std::int64_t inc = 0;   ///< input, gone: the incarnation; snap, snap_chunk, digest: the revision R
    std::uint64_t seq = 0;  ///< input: the batch's sequence; snap_chunk: its index
  };
  parsed parse(std::string_view key) const;
};

/// A host's name in keys: its node and port, "node1:7727".
std::string host_key(std::string_view node, std::string_view port);

/// What a presence key holds.
struct presence {
  int sm = 0;
  std::string node, address;
  std::uint32_t pid = 0;
  std::string format() const;
  static bool parse(std::string_view text, presence& out);
};

/// What PREFIX/key holds: the public name of the key that MACs the prefix's
/// inputs, and where the hosts take it from MUNGE, the key itself sealed for
/// its owner's uid (docs/store.md, "Authorization").
struct key_record {
  std::string id;     ///< key_id() of the key; "none" when inputs carry no MAC (--insecure)
  std::string munge;  ///< the key, sealed by munge_auth::seal ("" for a shared secret file)
  std::string format() const;
  static bool parse(std::string_view text, key_record& out);
  /// How the hosts that wrote it take their key, in words for messages.
  std::string source() const;
};
/// A key's public name: 16 hex digits of an HMAC with it, which tell nothing
/// of the key; "none" for no key.
std::string key_id(const std::string* secret);

/// One input as a line of a batch; "" for what is not shared (shutdown).
std::string encode(const door_input& in);
/// The inverse of encode; false with error for a malformed line.
bool decode(std::string_view line, door_input& in, std::string& error);

/// A batch's value: its lines, and with a secret a MAC over the key and them.
std::string seal_batch(const std::vector<std::string>& lines, std::string_view key, const std::string* secret);
/// Splits a batch into its lines; with a secret, false unless its MAC is right.
bool open_batch(std::string_view value, std::string_view key, const std::string* secret,
                std::vector<std::string_view>& lines, std::string& error);

/// A gone key's value: the presence it ends, and with a secret " mac=HMAC"
/// of the key and it (so that no one without the secret withdraws a host).
std::string seal_gone(std::string_view key, std::string_view presence, const std::string* secret);
/// The presence a gone key ends; with a secret, false unless its MAC is right.
bool open_gone(std::string_view key, std::string_view value, const std::string* secret, std::string& presence,
               std::string& error);

class replica {
 public:
  /// self: this host's key name ("node1:7727").
  replica(std::string self, barrier_set& state)
      : self_(std::move(self)), state_(state), own_([this](conn_id rid) { return own(rid); }) {}
  replica(const replica&) = delete;  // own_ holds this
  replica& operator=(const replica&) = delete;
  /// This host's current incarnation (the create_revision of its presence key).
  void set_incarnation(std::int64_t inc) { self_inc_ = inc; }
  std::int64_t incarnation() const { return self_inc_; }

  /// The whole replicated state as text (the barriers and the identities):
  /// a snapshot's content. The same log makes the same text on every host.
  std::string dump() const;
  /// Replaces the replicated state with a dump's (this host's own name and
  /// incarnation stay); false with error, and nothing changed, when it is not one.
  bool load(std::string_view text, std::string& error);
  /// The incarnation of host h that is present here (0: none).
  /// The newest incarnation of host h that is present here (0: none).
  std::int64_t incarnation_of(const std::string& h) const {
    auto it = incs_.lower_bound({h + '\0', 0});  // just past h's
    if (it == incs_.begin()) return 0;
    --it;
    return it->first == h ? it->second : 0;
  }
  bool present(const std::string& h, std::int64_t inc) const { return incs_.count({h, inc}) != 0; }
  /// Every incarnation present, by host and then incarnation. A host that
  /// came back may have two for a while: the old one's end is a key of its
  /// own, written after the new one registered.
  const std::set<std::pair<std::string, std::int64_t>>& incarnations() const { return incs_; }

  /// A host registered (its presence key was created at revision inc).
  void host_up(const std::string& h, std::int64_t inc, const presence& p);
  /// A host's incarnation went (the gone key that marks its presence's end
  /// was written): its participants of open rounds are withdrawn, as by a
  /// lost connection.
  void host_down(const std::string& h, std::int64_t inc, output& out);
  /// Batch seq of host h (incarnation inc) was written: apply each input.
  /// False (and nothing applied) when it is malformed, its MAC is wrong, or
  /// it is a replay: a batch of that incarnation with this sequence or a
  /// later one was applied already (someone put an old batch again).
  bool apply_batch(const std::string& h, std::int64_t inc, std::uint64_t seq, std::string_view key,
                   std::string_view value, const std::string* secret, output& out, std::string& error);

  barrier_set& state() { return state_; }
  const barrier_set& state() const { return state_; }
  /// The host a node's participants came through, by presence (for status).
  const std::map<std::string, presence>& hosts() const { return hosts_; }
  /// Batches applied since the store began (a snapshot carries it): every
  /// host counts the same, so "every K batches" is the same revision on each.
  std::uint64_t batches() const { return batches_; }
  /// Global identities known (bounded by the participants waiting on every host).
  std::size_t identities() const { return ids_.size(); }
  /// Whether this host's connection c waits in the shared barriers (as far as
  /// this replica has applied the log): if not, its departure changes nothing.
  bool waiting_here(conn_id c) const;

 private:
  struct gid {
    std::string host;
    std::int64_t inc = 0;
    conn_id c = 0;
    auto operator<=>(const gid&) const = default;
  };
  conn_id replica_id(const std::string& h, std::int64_t inc, conn_id c);
  void apply(const std::string& h, std::int64_t inc, const door_input& in, output& out);
  /// Keeps this host's replies (under their own connection ids), drops the rest.
  void route(output& out, std::size_t from);
  void forget(conn_id rid);
  /// Whether a reply ending rid's wait is this host's to send (else rid is forgotten).
  bool own(conn_id rid);

  std::string self_;
  std::int64_t self_inc_ = 0;
  barrier_set& state_;
  std::map<std::string, presence> hosts_;  // live hosts, by key name
  std::set<std::pair<std::string, std::int64_t>> incs_;
  /// Per incarnation present: the lowest batch sequence it may still apply.
  std::map<std::pair<std::string, std::int64_t>, std::uint64_t> next_seq_;
  std::map<gid, conn_id> ids_;
  std::unordered_map<conn_id, gid> back_;
  conn_id next_ = 1;
  millis last_now_ = 0;
  std::uint64_t batches_ = 0;
  std::function<bool(conn_id)> own_;  ///< output::only_to while an input is applied
};

}  // namespace tfb::store
