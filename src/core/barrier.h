#pragma once
// The barrier rules: a pure state machine. No sockets, no clocks: the caller
// passes connection ids and the time, and gets back what to send to whom.
// Every rule here is in docs/protocol.md and tested in tests/unit/barrier_test.cpp.
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "events.h"
#include "history.h"
#include "protocol.h"

namespace tfb {

namespace text_state {
class reader;
}

using conn_id = std::uint64_t;
using millis = std::int64_t;  ///< a monotonic time in milliseconds, from the caller

/// Who is behind a connection (from its HELLO).
struct peer_info {
  std::string host;
  std::uint32_t pid = 0;
};

/// One message for one connection.
struct effect {
  conn_id to;
  proto::reply msg;
};

/// A fact the host must write (and flush) to its journal before it sends
/// the replies of the same step, so that an acknowledged verdict survives a crash.
struct journal_entry {
  enum class kind { verdict, release, abort, gathered } what = kind::verdict;
  std::string scope, name;
  std::uint64_t gen = 0;
  proto::verdict v = proto::verdict::none;
  std::string message;  ///< verdict message, or abort reason
  // kind::verdict: the chief's arrival that carried the verdict (when it arrived with it)
  bool chief_arrival = false;
  std::string id, host;
  std::uint32_t pid = 0;
  std::optional<std::uint32_t> n, rank;
  /// kind::release: who was released. kind::gathered: who is present, with
  /// their ranks in `ranks` (same order); the chief's arrival is in id, host, pid, rank.
  std::vector<std::string> ids;
  std::vector<std::optional<std::uint32_t>> ranks;
  /// kind::gathered: the chief's decide deadline (wait --decide-within or
  /// --decide-timeout), in ms from all arriving; restored in full from the restart.
  std::optional<millis> within;
};

/// A gathered round waiting for its chief's verdict for at most `within` ms
/// (wait --decide-within, --decide-timeout): which round, and how long.
struct decide_deadline {
  std::string scope, name;
  std::uint64_t gen = 0;
  millis within = 0;
};

/// What one step of the state machine produced.
struct output {
  std::vector<effect> sends;
  std::vector<ev::event> events;       ///< what happened, in order (events.h): the log, the metrics
  std::vector<journal_entry> journal;  ///< to persist before `sends` go out
  std::vector<round_end> ended;        ///< rounds released or aborted (metrics)
  std::vector<round_record> rounds;    ///< rounds that ended in this step, for the arrival history (history.h)
  tally counted;                       ///< participants that came and went in this step (metrics)
  /// Decide deadlines armed in this step (a chief's within=): the host wakes
  /// `within` after it applied this step, on its own monotonic clock, and
  /// submits input::expire for the round (barrier_set::expire).
  std::vector<decide_deadline> deadlines;
  /// Set by a host with a store (replica.h): a release's or an abort's replies
  /// go only to the connections it accepts. The others' waits end all the
  /// same, unseen: their own hosts tell them. Null: every reply.
  const std::function<bool(conn_id)>* only_to = nullptr;
  bool wanted(conn_id c) const { return !only_to || (*only_to)(c); }
  /// False where no journal keeps this step (a host without --state-dir, a
  /// store): a release's journal entry then goes without its list of ids.
  bool journaled = true;
  /// What a step let go of (a released round, a forgotten one), freed with
  /// the output: after the caller sent the replies, so that a release to
  /// 19,000 does not wait for 19,000 members to be freed (bench/fanout.sh).
  std::vector<std::shared_ptr<void>> retired;
};

using proto::departure;

class barrier_set {
 public:
  /// ARRIVE on connection c. Replies WAITING, then possibly releases the round.
  void arrive(conn_id c, const proto::arrive& a, const peer_info& p, millis now, output& out);
  /// DECIDE on connection c (see docs/protocol.md for the rules).
  void decide(conn_id c, const proto::decide& d, const peer_info& p, millis now, output& out);
  /// ABORT: every participant of the current round gets ABORTED.
  void abort(conn_id c, const proto::abort_req& a, millis now, output& out);
  /// Aborts every round whose chief gave no verdict within its ARRIVE's
  /// within= of all arriving, by now (wait --decide-within, --decide-timeout).
  /// Clock-free: the round is named, and whoever measured the time (the
  /// host, on its own clock) decided it was due; a round already decided,
  /// released or aborted is left alone, so a late second expire does nothing.
  void expire(const decide_deadline& which, millis now, output& out);
  /// The earliest such deadline of a round still waiting for its verdict
  /// (the host arms a timer for it and then calls expire), or nullopt.
  std::vector<decide_deadline> pending_deadlines() const;
  /// LEAVE (explicit == true, replies LEFT) or a closed connection.
  void leave(conn_id c, bool explicit_leave, millis now, output& out) {
    leave(c, explicit_leave ? departure::left : departure::disconnected, now, out);
  }
  /// A participant goes: LEAVE (replies LEFT), a closed connection, or silence past the keep-alive.
  /// timed_out: the participant said LEAVE why=timeout (counted in its round's record).
  void leave(conn_id c, departure how, millis now, output& out, bool timed_out = false);
  /// Replays one journal entry (at start-up, before any connection).
  void restore(const journal_entry& e, millis now);
  /// The journal entries that describe the current state (to compact the journal).
  std::vector<journal_entry> snapshot() const;
  /// The whole state as text (barrier_dump.cpp): open rounds, members,
  /// deciders, departures and waits included, for a store's snapshots. The
  /// limits set by limit() are not part of it.
  std::string dump() const;
  /// Replaces the state with a dump's; false (and nothing changed) with error
  /// when the text is not a whole, consistent dump.
  bool load(std::string_view text, std::string& error);
  /// Whether every connection id in the state is below limit (a replica's next id).
  bool connections_below(conn_id limit) const;
  /// Tells everyone waiting that the host shuts down; forgets them.
  void shutdown(std::string_view text, output& out);

