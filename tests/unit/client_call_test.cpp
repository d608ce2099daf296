// One call of wait, decide or abort (src/core/client_call.h), driven in
// memory: replies, timers, signals and lost connections in, what to send,
// which timers to arm and the typed result out. No host, no sockets, no clock.
#include "client_call.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace tfb::client {
namespace {

using namespace std::chrono_literals;
using kind = call_result::kind;
using how = call_result::interrupt_how;

constexpr link_state up{true, true};
constexpr link_state down_sent{false, true};
constexpr link_state connecting{false, false};

call_config wait_config(std::optional<duration> timeout = std::nullopt) {
  call_config c;
  c.k = call_kind::wait;
  c.addr = "127.0.0.1:7777";
  c.scope = "job1";
  c.name = "epoch";
  c.timeout = timeout;
  return c;
}

call_config decide_config(bool wait = true, std::optional<duration> timeout = std::nullopt) {
  call_config c;
  c.k = call_kind::decide;
  c.addr = "127.0.0.1:7777";
  c.scope = "job1";
  c.v = proto::verdict::stop;
  c.wait = wait;
  c.timeout = timeout;
  return c;
}

proto::reply waiting(std::uint64_t gen = 3) { return proto::waiting{"epoch", gen, 1, 4}; }

bool arms(const call_step& s, call_timer t, duration after) {
  for (auto [which, d] : s.arm)
    if (which == t && d == after) return true;
  return false;
}

TEST(ClientCall, EachReplyOfWaitGivesItsResult) {
  {
    client_call c(wait_config());
    c.start();
    EXPECT_FALSE(c.reply(waiting(), up, 0ms).result);
    auto s = c.reply(proto::release{"epoch", 3, proto::verdict::stop, std::nullopt, "loss went up"}, up, 5ms);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->k, kind::released);
    EXPECT_EQ(s.result->v, proto::verdict::stop);
    EXPECT_EQ(s.result->message, "loss went up");
    EXPECT_TRUE(c.done());
  }
  {
    client_call c(wait_config());
    auto s = c.reply(proto::all_here{"epoch", 3, 4, 4}, up, 0ms);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->k, kind::all_here);
  }
  {
    client_call c(wait_config());
    c.reply(waiting(), up, 0ms);
    auto s = c.reply(proto::aborted{"epoch", 3, std::nullopt, "rank 4 ran out of memory"}, up, 0ms);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->k, kind::aborted);
    EXPECT_EQ(s.result->gen, 3u);
    EXPECT_EQ(s.result->message, "rank 4 ran out of memory");
  }
  {  // the host's other lines end nothing
    client_call c(wait_config());
    EXPECT_FALSE(c.reply(proto::pong{}, up, 0ms).result);
    EXPECT_FALSE(c.reply(proto::status_reply{}, up, 0ms).result);
    EXPECT_FALSE(c.done());
  }
}

TEST(ClientCall, EachReplyOfDecideAndAbortGivesItsResult) {
  {
    client_call c(decide_config(false));
    auto s = c.reply(proto::decided{"epoch", 3, proto::verdict::stop, 2, 4}, up, 0ms);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->k, kind::decide_recorded);
    EXPECT_EQ(s.result->rec.arrived, 2u);
    EXPECT_EQ(s.result->rec.name, "epoch");
  }
  {
    client_call c(decide_config());
    EXPECT_FALSE(c.reply(proto::decided{"epoch", 3, proto::verdict::stop, 2, 4}, up, 0ms).result);
    auto s = c.reply(proto::release{"epoch", 3, proto::verdict::stop, 4, ""}, up, 0ms);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->k, kind::decide_delivered);
    EXPECT_EQ(s.result->delivered, 4u);
  }
  {
    call_config cfg;
    cfg.k = call_kind::abort;
    client_call c(cfg);
    auto s = c.reply(proto::aborted{"epoch", 3, 0, ""}, up, 0ms);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->k, kind::abort_done);
    EXPECT_EQ(s.result->delivered, 0u);
  }
}

