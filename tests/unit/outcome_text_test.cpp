// What a call's typed result says, and its exit code (src/cli/outcome_text.h):
// the sentences that tests/bats check, from results made by hand.
#include "outcome_text.h"

#include <gtest/gtest.h>

#include "exit_codes.h"

namespace tfb::cmd {
namespace {

using namespace std::chrono_literals;
using client::call_result;
using kind = call_result::kind;

call_result result(kind k, std::string name = "i", std::uint64_t gen = 1) {
  call_result r;
  r.k = k;
  r.name = std::move(name);
  r.gen = gen;
  r.addr = "127.0.0.1:7777";
  return r;
}

TEST(OutcomeText, Released) {
  call_result r = result(kind::released);
  r.v = proto::verdict::stop;
  r.message = "loss went up";
  outcome o = outcome_of(r);
  EXPECT_EQ(o.exit_code, exit_code::released_stop);
  EXPECT_EQ(o.out, "loss went up");
  EXPECT_EQ(o.err, "");
  r.v = proto::verdict::continue_;
  EXPECT_EQ(outcome_of(r).exit_code, exit_code::released_continue);
  EXPECT_EQ(outcome_of(result(kind::all_here)).exit_code, exit_code::ok);
}

TEST(OutcomeText, Interrupted) {
  call_result r = result(kind::interrupted);
  r.how = call_result::interrupt_how::withdrew;
  r.sig = client::interrupt_signal::sigterm;
  outcome o = outcome_of(r);
  EXPECT_EQ(o.exit_code, exit_code::interrupted_term);
  EXPECT_EQ(o.err, "interrupted by SIGTERM; withdrew from barrier i (round 1)");
  r = result(kind::interrupted, "z");
  r.how = call_result::interrupt_how::unconfirmed;
  o = outcome_of(r);
  EXPECT_EQ(o.exit_code, exit_code::interrupted_int);
  EXPECT_EQ(o.err, "interrupted by SIGINT; the host did not confirm the withdrawal from barrier z (round 1) within "
                   "1s: this participant may still be counted in that round");
  r = result(kind::interrupted, "f");
  r.how = call_result::interrupt_how::released_first;
  r.v = proto::verdict::stop;
  EXPECT_EQ(outcome_of(r).err,
            "interrupted by SIGINT; barrier f (round 1) had released (verdict stop) before the host read the withdrawal");
  r = result(kind::interrupted, "later");
  r.how = call_result::interrupt_how::verdict_stands;
  r.v = proto::verdict::stop;
  EXPECT_EQ(outcome_of(r).err, "interrupted by SIGINT; the verdict stop stands for barrier later round 1, and is "
                               "delivered when all have arrived");
  EXPECT_EQ(outcome_of(result(kind::interrupted)).err, "interrupted by SIGINT");
}

TEST(OutcomeText, AbortedAndAbort) {
  call_result r = result(kind::aborted, "ab", 2);
  r.message = "rank 3 ran out of memory";
  outcome o = outcome_of(r);
  EXPECT_EQ(o.exit_code, exit_code::aborted);
  EXPECT_EQ(o.err, "barrier ab (round 2) was aborted: rank 3 ran out of memory");
  r = result(kind::abort_done, "note");
  r.delivered = 2;
  o = outcome_of(r);
  EXPECT_EQ(o.exit_code, exit_code::ok);
  EXPECT_EQ(o.err, "aborted barrier note round 1: 2 waiting participants told");
  r.delivered = 0;
  EXPECT_EQ(outcome_of(r).err,
            "aborted barrier note round 1: 0 waiting participants told; nobody was waiting, so check the name (and "
            "--scope): later arrivals exit 3 until the host forgets the barrier (serve --forget-after, default 1h)");
}

TEST(OutcomeText, TimedOutAndUnconfirmed) {
  call_result r = result(kind::timed_out, "t", 1);
  r.timeout = 2s;
  proto::barrier_info b;
  b.name = "t";
  b.gen = 1;
  b.arrived = 1;
  b.n = 3;
  b.missing = "1-2";
  r.last = b;
  outcome o = outcome_of(r);
  EXPECT_EQ(o.exit_code, exit_code::timed_out);
  EXPECT_EQ(o.err, "timed out after 2s waiting at barrier t (round 1): 1/3 arrived; missing ranks 1-2; never "
                   "arrived: ranks 1-2");
  r.k = kind::unconfirmed;
  r.why = call_result::no_left::reconnecting;
  r.last.reset();
  o = outcome_of(r);
  EXPECT_EQ(o.exit_code, exit_code::unconfirmed);
  EXPECT_EQ(o.err, "timed out after 2s waiting at barrier t (round 1), while reconnecting to the host at "
                   "127.0.0.1:7777, so the withdrawal could not be sent: this participant may still be counted in "
                   "the round, and the others released with it (exit 75, not 124). Treat its outcome as unknown: "
                   "`tfbarrier status --name t` shows whom the round counts");
}

TEST(OutcomeText, Decide) {
  call_result r = result(kind::decide_delivered, "tq");
  r.v = proto::verdict::continue_;
  r.delivered = 1;
  EXPECT_EQ(outcome_of(r).err, "verdict continue delivered to 1 participant of barrier tq round 1");
  client::recorded rec{proto::verdict::stop, "later", 1, 1, 2};
  EXPECT_EQ(note_text(rec), "verdict stop recorded for barrier later round 1 (1/2 arrived); waiting for its "
                            "delivery (interrupting leaves it standing)");
  r = result(kind::decide_timed_out, "v", 4);
  r.v = proto::verdict::stop;
  r.timeout = 1s;
  r.reconnecting = true;
  outcome o = outcome_of(r);
  EXPECT_EQ(o.exit_code, exit_code::timed_out);
  EXPECT_EQ(o.err, "timed out after 1s waiting for barrier v (round 4) to release; the verdict stop stands and is "
                   "delivered when all have arrived (reconnecting to the host at 127.0.0.1:7777)");
  r = result(kind::failed);
  r.failure = {error_kind::unreachable, "cannot reach the host"};
  o = outcome_of(r);
  EXPECT_EQ(o.exit_code, exit_code::unreachable);
  EXPECT_EQ(o.err, "cannot reach the host");
}

// A failure's code is its cause's (exit_code_of); a verdict has no cause.
TEST(OutcomeText, TheCodeIsTheCauses) {
  struct {
    kind k;
    std::optional<error_kind> cause;
  } cases[] = {{kind::released, std::nullopt},
               {kind::aborted, error_kind::aborted},
               {kind::timed_out, error_kind::timed_out},
               {kind::unconfirmed, error_kind::unconfirmed},
               {kind::decide_timed_out, error_kind::timed_out},
               {kind::abort_done, std::nullopt},
               {kind::interrupted, error_kind::interrupted_int}};
  for (const auto& c : cases) {
    outcome o = outcome_of(result(c.k));
    EXPECT_EQ(o.cause, c.cause) << static_cast<int>(c.k);
    if (c.cause) {
      EXPECT_EQ(o.exit_code, exit_code_of(*c.cause)) << static_cast<int>(c.k);
    }
  }
  for (error_kind k : {error_kind::host_lost, error_kind::protocol, error_kind::auth, error_kind::conflict}) {
    call_result r = result(kind::failed);
    r.failure = {k, "why"};
    outcome o = outcome_of(r);
    EXPECT_EQ(o.cause, k);
    EXPECT_EQ(o.exit_code, exit_code_of(k));
    EXPECT_EQ(o.err, "why");
  }
}

}  // namespace
}  // namespace tfb::cmd