  proto::status_reply status(const proto::status_req& s, millis now) const;

  /// True while any participant or decider is waiting anywhere.
  bool active() const { return !where_.empty(); }
  /// Participants and deciders waiting anywhere.
  std::size_t waiting() const { return where_.size(); }
  /// With a store (replica.h): the arrivals and decisions that follow came
  /// through this host of the store, as status shows. Never set on a single host.
  void came_through(std::string_view host);
  /// Whether connection c waits for anything (a round, or a verdict's delivery).
  bool is_waiting(conn_id c) const { return where_.count(c) != 0; }
  /// Whether connection c is the chief of `wait --decide-by` whose round, all
  /// present, waits for the verdict it is to send (DECIDE on that connection).
  bool decides_on(conn_id c) const;
  /// Forgets barriers with nobody waiting whose last activity is older than max_idle.
  std::size_t prune(millis now, millis max_idle);
  /// One barrier that nobody waits on, as forget() names it.
  struct idle_barrier {
    std::string scope, name;
    std::uint64_t gen = 0;       ///< its open round's number
    millis last_activity = 0;    ///< the time of its last input (the input's own)
  };
  /// Every barrier that nobody waits on (a store's time keeper picks from these).
  std::vector<idle_barrier> idle_barriers() const;
  /// With a store: forgets barrier b if nobody waits on it and nothing has
  /// happened to it since b was read (the same round number and last
  /// activity), whatever any clock says now. True when it went.
  bool forget(const idle_barrier& b, output& out);
  std::size_t barrier_count() const { return barriers_.size(); }
  /// Barriers with a round under way: someone waits in it, or all are
  /// present and the chief's verdict is awaited. Idle ones are not counted.
  std::size_t open_count() const;
  /// When the oldest round under way began (its first arrival, on the
  /// caller's clock); nullopt when none is.
  std::optional<millis> oldest_open() const;
  /// At most max barriers (0: no limit). A request for a new one past it first
  /// forgets one that nobody waits on and that was idle longer than
  /// keep_recent (finished rounds before aborts, the longest idle first), so
  /// that a participant reconnecting within keep_recent never meets a fresh
  /// round 1; when there is none, the request gets ERR BUSY.
  std::size_t max_barriers() const { return max_barriers_; }
  millis keep_recent() const { return keep_recent_; }
  void limit(std::size_t max, millis keep_recent) {
    max_barriers_ = max;
    keep_recent_ = keep_recent;
  }
  /// With a store: at max barriers a new one is refused and none is forgotten
  /// to make room, since what is "recent" would depend on a host's clock;
  /// the store's time keeper forgets idle ones (forget()).
  static constexpr millis never_forget = std::numeric_limits<millis>::max();

