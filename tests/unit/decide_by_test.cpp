// wait --decide-by and --decide-within (issue #33 part 1): the chief that
// decides on its own connection, the abort when it goes before its verdict,
// and the decide deadline. Rules of src/core/barrier.h; docs/protocol.md, ARRIVE.
#include <gtest/gtest.h>

#include <string>

#include "../support/barrier_checker.h"
#include "barrier.h"
#include "decide_cmd.h"
#include "journal.h"

#include <sys/wait.h>

namespace tfb {
namespace {

using check::peer;
using opt_u32 = std::optional<std::uint32_t>;

std::string to(const output& o, conn_id c) {
  std::string s;
  for (const auto& e : o.sends)
    if (e.to == c) s += proto::format_reply(e.msg);
  return s;
}

class DecideBy : public ::testing::Test {
 protected:
  barrier_set bs;
  millis now = 10'000;

  output arrive(conn_id c, opt_u32 rank, bool chief = false, bool decides = false,
                std::optional<std::uint32_t> within = std::nullopt, std::string id = "") {
    proto::arrive a;
    a.name = "e";
    a.scope = "default";
    a.id = id.empty() ? "id" + std::to_string(c) : id;
    a.n = 3;
    a.rank = rank;
    a.chief = chief;
    a.decide = decides;
    a.within_ms = within;
    output out;
    bs.arrive(c, a, peer(c), now, out);
    return out;
  }
  output decide(conn_id c, proto::verdict v, std::string message = "") {
    proto::decide d;
    d.name = "e";
    d.scope = "default";
    d.id = "id" + std::to_string(c);
    d.v = v;
    d.message = std::move(message);
    output out;
    bs.decide(c, d, peer(c), now, out);
    return out;
  }
  output gone(conn_id c, departure how = departure::disconnected) {
    output out;
    bs.leave(c, how, now, out);
    return out;
  }
  /// The host's timer for round gen of "e" went off (it measured `within` itself).
  output expire(std::uint64_t gen = 1, millis within = 0) {
    output out;
    bs.expire(decide_deadline{"default", "e", gen, within}, now, out);
    return out;
  }
};

TEST_F(DecideBy, TheChiefStaysWaitingOnceAllAreHere) {
  arrive(1, 1);
  arrive(2, 2);
  output o = arrive(3, 0, true, true);
  EXPECT_EQ(to(o, 3), "WAITING name=e gen=1 arrived=3 n=3\nALLHERE name=e gen=1 arrived=3 n=3\n");
  EXPECT_TRUE(bs.is_waiting(3));
  EXPECT_TRUE(bs.decides_on(3));
  EXPECT_FALSE(bs.decides_on(1));
}

TEST_F(DecideBy, ItsVerdictOnItsConnectionReleasesEveryone) {
  arrive(1, 1);
  arrive(2, 2);
  arrive(3, 0, true, true);
  output o = decide(3, proto::verdict::stop, "loss 0.5");
  EXPECT_EQ(to(o, 3),
            "DECIDED name=e gen=1 verdict=stop arrived=3 n=3\n"
            "RELEASE name=e gen=1 verdict=stop delivered=2 :loss 0.5\n");
  EXPECT_EQ(to(o, 1), "RELEASE name=e gen=1 verdict=stop :loss 0.5\n");
  EXPECT_EQ(to(o, 2), "RELEASE name=e gen=1 verdict=stop :loss 0.5\n");
  EXPECT_FALSE(bs.active());
  EXPECT_FALSE(bs.decides_on(3));
}

TEST_F(DecideBy, TheChiefDyingWhileDecidingAbortsTheRoundAtOnce) {
  arrive(1, 1);
  arrive(2, 2);
  arrive(3, 0, true, true);
  output o = gone(3);
  const std::string aborted = "ABORTED name=e gen=1 :the chief (rank 0 on h3) died while deciding\n";
  EXPECT_EQ(to(o, 1), aborted);
  EXPECT_EQ(to(o, 2), aborted);
  EXPECT_EQ(to(o, 3), "");  // its connection is closed
  EXPECT_FALSE(bs.active());
  ASSERT_EQ(o.journal.size(), 1u);  // journaled, as any abort
  EXPECT_EQ(o.journal[0].what, journal_entry::kind::abort);
  // A late arrival hears it too.
  EXPECT_EQ(to(arrive(4, 1), 4), aborted);
}

TEST_F(DecideBy, HowTheChiefWentIsInTheReason) {
  arrive(1, 1);
  arrive(2, 2);
  arrive(3, 0, true, true);
  EXPECT_EQ(to(gone(3, departure::lost), 1),
            "ABORTED name=e gen=1 :the chief (rank 0 on h3) died while deciding (its host of the store was lost)\n");
}

TEST_F(DecideBy, AChiefThatWithdrawsWhileDecidingAbortsToo) {
  arrive(1, 1);
  arrive(2, 2);
  arrive(3, 0, true, true);
  output o = gone(3, departure::left);
  EXPECT_EQ(to(o, 3), "LEFT name=e gen=1\n");
  EXPECT_EQ(to(o, 1), "ABORTED name=e gen=1 :the chief (rank 0 on h3) withdrew while deciding\n");
}

TEST_F(DecideBy, ATwoStepChiefGoingAfterAllHereAbortsNothing) {
  // wait --chief without --decide-by: its wait ends at ALLHERE, and `decide` follows.
  arrive(1, 1);
  arrive(2, 2);
  arrive(3, 0, true, false);
  output o = gone(3);
  EXPECT_TRUE(o.sends.empty());
  EXPECT_TRUE(bs.active());
}

TEST_F(DecideBy, TheChiefLeavingBeforeAllAreHereOnlyWithdraws) {
  arrive(1, 1);
  arrive(3, 0, true, true);
  output o = gone(3);
  EXPECT_TRUE(o.sends.empty());
  EXPECT_TRUE(bs.is_waiting(1));
}

TEST_F(DecideBy, NoVerdictWithinTheDeadlineAbortsTheRound) {
  arrive(1, 1, true, false, 2000);  // wait --chief --decide-within 2s
  arrive(2, 0);
  output last = arrive(3, 2);
  // The step names the round and how long it may wait: the host measures it.
  ASSERT_EQ(last.deadlines.size(), 1u);
  EXPECT_EQ(last.deadlines[0].scope, "default");
  EXPECT_EQ(last.deadlines[0].name, "e");
  EXPECT_EQ(last.deadlines[0].gen, 1u);
  EXPECT_EQ(last.deadlines[0].within, 2000);
  ASSERT_EQ(bs.pending_deadlines().size(), 1u);
  EXPECT_TRUE(expire(2).sends.empty());  // another round: nothing
  // Clock-free: no time in the state decides it (a host's clock an hour off
  // changes nothing); the expire input for the round does.
  now -= 3'600'000;
  output o = expire();
  const std::string aborted =
      "ABORTED name=e gen=1 :the chief (rank 1 on h1) gave no verdict within 2s of all arriving (its "
      "--decide-timeout or --decide-within)\n";
  EXPECT_EQ(to(o, 2), aborted);
  EXPECT_EQ(to(o, 3), aborted);
  EXPECT_EQ(to(o, 1), "");  // a two-step chief's wait ended at ALLHERE
  EXPECT_TRUE(bs.pending_deadlines().empty());
  EXPECT_TRUE(expire().sends.empty());  // a second host's expire, applied later: nothing
}

TEST_F(DecideBy, TheDeadlineTellsAChiefStillDecidingToo) {
  arrive(1, 1);
  arrive(2, 2);
  arrive(3, 0, true, true, 500);
  now += 500;
  output o = expire();
  EXPECT_NE(to(o, 3).find("ABORTED name=e gen=1 :the chief (rank 0 on h3) gave no verdict within"), std::string::npos);
}

TEST_F(DecideBy, AVerdictInTimeDisarmsTheDeadline) {
  arrive(1, 1);
  arrive(2, 2);
  arrive(3, 0, true, true, 500);
  decide(3, proto::verdict::continue_);
  EXPECT_TRUE(bs.pending_deadlines().empty());
  now += 1000;
  EXPECT_TRUE(expire().sends.empty());
}

TEST_F(DecideBy, ADecideOnAWaitingConnectionThatDecidesNothingIsRefused) {
  arrive(1, 1, true, true);
  output o = decide(1, proto::verdict::stop);  // not all here yet
  EXPECT_EQ(to(o, 1).rfind("ERR BADREQUEST", 0), 0u) << to(o, 1);
  EXPECT_TRUE(bs.is_waiting(1));
}

TEST_F(DecideBy, TheDumpKeepsWhoDecidesAndTheDeadline) {
  arrive(1, 1);
  arrive(2, 2);
  arrive(3, 0, true, true, 700);
  barrier_set copy;
  std::string error;
  ASSERT_TRUE(copy.load(bs.dump(), error)) << error;
  EXPECT_EQ(copy.dump(), bs.dump());
  EXPECT_TRUE(copy.decides_on(3));
  ASSERT_EQ(copy.pending_deadlines().size(), 1u);  // a host that loads the state arms it again
  EXPECT_EQ(copy.pending_deadlines()[0].within, 700);
  output o;
  copy.leave(3, departure::disconnected, now, o);
  EXPECT_EQ(to(o, 1), "ABORTED name=e gen=1 :the chief (rank 0 on h3) died while deciding\n");
}

// A host restarted with --state-dir keeps a gathered round's decide deadline:
// without it, the ranks of a round whose two-step chief never decided waited
// for good after the restart.
TEST_F(DecideBy, TheJournalKeepsTheDeadlineOfARoundWaitingForItsVerdict) {
  arrive(1, 1, true, false, 2000);  // wait --chief --decide-within 2s
  arrive(2, 0);
  output last = arrive(3, 2);
  const journal_entry* g = nullptr;
  for (const auto& e : last.journal)
    if (e.what == journal_entry::kind::gathered) g = &e;
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(g->within.has_value());
  EXPECT_EQ(*g->within, 2000);
  std::string line = to_journal_line(*g), error;
  EXPECT_NE(line.find("\"within_ms\":2000"), std::string::npos) << line;
  auto back = from_journal_line(line, error);
  ASSERT_TRUE(back) << error;
  barrier_set restarted;
  restarted.restore(*back, 50'000);
  ASSERT_EQ(restarted.pending_deadlines().size(), 1u);  // the host arms it again, in full from the restart
  EXPECT_EQ(restarted.pending_deadlines()[0].within, 2000);
  // And the snapshot that compacts the journal keeps it too.
  bool kept = false;
  for (const auto& e : restarted.snapshot()) kept = kept || (e.what == journal_entry::kind::gathered && e.within == 2000);
  EXPECT_TRUE(kept);
  output o;
  restarted.expire(decide_deadline{"default", "e", 1, 2000}, 52'000, o);
  EXPECT_TRUE(restarted.pending_deadlines().empty());
  bool aborted = false;
  for (const auto& e : o.journal) aborted = aborted || e.what == journal_entry::kind::abort;
  EXPECT_TRUE(aborted);
  // A deadline out of range, or on another kind of entry, is not restored.
  std::string bad = line;
  bad.replace(bad.find("2000"), 4, "0");
  EXPECT_FALSE(from_journal_line(bad, error));
}

TEST(DecideCmd, TheMessageIsTheLastNonEmptyLineEscapedAndBounded) {
  decide_cmd::last_line l;
  l.feed("epoch 3\nloss 0.");
  l.feed("25\r\n\n");
  EXPECT_EQ(l.message(), "loss 0.25");
  l.feed("no newline at the end");
  EXPECT_EQ(l.message(), "no newline at the end");
  decide_cmd::last_line esc;
  esc.feed("\x1b[31mred\n");
  EXPECT_EQ(esc.message(), "\\x1b[31mred");
  decide_cmd::last_line big;
  big.feed(std::string(100'000, 'x') + "\n");
  EXPECT_TRUE(proto::valid_text(big.message()));
  EXPECT_LE(big.message().size(), proto::max_text);
}

TEST(DecideCmd, TheExitStatusIsTheVerdict) {
  std::string why;
  EXPECT_EQ(decide_cmd::verdict_of(0, why), proto::verdict::continue_);
  EXPECT_EQ(decide_cmd::verdict_of(1 << 8, why), proto::verdict::stop);
  EXPECT_EQ(decide_cmd::verdict_of(2 << 8, why), std::nullopt);
  EXPECT_EQ(why, "exited with status 2 (0 is continue, 1 stop)");
  EXPECT_EQ(decide_cmd::verdict_of(SIGKILL, why), std::nullopt);  // a wait status: killed by signal 9
  EXPECT_EQ(why, "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(decide_cmd::verdict_of(SIGTERM, why), std::nullopt);
  EXPECT_EQ(why, "was killed by signal 15 (SIGTERM)");
  EXPECT_EQ(decide_cmd::verdict_of(40, why), std::nullopt);
  EXPECT_EQ(why, "was killed by signal 40");
}

}  // namespace
}  // namespace tfb
