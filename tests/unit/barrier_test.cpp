// The barrier rules of docs/protocol.md (src/core/barrier.h): a pure state machine.
// These tests are the spec. Each connection id stands for one client connection;
// as in the host, a connection makes one ARRIVE or DECIDE (another only after an ERR).
#include "barrier.h"
#include "events_out.h"
#include "journal.h"
#include "../support/barrier_checker.h"
#include "seeds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace tfb {
namespace {

using proto::verdict;
constexpr auto stop = verdict::stop;
constexpr auto cont = verdict::continue_;
constexpr std::nullopt_t none = std::nullopt;
using opt_u32 = std::optional<std::uint32_t>;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

using check::peer;          // the same peers and journal dump as the model checker
using check::dump_journal;

/// Everything sent to c in this output, as wire lines.
std::string to(const output& o, conn_id c) {
  std::string s;
  for (const auto& e : o.sends)
    if (e.to == c) s += proto::format_reply(e.msg);
  return s;
}

/// The whole output as "c: LINE" lines, in order.
std::string trace(const output& o) {
  std::string s;
  for (const auto& e : o.sends) s += std::to_string(e.to) + ": " + proto::format_reply(e.msg);
  return s;
}

std::set<conn_id> recipients(const output& o) {
  std::set<conn_id> s;
  for (const auto& e : o.sends) s.insert(e.to);
  return s;
}

std::string all_log(const output& o) {
  std::string s;
  for (const auto& e : o.events) s += observe::line(e) + "\n";
  return s;
}

class Barrier : public ::testing::Test {
 protected:
  barrier_set bs;
  millis now = 10'000;
  std::map<conn_id, std::string> ids;  ///< participant ids; by default one per connection

  void tick(millis ms) { now += ms; }
  std::string id_of(conn_id c) {
    auto it = ids.find(c);
    return it == ids.end() ? "id" + std::to_string(c) : it->second;
  }
  /// Connection c is participant `was` coming back (same id).
  void comes_back(conn_id c, conn_id was) { ids[c] = id_of(was); }

  output arrive(conn_id c, std::string name, opt_u32 n, opt_u32 rank = none, bool chief = false,
                std::string scope = "default") {
    proto::arrive a;
    a.name = std::move(name);
    a.scope = std::move(scope);
    a.id = id_of(c);
    a.n = n;
    a.rank = rank;
    a.chief = chief;
    output out;
    bs.arrive(c, a, peer(c), now, out);
    return out;
  }
  output chief(conn_id c, std::string name, opt_u32 n, opt_u32 rank = none, std::string scope = "default") {
    return arrive(c, std::move(name), n, rank, true, std::move(scope));
  }
  output decide(conn_id c, std::string name, verdict v, std::string message = "", bool wait = true,
                opt_u32 n = none, opt_u32 rank = none, std::string scope = "default") {
    proto::decide d;
    d.name = std::move(name);
    d.scope = std::move(scope);
    d.id = id_of(c);
    d.v = v;
    d.n = n;
    d.rank = rank;
    d.wait = wait;
    d.message = std::move(message);
    output out;
    bs.decide(c, d, peer(c), now, out);
    return out;
  }
  output abort(conn_id c, std::string name, std::string reason = "", std::string scope = "default") {
    output out;
    bs.abort(c, proto::abort_req{std::move(scope), std::move(name), std::move(reason)}, now, out);
    return out;
  }
  output leave(conn_id c, bool explicit_leave = false) {
    output out;
    bs.leave(c, explicit_leave, now, out);
    return out;
  }
  proto::status_reply status(std::string scope = "*", std::string name = "", bool detail = true) {
    return bs.status(proto::status_req{std::move(scope), std::move(name), detail}, now);
  }
  std::string status_text(std::string scope = "*", std::string name = "", bool detail = true) {
    return proto::format_reply(status(std::move(scope), std::move(name), detail));
  }
  std::string status_of(const std::string& name, bool detail = false) { return status_text("default", name, detail); }
};

// ---------------------------------------------------------------------------
// release

TEST_F(Barrier, ReleasesExactlyWhenTheNthArrives) {
  output o = arrive(1, "e", 3, 0);
  EXPECT_EQ(trace(o), "1: WAITING name=e gen=1 arrived=1 n=3\n");
  o = arrive(2, "e", 3, 1);
  EXPECT_EQ(trace(o), "2: WAITING name=e gen=1 arrived=2 n=3\n");
  EXPECT_TRUE(bs.active());
  o = arrive(3, "e", 3, 2);
  EXPECT_EQ(to(o, 3), "WAITING name=e gen=1 arrived=3 n=3\nRELEASE name=e gen=1 verdict=continue\n");
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=continue\n");
  EXPECT_EQ(to(o, 2), "RELEASE name=e gen=1 verdict=continue\n");
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1, 2, 3}));
  EXPECT_EQ(o.sends.size(), 4u);
  EXPECT_FALSE(bs.active());
  EXPECT_CONTAINS(all_log(o), "release e#1: 3 participants, verdict continue");
}

// What the host's metrics count (round_end): each released round once, with
// its verdict and its first-to-last arrival spread; an abort once.
TEST_F(Barrier, EndedRoundsForTheMetrics) {
  EXPECT_TRUE(arrive(1, "e", 2, 0).ended.empty());
  EXPECT_EQ(bs.waiting(), 1u);
  tick(250);
  output o = arrive(2, "e", 2, 1);
  ASSERT_EQ(o.ended.size(), 1u);
  EXPECT_FALSE(o.ended[0].aborted);
  EXPECT_EQ(o.ended[0].v, cont);
  EXPECT_EQ(o.ended[0].spread, 250);
  EXPECT_EQ(bs.waiting(), 0u);
  // With a chief: the spread ends at the last arrival, not at the verdict.
  chief(3, "c", 2, 0);
  tick(40);
  EXPECT_TRUE(arrive(4, "c", 2, 1).ended.empty());  // gathered, waiting for the verdict
  tick(5000);
  o = decide(5, "c", stop);
  ASSERT_EQ(o.ended.size(), 1u);
  EXPECT_EQ(o.ended[0].v, stop);
  EXPECT_EQ(o.ended[0].spread, 40);
  arrive(6, "a", 3, 0);
  o = abort(7, "a", "oom");
  ASSERT_EQ(o.ended.size(), 1u);
  EXPECT_TRUE(o.ended[0].aborted);
  EXPECT_TRUE(abort(8, "a", "again").ended.empty());  // already aborted: no second count
}

// Issue #32 item 7: a round that nobody decided is told apart from one a
// chief continued, and the node of its last arrival is named.
TEST_F(Barrier, EndedRoundsSayWhetherAVerdictWasGivenAndWhoCameLast) {
  arrive(1, "e", 3, 0);
  tick(10);
  arrive(3, "e", 3, 2);
  tick(10);
  output o = arrive(2, "e", 3, 1);
  ASSERT_EQ(o.ended.size(), 1u);
  EXPECT_FALSE(o.ended[0].decided);  // no chief: released with no verdict given
  EXPECT_EQ(o.ended[0].last_node, "h2");
  chief(4, "c", 2, 0);
  tick(10);
  arrive(5, "c", 2, 1);
  o = decide(6, "c", cont);
  ASSERT_EQ(o.ended.size(), 1u);
  EXPECT_TRUE(o.ended[0].decided);
  EXPECT_EQ(o.ended[0].v, cont);
  EXPECT_EQ(o.ended[0].last_node, "h5");
}

// Issue #32 item 7: arrivals, withdrawals (LEAVE) and disconnects, counted
// once each, and only for members of a round under way.
TEST_F(Barrier, StepsTallyArrivalsWithdrawalsAndDisconnects) {
  EXPECT_EQ(arrive(1, "e", 3, 0).counted.arrivals, 1u);
  arrive(2, "e", 3, 1);
  output o = leave(1, true);
  EXPECT_EQ(o.counted.withdrawals, 1u);
  EXPECT_EQ(o.counted.disconnects, 0u);
  o = leave(2, false);
  EXPECT_EQ(o.counted.disconnects, 1u);
  EXPECT_EQ(leave(2, false).counted.disconnects, 0u);  // gone already: not twice
  // A member of a released round that closes is no departure.
  arrive(3, "r", 1, 0);
  EXPECT_EQ(leave(3, false).counted.disconnects, 0u);
  // Nor is a refused arrival an arrival.
  arrive(4, "x", 2, 0);
  EXPECT_EQ(arrive(5, "x", 3, 1).counted.arrivals, 0u);  // another n: refused
}

// Issue #32 item 7: tfbarrier_barriers counts rounds under way (a gathered
// round waiting for its verdict too), not idle barriers; the oldest's age is
// what a hang alert needs.
TEST_F(Barrier, OpenRoundsAndTheOldestOfThem) {
  EXPECT_EQ(bs.open_count(), 0u);
  EXPECT_FALSE(bs.oldest_open().has_value());
  for (conn_id c = 1; c <= 5; ++c) arrive(c, "done" + std::to_string(c), 1);  // released at once: idle
  EXPECT_EQ(bs.barrier_count(), 5u);
  EXPECT_EQ(bs.open_count(), 0u);
  millis t0 = now;
  arrive(10, "a", 2, 0);
  tick(100);
  chief(11, "g", 2, 0);
  arrive(12, "g", 2, 1);  // gathered: the chief's verdict is awaited
  EXPECT_EQ(bs.open_count(), 2u);
  EXPECT_EQ(bs.oldest_open(), t0);
  leave(10, true);  // "a" is idle again
  EXPECT_EQ(bs.open_count(), 1u);
  EXPECT_EQ(bs.oldest_open(), t0 + 100);
  decide(13, "g", cont);
  EXPECT_EQ(bs.open_count(), 0u);
  EXPECT_FALSE(bs.oldest_open().has_value());
}

TEST_F(Barrier, OneParticipantReleasesAtOnce) {
  output o = arrive(1, "solo", 1);
  EXPECT_EQ(trace(o), "1: WAITING name=solo gen=1 arrived=1 n=1\n1: RELEASE name=solo gen=1 verdict=continue\n");
  EXPECT_FALSE(bs.active());
  EXPECT_CONTAINS(all_log(o), "release solo#1: 1 participant, verdict continue");
}

TEST_F(Barrier, ParticipantsWithoutRanks) {
  arrive(1, "e", 2);
  output o = arrive(2, "e", 2);
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=continue\n");
  EXPECT_EQ(to(o, 2), "WAITING name=e gen=1 arrived=2 n=2\nRELEASE name=e gen=1 verdict=continue\n");
}

TEST_F(Barrier, LogsArrivals) {
  output o = arrive(1, "e", 2, 1);
  EXPECT_CONTAINS(all_log(o), "arrive e#1: rank 1 (h1 pid 1001), 1/2");
  o = arrive(2, "e", 2, none, false, "job.7");
  EXPECT_CONTAINS(all_log(o), "arrive job.7/e#1: a participant without rank (h2 pid 1002), 1/2");
}

TEST_F(Barrier, OtherBarriersAreUntouched) {
  arrive(1, "a", 2);
  arrive(2, "b", 2);
  output o = arrive(3, "a", 2);
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1, 3}));
  EXPECT_TRUE(bs.active());  // b still waits
  EXPECT_CONTAINS(status_of("b"), "state=open n=2 arrived=1");
}

// ---------------------------------------------------------------------------
// generations

TEST_F(Barrier, AfterReleaseTheNextArrivalOpensTheNextRound) {
  arrive(1, "e", 2, 0);
  arrive(2, "e", 2, 1);
  output o = arrive(3, "e", 2, 0);
  EXPECT_EQ(trace(o), "3: WAITING name=e gen=2 arrived=1 n=2\n");
  o = arrive(4, "e", 2, 1);
  EXPECT_EQ(to(o, 3), "RELEASE name=e gen=2 verdict=continue\n");
  EXPECT_EQ(to(o, 4), "WAITING name=e gen=2 arrived=2 n=2\nRELEASE name=e gen=2 verdict=continue\n");
}