 private:
  struct member {
    std::optional<std::uint32_t> rank;
    std::string host;
    std::uint32_t pid = 0;
    std::uint32_t via = 0;  ///< with a store: the host it came through, in vias_ (0: none)
    std::string id;
    bool chief = false;
    bool durable = false;    ///< a DECIDE that was acknowledged: stays when its connection closes
    bool connected = true;
    bool wants_release = false;  ///< a one-step DECIDE with wait=1: gets RELEASE delivered=K
    /// The chief of `wait --decide-by` (ARRIVE decide=1): once all are here its
    /// connection stays, and it gives the verdict on it; closing it first aborts the round.
    bool decides = false;
    millis since = 0;
  };
  struct gone {
    std::optional<std::uint32_t> rank;
    std::string host;
    std::uint32_t pid = 0;
    departure how = departure::disconnected;
    millis when = 0;
    std::string id;  ///< the participant's id: an unranked one that comes back has the same
  };
  struct finished {
    std::uint64_t gen = 0;
    proto::verdict v = proto::verdict::continue_;
    std::string message;
    std::vector<std::string> ids;  ///< sorted: who was released (and deciders)
  };
  struct round {
    std::uint64_t gen = 1;
    std::optional<std::uint32_t> n;
    std::string n_by;  ///< who fixed n, for conflict messages
    std::unordered_map<conn_id, member> members;
    std::unordered_map<std::uint32_t, conn_id> by_rank;
    std::unordered_map<std::string, conn_id> by_id;
    std::optional<conn_id> chief;
    proto::verdict v = proto::verdict::none;
    std::string message;
    std::string verdict_by;
    std::vector<conn_id> deciders;  ///< DECIDE wait=1 connections that are not members
    millis opened = 0;        ///< when the round was created; from its first arrival on, when that came
    millis complete_at = -1;  ///< when its last arrival came (-1: not yet, or restored), for the metrics
    bool started = false;     ///< someone has arrived (they may all have left since)
    bool gathered = false;
    std::vector<gone> departed;  ///< who left before release and has not come back (bounded)
    std::vector<std::string> decider_ids;
    std::uint32_t withdrawn = 0, timeouts = 0;  ///< for the round's record (history.h)
    millis within = -1;    ///< the chief's ARRIVE within= (-1: none)
    millis deadline = -1;  ///< gathered with within: abort when no verdict by then (-1: none)
  };
  using key = std::pair<std::string, std::string>;  // scope, name
  struct barrier {
    std::string scope, name;
    round open;
    std::map<std::uint64_t, round> gathered;  ///< all present, waiting for the verdict
    bool aborted = false;
    std::uint64_t aborted_gen = 0;
    std::string abort_reason;
    millis last_activity = 0;
    std::deque<finished> recent;  ///< the last few released rounds, for participants that reconnect
  };
  struct location {
    const key* k;
    std::uint64_t gen;
    bool member;  ///< false: a decider only
  };