TEST(ClientCall, TimeoutSendsLeaveAndLeftEndsTimedOut) {
  client_call c(wait_config(10s));
  EXPECT_TRUE(arms(c.start(), call_timer::timeout, 10s));  // from the start, not from WAITING
  c.reply(waiting(), up, 0ms);
  auto s = c.timer(call_timer::timeout, up, 10s);
  EXPECT_EQ(s.send, proto::format_request(proto::status_req{"job1", "epoch", true}) +
                        proto::format_request(proto::leave{"timeout"}));
  EXPECT_TRUE(arms(s, call_timer::timeout, leave_grace));
  EXPECT_TRUE(c.timing_out());
  proto::barrier_info b;
  b.name = "epoch";
  b.gen = 3;
  b.arrived = 3;
  b.n = 4;
  EXPECT_FALSE(c.reply(proto::status_reply{{b}}, up, 10s).result);
  s = c.reply(proto::left{"epoch", 3}, up, 10s);
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::timed_out);
  EXPECT_EQ(s.result->timeout, 10s);
  ASSERT_TRUE(s.result->last);
  EXPECT_EQ(s.result->last->arrived, 3u);
}

TEST(ClientCall, TimeoutWithoutLeftIsUnconfirmed) {
  client_call c(wait_config(1s));
  c.start();
  c.reply(waiting(), up, 0ms);
  c.timer(call_timer::timeout, up, 1s);
  auto s = c.timer(call_timer::timeout, up, 3s);  // the grace passed
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::unconfirmed);
  EXPECT_EQ(s.result->why, call_result::no_left::unanswered);
  EXPECT_TRUE(s.send.empty());
}

TEST(ClientCall, TimeoutWhileReconnectingEndsUnconfirmedAtOnce) {
  client_call c(wait_config(1s));
  c.start();
  c.reply(waiting(), up, 0ms);
  EXPECT_FALSE(c.lost().result);  // the driver reconnects
  auto s = c.timer(call_timer::timeout, down_sent, 1s);
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::unconfirmed);
  EXPECT_EQ(s.result->why, call_result::no_left::reconnecting);
  EXPECT_TRUE(s.send.empty());
}

TEST(ClientCall, TimeoutBeforeTheArrivalWentOutStandsDownUntilWaiting) {
  client_call c(wait_config(0ms));
  c.start();
  auto s = c.timer(call_timer::timeout, connecting, 0ms);
  EXPECT_FALSE(s.result);
  EXPECT_FALSE(c.timing_out());
  s = c.reply(waiting(), up, 50ms);
  EXPECT_TRUE(arms(s, call_timer::timeout, 0ms));  // --timeout 0 still checks once, after arriving
}

TEST(ClientCall, ResumedAfterALostConnectionWithdrawsAgain) {
  client_call c(wait_config(1s));
  c.start();
  c.reply(waiting(), up, 0ms);
  c.timer(call_timer::timeout, up, 1s);  // the withdrawal goes out...
  EXPECT_FALSE(c.lost().result);         // ...and the connection with it
  // Reconnected: the request again, the host's WAITING again: withdraw now.
  auto s = c.reply(waiting(), up, 1500ms);
  EXPECT_NE(s.send.find("LEAVE"), std::string::npos);
  s = c.reply(proto::left{"epoch", 3}, up, 1600ms);
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::timed_out);
}

TEST(ClientCall, ResumedCallStillReleases) {
  client_call c(wait_config());
  c.start();
  c.reply(waiting(), up, 0ms);
  EXPECT_FALSE(c.lost().result);
  c.reply(waiting(), up, 2s);
  auto s = c.reply(proto::release{"epoch", 3, proto::verdict::continue_, std::nullopt, ""}, up, 3s);
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::released);
}

TEST(ClientCall, InterruptConfirmedByLeftWithdrew) {
  client_call c(wait_config());
  c.start();
  c.reply(waiting(7), up, 0ms);
  auto s = c.signal(interrupt_signal::sigterm, up);
  EXPECT_EQ(s.send, proto::format_request(proto::leave{}));
  EXPECT_TRUE(arms(s, call_timer::interrupt, interrupt_grace));
  EXPECT_FALSE(s.result);
  s = c.reply(proto::left{"epoch", 7}, up, 100ms);
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::interrupted);
  EXPECT_EQ(s.result->sig, interrupt_signal::sigterm);
  EXPECT_EQ(s.result->how, how::withdrew);
  EXPECT_EQ(s.result->gen, 7u);
}