TEST_F(Barrier, EachRoundMayHaveItsOwnN) {
  arrive(1, "e", 1);
  output o = arrive(2, "e", 3);
  EXPECT_EQ(trace(o), "2: WAITING name=e gen=2 arrived=1 n=3\n");
  // ... but a round that had a release does not remember its n for the next one:
  output needn = arrive(3, "f", 1);
  needn = arrive(4, "f", none);
  EXPECT_EQ(to(needn, 4).substr(0, 8), "ERR NEED");
}

TEST_F(Barrier, GenerationsCountUp) {
  for (std::uint64_t g = 1; g <= 5; ++g) {
    conn_id a = 10 * g, b = 10 * g + 1;
    EXPECT_EQ(to(arrive(a, "loop", 2), a), "WAITING name=loop gen=" + std::to_string(g) + " arrived=1 n=2\n");
    EXPECT_EQ(to(arrive(b, "loop", 2), a), "RELEASE name=loop gen=" + std::to_string(g) + " verdict=continue\n");
  }
}

TEST_F(Barrier, AFastReArrivalJoinsTheNextRound) {
  arrive(1, "e", 2, 0);
  output o = arrive(2, "e", 2, 1);
  ASSERT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=continue\n");
  // Rank 1 is quick: it arrives for the next round before rank 0 does. It waits.
  o = arrive(3, "e", 2, 1);
  EXPECT_EQ(trace(o), "3: WAITING name=e gen=2 arrived=1 n=2\n");
  o = arrive(4, "e", 2, 0);
  EXPECT_EQ(recipients(o), (std::set<conn_id>{3, 4}));
  EXPECT_EQ(to(o, 3), "RELEASE name=e gen=2 verdict=continue\n");
}

TEST_F(Barrier, ArrivalsWhileARoundAwaitsItsVerdictJoinTheNextRound) {
  arrive(1, "e", 2, 1);
  chief(2, "e", 2, 0);  // gathered: gen 1 waits for the verdict
  output o = arrive(3, "e", 2, 1);
  EXPECT_EQ(trace(o), "3: WAITING name=e gen=2 arrived=1 n=2\n");
  o = decide(9, "e", stop, "halt");
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop :halt\n");
  EXPECT_EQ(to(o, 3), "");  // gen 2 is not released by gen 1's verdict
  o = arrive(4, "e", 2, 0);
  EXPECT_EQ(to(o, 3), "RELEASE name=e gen=2 verdict=continue\n");  // and gen 2 has no verdict
}

// ---------------------------------------------------------------------------
// n, rank and chief conflicts

TEST_F(Barrier, NMismatchIsAConflictForThatCallerOnly) {
  arrive(1, "e", 3, 0);
  output o = arrive(2, "e", 4, 1);
  ASSERT_EQ(o.sends.size(), 1u);
  EXPECT_EQ(o.sends[0].to, 2u);
  std::string line = to(o, 2);
  EXPECT_TRUE(line.starts_with("ERR CONFLICT :")) << line;
  EXPECT_CONTAINS(line, "n=3");
  EXPECT_CONTAINS(line, "set by rank 0 on h1 pid 1001");
  EXPECT_CONTAINS(line, "you asked for n=4");
  EXPECT_CONTAINS(all_log(o), "conflict e#1: h2 pid 1002");
  // The round is unharmed.
  EXPECT_CONTAINS(status_of("e"), "n=3 arrived=1");
  arrive(3, "e", 3, 1);
  o = arrive(4, "e", 3, 2);
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1, 3, 4}));
}

TEST_F(Barrier, NMismatchNamesAParticipantWithoutRank) {
  arrive(1, "e", 3);
  EXPECT_CONTAINS(to(arrive(2, "e", 2), 2), "(set by h1 pid 1001)");
}

TEST_F(Barrier, ArrivalWithoutNToAnEmptyRoundNeedsN) {
  output o = arrive(1, "e", none, 0);
  ASSERT_EQ(o.sends.size(), 1u);
  std::string line = to(o, 1);
  EXPECT_TRUE(line.starts_with("ERR NEEDN :")) << line;
  EXPECT_CONTAINS(line, "--n N");
  EXPECT_FALSE(bs.active());
  // and it did not join: a later n=1 arrival releases alone
  o = arrive(2, "e", 1);
  EXPECT_EQ(recipients(o), (std::set<conn_id>{2}));
}

TEST_F(Barrier, ArrivalWithoutNTakesTheRoundsN) {
  arrive(1, "e", 3, 0);
  EXPECT_EQ(trace(arrive(2, "e", none, 1)), "2: WAITING name=e gen=1 arrived=2 n=3\n");
  output o = arrive(3, "e", none);
  EXPECT_EQ(to(o, 3), "WAITING name=e gen=1 arrived=3 n=3\nRELEASE name=e gen=1 verdict=continue\n");
}

TEST_F(Barrier, RankBeyondNIsAConflict) {
  arrive(1, "e", 3, 0);
  std::string line = to(arrive(2, "e", none, 3), 2);
  EXPECT_TRUE(line.starts_with("ERR CONFLICT :")) << line;
  EXPECT_CONTAINS(line, "rank 3 is beyond");
  EXPECT_CONTAINS(line, "ranks are 0 to 2");
  EXPECT_TRUE(to(arrive(3, "e", none, 1000), 3).starts_with("ERR CONFLICT"));
  // The state machine checks it even when the request carries both (parse_request does too).
  EXPECT_TRUE(to(arrive(4, "f", 2, 2), 4).starts_with("ERR CONFLICT"));
  EXPECT_CONTAINS(status_of("e"), "arrived=1");
}

TEST_F(Barrier, DuplicateRankIsAConflictNamingTheHolder) {
  arrive(7, "e", 3, 1);
  output o = arrive(2, "e", 3, 1);
  ASSERT_EQ(o.sends.size(), 1u);
  std::string line = to(o, 2);
  EXPECT_TRUE(line.starts_with("ERR CONFLICT :")) << line;
  EXPECT_CONTAINS(line, "rank 1 of barrier e round 1 is already held by h7 pid 1007");
  EXPECT_CONTAINS(status_of("e"), "arrived=1");
  // The refused connection may try again with another rank (the host allows a retry after ERR).
  EXPECT_EQ(trace(arrive(2, "e", 3, 2)), "2: WAITING name=e gen=1 arrived=2 n=3\n");
}

TEST_F(Barrier, RanksAreFreeAgainInTheNextRound) {
  arrive(1, "e", 2, 0);
  arrive(2, "e", 2, 1);
  EXPECT_EQ(trace(arrive(3, "e", 2, 0)), "3: WAITING name=e gen=2 arrived=1 n=2\n");
}

TEST_F(Barrier, SecondChiefIsAConflict) {
  chief(1, "e", 3, 0);
  std::string line = to(chief(2, "e", 3, 1), 2);
  EXPECT_TRUE(line.starts_with("ERR CONFLICT :")) << line;
  EXPECT_CONTAINS(line, "already has a chief: rank 0 (h1 pid 1001)");
  EXPECT_CONTAINS(status_of("e"), "arrived=1 chief=1");
}

// ---------------------------------------------------------------------------
// withdrawal

TEST_F(Barrier, DisconnectBeforeReleaseWithdraws) {
  arrive(1, "e", 2, 0);
  output o = leave(1);
  EXPECT_TRUE(o.sends.empty());
  EXPECT_CONTAINS(all_log(o), "leave e#1: rank 0 (h1 pid 1001) withdrew (disconnected), 0/2");
  EXPECT_FALSE(bs.active());
  arrive(2, "e", 2, 1);
  o = arrive(3, "e", 2, 0);  // rank 0 is free again
  EXPECT_EQ(to(o, 3), "WAITING name=e gen=1 arrived=2 n=2\nRELEASE name=e gen=1 verdict=continue\n");
  EXPECT_EQ(recipients(o), (std::set<conn_id>{2, 3}));
}

TEST_F(Barrier, AWithdrawnParticipantIsNoLongerCounted) {
  arrive(1, "e", 3, 0);
  arrive(2, "e", 3, 1);
  leave(1);
  EXPECT_CONTAINS(status_of("e", true), "arrived=1");
  output o = arrive(3, "e", 3, 2);
  EXPECT_EQ(trace(o), "3: WAITING name=e gen=1 arrived=2 n=3\n");  // not released: only 2 present
}

TEST_F(Barrier, AnEmptyRoundForgetsN) {
  arrive(1, "e", 3);
  leave(1);
  EXPECT_TRUE(to(arrive(2, "e", none), 2).starts_with("ERR NEEDN"));
  EXPECT_EQ(trace(arrive(3, "e", 5)), "3: WAITING name=e gen=1 arrived=1 n=5\n");  // no conflict with the old n=3
}

TEST_F(Barrier, ExplicitLeaveRepliesLeft) {
  arrive(1, "e", 2, 0);
  output o = leave(1, true);
  EXPECT_EQ(trace(o), "1: LEFT name=e gen=1\n");
  EXPECT_CONTAINS(all_log(o), "withdrew (left)");
  EXPECT_FALSE(bs.active());
  // A second LEAVE, or a LEAVE from a connection that waits for nothing.
  EXPECT_EQ(trace(leave(1, true)), "1: LEFT name=- gen=0\n");
  EXPECT_EQ(trace(leave(42, true)), "42: LEFT name=- gen=0\n");
  EXPECT_TRUE(leave(43).sends.empty());
}

TEST_F(Barrier, LeaveAfterReleaseChangesNothing) {
  arrive(1, "e", 2, 0);
  arrive(2, "e", 2, 1);
  EXPECT_EQ(trace(leave(1, true)), "1: LEFT name=- gen=0\n");  // the release stands
  EXPECT_TRUE(leave(2).sends.empty());
}

TEST_F(Barrier, DisconnectAfterAllArePresentDoesNotWithdraw) {
  arrive(1, "e", 3, 0);
  arrive(2, "e", 3, 1);
  chief(3, "e", 3, 2);  // gathered
  EXPECT_TRUE(leave(1).sends.empty());
  EXPECT_CONTAINS(status_of("e"), "state=gathered n=3 arrived=3");
  output o = decide(9, "e", cont);
  EXPECT_EQ(trace(o),
            "9: DECIDED name=e gen=1 verdict=continue arrived=3 n=3\n"
            "2: RELEASE name=e gen=1 verdict=continue\n"
            "9: RELEASE name=e gen=1 verdict=continue delivered=1\n");
}

TEST_F(Barrier, ExplicitLeaveOfAGatheredMember) {
  arrive(1, "e", 2, 0);
  chief(2, "e", 2, 1);
  EXPECT_EQ(trace(leave(1, true)), "1: LEFT name=e gen=1\n");
  EXPECT_CONTAINS(status_of("e"), "arrived=2");
  output o = decide(9, "e", stop);
  EXPECT_EQ(to(o, 9), "DECIDED name=e gen=1 verdict=stop arrived=2 n=2\nRELEASE name=e gen=1 verdict=stop delivered=0\n");
  EXPECT_EQ(recipients(o), (std::set<conn_id>{9}));
}

TEST_F(Barrier, AChiefWhoLeavesFreesTheChiefSeat) {
  chief(1, "e", 2, 0);
  leave(1);
  EXPECT_EQ(trace(chief(2, "e", 2, 0)), "2: WAITING name=e gen=1 arrived=1 n=2\n");
}

// ---------------------------------------------------------------------------
// the chief: arrive chief=1, then DECIDE

TEST_F(Barrier, ChiefGetsAllHereAndTheOthersKeepWaiting) {
  arrive(1, "e", 3, 1);
  arrive(2, "e", 3, 2);
  output o = chief(3, "e", 3, 0);
  EXPECT_EQ(trace(o), "3: WAITING name=e gen=1 arrived=3 n=3\n3: ALLHERE name=e gen=1 arrived=3 n=3\n");
  EXPECT_TRUE(bs.active());
  EXPECT_CONTAINS(all_log(o), "gathered e#1: all 3 present; waiting for the chief's verdict (rank 0 (h3 pid 1003))");
  EXPECT_EQ(status_of("e"),
            "BARRIER scope=default name=e gen=1 state=gathered n=3 arrived=3 chief=1 verdict=none age_ms=0\n"
            "MISSING ranks=-\n"
            "BARRIER scope=default name=e gen=2 state=open n=- arrived=0 chief=0 verdict=none age_ms=0\n"
            "END\n");
}

