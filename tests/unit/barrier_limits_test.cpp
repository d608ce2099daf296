// serve --max-barriers in the pure state machine (barrier_set::limit): the
// number of barriers is bounded, finished rounds are forgotten before aborts,
// and nothing active within keep_recent is ever dropped.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "barrier.h"
#include "events_out.h"

namespace tfb {
namespace {

proto::arrive arrival(const std::string& name, std::uint32_t n, const std::string& id) {
  proto::arrive a;
  a.name = name;
  a.scope = "s";
  a.id = id;
  a.n = n;
  return a;
}

bool got_busy(const output& out, conn_id c) {
  for (auto& e : out.sends)
    if (e.to == c)
      if (auto* er = std::get_if<proto::error_reply>(&e.msg)) return er->kind == proto::error_kind::busy;
  return false;
}

bool released(const output& out, conn_id c) {
  for (auto& e : out.sends)
    if (e.to == c && std::holds_alternative<proto::release>(e.msg)) return true;
  return false;
}

const peer_info who{"node", 1};

}  // namespace

TEST(BarrierLimit, ANewBarrierPastTheLimitIsRefusedWhileAllAreRecent) {
  barrier_set s;
  s.limit(2, 1000);
  output out;
  s.arrive(1, arrival("a", 1, "x1"), who, 0, out);  // released at once: finished, but recent
  s.arrive(2, arrival("b", 2, "x2"), who, 0, out);  // waiting
  out = {};
  s.arrive(3, arrival("c", 1, "x3"), who, 500, out);
  EXPECT_TRUE(got_busy(out, 3));
  EXPECT_EQ(s.barrier_count(), 2u);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0], ev::event(ev::barrier_refused{"s", "c", 2}));
  EXPECT_NE(observe::line(out.events[0]).find("refused a new barrier s/c"), std::string::npos);
}

TEST(BarrierLimit, AnExistingBarrierIsNeverRefused) {
  barrier_set s;
  s.limit(1, 1000);
  output out;
  s.arrive(1, arrival("a", 2, "x1"), who, 0, out);
  out = {};
  s.arrive(2, arrival("a", 2, "x2"), who, 10, out);
  EXPECT_FALSE(got_busy(out, 2));
  EXPECT_TRUE(released(out, 1));
  EXPECT_TRUE(released(out, 2));
}

TEST(BarrierLimit, AFinishedIdleRoundGoesBeforeAnAbortAndAWaitingOneNever) {
  barrier_set s;
  s.limit(3, 1000);
  output out;
  s.arrive(1, arrival("waiting", 2, "w"), who, 0, out);  // someone waits: never forgotten
  s.arrive(2, arrival("done", 1, "d"), who, 0, out);     // finished
  proto::abort_req ab{"s", "stopped", "broken"};
  s.abort(3, ab, 100, out);                              // aborted, idle since 100
  out = {};
  s.arrive(4, arrival("new1", 1, "n1"), who, 5000, out);
  EXPECT_FALSE(got_busy(out, 4));
  EXPECT_EQ(s.barrier_count(), 3u);
  auto st = s.status(proto::status_req{"s", "", false}, 5000);
  std::string names;
  for (auto& b : st.barriers) names += b.name + " ";
  EXPECT_EQ(names.find("done"), std::string::npos) << names;  // the finished one went first
  EXPECT_NE(names.find("stopped"), std::string::npos) << names;
  EXPECT_NE(names.find("waiting"), std::string::npos) << names;
  out = {};
  s.arrive(5, arrival("new2", 1, "n2"), who, 5000, out);  // new1 is recent: the abort goes now
  EXPECT_FALSE(got_busy(out, 5));
  st = s.status(proto::status_req{"s", "", false}, 5000);
  names.clear();
  for (auto& b : st.barriers) names += b.name + " ";
  EXPECT_EQ(names.find("stopped"), std::string::npos) << names;
  EXPECT_NE(names.find("waiting"), std::string::npos) << names;
}

TEST(BarrierLimit, AbortAndDecideCountAsNewBarriersToo) {
  barrier_set s;
  s.limit(1, 1000);
  output out;
  s.arrive(1, arrival("a", 2, "x1"), who, 0, out);
  out = {};
  s.abort(2, proto::abort_req{"s", "other", "r"}, 10, out);
  EXPECT_TRUE(got_busy(out, 2));
  proto::decide d;
  d.name = "other";
  d.scope = "s";
  d.id = "dd";
  d.v = proto::verdict::stop;
  d.n = 2;
  d.rank = 0;
  out = {};
  s.decide(3, d, who, 10, out);
  EXPECT_TRUE(got_busy(out, 3));
  EXPECT_EQ(s.barrier_count(), 1u);
}

TEST(BarrierLimit, NoLimitByDefault) {
  barrier_set s;
  output out;
  for (int i = 0; i < 1000; ++i) s.arrive(static_cast<conn_id>(i + 1), arrival("b" + std::to_string(i), 1, "i" + std::to_string(i)), who, 0, out);
  EXPECT_EQ(s.barrier_count(), 1000u);
}

}  // namespace tfb
