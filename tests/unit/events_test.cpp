// Issue #34 item 4: the core's typed events (core/events.h), and what
// observe/events_out.h makes of them: each kind's line in the host's log,
// word for word as before, what --quiet keeps, and what the metrics count.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "barrier.h"
#include "events.h"
#include "events_out.h"

namespace tfb {
namespace {

using observe::line;

const ev::round_id e1{"default", "e", 1};
const ev::who r0{0, "h1", 1001};
const ev::who unranked{std::nullopt, "h2", 1002};

TEST(EventLines, Barriers) {
  EXPECT_EQ(line(ev::barrier_refused{"s", "c", 2}), "refused a new barrier s/c: 2 barriers, the limit");
  EXPECT_EQ(line(ev::barrier_evicted{"s", "a", 10}), "forgot barrier s/a to make room (--max-barriers 10)");
  EXPECT_EQ(line(ev::barrier_forgotten{"default", "x"}),
            "forgot barrier default/x (idle for the store's --forget-after)");
}

TEST(EventLines, Arrivals) {
  EXPECT_EQ(line(ev::arrived{e1, r0, false, 1, 2}), "arrive e#1: rank 0 (h1 pid 1001), 1/2");
  EXPECT_EQ(line(ev::arrived{{"job.7", "e", 3}, unranked, true, 2, 4}),
            "arrive job.7/e#3: a participant without rank (h2 pid 1002) as chief, 2/4");
  EXPECT_EQ(line(ev::arrived_deciding{e1, r0, proto::verdict::stop, 2, 3}),
            "arrive e#1: rank 0 (h1 pid 1001) as chief with verdict stop, 2/3");
  EXPECT_EQ(line(ev::rejoined{e1, r0}), "rejoin e#1: rank 0 (h1 pid 1001) came back");
  EXPECT_EQ(line(ev::rejoined_late{e1, "id7"}),
            "rejoin e#1: participant id7 came back after the release; told the outcome");
  EXPECT_EQ(line(ev::conflict{e1, "h2", 1002, "you asked for n=3"}), "conflict e#1: h2 pid 1002: you asked for n=3");
}

TEST(EventLines, Outcomes) {
  EXPECT_EQ(line(ev::gathered{e1, 3, {0, "h3", 1003}}),
            "gathered e#1: all 3 present; waiting for the chief's verdict (rank 0 (h3 pid 1003))");
  EXPECT_EQ(line(ev::verdict_given{e1, proto::verdict::stop, "h4 pid 1004", "loss diverged"}),
            "verdict e#1: stop from h4 pid 1004: loss diverged");
  EXPECT_EQ(line(ev::verdict_given{e1, proto::verdict::continue_, "h4 pid 1004", ""}),
            "verdict e#1: continue from h4 pid 1004");
  EXPECT_EQ(line(ev::released{e1, 3, proto::verdict::continue_, ""}), "release e#1: 3 participants, verdict continue");
  EXPECT_EQ(line(ev::released{{"default", "solo", 1}, 1, proto::verdict::stop, "done"}),
            "release solo#1: 1 participant, verdict stop: done");
  EXPECT_EQ(line(ev::aborted{e1, 2, "node3 died"}), "abort e#1: 2 participants told: node3 died");
  EXPECT_EQ(line(ev::aborted{e1, 1, ""}), "abort e#1: 1 participant told");
  EXPECT_EQ(line(ev::withdrew{e1, r0, proto::departure::disconnected, 0, 2}),
            "leave e#1: rank 0 (h1 pid 1001) withdrew (disconnected), 0/2");
  EXPECT_EQ(line(ev::withdrew{e1, unranked, proto::departure::left, 1, std::nullopt}),
            "leave e#1: a participant without rank (h2 pid 1002) withdrew (left), 1/?");
}

TEST(EventLines, HostAndStore) {
  EXPECT_EQ(line(ev::journal_not_compacted{"/s/journal", "No space left on device"}),
            "warning: cannot compact the journal /s/journal: No space left on device");
  EXPECT_EQ(line(ev::store_host_left{"B:1", 42}),
            "store: host B:1 left (incarnation 42); its participants of open rounds are withdrawn");
  EXPECT_EQ(line(ev::bad_client{"10.0.0.1:5", ""}), "bad client 10.0.0.1:5: it does not read its replies; closing");
  EXPECT_EQ(line(ev::bad_client{"10.0.0.1:5", "no HELLO"}), "bad client 10.0.0.1:5: no HELLO");
  EXPECT_EQ(line(ev::client_silent{"10.0.0.1:5", "3s"}), "client 10.0.0.1:5 sent nothing for 3s; closing");
  EXPECT_EQ(line(ev::connection_evicted{100, 100, "a:1", "b:2"}),
            "warning: 100 connections open (limit 100): closing the oldest that has not authenticated, from a:1, "
            "to make room for one from b:2");
  EXPECT_EQ(line(ev::auth_failed{}), "");
  EXPECT_EQ(line(ev::timeout_leave{}), "");
  EXPECT_EQ(line(ev::store_host_lost{"B:1", 42}), "");
  EXPECT_EQ(line(ev::store_diverged{"B:1", 7}), "");
}

TEST(EventLog, QuietKeepsWarningsOnly) {
  std::vector<std::string> lines;
  observe::log_writer quiet(true, [&](std::string_view t) { lines.emplace_back(t); });
  quiet(ev::released{e1, 3, proto::verdict::continue_, ""});
  quiet(ev::journal_not_compacted{"j", "why"});
  quiet(ev::connection_evicted{1, 1, "a", "b"});
  quiet(ev::auth_failed{});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0].starts_with("warning: cannot compact"));
  EXPECT_TRUE(lines[1].starts_with("warning: 1 connections open"));
  lines.clear();
  observe::log_writer all(false, [&](std::string_view t) { lines.emplace_back(t); });
  all(ev::released{e1, 3, proto::verdict::continue_, ""});
  all(ev::timeout_leave{});  // counted, not logged
  EXPECT_EQ(lines, std::vector<std::string>{"release e#1: 3 participants, verdict continue"});
}