TEST_F(Barrier, ChiefArrivingFirstIsToldWhenTheLastArrives) {
  chief(1, "e", 3, 0);
  arrive(2, "e", 3, 1);
  output o = arrive(3, "e", 3, 2);
  EXPECT_EQ(trace(o), "3: WAITING name=e gen=1 arrived=3 n=3\n1: ALLHERE name=e gen=1 arrived=3 n=3\n");
}

TEST_F(Barrier, DecideReleasesAGatheredRound) {
  arrive(1, "e", 3, 1);
  arrive(2, "e", 3, 2);
  chief(3, "e", 3, 0);
  output o = decide(4, "e", stop, "loss diverged");
  EXPECT_EQ(to(o, 4),
            "DECIDED name=e gen=1 verdict=stop arrived=3 n=3\n"
            "RELEASE name=e gen=1 verdict=stop delivered=2 :loss diverged\n");
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop :loss diverged\n");
  EXPECT_EQ(to(o, 2), "RELEASE name=e gen=1 verdict=stop :loss diverged\n");
  EXPECT_EQ(to(o, 3), "");  // the chief was told ALLHERE; its wait is over
  EXPECT_TRUE(trace(o).starts_with("4: DECIDED"));
  EXPECT_FALSE(bs.active());
  EXPECT_CONTAINS(all_log(o), "verdict e#1: stop from h4 pid 1004: loss diverged");
  // The round is gone; the next one is open.
  EXPECT_EQ(status_of("e"),
            "BARRIER scope=default name=e gen=2 state=open n=- arrived=0 chief=0 verdict=none age_ms=0\nEND\n");
}

TEST_F(Barrier, DecideWithoutWaitGetsOnlyDecided) {
  arrive(1, "e", 2, 1);
  chief(2, "e", 2, 0);
  output o = decide(4, "e", cont, "", false);
  EXPECT_EQ(to(o, 4), "DECIDED name=e gen=1 verdict=continue arrived=2 n=2\n");
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=continue\n");
  EXPECT_FALSE(bs.active());
}

TEST_F(Barrier, DecideWithEmptyNamePicksTheOneGatheredRound) {
  arrive(1, "e1", 2, 1);
  chief(2, "e1", 2, 0);
  arrive(3, "other", 5);  // an open round without chief: a gathered round is preferred
  arrive(4, "e9", 2, none, false, "elsewhere");
  chief(5, "e9", 2, none, "elsewhere");  // gathered, but in another scope
  output o = decide(6, "", stop, "m");
  EXPECT_EQ(to(o, 6), "DECIDED name=e1 gen=1 verdict=stop arrived=2 n=2\nRELEASE name=e1 gen=1 verdict=stop delivered=1 :m\n");
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1, 6}));
}

TEST_F(Barrier, DecideWithEmptyNameAndNoRoundIsAmbiguous) {
  output o = decide(1, "", stop);
  ASSERT_EQ(o.sends.size(), 1u);
  std::string line = to(o, 1);
  EXPECT_TRUE(line.starts_with("ERR AMBIGUOUS :")) << line;
  EXPECT_CONTAINS(line, "no barrier of scope default awaits a verdict or has an open round");
  EXPECT_EQ(bs.barrier_count(), 0u);  // nothing was made up
  // A barrier in another scope does not count.
  arrive(2, "e", 2, none, false, "elsewhere");
  EXPECT_TRUE(to(decide(3, "", stop), 3).starts_with("ERR AMBIGUOUS"));
}

TEST_F(Barrier, DecideWithEmptyNameAndSeveralRoundsIsAmbiguous) {
  arrive(1, "e1", 2, 1);
  chief(2, "e1", 2, 0);
  arrive(3, "e2", 2, 1);
  chief(4, "e2", 2, 0);
  output o = decide(5, "", stop);
  ASSERT_EQ(o.sends.size(), 1u);
  std::string line = to(o, 5);
  EXPECT_TRUE(line.starts_with("ERR AMBIGUOUS :")) << line;
  EXPECT_CONTAINS(line, "2 barriers of scope default await a verdict (e1, e2)");
  EXPECT_TRUE(bs.active());
  // Naming one resolves it.
  o = decide(5, "e2", stop);
  EXPECT_EQ(recipients(o), (std::set<conn_id>{3, 5}));
}

TEST_F(Barrier, DecideWithEmptyNameCountsAWaitingChief) {
  chief(1, "e1", 2, 0);      // open, chief waiting: awaits a verdict
  arrive(2, "e2", 3);        // open, no chief
  output o = decide(3, "", stop, "early");
  EXPECT_EQ(trace(o), "3: DECIDED name=e1 gen=1 verdict=stop arrived=1 n=2\n");
}

TEST_F(Barrier, DecideWithEmptyNameFallsBackToTheOneOpenRound) {
  arrive(1, "e", 2, 0);
  output o = decide(2, "", stop, "", true, none, 1);
  EXPECT_EQ(to(o, 2), "DECIDED name=e gen=1 verdict=stop arrived=2 n=2\nRELEASE name=e gen=1 verdict=stop delivered=1\n");
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop\n");
  // Two open rounds: ambiguous, and the error does not say they await a verdict.
  arrive(3, "a", 3);
  arrive(4, "b", 3);
  EXPECT_EQ(to(decide(5, "", stop), 5),
            "ERR AMBIGUOUS :none awaits a verdict, and 2 barriers of scope default have an open round (a, b); "
            "give --name NAME\n");
}

// ---------------------------------------------------------------------------
// one-step DECIDE: the chief's arrival with its verdict

TEST_F(Barrier, OneStepDecideCountsAsTheChiefsArrival) {
  arrive(1, "e", 3, 1);
  output o = decide(2, "e", stop, "enough", true, none, 0);
  EXPECT_EQ(trace(o), "2: DECIDED name=e gen=1 verdict=stop arrived=2 n=3\n");
  EXPECT_CONTAINS(all_log(o), "arrive e#1: rank 0 (h2 pid 1002) as chief with verdict stop, 2/3");
  EXPECT_CONTAINS(status_of("e", true),
                  "state=open n=3 arrived=2 chief=1 verdict=stop age_ms=0\n"
                  "MEMBER rank=0 host=h2 pid=1002 chief=1 age_ms=0\n"
                  "MEMBER rank=1 host=h1 pid=1001 chief=0 age_ms=0\n"
                  "MISSING ranks=2\n");
  o = arrive(3, "e", 3, 2);
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop :enough\n");
  EXPECT_EQ(to(o, 3), "WAITING name=e gen=1 arrived=3 n=3\nRELEASE name=e gen=1 verdict=stop :enough\n");
  EXPECT_EQ(to(o, 2), "RELEASE name=e gen=1 verdict=stop delivered=2 :enough\n");
  EXPECT_FALSE(bs.active());
}

TEST_F(Barrier, OneStepDecideIsDurable) {
  arrive(1, "e", 3, 1);
  decide(2, "e", stop, "", true);
  EXPECT_TRUE(leave(2).sends.empty());  // its connection closes: it stays counted
  EXPECT_CONTAINS(status_of("e"), "arrived=2 chief=1 verdict=stop");
  output o = arrive(3, "e", 3, 2);
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1, 3}));
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop\n");
}

TEST_F(Barrier, OneStepDecideWithNoWaitGetsOnlyDecided) {
  arrive(1, "e", 2, 1);
  output o = decide(2, "e", cont, "go", false);
  EXPECT_EQ(trace(o), "2: DECIDED name=e gen=1 verdict=continue arrived=2 n=2\n1: RELEASE name=e gen=1 verdict=continue :go\n");
  EXPECT_FALSE(bs.active());
  // Before the others arrive:
  o = decide(3, "f", stop, "", false, 3);
  EXPECT_EQ(trace(o), "3: DECIDED name=f gen=1 verdict=stop arrived=1 n=3\n");
  EXPECT_FALSE(bs.active());  // nobody waits: the decider went away
  EXPECT_TRUE(leave(3).sends.empty());
  arrive(4, "f", 3);
  o = arrive(5, "f", none);
  EXPECT_EQ(recipients(o), (std::set<conn_id>{4, 5}));
  EXPECT_EQ(to(o, 4), "RELEASE name=f gen=1 verdict=stop\n");
}

TEST_F(Barrier, OneStepDecideFixesN) {
  EXPECT_TRUE(to(decide(1, "e", stop), 1).starts_with("ERR NEEDN"));
  EXPECT_EQ(trace(decide(2, "e", stop, "", true, 2)), "2: DECIDED name=e gen=1 verdict=stop arrived=1 n=2\n");
  std::string line = to(arrive(3, "e", 4), 3);
  EXPECT_TRUE(line.starts_with("ERR CONFLICT")) << line;
  EXPECT_CONTAINS(line, "set by the chief on h2 pid 1002");
}

TEST_F(Barrier, OneStepDecideChecksItsRank) {
  arrive(1, "e", 2, 0);
  std::string line = to(decide(2, "e", stop, "", true, 2, 0), 2);
  EXPECT_CONTAINS(line, "ERR CONFLICT :rank 0 of barrier e round 1 is already held by h1 pid 1001");
  line = to(decide(3, "e", stop, "", true, 5), 3);
  EXPECT_CONTAINS(line, "ERR CONFLICT");
  EXPECT_CONTAINS(line, "you asked for n=5");
  EXPECT_CONTAINS(status_of("e"), "arrived=1 chief=0 verdict=none");
}

TEST_F(Barrier, OneStepDecideAsTheLastArrival) {
  arrive(1, "e", 2, 0);
  output o = decide(2, "e", stop, "x", true);
  EXPECT_EQ(trace(o),
            "2: DECIDED name=e gen=1 verdict=stop arrived=2 n=2\n"
            "1: RELEASE name=e gen=1 verdict=stop :x\n"
            "2: RELEASE name=e gen=1 verdict=stop delivered=1 :x\n");
}

TEST_F(Barrier, ChiefAfterOneStepDecideIsAConflict) {
  decide(1, "e", stop, "", true, 3);
  std::string line = to(chief(2, "e", 3), 2);
  EXPECT_TRUE(line.starts_with("ERR CONFLICT :")) << line;
  EXPECT_CONTAINS(line, "already has a chief");
  EXPECT_CONTAINS(line, "h1 pid 1001");
}

TEST_F(Barrier, ADifferentVerdictIsAConflict) {
  arrive(1, "e", 3);
  decide(2, "e", stop, "why", false);
  output o = decide(3, "e", cont, "why");
  ASSERT_EQ(o.sends.size(), 1u);
  std::string line = to(o, 3);
  EXPECT_TRUE(line.starts_with("ERR CONFLICT :")) << line;
  EXPECT_CONTAINS(line, "already has the verdict stop (from h2 pid 1002)");
  EXPECT_CONTAINS(line, "you sent continue");
  // The round keeps its verdict.
  o = arrive(4, "e", 3);
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop :why\n");
}

TEST_F(Barrier, TheSameVerdictAgainIsAccepted) {
  arrive(1, "e", 3);
  decide(2, "e", stop, "why", false);
  output o = decide(3, "e", stop, "why", true);  // a retry
  EXPECT_EQ(trace(o), "3: DECIDED name=e gen=1 verdict=stop arrived=2 n=3\n");
  EXPECT_TRUE(bs.active());
  EXPECT_EQ(trace(decide(4, "e", stop, "why", false)), "4: DECIDED name=e gen=1 verdict=stop arrived=2 n=3\n");
  o = arrive(5, "e", 3);
  EXPECT_EQ(to(o, 3), "RELEASE name=e gen=1 verdict=stop delivered=2 :why\n");
  EXPECT_EQ(to(o, 4), "");
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1, 3, 5}));
}