TEST(ClientCall, InterruptWithoutLeftIsUnconfirmed) {
  client_call c(wait_config());
  c.reply(waiting(), up, 0ms);
  c.signal(interrupt_signal::sigint, up);
  auto s = c.timer(call_timer::interrupt, up, 1s);
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::interrupted);
  EXPECT_EQ(s.result->how, how::unconfirmed);
  // Nor does what comes after the grace change it, nor any other end.
  EXPECT_FALSE(c.reply(proto::left{"epoch", 3}, up, 2s).result);
}

TEST(ClientCall, InterruptEndsAsInterruptedWhateverEndsIt) {
  {  // the connection goes with the LEAVE on its way
    client_call c(wait_config());
    c.reply(waiting(), up, 0ms);
    c.signal(interrupt_signal::sigint, up);
    auto s = c.lost();
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->how, how::unconfirmed);
  }
  {  // an error of the connection
    client_call c(wait_config());
    c.reply(waiting(), up, 0ms);
    c.signal(interrupt_signal::sigint, up);
    auto s = c.fail({error_kind::protocol, "the host at x sent an over-long line"});
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->k, kind::interrupted);
  }
  {  // the round released first: it stands, and says so
    client_call c(wait_config());
    c.reply(waiting(), up, 0ms);
    c.signal(interrupt_signal::sigint, up);
    auto s = c.reply(proto::release{"epoch", 3, proto::verdict::stop, std::nullopt, "m"}, up, 10ms);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->k, kind::interrupted);
    EXPECT_EQ(s.result->how, how::released_first);
    EXPECT_EQ(s.result->v, proto::verdict::stop);
  }
  {  // a second signal
    client_call c(wait_config());
    c.reply(waiting(), up, 0ms);
    c.signal(interrupt_signal::sigint, up);
    auto s = c.signal(interrupt_signal::sigterm, up);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->sig, interrupt_signal::sigint);
    EXPECT_EQ(s.result->how, how::unconfirmed);
  }
}

TEST(ClientCall, InterruptWithNothingToWithdrawEndsAtOnce) {
  {  // before WAITING
    client_call c(wait_config());
    auto s = c.signal(interrupt_signal::sigint, up);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->how, how::plain);
    EXPECT_TRUE(s.send.empty());
  }
  {  // while reconnecting: the host may still count it
    client_call c(wait_config());
    c.reply(waiting(), up, 0ms);
    c.lost();
    auto s = c.signal(interrupt_signal::sigint, down_sent);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->how, how::unconfirmed);
  }
  {  // decide: the verdict stands
    client_call c(decide_config());
    c.reply(proto::decided{"epoch", 3, proto::verdict::stop, 2, 4}, up, 0ms);
    auto s = c.signal(interrupt_signal::sigint, up);
    ASSERT_TRUE(s.result);
    EXPECT_EQ(s.result->how, how::verdict_stands);
    EXPECT_EQ(s.result->name, "epoch");
  }
}

TEST(ClientCall, DecideTimeoutAsksStatusAndEndsTimedOut) {
  client_call c(decide_config(true, 5s));
  EXPECT_TRUE(c.start().arm.empty());  // decide's timeout runs from DECIDED
  auto s = c.reply(proto::decided{"epoch", 3, proto::verdict::stop, 2, 4}, up, 0ms);
  EXPECT_TRUE(arms(s, call_timer::timeout, 5s));
  s = c.timer(call_timer::timeout, up, 5s);
  EXPECT_EQ(s.send, proto::format_request(proto::status_req{"job1", "epoch", true}));  // nothing to withdraw
  proto::barrier_info b;
  b.name = "epoch";
  b.gen = 3;
  s = c.reply(proto::status_reply{{b}}, up, 5s);
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::decide_timed_out);
  EXPECT_TRUE(s.result->last);
  EXPECT_EQ(s.result->v, proto::verdict::stop);
}

TEST(ClientCall, DecideNotesOnceWhenTheDeliveryTakes) {
  call_config cfg = decide_config();
  cfg.note = true;
  client_call c(cfg);
  auto s = c.reply(proto::decided{"epoch", 3, proto::verdict::stop, 2, 4}, up, 0ms);
  EXPECT_TRUE(arms(s, call_timer::note, note_after));
  s = c.reply(proto::decided{"epoch", 3, proto::verdict::stop, 2, 4}, up, 0ms);  // resumed: once
  EXPECT_FALSE(arms(s, call_timer::note, note_after));
  s = c.timer(call_timer::note, up, 1s);
  ASSERT_TRUE(s.note);
  EXPECT_EQ(s.note->gen, 3u);
}