TEST(EventMetrics, CountedKinds) {
  metrics::counters c;
  std::vector<std::string> lines;
  observe::observer o(c, false, [&](std::string_view t) { lines.emplace_back(t); });
  std::vector<ev::event> evs{ev::auth_failed{}, ev::timeout_leave{}, ev::store_host_lost{"B", 1},
                             ev::store_diverged{"B", 2}, ev::arrived{e1, r0, false, 1, 2}};
  o.events(evs);
  EXPECT_TRUE(evs.empty());
  EXPECT_EQ(c.auth_failures, 1u);
  EXPECT_EQ(c.timed_out, 1u);
  EXPECT_EQ(c.store_hosts_lost, 1u);
  EXPECT_EQ(c.store_divergences, 1u);
  EXPECT_EQ(lines, std::vector<std::string>{"arrive e#1: rank 0 (h1 pid 1001), 1/2"});
}

TEST(EventMetrics, TallyAndEndedRounds) {
  metrics::counters c;
  output out;
  out.counted = {3, 1, 2};
  out.ended.push_back(round_end{false, proto::verdict::stop, 1500, true, "n1"});
  out.ended.push_back(round_end{false, proto::verdict::continue_, -1, false, ""});
  out.ended.push_back(round_end{true, proto::verdict::none, -1, false, {}});
  observe::observer o(c, false, [](std::string_view) {});
  EXPECT_EQ(o.measures(out), 2u);
  EXPECT_EQ(c.arrivals, 3u);
  EXPECT_EQ(c.withdrawals, 1u);
  EXPECT_EQ(c.disconnects, 2u);
  EXPECT_EQ(c.released_stop, 1u);
  EXPECT_EQ(c.released_undecided, 1u);
  EXPECT_EQ(c.aborted, 1u);
  EXPECT_EQ(c.spread.count, 1u);
  EXPECT_EQ(c.last_by_node.at("n1"), 1u);
  EXPECT_TRUE(out.ended.empty());
  EXPECT_EQ(out.counted.arrivals, 0u);
}

TEST(EventHistory, FeedDatesTheFirstArrival) {
  observe::history_feed h;
  std::vector<round_record> rounds(1);
  rounds[0].first = 400;
  h.take(rounds, 1'000'000, 1000);  // the wall clock says 1,000,000 when the records' clock says 1000
  EXPECT_TRUE(rounds.empty());
  std::vector<std::int64_t> got;
  h.drain([&](const round_record&, std::int64_t wall_first) { got.push_back(wall_first); });
  EXPECT_EQ(got, std::vector<std::int64_t>{999'400});
  EXPECT_TRUE(h.empty());
}

// ---- the core emits them ----

proto::arrive arrival(std::uint32_t rank, std::uint32_t n, bool chief = false) {
  proto::arrive a;
  a.name = "e";
  a.scope = "default";
  a.id = "id" + std::to_string(rank);
  a.n = n;
  a.rank = rank;
  a.chief = chief;
  return a;
}

TEST(CoreEvents, ArrivalsThenRelease) {
  barrier_set bs;
  output out;
  bs.arrive(1, arrival(0, 2), {"h1", 1001}, 0, out);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0], ev::event(ev::arrived{e1, r0, false, 1, 2}));
  out = {};
  bs.arrive(2, arrival(1, 2), {"h2", 1002}, 10, out);
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.events[0], ev::event(ev::arrived{e1, {1, "h2", 1002}, false, 2, 2}));
  EXPECT_EQ(out.events[1], ev::event(ev::released{e1, 2, proto::verdict::continue_, ""}));
}

TEST(CoreEvents, GatheredVerdictAbortAndLeave) {
  barrier_set bs;
  output out;
  bs.arrive(1, arrival(0, 2, true), {"h1", 1001}, 0, out);
  bs.arrive(2, arrival(1, 2), {"h2", 1002}, 0, out);
  ASSERT_EQ(out.events.size(), 3u);
  EXPECT_EQ(out.events[1], ev::event(ev::arrived{e1, {1, "h2", 1002}, false, 2, 2}));
  EXPECT_EQ(out.events[2], ev::event(ev::gathered{e1, 2, r0}));
  out = {};
  bs.abort(9, proto::abort_req{"default", "e", "why"}, 5, out);
  ASSERT_FALSE(out.events.empty());
  EXPECT_EQ(out.events.back(), ev::event(ev::aborted{e1, 1, "why"}));

  barrier_set other;
  out = {};
  other.arrive(1, arrival(0, 3), {"h1", 1001}, 0, out);
  out = {};
  other.leave(1, true, 1, out);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0], ev::event(ev::withdrew{e1, r0, proto::departure::left, 0, 3}));
}

}  // namespace
}  // namespace tfb