TEST_F(Barrier, TheSameVerdictWithAnotherMessageIsAConflict) {
  // The verdict is the verdict and its message: a retry sends both unchanged.
  arrive(1, "e", 3);
  decide(2, "e", stop, "why", false);
  std::string line = to(decide(3, "e", stop, "other"), 3);
  EXPECT_TRUE(line.starts_with("ERR CONFLICT")) << line;
  EXPECT_CONTAINS(line, "with another message");
}

TEST_F(Barrier, TheVerdictIsPerRound) {
  arrive(1, "e", 2);
  decide(2, "e", stop, "s", false);  // gen 1 released with stop
  EXPECT_CONTAINS(status_of("e"), "gen=2 state=open n=- arrived=0 chief=0 verdict=none");
  arrive(3, "e", 2);
  output o = arrive(4, "e", 2);
  EXPECT_EQ(to(o, 3), "RELEASE name=e gen=2 verdict=continue\n");
  // and a new chief may decide gen 3 differently
  arrive(5, "e", 2);
  EXPECT_EQ(to(decide(6, "e", cont, "", false), 5), "RELEASE name=e gen=3 verdict=continue\n");
}

// ---------------------------------------------------------------------------
// the verdict given in advance, while a `wait --chief` chief waits

TEST_F(Barrier, VerdictInAdvanceForAWaitingChief) {
  chief(1, "e", 3, 0);
  arrive(2, "e", 3, 1);
  output o = decide(9, "e", stop, "early");
  EXPECT_EQ(trace(o), "9: DECIDED name=e gen=1 verdict=stop arrived=2 n=3\n");
  EXPECT_CONTAINS(status_of("e"), "state=open n=3 arrived=2 chief=1 verdict=stop");
  o = arrive(3, "e", 3, 2);
  EXPECT_EQ(to(o, 1), "ALLHERE name=e gen=1 arrived=3 n=3\n");  // as the chief asked
  EXPECT_EQ(to(o, 2), "RELEASE name=e gen=1 verdict=stop :early\n");
  EXPECT_EQ(to(o, 3), "WAITING name=e gen=1 arrived=3 n=3\nRELEASE name=e gen=1 verdict=stop :early\n");
  EXPECT_EQ(to(o, 9), "RELEASE name=e gen=1 verdict=stop delivered=3 :early\n");
  EXPECT_FALSE(bs.active());
}

TEST_F(Barrier, VerdictInAdvanceChecksN) {
  chief(1, "e", 3, 0);
  std::string line = to(decide(9, "e", stop, "", true, 4), 9);
  EXPECT_TRUE(line.starts_with("ERR CONFLICT")) << line;
  EXPECT_CONTAINS(line, "you asked for n=4");
  EXPECT_EQ(trace(decide(9, "e", stop, "", true, 3)), "9: DECIDED name=e gen=1 verdict=stop arrived=1 n=3\n");
}

TEST_F(Barrier, ADeciderMayLeave) {
  chief(1, "e", 2, 0);
  decide(9, "e", stop);
  EXPECT_EQ(trace(leave(9, true)), "9: LEFT name=e gen=1\n");
  output o = arrive(2, "e", 2, 1);
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1, 2}));
  EXPECT_EQ(to(o, 2), "WAITING name=e gen=1 arrived=2 n=2\nRELEASE name=e gen=1 verdict=stop\n");
}

TEST_F(Barrier, PruneKeepsABarrierWithAWaitingDecider) {
  // The chief that got a verdict in advance goes away; the decider still waits
  // for the release. Forgetting the barrier would leave the decider pointing at
  // freed memory (and never released).
  chief(1, "e", 2, 0);
  decide(9, "e", stop, "", true);
  leave(1);
  ASSERT_TRUE(bs.active());
  tick(10 * 3600 * 1000);
  EXPECT_EQ(bs.prune(now, 1000), 0u);
  ASSERT_EQ(bs.barrier_count(), 1u);
  arrive(2, "e", 2, 0);
  output o = arrive(3, "e", 2, 1);
  EXPECT_EQ(to(o, 9), "RELEASE name=e gen=1 verdict=stop delivered=2\n");
  EXPECT_TRUE(leave(9).sends.empty());
  EXPECT_FALSE(bs.active());
}

// ---------------------------------------------------------------------------
// abort

TEST_F(Barrier, AbortTellsWaitingMembersAndDeciders) {
  chief(1, "e", 3, 0);
  arrive(2, "e", 3, 1);
  decide(3, "e", stop, "early");  // a decider waiting for the release
  output o = abort(8, "e", "node3 died");
  EXPECT_EQ(to(o, 1), "ABORTED name=e gen=1 :node3 died\n");
  EXPECT_EQ(to(o, 2), "ABORTED name=e gen=1 :node3 died\n");
  EXPECT_EQ(to(o, 3), "ABORTED name=e gen=1 :node3 died\n");
  EXPECT_EQ(to(o, 8), "ABORTED name=e gen=1 notified=2 :node3 died\n");
  EXPECT_EQ(o.sends.back().to, 8u);
  EXPECT_CONTAINS(all_log(o), "abort e#1: 2 participants told: node3 died");
  EXPECT_FALSE(bs.active());
}

TEST_F(Barrier, AbortLogCountsOneParticipantInTheSingular) {
  arrive(1, "e", 3, 0);
  output o = abort(8, "e", "");
  EXPECT_CONTAINS(all_log(o), "abort e#1: 1 participant told");
  EXPECT_EQ(all_log(o).find("participants"), std::string::npos);
}

TEST_F(Barrier, AnAbortedBarrierStaysAborted) {
  arrive(1, "e", 3);
  abort(8, "e", "bad node");
  output o = arrive(2, "e", 3);
  EXPECT_EQ(trace(o), "2: ABORTED name=e gen=1 :bad node\n");
  EXPECT_FALSE(bs.active());
  o = decide(3, "e", stop);
  EXPECT_EQ(trace(o), "3: ERR ABORTED :barrier e was aborted: bad node\n");
  EXPECT_EQ(status_of("e"),
            "BARRIER scope=default name=e gen=1 state=aborted n=- arrived=0 chief=0 verdict=none age_ms=0 :bad node\n"
            "END\n");
  // decide with no name skips aborted barriers
  EXPECT_TRUE(to(decide(4, "", stop), 4).starts_with("ERR AMBIGUOUS"));
}

TEST_F(Barrier, AbortWithoutReason) {
  arrive(1, "e", 2);
  output o = abort(8, "e");
  EXPECT_EQ(trace(o), "1: ABORTED name=e gen=1\n8: ABORTED name=e gen=1 notified=1\n");
  EXPECT_EQ(trace(decide(3, "e", stop)), "3: ERR ABORTED :barrier e was aborted\n");
}

TEST_F(Barrier, AbortOfAGatheredRound) {
  arrive(1, "e", 2, 1);
  chief(2, "e", 2, 0);  // gen 1 gathered; the chief was told ALLHERE
  arrive(3, "e", 2, 1);  // gen 2 open
  output o = abort(8, "e", "r");
  EXPECT_EQ(to(o, 1), "ABORTED name=e gen=1 :r\n");
  EXPECT_EQ(to(o, 2), "");
  EXPECT_EQ(to(o, 3), "ABORTED name=e gen=2 :r\n");
  EXPECT_EQ(to(o, 8), "ABORTED name=e gen=1 notified=2 :r\n");
  EXPECT_FALSE(bs.active());
  EXPECT_TRUE(to(decide(9, "e", stop), 9).starts_with("ERR ABORTED"));
}

TEST_F(Barrier, AbortBeforeAnyoneArrives) {
  EXPECT_EQ(trace(abort(8, "e", "cancelled")), "8: ABORTED name=e gen=1 notified=0 :cancelled\n");
  EXPECT_EQ(trace(arrive(1, "e", 2)), "1: ABORTED name=e gen=1 :cancelled\n");
}

TEST_F(Barrier, AbortAfterReleasesNamesTheCurrentRound) {
  arrive(1, "e", 1);
  arrive(2, "e", 1);
  arrive(3, "e", 2);
  output o = abort(8, "e", "r");
  EXPECT_EQ(to(o, 3), "ABORTED name=e gen=3 :r\n");
  EXPECT_EQ(to(o, 8), "ABORTED name=e gen=3 notified=1 :r\n");
}

TEST_F(Barrier, AbortTwiceKeepsTheFirstReason) {
  abort(8, "e", "first");
  EXPECT_EQ(trace(abort(9, "e", "second")), "9: ABORTED name=e gen=1 notified=0 :first\n");
  EXPECT_EQ(trace(arrive(1, "e", 1)), "1: ABORTED name=e gen=1 :first\n");
}

TEST_F(Barrier, AbortTouchesOnlyItsBarrierAndScope) {
  arrive(1, "e", 2);
  arrive(2, "f", 2);
  arrive(3, "e", 2, none, false, "other");
  output o = abort(8, "e", "r");
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1, 8}));
  EXPECT_EQ(to(arrive(4, "f", 2), 2), "RELEASE name=f gen=1 verdict=continue\n");
  EXPECT_EQ(to(arrive(5, "e", 2, none, false, "other"), 3), "RELEASE name=e gen=1 verdict=continue\n");
}

TEST_F(Barrier, AnAbortedBarrierIsForgottenByPrune) {
  abort(8, "e", "r");
  tick(5000);
  EXPECT_EQ(bs.prune(now, 1000), 1u);
  EXPECT_EQ(bs.barrier_count(), 0u);
  EXPECT_EQ(trace(arrive(1, "e", 2)), "1: WAITING name=e gen=1 arrived=1 n=2\n");
}

// ---------------------------------------------------------------------------
// status

TEST_F(Barrier, StatusFields) {
  arrive(1, "e", 6, 3);
  tick(400);
  arrive(2, "e", 6, 0);
  tick(800);
  EXPECT_EQ(status_text("default", "e", true),
            "BARRIER scope=default name=e gen=1 state=open n=6 arrived=2 chief=0 verdict=none age_ms=1200\n"
            "MEMBER rank=0 host=h2 pid=1002 chief=0 age_ms=800\n"
            "MEMBER rank=3 host=h1 pid=1001 chief=0 age_ms=1200\n"
            "MISSING ranks=1-2,4-5\n"
            "END\n");
  // Without detail: no MEMBER lines, MISSING still there.
  EXPECT_EQ(status_text("default", "e", false),
            "BARRIER scope=default name=e gen=1 state=open n=6 arrived=2 chief=0 verdict=none age_ms=1200\n"
            "MISSING ranks=1-2,4-5\n"
            "END\n");
}

TEST_F(Barrier, StatusMembersSortedByRank) {
  for (std::uint32_t r : {7u, 2u, 9u, 0u, 5u}) arrive(100 + r, "e", 10, r);
  arrive(200, "e", 10);  // without rank: listed last, and MISSING cannot be computed
  auto s = status("default", "e", true);
  ASSERT_EQ(s.barriers.size(), 1u);
  std::vector<opt_u32> ranks;
  for (const auto& m : s.barriers[0].members) ranks.push_back(m.rank);
  EXPECT_EQ(ranks, (std::vector<opt_u32>{0u, 2u, 5u, 7u, 9u, none}));
  EXPECT_FALSE(s.barriers[0].missing);
}

TEST_F(Barrier, StatusMissingOnlyWhenEveryMemberHasARank) {
  arrive(1, "e", 4, 0);
  EXPECT_EQ(status("default", "e").barriers.at(0).missing, "1-3");
  arrive(2, "e", 4);
  EXPECT_FALSE(status("default", "e").barriers.at(0).missing);
  leave(2);
  EXPECT_EQ(status("default", "e").barriers.at(0).missing, "1-3");
  leave(1);
  // Empty round: n forgotten, nothing to compute.
  EXPECT_EQ(status_of("e"),
            "BARRIER scope=default name=e gen=1 state=open n=- arrived=0 chief=0 verdict=none age_ms=0\nEND\n");
}

TEST_F(Barrier, StatusAgeComesFromThePassedInTime) {
  arrive(1, "e", 3, 0);
  tick(250);
  EXPECT_CONTAINS(status_of("e", true), "age_ms=250\nMEMBER rank=0 host=h1 pid=1001 chief=0 age_ms=250\n");
  EXPECT_EQ(bs.status(proto::status_req{"default", "e", false}, now + 1000).barriers.at(0).age_ms, 1250);
}