TEST(ClientCall, ProgressAsksStatusAndReportsIt) {
  call_config cfg = wait_config();
  cfg.progress_every = 30s;
  client_call c(cfg);
  auto s = c.reply(waiting(), up, 0ms);
  EXPECT_TRUE(arms(s, call_timer::progress, 30s));
  s = c.timer(call_timer::progress, up, 30s);
  EXPECT_EQ(s.send, proto::format_request(proto::status_req{"job1", "epoch", false}));
  EXPECT_TRUE(arms(s, call_timer::progress, 30s));
  proto::barrier_info b;
  b.name = "epoch";
  b.gen = 3;
  b.arrived = 2;
  b.state = proto::round_state::gathered;
  s = c.reply(proto::status_reply{{b}}, up, 30s);
  ASSERT_TRUE(s.report);
  EXPECT_EQ(s.report->arrived, 2u);
  EXPECT_TRUE(s.report->gathered);
  EXPECT_EQ(s.report->waited, 30s);
}

TEST(ClientCall, DecideByRunsTheCommandOnceAndResendsItsVerdict) {
  call_config cfg = wait_config();
  cfg.decide_by = true;
  client_call c(cfg);
  c.reply(waiting(), up, 0ms);
  auto s = c.reply(proto::all_here{"epoch", 3, 4, 4}, up, 0ms);
  ASSERT_TRUE(s.run_decide_by);
  EXPECT_FALSE(s.result);  // the chief of --decide-by is not released by ALLHERE
  s = c.verdict_ready("DECIDE ...\n");
  EXPECT_EQ(s.send, "DECIDE ...\n");
  s = c.reply(proto::all_here{"epoch", 3, 4, 4}, up, 0ms);  // a host restarted with its journal
  EXPECT_FALSE(s.run_decide_by);
  EXPECT_EQ(s.send, "DECIDE ...\n");
  EXPECT_FALSE(c.reply(proto::decided{"epoch", 3, proto::verdict::stop, 4, 4}, up, 0ms).result);
  s = c.reply(proto::release{"epoch", 3, proto::verdict::stop, std::nullopt, ""}, up, 0ms);
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::released);
}

TEST(ClientCall, FailCarriesTheConnectionsEndAndNothingAfterTheEnd) {
  client_call c(wait_config(1s));
  c.start();
  auto s = c.fail({error_kind::unreachable, "cannot reach the host"});
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, kind::failed);
  EXPECT_EQ(s.result->failure.kind, error_kind::unreachable);
  EXPECT_EQ(s.result->failure.text, "cannot reach the host");
  EXPECT_FALSE(c.fail({error_kind::protocol, "again"}).result);
  auto after = c.timer(call_timer::timeout, up, 1s);
  EXPECT_TRUE(after.send.empty());
  EXPECT_TRUE(after.arm.empty());
  EXPECT_FALSE(c.signal(interrupt_signal::sigint, up).result);
}

TEST(ClientCall, ReconnectBacksOffDoublingWithJitterWithinTheBudget) {
  backoff b(50ms, 1s);
  EXPECT_EQ(b.next(1.0, 60s), 50ms);
  EXPECT_EQ(b.next(1.0, 60s), 100ms);
  EXPECT_EQ(b.next(0.5, 60s), 100ms);  // 200 ms, jittered down
  EXPECT_EQ(b.next(1.5, 60s), 600ms);  // 400 ms, jittered up
  EXPECT_EQ(b.next(1.0, 60s), 800ms);
  EXPECT_EQ(b.next(1.0, 60s), 1s);     // the cap
  EXPECT_EQ(b.next(1.0, 60s), 1s);
  EXPECT_EQ(b.next(1.0, 300ms), 300ms);  // one last try at the deadline
  EXPECT_FALSE(b.next(1.0, 0ms));       // the budget is spent: unreachable
  EXPECT_FALSE(b.next(1.0, -5ms));
}

}  // namespace
}  // namespace tfb::client