  struct loader;  ///< reads a dump line by line (barrier_dump.cpp)
  static bool load_round(text_state::reader& r, round& out, std::string& error);
  static std::vector<std::string> released_ids(round& r);
  static void retire(round&& r, output& out);
  barrier& get(const std::string& scope, const std::string& name, millis now);
  /// False (after replying ERR BUSY to c) when a new barrier would pass the limit and none can go.
  bool make_room(conn_id c, const std::string& scope, const std::string& name, millis now, output& out);
  static bool busy(const barrier& b) {
    // A decider may wait on an open round that has no members left (its chief withdrew).
    return !b.open.members.empty() || !b.open.deciders.empty() || !b.gathered.empty();
  }
  round* find_round(barrier& b, std::uint64_t gen);
  static void first_arrival(round& r, millis now);
  void complete(barrier& b, millis now, output& out);
  /// Releases r and takes it: what is left of it goes to out.retired, and the
  /// caller drops the emptied round (b.open reset, or erased from b.gathered).
  void release(barrier& b, round& r, millis now, output& out);
  /// Aborts barrier b's rounds (ABORT, a chief gone while deciding, a decide deadline); returns who was told.
  std::uint32_t abort_barrier(barrier& b, const std::string& reason, millis now, output& out);
  static void record(const barrier& b, const round& r, round_record::ending e, millis now, output& out);
  void deliver_verdict(barrier& b, round& r, proto::verdict v, const std::string& message,
                       const std::string& by, const std::string& decider_id, conn_id decider, bool wait,
                       output& out);
  bool rejoin(barrier& b, conn_id c, const std::string& id, bool is_decide, const peer_info& p, output& out,
              bool decides = false);
  /// DECIDE from the chief of `wait --decide-by` (at: where it waits), on the connection it arrived with.
  void decide_as_member(conn_id c, location at, const proto::decide& d, const std::string& by, millis now,
                        output& out);
  /// The barrier a DECIDE is for: the named one, or the one of its scope that awaits a verdict, else the one
  /// with an open round. Nullptr (after replying ERR to c) when there is none or more than one.
  barrier* decided_barrier(conn_id c, const proto::decide& d, millis now, output& out);
  /// DECIDE on an open round that has its verdict already: a retry is acknowledged, another verdict refused.
  void decide_again(barrier& b, round& r, conn_id c, const proto::decide& d, output& out);
  /// DECIDE on an open round without a chief: the chief's arrival, with its verdict.
  void decide_on_arrival(barrier& b, conn_id c, const proto::decide& d, const peer_info& p, const std::string& by,
                         millis now, output& out);
  /// restore() of each kind of journal entry but an abort.
  static void restore_release(barrier& b, const journal_entry& e, millis now);
  void restore_verdict(barrier& b, const journal_entry& e, millis now);
  void restore_gathered(barrier& b, const journal_entry& e, millis now);
  void move_member(round& r, conn_id from, conn_id to, const key* k);
  bool check_join(barrier& b, conn_id c, const std::optional<std::uint32_t>& n,
                  const std::optional<std::uint32_t>& rank, bool chief, const peer_info& p, output& out);
  void add_member(barrier& b, conn_id c, member m, millis now);
  static std::string describe(const member& m);
  /// "the chief (rank 0 on node1)", for the reason of an abort.
  static std::string chief_words(const member& m);
  static journal_entry entry(journal_entry::kind what, const barrier& b, std::uint64_t gen, proto::verdict v,
                             const std::string& message);
  static void chief_arrival(journal_entry& j, const member& m);
  static journal_entry gathered_entry(const barrier& b, const round& r);
  /// The round and the participant as events.h names them.
  static ev::round_id round_of(const barrier& b, std::uint64_t gen) { return {b.scope, b.name, gen}; }
  static ev::who who_of(const member& m) { return {m.rank, m.host, m.pid}; }

  std::map<key, barrier> barriers_;
  std::unordered_map<conn_id, location> where_;
  conn_id next_restored_ = 0;
  std::size_t max_barriers_ = 0;
  millis keep_recent_ = 0;
  std::vector<std::string> vias_{""};  ///< the hosts of a store, by member::via
  std::uint32_t via_now_ = 0;          ///< came_through's
};

}  // namespace tfb