TEST_F(Barrier, StatusOfAnAgedRoundAfterWithdrawal) {
  arrive(1, "e", 2);
  tick(1000);
  leave(1);
  tick(1000);
  arrive(2, "e", 2);  // the round emptied and filled again: its age goes on
  tick(5);
  EXPECT_CONTAINS(status_of("e"), "arrived=1 chief=0 verdict=none age_ms=2005\n");
}

TEST_F(Barrier, StatusAgeOfTheNextRoundRunsFromItsFirstArrival) {
  arrive(1, "e", 1);  // released at once: round 2 is created, empty
  tick(1000);
  EXPECT_CONTAINS(status_of("e"), "gen=2 state=open n=- arrived=0 chief=0 verdict=none age_ms=1000\n");
  arrive(2, "e", 2);
  tick(5);
  EXPECT_CONTAINS(status_of("e"), "gen=2 state=open n=2 arrived=1 chief=0 verdict=none age_ms=5\n");
}

TEST_F(Barrier, WhoComesBackIsNoLongerGone) {
  arrive(1, "e", 4, 0);
  arrive(2, "e", 4, 1);
  arrive(3, "e", 4);  // unranked
  leave(1);
  leave(2);
  leave(3);
  tick(100);
  arrive(4, "e", 4, 0);  // rank 0 again, another process
  arrive(5, "e", 4);     // unranked, another participant: h3 pid 1003 stays gone
  EXPECT_EQ(status_text("default", "e", true),
            "BARRIER scope=default name=e gen=1 state=open n=4 arrived=2 chief=0 verdict=none age_ms=100\n"
            "MEMBER rank=0 host=h4 pid=1004 chief=0 age_ms=0\n"
            "MEMBER rank=- host=h5 pid=1005 chief=0 age_ms=0\n"
            "GONE rank=1 host=h2 pid=1002 how=disconnected ago_ms=100\n"
            "GONE rank=- host=h3 pid=1003 how=disconnected ago_ms=100\n"
            "END\n");
  comes_back(6, 3);
  arrive(6, "e", 4);  // the unranked participant itself, on a new connection
  EXPECT_EQ(status_text("default", "e", true).find("GONE rank=- host=h3"), std::string::npos);
}

TEST_F(Barrier, StatusScopesAndNames) {
  arrive(1, "a", 2, none, false, "s1");
  arrive(2, "b", 2, none, false, "s1");
  arrive(3, "a", 2, none, false, "s2");
  auto names = [](const proto::status_reply& s) {
    std::vector<std::string> v;
    for (const auto& b : s.barriers) v.push_back(b.scope + "/" + b.name);
    return v;
  };
  EXPECT_EQ(names(status("*")), (std::vector<std::string>{"s1/a", "s1/b", "s2/a"}));
  EXPECT_EQ(names(status("s1")), (std::vector<std::string>{"s1/a", "s1/b"}));
  EXPECT_EQ(names(status("s2")), (std::vector<std::string>{"s2/a"}));
  EXPECT_EQ(names(status("*", "a")), (std::vector<std::string>{"s1/a", "s2/a"}));
  EXPECT_EQ(names(status("s1", "b")), (std::vector<std::string>{"s1/b"}));
  EXPECT_TRUE(status("s3").barriers.empty());
  EXPECT_TRUE(status("s2", "b").barriers.empty());
  EXPECT_TRUE(status("*", "nope").barriers.empty());
  EXPECT_EQ(bs.barrier_count(), 3u);  // status makes nothing up
}

TEST_F(Barrier, StatusHidesIdleBarriersUnlessNamed) {
  arrive(1, "e", 1);  // released: the open round gen 2 is empty
  EXPECT_EQ(status_text(), "END\n");
  EXPECT_EQ(status_of("e"),
            "BARRIER scope=default name=e gen=2 state=open n=- arrived=0 chief=0 verdict=none age_ms=0\nEND\n");
}

TEST_F(Barrier, StatusListsGatheredRoundsThenTheOpenRound) {
  arrive(1, "e", 2, 1);
  chief(2, "e", 2, 0);
  arrive(3, "e", 2, 1);
  chief(4, "e", 2, 0);  // gen 2 gathered too
  arrive(5, "e", 2, 0);
  tick(10);
  EXPECT_EQ(status_of("e"),
            "BARRIER scope=default name=e gen=1 state=gathered n=2 arrived=2 chief=1 verdict=none age_ms=10\n"
            "MISSING ranks=-\n"
            "BARRIER scope=default name=e gen=2 state=gathered n=2 arrived=2 chief=1 verdict=none age_ms=10\n"
            "MISSING ranks=-\n"
            "BARRIER scope=default name=e gen=3 state=open n=2 arrived=1 chief=0 verdict=none age_ms=10\n"
            "MISSING ranks=1\n"
            "END\n");
  // DECIDE takes the oldest gathered round first.
  output o = decide(9, "e", stop);
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop\n");
  EXPECT_EQ(to(o, 3), "");
  EXPECT_CONTAINS(status_of("e"), "gen=2 state=gathered");
}

TEST_F(Barrier, StatusShowsAtMost1000Members) {
  const std::uint32_t n = 1200;
  for (std::uint32_t r = 0; r + 1 < n; ++r) arrive(r + 1, "big", n, n - 2 - r);  // rank n-1 missing
  auto s = status("default", "big", true);
  ASSERT_EQ(s.barriers.size(), 1u);
  const auto& b = s.barriers[0];
  EXPECT_EQ(b.arrived, n - 1);
  EXPECT_EQ(b.members.size(), proto::max_member_lines);
  EXPECT_TRUE(std::is_sorted(b.members.begin(), b.members.end(),
                             [](const auto& x, const auto& y) { return x.rank < y.rank; }));
  EXPECT_EQ(b.missing, "1199");
}

TEST_F(Barrier, StatusWithManyMissingRanksIsReadable) {
  // n=5000, ranks 0-999 present and then every other one: 64 four-digit ranges
  // are over 256 bytes, yet MISSING must fit one value, or no client can read
  // the STATUS reply.
  const std::uint32_t n = 5000;
  for (std::uint32_t r = 0; r < n; ++r)
    if (r < 1000 || r % 2 == 0) arrive(r + 1, "wide", n, r);
  auto s = status("default", "wide", false);
  ASSERT_TRUE(s.barriers.at(0).missing);
  const std::string& missing = *s.barriers[0].missing;
  EXPECT_LE(missing.size(), proto::max_value);
  EXPECT_TRUE(missing.starts_with("1001,1003,1005,"));
  EXPECT_TRUE(missing.ends_with("+"));
  std::string bytes = proto::format_reply(s);
  proto::reply_reader rd;
  std::optional<proto::reply> got;
  std::istringstream in(bytes);
  std::string l;
  while (std::getline(in, l)) {
    std::string error;
    auto r = rd.feed(l, error);
    ASSERT_EQ(error, "") << l;
    if (r) got = r;
  }
  ASSERT_TRUE(got);
  EXPECT_EQ(std::get<proto::status_reply>(*got).barriers.at(0).missing, missing);
}

TEST_F(Barrier, StatusOfAChiefAndAVerdict) {
  chief(1, "e", 2, 0);
  EXPECT_CONTAINS(status_of("e", true), "chief=1 verdict=none age_ms=0\nMEMBER rank=0 host=h1 pid=1001 chief=1 age_ms=0\n");
  decide(2, "e", cont);
  EXPECT_CONTAINS(status_of("e"), "arrived=1 chief=1 verdict=continue");
}

// ---------------------------------------------------------------------------
// scopes

TEST_F(Barrier, ScopesIsolateBarriers) {
  arrive(1, "e", 2, 0, false, "job.1");
  output o = arrive(2, "e", 2, 0, false, "job.2");  // same name and rank, other scope: no conflict
  EXPECT_EQ(trace(o), "2: WAITING name=e gen=1 arrived=1 n=2\n");
  o = arrive(3, "e", 3, 1, false, "job.2");  // n differs from job.1's, and that is fine... but not from job.2's
  EXPECT_TRUE(to(o, 3).starts_with("ERR CONFLICT"));
  o = arrive(4, "e", 2, 1, false, "job.1");
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1, 4}));
  EXPECT_TRUE(bs.active());  // job.2 still waits
  EXPECT_EQ(bs.barrier_count(), 2u);
}

TEST_F(Barrier, DecideStaysInItsScope) {
  arrive(1, "e", 2, 1, false, "a");
  chief(2, "e", 2, 0, "a");
  output o = decide(3, "e", stop, "", true, none, none, "b");  // named, other scope: a new barrier there
  EXPECT_TRUE(to(o, 3).starts_with("ERR NEEDN"));
  EXPECT_TRUE(bs.active());
  o = decide(4, "", stop, "", true, none, none, "a");
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop\n");
}

// ---------------------------------------------------------------------------
// shutdown, prune, active

TEST_F(Barrier, ShutdownTellsEveryWaitingConnection) {
  arrive(1, "a", 3);
  chief(2, "b", 2);
  arrive(3, "b", 2);        // b gathered: 2 got ALLHERE, 3 waits
  arrive(4, "c", 3);
  decide(5, "c", stop, "", true);   // one-step, waits for the release
  decide(6, "c", stop, "", false);  // same verdict, does not wait
  arrive(7, "d", 1);        // released
  chief(8, "e", 2);
  decide(9, "e", cont);     // verdict in advance, waits
  output o;
  bs.shutdown("bye", o);
  std::set<conn_id> told;
  for (const auto& e : o.sends) {
    EXPECT_EQ(proto::format_reply(e.msg), "SHUTDOWN :bye\n");
    EXPECT_TRUE(told.insert(e.to).second) << "twice to " << e.to;
  }
  EXPECT_EQ(told, (std::set<conn_id>{1, 3, 4, 5, 8, 9}));
  EXPECT_FALSE(bs.active());
  output again;
  bs.shutdown("bye", again);
  EXPECT_TRUE(again.sends.empty());
}

TEST_F(Barrier, PruneForgetsOnlyIdleBarriers) {
  arrive(1, "released", 1);  // idle from now on
  arrive(2, "waiting", 2);   // busy
  arrive(3, "g", 2, 1);
  chief(4, "g", 2, 0);       // gathered: busy though nobody is connected
  leave(3);
  decide(5, "durable", stop, "", false, 3);  // a one-step decider that went away: counted, busy
  arrive(6, "left", 2);
  leave(6);                  // empty again: idle
  EXPECT_EQ(bs.barrier_count(), 5u);
  tick(500);
  arrive(7, "recent", 1);    // idle, but recent
  tick(600);
  EXPECT_EQ(bs.prune(now, 1000), 2u);  // released, left
  EXPECT_EQ(bs.barrier_count(), 4u);
  EXPECT_TRUE(status("*", "released").barriers.empty());
  EXPECT_TRUE(status("*", "left").barriers.empty());
  EXPECT_EQ(status("*", "waiting").barriers.size(), 1u);
  EXPECT_EQ(status("*", "g").barriers.size(), 2u);
  EXPECT_EQ(status("*", "durable").barriers.size(), 1u);
  EXPECT_EQ(status("*", "recent").barriers.size(), 1u);
  tick(1000);
  EXPECT_EQ(bs.prune(now, 1000), 1u);  // recent
  // A forgotten barrier starts again at gen 1.
  EXPECT_EQ(trace(arrive(8, "released", 2)), "8: WAITING name=released gen=1 arrived=1 n=2\n");
}

TEST_F(Barrier, PruneCountsActivityNotAge) {
  arrive(1, "e", 1);
  tick(900);
  leave(99);                   // unrelated: no activity on e
  arrive(2, "e", 2);
  leave(2);                    // activity at t+900
  tick(900);
  EXPECT_EQ(bs.prune(now, 1000), 0u);
  tick(200);
  EXPECT_EQ(bs.prune(now, 1000), 1u);
}

