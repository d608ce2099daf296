#pragma once
// What happened, as values (issue #34 item 4). The core says what happened;
// what the host shows of it is src/observe/'s (events_out.h): the log's
// line for each event, the metrics it counts, the arrival history.
//
// One step of the state machine (barrier.h's `output`) carries four kinds
// of observation, all plain data and all consumed in src/observe/:
//  - `events`: one ev::event per thing that happened, in order: what the
//    host's log says (one line each, in the exact words of before), and
//    what the metrics count of it. Each kind is a small struct with its
//    fields (the round, the participant, the reason), never a sentence;
//  - `ended` (round_end, below): the rounds that ended, with their figures
//    (spread, last node), for the metrics;
//  - `counted` (tally, below): the participants that came and went;
//  - `rounds` (history.h's round_record): the ended rounds' records, for
//    the arrival history.
// The last three are the step's measurements, summed or recorded whole; an
// event is a fact that is told. The layers above the core add events of
// their own (a bad client, a failed authentication, a store's host lost)
// to the same stream, so that src/net/ only hands events to src/observe/.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "protocol.h"

namespace tfb {

using millis = std::int64_t;  ///< a monotonic time in milliseconds, from the caller

/// A round that ended in this step, for the host's metrics (metrics.h).
struct round_end {
  bool aborted = false;
  proto::verdict v = proto::verdict::none;  ///< released: its verdict
  millis spread = -1;  ///< released: first to last arrival; -1 when not known (restored from the journal)
  bool decided = false;  ///< released: a chief or `decide` gave the verdict (false: nobody decided; it went on)
  std::string last_node;  ///< released: the node (HELLO host=) of the last arrival; empty when not known
};

/// Participants counted by one step, for the host's metrics: arrivals that
/// joined a round, and members that went before their round ended, by how.
struct tally {
  std::uint64_t arrivals = 0;
  std::uint64_t withdrawals = 0;  ///< LEAVE (a participant's Ctrl-C or --timeout)
  std::uint64_t disconnects = 0;  ///< connection closed, silent past its keep-alive, or its host lost
};

namespace ev {

/// One round of one barrier.
struct round_id {
  std::string scope, name;
  std::uint64_t gen = 0;
  bool operator==(const round_id&) const = default;
};
/// A participant as the log names it.
struct who {
  std::optional<std::uint32_t> rank;
  std::string host;
  std::uint32_t pid = 0;
  bool operator==(const who&) const = default;
};

// ---- from the barrier rules (barrier.cpp) ----

/// A new barrier refused: the host holds `count` barriers, its limit.
struct barrier_refused {
  std::string scope, name;
  std::size_t count = 0;
  bool operator==(const barrier_refused&) const = default;
};
/// A barrier nobody waited on forgotten to make room for a new one.
struct barrier_evicted {
  std::string scope, name;
  std::size_t max = 0;  ///< --max-barriers
  bool operator==(const barrier_evicted&) const = default;
};
/// A barrier forgotten by the store's time keeper (idle for --forget-after).
struct barrier_forgotten {
  std::string scope, name;
  bool operator==(const barrier_forgotten&) const = default;
};
/// A participant came back after its round was released, and was told the outcome.
struct rejoined_late {
  round_id round;
  std::string id;
  bool operator==(const rejoined_late&) const = default;
};
/// A participant came back to the round it was in.
struct rejoined {
  round_id round;
  who member;
  bool operator==(const rejoined&) const = default;
};
/// An arrival refused as a conflict (text: what the participant is told).
struct conflict {
  round_id round;
  std::string host;
  std::uint32_t pid = 0;
  std::string text;
  bool operator==(const conflict&) const = default;
};
/// An arrival joined its round: count of n present now.
struct arrived {
  round_id round;
  who member;
  bool chief = false;
  std::uint32_t count = 0, n = 0;
  bool operator==(const arrived&) const = default;
};
/// The chief arrived with its verdict (DECIDE on a round without a chief).
struct arrived_deciding {
  round_id round;
  who member;
  proto::verdict v = proto::verdict::none;
  std::uint32_t count = 0, n = 0;
  bool operator==(const arrived_deciding&) const = default;
};
/// All n are present; the round waits for its chief's verdict.
struct gathered {
  round_id round;
  std::uint32_t n = 0;
  who chief;
  bool operator==(const gathered&) const = default;
};
/// A verdict given (by: who gave it).
struct verdict_given {
  round_id round;
  proto::verdict v = proto::verdict::none;
  std::string by, message;
  bool operator==(const verdict_given&) const = default;
};
/// A round released to its n participants.
struct released {
  round_id round;
  std::uint32_t n = 0;
  proto::verdict v = proto::verdict::none;
  std::string message;
  bool operator==(const released&) const = default;
};
/// A barrier's rounds aborted; `told` participants were told.
struct aborted {
  round_id round;
  std::uint32_t told = 0;
  std::string reason;
  bool operator==(const aborted&) const = default;
};
/// A participant went before its round ended; `left` remain of n (nullopt: n not known).
struct withdrew {
  round_id round;
  who member;
  proto::departure how = proto::departure::disconnected;
  std::size_t left = 0;
  std::optional<std::uint32_t> n;
  bool operator==(const withdrew&) const = default;
};

// ---- from the door (door.cpp) ----

/// The journal could not be compacted (a warning: the old journal is whole).
struct journal_not_compacted {
  std::string path, why;
  bool operator==(const journal_not_compacted&) const = default;
};

// ---- from a store (src/store/) ----

/// A gone key applied: host's participants of open rounds are withdrawn.
struct store_host_left {
  std::string host;
  std::int64_t inc = 0;
  bool operator==(const store_host_left&) const = default;
};
/// A host's presence went and this host marks its end (counted; no line).
struct store_host_lost {
  std::string host;
  std::int64_t inc = 0;
  bool operator==(const store_host_lost&) const = default;
};
/// This host's state differs from another's, by their digests (counted; the
/// follower's action logs how).
struct store_diverged {
  std::string host;
  std::int64_t revision = 0;
  bool operator==(const store_diverged&) const = default;
};

// ---- from the host's connections (src/net/) ----

/// A client broke the protocol (what: its fault, as host_conn says it), or
/// did not read its replies (what empty).
struct bad_client {
  std::string remote, what;
  bool operator==(const bad_client&) const = default;
};
/// A client that promised keep-alives sent nothing for `silent` (as written).
struct client_silent {
  std::string remote, silent;
  bool operator==(const client_silent&) const = default;
};
/// The host is full: the oldest connection that had not authenticated goes.
struct connection_evicted {
  std::size_t open = 0, limit = 0;
  std::string oldest, newcomer;
  bool operator==(const connection_evicted&) const = default;
};
/// A handshake's authentication failed (counted; host_conn's warning says how).
struct auth_failed {
  bool operator==(const auth_failed&) const = default;
};
/// A participant gave up at its --timeout (LEAVE why=timeout; counted).
struct timeout_leave {
  bool operator==(const timeout_leave&) const = default;
};

using event = std::variant<barrier_refused, barrier_evicted, barrier_forgotten, rejoined_late, rejoined, conflict,
                           arrived, arrived_deciding, gathered, verdict_given, released, aborted, withdrew,
                           journal_not_compacted, store_host_left, store_host_lost, store_diverged, bad_client,
                           client_silent, connection_evicted, auth_failed, timeout_leave>;

}  // namespace ev
}  // namespace tfb