TEST_F(Barrier, Active) {
  EXPECT_FALSE(bs.active());
  arrive(1, "e", 2);
  EXPECT_TRUE(bs.active());
  leave(1);
  EXPECT_FALSE(bs.active());
  arrive(2, "e", 2, 1);
  chief(3, "e", 2, 0);
  EXPECT_TRUE(bs.active());  // 2 waits for the verdict
  decide(4, "e", stop, "", false);
  EXPECT_FALSE(bs.active());
  decide(5, "f", stop, "", true, 2);
  EXPECT_TRUE(bs.active());  // the one-step decider waits
  leave(5);
  EXPECT_FALSE(bs.active());
  EXPECT_TRUE(to(arrive(6, "g", none), 6).starts_with("ERR"));
  EXPECT_FALSE(bs.active());  // refused requests leave nothing behind
}

// ---------------------------------------------------------------------------
// coming back: the same id on a new connection (docs/protocol.md, "Coming back")

TEST_F(Barrier, ComingBackTakesTheOldPlace) {
  arrive(1, "e", 3, 0);
  arrive(2, "e", 3, 1);
  comes_back(5, 1);  // 1's connection is lost, and the host has not noticed yet
  output o = arrive(5, "e", 3, 0);
  EXPECT_EQ(trace(o), "5: WAITING name=e gen=1 arrived=2 n=3\n");  // counted once; its rank is its own
  EXPECT_CONTAINS(all_log(o), "rejoin e#1: rank 0 (h1 pid 1001) came back");
  EXPECT_TRUE(leave(1).sends.empty());  // the old connection closes at last: nothing changes
  EXPECT_CONTAINS(status_of("e"), "arrived=2");
  o = arrive(3, "e", 3, 2);
  EXPECT_EQ(recipients(o), (std::set<conn_id>{2, 3, 5}));
}

TEST_F(Barrier, ComingBackAfterWithdrawalIsANewArrival) {
  arrive(1, "e", 3, 0);
  leave(1);
  comes_back(5, 1);
  EXPECT_EQ(trace(arrive(5, "e", 3, 0)), "5: WAITING name=e gen=1 arrived=1 n=3\n");
}

TEST_F(Barrier, ComingBackAfterTheReleaseGetsTheOutcome) {
  arrive(1, "e", 2, 0);
  decide(2, "e", stop, "why", false);  // the chief's arrival: gen 1 releases
  comes_back(5, 1);
  output o = arrive(5, "e", 2, 0);
  EXPECT_EQ(trace(o), "5: RELEASE name=e gen=1 verdict=stop :why\n");
  EXPECT_CONTAINS(all_log(o), "came back after the release");
  EXPECT_FALSE(bs.active());
  EXPECT_CONTAINS(status_of("e"), "gen=2 state=open n=- arrived=0");  // it did not join gen 2
  comes_back(6, 2);
  EXPECT_EQ(trace(decide(6, "e", stop, "why", false)), "6: RELEASE name=e gen=1 verdict=stop delivered=0 :why\n");
}

TEST_F(Barrier, TheHostRemembersTheLastEightReleasedRounds) {
  for (conn_id c = 1; c <= 9; ++c) arrive(c, "e", 1);  // gens 1 to 9
  comes_back(20, 2);
  EXPECT_EQ(trace(arrive(20, "e", 1)), "20: RELEASE name=e gen=2 verdict=continue\n");
  comes_back(21, 1);  // gen 1 is forgotten: a new arrival
  EXPECT_EQ(to(arrive(21, "e", 1), 21), "WAITING name=e gen=10 arrived=1 n=1\nRELEASE name=e gen=10 verdict=continue\n");
}

TEST_F(Barrier, ComingBackToAGatheredRound) {
  arrive(1, "e", 2, 1);
  chief(2, "e", 2, 0);
  comes_back(5, 2);  // the chief: told again
  EXPECT_EQ(trace(chief(5, "e", 2, 0)), "5: ALLHERE name=e gen=1 arrived=2 n=2\n");
  leave(1);          // all were present: 1 stays counted
  comes_back(6, 1);  // and waits again on its new connection
  EXPECT_EQ(trace(arrive(6, "e", 2, 1)), "6: WAITING name=e gen=1 arrived=2 n=2\n");
  output o = decide(9, "e", cont);
  EXPECT_EQ(to(o, 6), "RELEASE name=e gen=1 verdict=continue\n");
  EXPECT_EQ(to(o, 9),
            "DECIDED name=e gen=1 verdict=continue arrived=2 n=2\nRELEASE name=e gen=1 verdict=continue delivered=1\n");
}

TEST_F(Barrier, AChiefWithItsVerdictComesBack) {
  arrive(1, "e", 3, 1);
  decide(2, "e", stop, "s", true);
  leave(2);  // durable: still counted
  comes_back(5, 2);
  EXPECT_EQ(trace(decide(5, "e", stop, "s", true)), "5: DECIDED name=e gen=1 verdict=stop arrived=2 n=3\n");
  output o = arrive(3, "e", 3);
  EXPECT_EQ(to(o, 5), "RELEASE name=e gen=1 verdict=stop delivered=2 :s\n");
}

TEST_F(Barrier, ADeciderComesBack) {
  chief(1, "e", 2, 0);
  decide(9, "e", stop, "early");
  leave(9);
  comes_back(10, 9);
  EXPECT_EQ(trace(decide(10, "e", stop, "early")), "10: DECIDED name=e gen=1 verdict=stop arrived=1 n=2\n");
  output o = arrive(2, "e", 2, 1);
  EXPECT_EQ(to(o, 10), "RELEASE name=e gen=1 verdict=stop delivered=2 :early\n");
}

TEST_F(Barrier, ADeciderThatRepeatedTheVerdictComesBackAfterTheRelease) {
  // A second DECIDE with the same verdict is accepted. Its participant must be
  // remembered like any decider: coming back after the release, it is told the
  // outcome, and must not become the chief of the next round with its old verdict.
  arrive(1, "e", 3);
  decide(2, "e", stop, "", false);    // the chief's arrival
  decide(3, "e", stop, "", true, 3);  // the same verdict again; waits
  leave(3);
  arrive(4, "e", 3);  // gen 1 releases
  comes_back(5, 3);
  output o = decide(5, "e", stop, "", true, 3);
  EXPECT_EQ(trace(o), "5: RELEASE name=e gen=1 verdict=stop delivered=0\n");
  EXPECT_CONTAINS(status_of("e"), "gen=2 state=open n=- arrived=0 chief=0 verdict=none");
}

TEST_F(Barrier, ADeciderThatRepeatedTheVerdictComesBackBeforeTheRelease) {
  arrive(1, "e", 3);
  decide(2, "e", stop, "", false);
  decide(3, "e", stop, "", true);
  leave(3);
  comes_back(5, 3);
  EXPECT_EQ(trace(decide(5, "e", stop, "", true)), "5: DECIDED name=e gen=1 verdict=stop arrived=2 n=3\n");
  EXPECT_EQ(to(arrive(4, "e", 3), 5), "RELEASE name=e gen=1 verdict=stop delivered=2\n");
}

TEST_F(Barrier, ComingBackToAnAbortedBarrier) {
  arrive(1, "e", 2);
  abort(8, "e", "r");
  comes_back(5, 1);
  EXPECT_EQ(trace(arrive(5, "e", 2)), "5: ABORTED name=e gen=1 :r\n");
}

// ---------------------------------------------------------------------------
// who left before the release (STATUS detail: GONE)

TEST_F(Barrier, StatusListsWhoLeftBeforeTheRelease) {
  arrive(1, "e", 4, 0);
  arrive(2, "e", 4, 1);
  arrive(3, "e", 4, 2);
  tick(100);
  leave(1, true);
  tick(100);
  leave(2);
  output o;
  bs.leave(3, departure::unresponsive, now, o);
  EXPECT_TRUE(o.sends.empty());
  EXPECT_CONTAINS(all_log(o), "withdrew (unresponsive)");
  tick(50);
  EXPECT_EQ(status_text("default", "e", true),
            "BARRIER scope=default name=e gen=1 state=open n=- arrived=0 chief=0 verdict=none age_ms=250\n"
            "GONE rank=0 host=h1 pid=1001 how=left ago_ms=150\n"
            "GONE rank=1 host=h2 pid=1002 how=disconnected ago_ms=50\n"
            "GONE rank=2 host=h3 pid=1003 how=unresponsive ago_ms=50\n"
            "END\n");
  EXPECT_EQ(status_text("default", "e", false),
            "BARRIER scope=default name=e gen=1 state=open n=- arrived=0 chief=0 verdict=none age_ms=250\nEND\n");
}

TEST_F(Barrier, GoneListsOnlyWithdrawalsOfItsRound) {
  arrive(1, "e", 2);
  leave(1);
  arrive(2, "e", 2);
  chief(3, "e", 2, 1);  // gathered
  leave(2);             // not a withdrawal: all were present
  auto s = status("default", "e", true);
  ASSERT_EQ(s.barriers.size(), 2u);
  ASSERT_EQ(s.barriers[0].gone.size(), 1u);
  EXPECT_EQ(s.barriers[0].gone[0].host, "h1");
  EXPECT_TRUE(s.barriers[1].gone.empty());  // the next round starts clean
}

TEST_F(Barrier, GoneIsBounded) {
  for (conn_id c = 1; c <= 100; ++c) {
    arrive(c, "e", 2);
    leave(c);
  }
  EXPECT_EQ(status("default", "e", true).barriers.at(0).gone.size(), 64u);
}

// ---------------------------------------------------------------------------
// the journal: what the host persists before it answers

TEST_F(Barrier, JournalsTheChiefsArrivalAndTheRelease) {
  arrive(1, "e", 3, 1);
  output o = decide(2, "e", stop, "why", false, none, 0);
  EXPECT_EQ(dump_journal(o.journal), "0 default/e#1 stop 'why' chief=1 id=id2 h2:1002 n=3 rank=0 ids=\n");
  o = decide(3, "e", stop, "why");  // the same verdict again: nothing new to persist
  EXPECT_TRUE(o.journal.empty());
  o = arrive(4, "e", 3);
  EXPECT_EQ(dump_journal(o.journal), "1 default/e#1 stop 'why' chief=0 id= :0 n=- rank=- ids=id1,id2,id3,id4,\n");
  o = abort(8, "e", "r");
  EXPECT_EQ(dump_journal(o.journal), "2 default/e#2 none 'r' chief=0 id= :0 n=- rank=- ids=\n");
}

// Where nothing keeps the journal (no --state-dir, a store), a release's
// entry goes without its list of ids: copying 19,000 ids for no one came
// before the first RELEASE (bench/fanout.sh). Who was released is kept all the
// same, for those who reconnect.
TEST_F(Barrier, AReleaseJournalsItsIdsOnlyWhereAJournalKeepsThem) {
  arrive(1, "e", 2);
  proto::arrive a;
  a.name = "e";
  a.scope = "default";
  a.id = id_of(2);
  a.n = 2;
  output o;
  o.journaled = false;
  bs.arrive(2, a, peer(2), now, o);
  EXPECT_EQ(dump_journal(o.journal), "1 default/e#1 continue '' chief=0 id= :0 n=- rank=- ids=\n");
  EXPECT_EQ(to(arrive(3, "e", 2), 3), "WAITING name=e gen=2 arrived=1 n=2\n");  // a new round...
  ids[4] = id_of(1);
  EXPECT_EQ(trace(arrive(4, "e", 2)), "4: RELEASE name=e gen=1 verdict=continue\n");  // ...and id1 was released
}

// A round that ended leaves the barriers with the step's output, to be freed
// after the replies went: the round is in `retired`, and nothing of it stays.
TEST_F(Barrier, AReleasedRoundIsFreedWithTheOutput) {
  arrive(1, "e", 2);
  output o = arrive(2, "e", 2);
  EXPECT_EQ(o.retired.size(), 1u);
  EXPECT_EQ(to(arrive(3, "e", 2), 3), "WAITING name=e gen=2 arrived=1 n=2\n");
  EXPECT_TRUE(o.retired.empty() == false && arrive(4, "e", 3).retired.empty());  // a conflict frees nothing
}

TEST_F(Barrier, JournalsAVerdictForAGatheredRound) {
  arrive(1, "e", 2, 1);
  output o = chief(2, "e", 2, 0);
  // Gathering is persisted, before ALLHERE goes out: who is present, and the chief.
  EXPECT_EQ(dump_journal(o.journal), "3 default/e#1 none '' chief=1 id=id2 h2:1002 n=2 rank=0 ids=id1,id2, ranks=1,0,\n");
  o = decide(9, "e", cont, "go", false);
  EXPECT_EQ(dump_journal(o.journal),
            "0 default/e#1 continue 'go' chief=0 id=id9 :0 n=2 rank=- ids=\n"
            "1 default/e#1 continue 'go' chief=0 id= :0 n=- rank=- ids=id1,id2,id9,\n");
}

TEST_F(Barrier, JournalsAVerdictInAdvance) {
  chief(1, "e", 2, 0);
  output o = decide(9, "e", stop);
  EXPECT_EQ(dump_journal(o.journal), "0 default/e#1 stop '' chief=0 id=id9 :0 n=2 rank=- ids=\n");
}

TEST_F(Barrier, RefusedRequestsJournalNothing) {
  EXPECT_TRUE(arrive(1, "e", none).journal.empty());
  EXPECT_TRUE(decide(4, "", stop).journal.empty());  // AMBIGUOUS
  EXPECT_TRUE(arrive(2, "e", 3, 0).journal.empty());  // an ordinary arrival is not journaled
  EXPECT_TRUE(arrive(3, "e", 4).journal.empty());     // CONFLICT
  decide(5, "e", stop, "", false);
  EXPECT_TRUE(decide(6, "e", cont).journal.empty());  // CONFLICT
  abort(7, "f");
  EXPECT_TRUE(decide(8, "f", cont).journal.empty());  // ABORTED
}

TEST_F(Barrier, RestoreARelease) {
  journal_entry j;
  j.what = journal_entry::kind::release;
  j.scope = "default";
  j.name = "e";
  j.gen = 4;
  j.v = stop;
  j.message = "m";
  j.ids = {"b", "a"};
  bs.restore(j, now);
  EXPECT_FALSE(bs.active());
  ids[1] = "a";
  EXPECT_EQ(trace(arrive(1, "e", 2)), "1: RELEASE name=e gen=4 verdict=stop :m\n");
  EXPECT_EQ(trace(arrive(2, "e", 2)), "2: WAITING name=e gen=5 arrived=1 n=2\n");
}

/// The journal's record of a chief's one-step arrival: id "k" from n9 pid 9.
journal_entry chief_entry(std::uint64_t gen, verdict v, std::uint32_t n, opt_u32 rank) {
  journal_entry j;
  j.what = journal_entry::kind::verdict;
  j.scope = "default";
  j.name = "e";
  j.gen = gen;
  j.v = v;
  j.chief_arrival = true;
  j.id = "k";
  j.host = "n9";
  j.pid = 9;
  j.n = n;
  j.rank = rank;
  return j;
}

TEST_F(Barrier, RestoreAChiefsArrivalWithItsVerdict) {
  journal_entry j = chief_entry(3, stop, 2, 0);
  j.message = "halt";
  bs.restore(j, now);
  EXPECT_FALSE(bs.active());
  EXPECT_EQ(status_text("default", "e", true),
            "BARRIER scope=default name=e gen=3 state=open n=2 arrived=1 chief=1 verdict=stop age_ms=0\n"
            "MEMBER rank=0 host=n9 pid=9 chief=1 age_ms=0\n"
            "MISSING ranks=1\n"
            "END\n");
  EXPECT_TRUE(to(arrive(3, "e", 2, 0), 3).starts_with("ERR CONFLICT"));  // its rank is held
  output o = arrive(1, "e", 2, 1);
  EXPECT_EQ(to(o, 1), "WAITING name=e gen=3 arrived=2 n=2\nRELEASE name=e gen=3 verdict=stop :halt\n");
  EXPECT_EQ(recipients(o), (std::set<conn_id>{1}));
  ids[2] = "k";  // the chief comes back: the outcome
  EXPECT_EQ(trace(decide(2, "e", stop, "halt")), "2: RELEASE name=e gen=3 verdict=stop delivered=0 :halt\n");
}

TEST_F(Barrier, ARestoredChiefsRoundKeepsItsAgeWhenOthersArrive) {
  bs.restore(chief_entry(1, cont, 3, 0), now);
  tick(1000);
  arrive(1, "e", 3, 1);  // not the round's first arrival: the restored chief was
  EXPECT_CONTAINS(status_of("e"), "arrived=2 chief=1 verdict=continue age_ms=1000\n");
}

TEST_F(Barrier, ARestoredChiefComesBackBeforeTheRelease) {
  bs.restore(chief_entry(1, stop, 2, std::nullopt), now);
  ids[2] = "k";
  EXPECT_EQ(trace(decide(2, "e", stop)), "2: DECIDED name=e gen=1 verdict=stop arrived=1 n=2\n");
  EXPECT_TRUE(bs.active());
  EXPECT_EQ(to(arrive(1, "e", 2), 2), "RELEASE name=e gen=1 verdict=stop delivered=1\n");
}

TEST_F(Barrier, RestoreAVerdictGivenInAdvance) {
  journal_entry j;
  j.what = journal_entry::kind::verdict;
  j.scope = "default";
  j.name = "e";
  j.gen = 1;
  j.v = cont;
  j.id = "d";
  j.n = 2;
  bs.restore(j, now);
  ids[3] = "d";  // the decider comes back
  EXPECT_EQ(trace(decide(3, "e", cont)), "3: DECIDED name=e gen=1 verdict=continue arrived=0 n=2\n");
  chief(1, "e", 2, 0);
  output o = arrive(2, "e", 2, 1);
  EXPECT_EQ(to(o, 1), "ALLHERE name=e gen=1 arrived=2 n=2\n");
  EXPECT_EQ(to(o, 2), "WAITING name=e gen=1 arrived=2 n=2\nRELEASE name=e gen=1 verdict=continue\n");
  EXPECT_EQ(to(o, 3), "RELEASE name=e gen=1 verdict=continue delivered=2\n");
}

// A gathered round as the journal records it: id1 (rank 1), id2 (the chief, rank 0), id3 (no rank).
journal_entry gathered_entry(std::uint64_t gen = 1) {
  journal_entry j;
  j.what = journal_entry::kind::gathered;
  j.scope = "default";
  j.name = "e";
  j.gen = gen;
  j.n = 3;
  j.chief_arrival = true;
  j.id = "id2";
  j.host = "h2";
  j.pid = 1002;
  j.rank = 0;
  j.ids = {"id1", "id2", "id3"};
  j.ranks = {1, 0, none};
  return j;
}

TEST_F(Barrier, RestoreAGatheredRoundADecideWithoutNReleasesIt) {
  bs.restore(gathered_entry(), now);
  EXPECT_FALSE(bs.active());
  EXPECT_CONTAINS(status_of("e"), "gen=1 state=gathered n=3 arrived=3 chief=1");
  // A worker comes back before the verdict: it waits in that round, not a new one.
  EXPECT_EQ(trace(arrive(1, "e", 3, 1)), "1: WAITING name=e gen=1 arrived=3 n=3\n");
  // The chief's decide, by name and without --n, finds the round (it used to get ERR NEEDN).
  output o = decide(9, "e", stop, "done", false);
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop :done\n");
  EXPECT_EQ(to(o, 9), "DECIDED name=e gen=1 verdict=stop arrived=3 n=3\n");
  EXPECT_FALSE(bs.active());
  // A worker that comes back after the release is told the outcome.
  EXPECT_EQ(trace(arrive(3, "e", 3)), "3: RELEASE name=e gen=1 verdict=stop :done\n");
  // The next round is round 2, and starts empty.
  EXPECT_EQ(trace(arrive(4, "e", 2)), "4: WAITING name=e gen=2 arrived=1 n=2\n");
}

TEST_F(Barrier, RestoreAGatheredRoundItsChiefIsToldAllHereAgainAndDecideFindsItByScope) {
  bs.restore(gathered_entry(), now);
  ids[5] = "id2";  // the chief's wait --chief comes back: it had not read ALLHERE
  EXPECT_EQ(trace(chief(5, "e", 3, 0)), "5: ALLHERE name=e gen=1 arrived=3 n=3\n");
  // Its rank is held; a second rank 1 in round 1 cannot happen (a new arrival is in round 2).
  EXPECT_EQ(trace(arrive(6, "e", 3, 1)), "6: WAITING name=e gen=2 arrived=1 n=3\n");
  output o = decide(9, "", cont);  // no name: the one round of the scope that awaits a verdict
  EXPECT_EQ(to(o, 9), "DECIDED name=e gen=1 verdict=continue arrived=3 n=3\nRELEASE name=e gen=1 verdict=continue delivered=0\n");
}

TEST_F(Barrier, RestoreAGatheredRoundShowsItsMembersAndSurvivesCompaction) {
  bs.restore(gathered_entry(), now);
  EXPECT_EQ(status_text("default", "e", true),
            "BARRIER scope=default name=e gen=1 state=gathered n=3 arrived=3 chief=1 verdict=none age_ms=0\n"
            "MEMBER rank=0 host=h2 pid=1002 chief=1 age_ms=0\n"
            "MEMBER rank=1 host=- pid=0 chief=0 age_ms=0\n"
            "MEMBER rank=- host=- pid=0 chief=0 age_ms=0\n"
            "BARRIER scope=default name=e gen=2 state=open n=- arrived=0 chief=0 verdict=none age_ms=0\n"
            "END\n");
  arrive(1, "e", 3, 1);  // back: its host and pid are known again
  EXPECT_CONTAINS(status_text("default", "e", true), "MEMBER rank=1 host=h1 pid=1001 chief=0");
  EXPECT_EQ(dump_journal(bs.snapshot()), dump_journal({gathered_entry()}));
  // Restored twice (a journal and its compacted copy): still one round.
  bs.restore(gathered_entry(), now);
  EXPECT_EQ(dump_journal(bs.snapshot()), dump_journal({gathered_entry()}));
}

TEST_F(Barrier, RestoreAGatheredRoundThenItsReleaseForgetsIt) {
  bs.restore(gathered_entry(2), now);
  journal_entry later = gathered_entry(3);  // round 3 gathered and released while round 2 waits
  later.what = journal_entry::kind::release;
  later.v = cont;
  bs.restore(later, now);
  EXPECT_CONTAINS(status_of("e"), "gen=2 state=gathered");
  journal_entry rel = gathered_entry(2);
  rel.what = journal_entry::kind::release;
  rel.v = stop;
  bs.restore(rel, now);
  EXPECT_EQ(status_of("e").find("gathered"), std::string::npos);
  EXPECT_EQ(trace(arrive(1, "e", 3)), "1: RELEASE name=e gen=2 verdict=stop\n");
}

TEST_F(Barrier, RestoreAnAbort) {
  journal_entry j;
  j.what = journal_entry::kind::abort;
  j.scope = "default";
  j.name = "e";
  j.gen = 2;
  j.message = "r";
  bs.restore(j, now);
  EXPECT_EQ(trace(arrive(1, "e", 2)), "1: ABORTED name=e gen=2 :r\n");
  EXPECT_CONTAINS(status_of("e"), "gen=2 state=aborted");
}

TEST_F(Barrier, SnapshotDescribesTheDurableState) {
  arrive(1, "a", 1);                       // a#1 released
  arrive(2, "a", 2);                       // a#2 open, not durable
  arrive(3, "b", 2, 1);
  decide(4, "b", stop, "x", false, 2, 0);  // b#1 released with stop
  decide(5, "b", cont, "y", true, 3, 2);   // b#2: the chief's arrival
  chief(6, "c", 2);
  decide(7, "c", stop);                    // c#1: verdict in advance
  arrive(8, "d", 1);
  abort(9, "d", "gone");                   // d: released once, then aborted
  auto snap = bs.snapshot();
  EXPECT_EQ(dump_journal(snap),
            "1 default/a#1 continue '' chief=0 id= :0 n=- rank=- ids=id1,\n"
            "1 default/b#1 stop 'x' chief=0 id= :0 n=- rank=- ids=id3,id4,\n"
            "0 default/b#2 continue 'y' chief=1 id=id5 h5:1005 n=3 rank=2 ids=\n"
            "0 default/c#1 stop '' chief=0 id=id7 :0 n=2 rank=- ids=\n"
            "1 default/d#1 continue '' chief=0 id= :0 n=- rank=- ids=id8,\n"
            "2 default/d#2 none 'gone' chief=0 id= :0 n=- rank=- ids=\n");
  barrier_set copy;
  for (const auto& e : snap) copy.restore(e, now);
  EXPECT_EQ(dump_journal(copy.snapshot()), dump_journal(snap));
  EXPECT_FALSE(copy.active());
}

// ---------------------------------------------------------------------------
// The examples of docs/protocol.md, through the state machine, byte-exact.

template <class T>
T parsed(std::string_view l) {
  auto r = proto::parse_request(l);
  EXPECT_TRUE(std::holds_alternative<proto::request>(r)) << l;
  return std::get<T>(std::get<proto::request>(r));
}

TEST_F(Barrier, DocExampleThreeParticipantsNoChief) {
  constexpr conn_id A = 1, B = 2, C = 3;
  output o;
  bs.arrive(A, parsed<proto::arrive>("ARRIVE name=e1 scope=default id=a n=3 rank=0 chief=0"), {"n1", 1}, now, o);
  EXPECT_EQ(trace(o), "1: WAITING name=e1 gen=1 arrived=1 n=3\n");
  o = {};
  bs.arrive(B, parsed<proto::arrive>("ARRIVE name=e1 scope=default id=b n=3 rank=1 chief=0"), {"n2", 2}, now, o);
  EXPECT_EQ(trace(o), "2: WAITING name=e1 gen=1 arrived=2 n=3\n");
  o = {};
  bs.arrive(C, parsed<proto::arrive>("ARRIVE name=e1 scope=default id=c n=3 rank=2 chief=0"), {"n3", 3}, now, o);
  EXPECT_EQ(to(o, C), "WAITING name=e1 gen=1 arrived=3 n=3\nRELEASE name=e1 gen=1 verdict=continue\n");
  for (conn_id c : {A, B}) EXPECT_EQ(to(o, c), "RELEASE name=e1 gen=1 verdict=continue\n");
}

TEST_F(Barrier, DocExampleTheChiefStopsTheJob) {
  constexpr conn_id W = 1, K = 2, D = 3;
  output o;
  bs.arrive(W, parsed<proto::arrive>("ARRIVE name=e2 scope=default id=w n=2 rank=1 chief=0"), {"n1", 1}, now, o);
  EXPECT_EQ(trace(o), "1: WAITING name=e2 gen=1 arrived=1 n=2\n");
  o = {};
  bs.arrive(K, parsed<proto::arrive>("ARRIVE name=e2 scope=default id=k n=2 rank=0 chief=1"), {"n2", 2}, now, o);
  EXPECT_EQ(trace(o), "2: WAITING name=e2 gen=1 arrived=2 n=2\n2: ALLHERE name=e2 gen=1 arrived=2 n=2\n");
  o = {};
  bs.decide(D, parsed<proto::decide>("DECIDE scope=default id=d verdict=stop name=- n=- rank=- wait=1 :loss diverged"),
            {"n3", 3}, now, o);
  EXPECT_EQ(trace(o),
            "3: DECIDED name=e2 gen=1 verdict=stop arrived=2 n=2\n"
            "1: RELEASE name=e2 gen=1 verdict=stop :loss diverged\n"
            "3: RELEASE name=e2 gen=1 verdict=stop delivered=1 :loss diverged\n");
}

// ---------------------------------------------------------------------------
// Property test: random sequences against a model of the rules.
//
// The model knows participants by id, as the host does, so it also covers a
// participant that comes back on a new connection. The same checker
// (tests/support/barrier_checker.h), with __builtin_trap as its failure,
// drives fuzz/fuzz_barrier.cpp.

using check::checker;

/// One random run; returns the first violation, or "".
std::string random_run(unsigned seed, int steps, checker::stats& total) {
  const char* names[] = {"a", "b", "c"};
  const char* scopes[] = {"s", "t"};
  const char* messages[] = {"", "m1", "loss diverged"};
  barrier_set bs;
  std::string failure;
  checker ck(bs, [&](const std::string& m) {
    if (failure.empty()) failure = m;
  });
  std::mt19937 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  millis now = 0;
  // Each name mostly has one n, so that rounds fill up; sometimes another, to cause conflicts.
  std::map<std::string, std::uint32_t> usual_n;
  for (const char* nm : names) usual_n[nm] = static_cast<std::uint32_t>(1 + pick(4));
  auto some_n = [&](const std::string& nm) -> opt_u32 {
    std::size_t p = pick(10);
    if (p < 2) return none;
    if (p < 9) return usual_n[nm];
    return static_cast<std::uint32_t>(1 + pick(4));
  };
  auto some_rank = [&](opt_u32 n) -> opt_u32 {
    if (pick(2)) return none;
    auto r = static_cast<std::uint32_t>(pick(4));
    if (n && r >= *n) return none;  // parse_request refuses rank >= n
    return r;
  };
  auto any_of = [&](const std::vector<conn_id>& v) { return v[pick(v.size())]; };
  int step = 0;
  for (; step < steps && failure.empty(); ++step) {
    now += static_cast<millis>(pick(40));
    std::size_t op = pick(100);
    std::string scope = scopes[pick(2)], name = names[pick(3)];
    if (op < 40) {
      auto retry = ck.retry_conns();
      conn_id c = !retry.empty() && pick(4) == 0 ? any_of(retry) : ck.fresh();
      proto::arrive a;
      a.scope = scope;
      a.name = name;
      a.id = "p" + std::to_string(c);
      a.n = some_n(name);
      a.rank = some_rank(a.n);
      a.chief = pick(7) == 0;
      ck.arrive(c, a, now);
    } else if (op < 54) {
      conn_id c = ck.fresh();
      proto::decide d;
      d.scope = scope;
      d.name = pick(4) == 0 ? "" : name;
      d.id = "p" + std::to_string(c);
      d.v = pick(2) ? verdict::stop : verdict::continue_;
      d.message = messages[pick(3)];
      d.n = pick(2) ? some_n(name) : none;
      d.rank = some_rank(d.n);
      d.wait = pick(4) != 0;
      ck.decide(c, d, now);
    } else if (op < 84) {
      auto open = ck.open_conns();
      if (open.empty()) continue;
      std::size_t h = pick(10);
      departure how = h < 3 ? departure::left : h < 9 ? departure::disconnected : departure::unresponsive;
      ck.leave(any_of(open), how, now);
    } else if (op < 91) {
      auto back = ck.comeback_conns();
      if (back.empty()) continue;
      ck.comeback(any_of(back), ck.fresh(), now);
    } else if (op < 93) {
      ck.abort(ck.fresh(), proto::abort_req{scope, name, messages[pick(3)]}, now);
    } else if (op < 96) {
      ck.prune(now, 100 + static_cast<millis>(pick(400)));
    } else if (op < 98) {
      ck.check_snapshot(now);
    } else {
      now += 100 + static_cast<millis>(pick(500));
    }
  }
  if (failure.empty()) ck.shutdown();
  if (!failure.empty()) return "seed " + std::to_string(seed) + ", step " + std::to_string(step) + ":\n" + failure;
  const auto& s = ck.counts();
  total.releases += s.releases;
  total.allheres += s.allheres;
  total.decided += s.decided;
  total.aborts += s.aborts;
  total.errors += s.errors;
  total.leaves += s.leaves;
  total.pruned += s.pruned;
  total.one_step += s.one_step;
  total.delivered += s.delivered;
  total.rejoins += s.rejoins;
  total.rejoin_releases += s.rejoin_releases;
  total.rejoin_waits += s.rejoin_waits;
  total.snapshots += s.snapshots;
  return "";
}

TEST(BarrierProperty, RandomSequencesKeepTheInvariants) {
  // TFBARRIER_PROPERTY_SEEDS=N runs N seeds instead of 100 (for a longer hunt).
  unsigned seeds = test::seeds(100);
  if (const char* e = std::getenv("TFBARRIER_PROPERTY_SEEDS")) seeds = static_cast<unsigned>(std::strtoul(e, nullptr, 10));
  checker::stats total;
  for (unsigned seed = 1; seed <= seeds; ++seed) ASSERT_EQ(random_run(seed, 300, total), "");
  if (seeds < 100) return;
  // The random walk reached every rule.
  EXPECT_GT(total.releases, 1000);
  EXPECT_GT(total.allheres, 50);
  EXPECT_GT(total.decided, 500);
  EXPECT_GT(total.one_step, 100);
  EXPECT_GT(total.delivered, 100);
  EXPECT_GT(total.aborts, 100);
  EXPECT_GT(total.errors, 500);
  EXPECT_GT(total.pruned, 50);
  EXPECT_GT(total.leaves, 1000);
  EXPECT_GT(total.rejoins, 100);
  EXPECT_GT(total.rejoin_releases, 20);
  EXPECT_GT(total.rejoin_waits, 10);
  EXPECT_GT(total.snapshots, 100);
}

// ---------------------------------------------------------------------------
// journal lines: what serve --state-dir writes and reads back

TEST(JournalLine, EveryKindRoundTrips) {
  journal_entry rel = gathered_entry(4);
  rel.what = journal_entry::kind::release;
  rel.v = stop;
  rel.message = "m";
  rel.chief_arrival = false;
  rel.id.clear(), rel.host.clear(), rel.pid = 0, rel.n.reset(), rel.rank.reset(), rel.ranks.clear();
  journal_entry ab = rel;
  ab.what = journal_entry::kind::abort;
  ab.v = verdict::none;
  ab.ids.clear();
  journal_entry ver = gathered_entry(5);
  ver.what = journal_entry::kind::verdict;
  ver.v = cont;
  ver.ids.clear(), ver.ranks.clear();
  for (const journal_entry& e : {gathered_entry(3), rel, ab, ver}) {
    std::string err;
    std::string line = to_journal_line(e);
    ASSERT_TRUE(line.ends_with('\n'));
    line.pop_back();
    auto back = from_journal_line(line, err);
    ASSERT_TRUE(back) << line << ": " << err;
    EXPECT_EQ(dump_journal({*back}), dump_journal({e})) << line;
  }
  EXPECT_CONTAINS(to_journal_line(gathered_entry()), R"("t":"gathered")");
  EXPECT_CONTAINS(to_journal_line(gathered_entry()), R"("ranks":[1,0,null])");
}

TEST(JournalLine, AGatheredRoundMustHoldItsNMembersAndItsChief) {
  auto refused = [](journal_entry e) {
    std::string line = to_journal_line(e), err;
    line.pop_back();
    bool bad = !from_journal_line(line, err);
    return bad && err == "a gathered round without its n members and chief";
  };
  journal_entry e = gathered_entry();
  e.n = 4;  // three ids for n = 4
  EXPECT_TRUE(refused(e));
  e = gathered_entry();
  e.id = "other";  // the chief is not among them
  EXPECT_TRUE(refused(e));
  e = gathered_entry();
  e.ranks = {1, 3, none};  // rank 3 of n = 3
  EXPECT_TRUE(refused(e));
  e = gathered_entry();
  e.ids = {"id2", "id1", "id3"};  // not sorted (this host writes them sorted)
  EXPECT_TRUE(refused(e));
  e = gathered_entry();
  e.ids = {"id1", "id1", "id2"};  // twice the same
  EXPECT_TRUE(refused(e));
  e = gathered_entry();
  e.ranks.pop_back();
  EXPECT_TRUE(refused(e));
  e = gathered_entry();
  e.ids[2] = "not an id";
  EXPECT_TRUE(refused(e));
  EXPECT_FALSE(refused(gathered_entry()));
}

}  // namespace
}  // namespace tfb
