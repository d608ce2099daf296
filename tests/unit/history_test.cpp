// The arrival history (history.h) and the report made of it (report.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fmt/format.h>
#include <random>

#include "barrier.h"
#include "history.h"
#include "history_file.h"
#include "report.h"

namespace tfb {
namespace {

round_record make_round(std::uint64_t gen, std::uint32_t n, std::uint32_t slow_rank, std::int64_t slow_by) {
  round_record r;
  r.scope = "job1";
  r.name = "epoch" + std::to_string(gen);
  r.gen = 1;
  r.n = n;
  r.v = proto::verdict::continue_;
  r.first = 1000;
  for (std::uint32_t i = 0; i < n; ++i)
    r.arrivals.push_back({i, i < n / 2 ? "nodeA" : "nodeB", 1000 + (i == slow_rank ? slow_by : i)});
  r.ended = 1000 + slow_by;
  return r;
}

TEST(History, ArrivalRecordIs16Bytes) { EXPECT_EQ(sizeof(hist::arrival_rec), 16u); }

TEST(History, KeepsRoundsAndDropsOldestPastCapacity) {
  hist::history h(10);
  for (std::uint64_t g = 1; g <= 4; ++g) h.add(make_round(g, 4, 3, 500), 1'700'000'000'000);
  EXPECT_EQ(h.arrivals(), 8u);  // 4 rounds of 4, capacity 10: the oldest two went
  EXPECT_EQ(h.rounds(), 2u);
  auto seqs = h.select({});
  ASSERT_EQ(seqs.size(), 2u);
  EXPECT_EQ(seqs.front(), 3u);
  auto r = h.get(4);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "epoch4");
  EXPECT_EQ(r->arrivals[3].offset_ms, 500u);
  EXPECT_EQ(r->arrivals[3].node, "nodeB");
  EXPECT_EQ(r->duration_ms, 500u);
}

// A host with no history file (--history-file -, or a default one it could
// not open) once queued every round's text for a file that never came:
// memory grew without bound.
TEST(History, AStoreWithoutAFileQueuesNothing) {
  hist::store s(1000);
  for (std::uint64_t g = 1; g <= 50; ++g) s.add(make_round(g, 4, 3, 500), 0);
  EXPECT_FALSE(s.pending());
  std::string error;
  EXPECT_TRUE(s.flush(error));
  EXPECT_EQ(s.data().rounds(), 50u);  // the memory's copy stays, for HISTORY
}

TEST(History, SelectsByScopeGlobAndLast) {
  hist::history h;
  for (std::uint64_t g = 1; g <= 5; ++g) h.add(make_round(g, 2, 1, 10), 0);
  EXPECT_EQ(h.select({"job1", "epoch*", 0}).size(), 5u);
  EXPECT_EQ(h.select({"job1", "epoch[", 0}).size(), 0u);
  EXPECT_EQ(h.select({"other", "", 0}).size(), 0u);
  EXPECT_EQ(h.select({"*", "epoch?", 2}), (std::vector<std::uint64_t>{4, 5}));
  EXPECT_TRUE(hist::glob_match("ep*h*3", "epoch3"));
  EXPECT_FALSE(hist::glob_match("ep*4", "epoch3"));
}

TEST(History, LinesRoundTripAndPage) {
  hist::history h;
  for (std::uint64_t g = 1; g <= 3; ++g) h.add(make_round(g, 100, 7, 2500), 1234);  // 2 ARR lines per round
  std::optional<std::size_t> next;
  auto seqs = h.select({});
  auto lines = h.page(seqs, 0, 1, next);  // a tiny page: one round
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, 1u);
  hist::round_parser p;
  std::string error;
  for (const auto& l : lines) {
    EXPECT_LT(l.size(), proto::max_line);
    ASSERT_TRUE(p.feed(l, error)) << error;
  }
  auto rounds = p.take();
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].arrivals.size(), 100u);
  EXPECT_EQ(rounds[0].at_ms, 1234);
  EXPECT_EQ(hist::format_round(rounds[0]), hist::format_round(*h.get(1)));
}

TEST(History, FileErrorsNameTheLine) {
  std::vector<hist::round_view> out;
  std::vector<std::string> warnings;
  std::string error;
  EXPECT_FALSE(hist::parse_file("hello\n", out, warnings, error));
  EXPECT_EQ(error, "1: not a tfbarrier history file (no TFBHISTORY header)");
  EXPECT_FALSE(hist::parse_file("TFBHISTORY v=9\n", out, warnings, error));
  EXPECT_NE(error.find("v=9"), std::string::npos);
  std::string good = hist::file_header() +
                     "ROUND seq=1 scope=s name=e gen=1 n=2 end=release verdict=continue at=5 ms=9 withdrawn=0 "
                     "timeouts=0 count=2\nARR a=0@n1+0,1@n2+9\n";
  ASSERT_TRUE(hist::parse_file(good, out, warnings, error)) << error;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(warnings.empty());
  auto bad_one = [&](const std::string& text) {
    out.clear();
    warnings.clear();
    EXPECT_TRUE(hist::parse_file(text, out, warnings, error)) << error;
    EXPECT_EQ(warnings.size(), 1u);
    return warnings.empty() ? std::string() : warnings[0];
  };
  EXPECT_EQ(bad_one(good + "ARR a=1@x+3\n"), "4: an ARR line outside a round");
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(bad_one(hist::file_header() + "ROUND seq=1 scope=s name=e gen=1 n=2 end=maybe verdict=- at=5 "
                                          "ms=9 withdrawn=0 timeouts=0 count=0\n"),
            "2: ROUND has a bad end=maybe");
  EXPECT_EQ(bad_one(hist::file_header() + "ROUND seq=1 scope=s name=e gen=1 n=2 end=abort verdict=- at=5 "
                                          "ms=9 withdrawn=0 timeouts=0 count=1\nARR a=5@x+1\n"),
            "3: bad rank in arrival '5@x+1' (round 1 skipped)");
  EXPECT_TRUE(out.empty());
  // A torn last line (the host died mid-append) is not an error.
  out.clear();
  warnings.clear();
  EXPECT_TRUE(hist::parse_file(good + "ROUND seq=2 sco", out, warnings, error));
  EXPECT_EQ(out.size(), 1u);
  EXPECT_TRUE(warnings.empty());
}

// Issue #30: one bad line made the whole file unreadable (report exited 2,
// a restarted host set all of it aside). Now it costs its own round only.
TEST(History, ABadLineCostsOnlyItsRound) {
  hist::history h;
  for (std::uint64_t g = 1; g <= 3; ++g) h.add(make_round(g, 100, 7, 2500), 1234);  // 2 ARR lines each
  std::string text = hist::file_header();
  h.each([&](const hist::round_view& r) { text += hist::format_round(r); });
  auto lines_of = [](const std::string& t) {
    std::vector<std::string> v;
    for (std::size_t pos = 0, nl; (nl = t.find('\n', pos)) != std::string::npos; pos = nl + 1)
      v.push_back(t.substr(pos, nl - pos));
    return v;
  };
  auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), 10u);  // header, then ROUND ARR ARR three times
  std::vector<hist::round_view> out;
  std::vector<std::string> warnings;
  std::string error;
  for (std::size_t bad : {1u, 2u, 3u, 4u, 5u, 6u, 9u}) {  // a ROUND, an ARR, a stray line
    auto l = lines;
    l[bad] = bad == 9 ? "garbage \x01" : l[bad].substr(0, l[bad].size() / 2) + "=x";
    std::string t;
    for (const auto& x : l) t += x + "\n";
    out.clear();
    warnings.clear();
    ASSERT_TRUE(hist::parse_file(t, out, warnings, error)) << error;
    ASSERT_EQ(warnings.size(), 1u) << bad;
    EXPECT_EQ(warnings[0].substr(0, warnings[0].find(':')), std::to_string(bad + 1));
    ASSERT_EQ(out.size(), 2u) << bad;  // the other two rounds, whole
    for (const auto& r : out) {
      EXPECT_NE(r.seq, (bad - 1) / 3 + 1);
      EXPECT_EQ(r.arrivals.size(), 100u);
    }
  }
  // A round cut short by the next ROUND: it goes, the next one stands.
  auto l = lines;
  l.erase(l.begin() + 3);
  std::string t;
  for (const auto& x : l) t += x + "\n";
  out.clear();
  warnings.clear();
  ASSERT_TRUE(hist::parse_file(t, out, warnings, error));
  ASSERT_EQ(warnings.size(), 1u);
  auto listed = std::count(lines[2].begin(), lines[2].end(), ',') + 1;  // on round 1's first ARR line
  EXPECT_EQ(warnings[0], fmt::format("4: round 1 lists {} of its count=100 arrivals", listed));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].seq, 2u);
  // Stray ARR lines: the first is bad, the ones after it belong to the round it dropped.
  t = text;
  for (int i = 0; i < 25; ++i) t += "ARR a=1@x+3\n";
  out.clear();
  warnings.clear();
  ASSERT_TRUE(hist::parse_file(t, out, warnings, error));
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(warnings.size(), 1u);
  // Many bad lines: ten warnings, then a count.
  t = text;
  for (int i = 0; i < 25; ++i) t += "JUNK\n";
  warnings.clear();
  ASSERT_TRUE(hist::parse_file(t, out, warnings, error));
  ASSERT_EQ(warnings.size(), hist::max_warnings + 1);
  EXPECT_EQ(warnings.back(), "and 15 more bad lines");
}

// Issue #30: an ARR line held 64 arrivals whatever their length, and the
// reader takes 1,024 bytes of value: 64 waits from gpu-node-0123 (or one
// HELLO host= of 1,024 bytes) made a history nobody could read. The writer
// never writes what its reader refuses: node names of 1-255 bytes, the
// longest a HELLO carries, and up to 100,000 ranks in a round.
TEST(History, WhatTheWriterWritesItsReaderReads) {
  std::mt19937 rng(30);
  auto random_name = [&](std::size_t len) {
    std::string s;
    for (std::size_t i = 0; i < len; ++i) {
      char c;
      do c = static_cast<char>(0x21 + rng() % (0x7f - 0x21));
      while (c == '=');  // the bytes a HELLO value may hold (protocol.cpp's valid_value)
      s += c;
    }
    return s;
  };
  std::vector<std::string> names = {"gpu-node-0123", "gpu-node-a07x", "nid000001", "a,b", ",", "@", "+", "-", "1@2+3",
                                    std::string(proto::max_value, 'x'), std::string(hist::max_node, 'y'),
                                    std::string(hist::max_node + 1, 'y')};
  for (std::size_t len = 1; len <= 255; ++len) names.push_back(random_name(len));
  for (int i = 0; i < 20; ++i) names.push_back(random_name(hist::max_node + 1 + rng() % (proto::max_value - hist::max_node)));
  hist::history h(2'000'000);
  std::vector<std::uint32_t> sizes = {1, 63, 64, 65, 70, 128, 1000, 100'000};
  std::uint64_t g = 0;
  for (std::uint32_t n : sizes) {
    for (int pick : {0, 1, 2}) {  // one short name, all long names, a mix
      round_record r;
      r.scope = "job";
      r.name = "e";
      r.gen = ++g;
      r.n = n;
      r.first = 0;
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::string& node = pick == 0 ? names[0] : pick == 1 ? names[9 + i % 3] : names[rng() % names.size()];
        r.arrivals.push_back({i, node, static_cast<std::int64_t>(rng() % 4'000'000'000u)});
      }
      r.ended = 4'000'000'000;
      h.add(r, 1'700'000'000'000);
    }
  }
  std::string text = hist::file_header();
  std::size_t longest = 0;
  h.each([&](const hist::round_view& r) {
    std::string t = hist::format_round(r);
    for (std::size_t pos = 0, nl; (nl = t.find('\n', pos)) != std::string::npos; pos = nl + 1) {
      std::string why;
      EXPECT_TRUE(proto::parse_line(t.substr(pos, nl - pos), why)) << why;
      longest = std::max(longest, nl - pos);
    }
    text += t;
  });
  EXPECT_LE(longest, 6 + proto::max_value);  // "ARR a=" and one value
  std::vector<hist::round_view> out;
  std::vector<std::string> warnings;
  std::string error;
  ASSERT_TRUE(hist::parse_file(text, out, warnings, error)) << error;
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  ASSERT_EQ(out.size(), h.rounds());
  for (const auto& r : out) {
    auto want = h.get(r.seq);
    ASSERT_TRUE(want);
    ASSERT_EQ(r.arrivals.size(), want->arrivals.size());
    for (std::size_t i = 0; i < r.arrivals.size(); ++i) {
      EXPECT_EQ(r.arrivals[i].node, want->arrivals[i].node);
      EXPECT_EQ(r.arrivals[i].offset_ms, want->arrivals[i].offset_ms);
      EXPECT_EQ(r.arrivals[i].rank, want->arrivals[i].rank);
    }
    EXPECT_EQ(hist::format_round(r), hist::format_round(*want));
  }
}

// Issue #30: a host's HISTORY page with one line the reader refuses (an ARR
// value past 1,024 bytes, as hosts wrote before) failed the whole report
// with exit 70. The page's lines now reach round_parser, which skips that round.
TEST(History, ABadLineInAHistoryReplyCostsOnlyItsRound) {
  std::string round1 = "ROUND seq=1 scope=s name=e gen=1 n=2 end=release verdict=- at=5 ms=9 withdrawn=0 timeouts=0 "
                       "count=2";
  std::string round2 = "ROUND seq=2 scope=s name=e gen=2 n=1 end=release verdict=- at=5 ms=0 withdrawn=0 timeouts=0 "
                       "count=1";
  std::vector<std::string> sent = {round1, "ARR a=0@" + std::string(1100, 'x') + "+0,1@y+3", round2, "ARR a=0@y+0",
                                   "HEND"};
  proto::reply_reader rd;
  std::optional<proto::reply> reply;
  for (const auto& l : sent) {
    std::string error;
    auto r = rd.feed(l, error);
    ASSERT_EQ(error, "") << l.substr(0, 40);
    if (r) reply = std::move(r);
  }
  ASSERT_TRUE(reply);
  auto* page = std::get_if<proto::history_page>(&*reply);
  ASSERT_TRUE(page);
  ASSERT_EQ(page->lines.size(), 4u);
  hist::round_parser p;
  std::vector<std::string> warnings;
  for (const auto& l : page->lines)
    if (std::string why; !p.feed(l, why)) warnings.push_back(why);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("round 1 skipped"), std::string::npos) << warnings[0];
  auto rounds = p.take();
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].seq, 2u);
}

TEST(History, NodeLabelsKeepShortNamesAndCutLongOnesApart) {
  EXPECT_EQ(hist::node_label("gpu-node-a07x"), "gpu-node-a07x");
  EXPECT_EQ(hist::node_label(""), "?");
  EXPECT_EQ(hist::node_label("a,b c=d\x1b\xe2"), "a_b_c_d__");
  std::string a(proto::max_value, 'x'), b = a;
  b.back() = 'z';
  auto la = hist::node_label(a), lb = hist::node_label(b);
  EXPECT_EQ(la.size(), hist::max_node);
  EXPECT_EQ(la.substr(0, 246), a.substr(0, 246));
  EXPECT_EQ(la[246], '~');
  EXPECT_NE(la, lb);  // two long names stay two nodes
  EXPECT_EQ(hist::node_label(la), la);  // idempotent: a file read back keeps its names
  std::string exact(hist::max_node, 'q');
  EXPECT_EQ(hist::node_label(exact), exact);
}

TEST(History, BarriersRecordReleaseAbortAndTimeouts) {
  barrier_set b;
  output out;
  auto arrive = [&](conn_id c, std::uint32_t rank, millis now, const char* node) {
    b.arrive(c, proto::arrive{"e1", "s", "id" + std::to_string(c), 3, rank, false}, peer_info{node, 1}, now, out);
  };
  arrive(1, 0, 100, "a");
  arrive(4, 2, 160, "c");
  b.leave(4, departure::left, 170, out, true);  // rank 2 gave up at its --timeout
  arrive(2, 1, 150, "a");
  EXPECT_TRUE(out.rounds.empty());
  arrive(3, 2, 400, "b");
  ASSERT_EQ(out.rounds.size(), 1u);
  const round_record& r = out.rounds[0];
  EXPECT_EQ(r.end, round_record::ending::release);
  EXPECT_EQ(r.withdrawn, 1u);
  EXPECT_EQ(r.timeouts, 1u);
  ASSERT_EQ(r.arrivals.size(), 3u);
  EXPECT_EQ(r.arrivals[2].rank, 2u);
  EXPECT_EQ(r.arrivals[2].at - r.first, 300);
  EXPECT_EQ(r.arrivals[2].node, "b");
  out = {};
  arrive(5, 0, 500, "a");
  b.abort(9, proto::abort_req{"s", "e1", "bad"}, 600, out);
  ASSERT_EQ(out.rounds.size(), 1u);
  EXPECT_EQ(out.rounds[0].end, round_record::ending::abort);
  EXPECT_EQ(out.rounds[0].gen, 2u);
}

// status --watch (issue #32 item 6): the barriers keep a barrier between its
// rounds in STATUS last=1, and the history says how its last round went and
// where its missing ranks were last seen.
TEST(History, FillsTheLastRoundAndWhereMissingRanksWere) {
  barrier_set b;
  output out;
  hist::history h;
  auto arrive = [&](conn_id c, std::uint32_t rank, millis now, const char* node) {
    b.arrive(c, proto::arrive{"e1", "s", "id" + std::to_string(c), 3, rank, false}, peer_info{node, 1}, now, out);
    for (const auto& r : out.rounds) h.add(r, 1'700'000'000'000 + r.first);  // unix ms = 1.7e12 + monotonic
    out.rounds.clear();
  };
  proto::status_req watch{"*", "", false, true};
  arrive(1, 0, 100, "a");
  arrive(2, 2, 150, "c");
  arrive(3, 1, 400, "b");  // rank 1 from node b came last: released at 400, after 300 ms
  EXPECT_TRUE(b.status(proto::status_req{"*", "", false}, 500).barriers.empty());  // as before without last=1
  auto st = b.status(watch, 500);
  ASSERT_EQ(st.barriers.size(), 1u);  // between rounds: round 2, nobody yet
  EXPECT_EQ(st.barriers[0].gen, 2u);
  EXPECT_EQ(st.barriers[0].arrived, 0u);
  h.fill_last(st.barriers[0], 1'700'000'000'000 + 1400);
  ASSERT_TRUE(st.barriers[0].last);
  const auto& last = *st.barriers[0].last;
  EXPECT_EQ(last.gen, 1u);
  EXPECT_EQ(last.v, proto::verdict::continue_);
  EXPECT_EQ(last.ago_ms, 1000);
  EXPECT_EQ(last.took_ms, 300);
  EXPECT_EQ(last.rank, 1u);
  EXPECT_EQ(last.node, "b");

  // Round 2: rank 0 arrives; rank 2 came and went (its node is the barrier's
  // to tell); rank 1 has not come (its node is the history's).
  arrive(4, 0, 600, "a");
  arrive(5, 2, 610, "d");
  b.leave(5, departure::disconnected, 620, out);
  st = b.status(watch, 700);
  ASSERT_EQ(st.barriers.size(), 1u);
  auto& open = st.barriers[0];
  EXPECT_EQ(open.missing, "1-2");
  ASSERT_EQ(open.missing_nodes.size(), 2u);
  EXPECT_EQ(open.missing_nodes[0].node, "");   // not the barrier's to know
  EXPECT_EQ(open.missing_nodes[1].node, "d");  // it left this round
  h.fill_last(open, 1'700'000'000'000 + 700);
  EXPECT_EQ(open.missing_nodes[0].node, "b");  // where it was in round 1
  EXPECT_EQ(open.missing_nodes[1].node, "d");
  ASSERT_TRUE(open.last);
  EXPECT_EQ(open.last->ago_ms, 300);

  // Only the round just before, and only a release: after an abort, none.
  proto::barrier_info other = open;
  other.last.reset();
  other.gen = 4;
  h.fill_last(other, 0);
  EXPECT_FALSE(other.last);
  other.name = "unknown";
  other.gen = 2;
  h.fill_last(other, 0);
  EXPECT_FALSE(other.last);
  b.abort(9, proto::abort_req{"s", "e1", "bad"}, 800, out);
  for (const auto& r : out.rounds) h.add(r, 1'700'000'000'000 + r.first);
  st = b.status(watch, 900);
  ASSERT_EQ(st.barriers.size(), 1u);
  EXPECT_EQ(st.barriers[0].state, proto::round_state::aborted);
  h.fill_last(st.barriers[0], 0);
  EXPECT_FALSE(st.barriers[0].last);
}

std::vector<hist::round_view> rounds_with_slow_rank(std::uint32_t slow) {
  hist::history h;
  for (std::uint64_t g = 1; g <= 20; ++g) h.add(make_round(g, 16, slow, 3200), 0);
  std::vector<hist::round_view> v;
  h.each([&](const hist::round_view& r) { v.push_back(r); });
  return v;
}

TEST(Report, PutsTheSlowRankAndItsNodeFirst) {
  auto rounds = rounds_with_slow_rank(3);
  auto a = report::analyze(rounds);
  ASSERT_FALSE(a.ranks.empty());
  EXPECT_EQ(a.ranks[0].who, "rank 3");
  EXPECT_EQ(a.ranks[0].last, 20u);
  EXPECT_EQ(a.ranks[0].slowest, 20u);
  EXPECT_DOUBLE_EQ(a.ranks[0].median_ms, 3192);  // after each round's median arrival (+8 ms)
  EXPECT_EQ(a.nodes[0].who, "node nodeA");
  EXPECT_EQ(a.nodes[0].ranks, "0-7");
  std::string t = report::text(a);
  EXPECT_NE(t.find("node nodeA (ranks 0-7) was the last node in 20 of 20 rounds, median +3.2 s"), std::string::npos) << t;
  EXPECT_NE(report::csv(rounds).find("seq,scope,name,round,end,verdict"), std::string::npos);
  EXPECT_NE(report::json(a).find("\"slowest_5pct\""), std::string::npos);
}

// Issue #32 item 5: types a machine can use. A rank is a number, a node's
// ranks an array, the node a field of its own.
TEST(Report, JsonGivesRanksAsNumbersAndArraysAndTheNodeAsAField) {
  auto rounds = rounds_with_slow_rank(3);
  auto j = nlohmann::json::parse(report::json(report::analyze(rounds)));
  const auto& r0 = j["stragglers"]["ranks"][0];
  EXPECT_EQ(r0["who"], "rank 3");
  EXPECT_EQ(r0["rank"], 3);
  EXPECT_EQ(r0["node"], "nodeA");
  EXPECT_FALSE(r0.contains("ranks"));
  const auto& n0 = j["stragglers"]["nodes"][0];
  EXPECT_EQ(n0["who"], "node nodeA");
  EXPECT_EQ(n0["node"], "nodeA");
  EXPECT_EQ(n0["ranks"], nlohmann::json::array({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(n0.contains("rank"));
  EXPECT_EQ(j["rounds"][0]["arrivals"][0]["rank"], 0);
}

// Issue #32 item 3: 22 processes started at once. Two were quick (+0 ms),
// nineteen came at about +270 ms, as the machine's start-up spread them, and
// one straggled (+2 s). Measured after the first arrival, the nineteen on
// time looked as late as a straggler; after the round's median they are on
// time, and "after the first" is kept as a second figure.
TEST(Report, LatenessRunsFromTheRoundsMedianArrivalNotItsFirst) {
  round_record r;
  r.scope = "s";
  r.name = "e";
  r.gen = 1;
  r.n = 22;
  r.first = 1000;
  for (std::uint32_t i = 0; i < 22; ++i)
    r.arrivals.push_back({i, i < 11 ? "n1" : "n2", 1000 + (i < 2 ? 0 : i == 21 ? 2000 : 265 + i % 5)});
  r.ended = 3000;
  hist::history h;
  h.add(r, 0);
  std::vector<hist::round_view> rounds;
  h.each([&](const hist::round_view& v) { rounds.push_back(v); });
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(report::median_offset(rounds[0]), 267u);
  auto a = report::analyze(rounds);
  ASSERT_EQ(a.rounds.size(), 1u);
  EXPECT_EQ(a.rounds[0].median_ms, 267u);
  ASSERT_FALSE(a.rounds[0].last.empty());
  EXPECT_EQ(a.rounds[0].last[0].rank, 21u);
  EXPECT_EQ(a.rounds[0].last[0].late_ms, 2000u - 267u);
  EXPECT_EQ(a.rounds[0].last[0].after_first_ms, 2000u);
  for (const auto& s : a.ranks) {
    if (s.who == "rank 21") EXPECT_DOUBLE_EQ(s.worst_ms, 1733);
    else EXPECT_LE(s.worst_ms, 2) << s.who;  // on time: at most 2 ms after the median
  }
  std::string csv = report::csv(rounds);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "seq,scope,name,round,end,verdict,first_arrival_unix_ms,rank,node,late_ms,"
                                           "after_first_ms,run");
  EXPECT_NE(csv.find(",21,n2,1733,2000,\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",5,n1,0,265,\n"), std::string::npos) << csv;
  std::string j = report::json(a);
  EXPECT_NE(j.find("\"median_arrival_ms\": 267"), std::string::npos);
  EXPECT_NE(j.find("\"after_first_ms\": 2000"), std::string::npos);
  // The heatmap and the SVG paint the median's lateness: the on-time ranks pale.
  EXPECT_NE(report::heatmap(rounds, 80, false).find("after the round's median arrival"), std::string::npos);
  EXPECT_NE(report::svg(rounds).find("Arrival after each round's median arrival"), std::string::npos);
}

// Issue #30: a '"' in a node name broke the rest of the CSV, and a name
// starting with = + - @ became a spreadsheet formula.
TEST(Report, CsvQuotesAndDisarmsFormulas) {
  EXPECT_EQ(report::csv_text("node1"), "node1");
  EXPECT_EQ(report::csv_text("a,b"), "\"a,b\"");
  EXPECT_EQ(report::csv_text("a\"b"), "\"a\"\"b\"");
  EXPECT_EQ(report::csv_text("a\r\nb"), "\"a\r\nb\"");
  for (const char* f : {"=1+1", "+1", "-1", "@SUM(A1)", "\tx"})
    EXPECT_EQ(report::csv_text(f), std::string("'") + f) << f;
  EXPECT_EQ(report::csv_text("\rx"), "\"'\rx\"");
  EXPECT_EQ(report::csv_text("=HYPERLINK(\"x\",1)"), "\"'=HYPERLINK(\"\"x\"\",1)\"");
  EXPECT_EQ(report::csv_text("a=1"), "a=1");  // only a first byte starts a formula
  hist::round_view r;
  r.seq = 1;
  r.scope = "-job";
  r.name = "e";
  r.at_ms = -5;  // a number: as it is
  r.arrivals.push_back({3, "=x\",y", 12});
  EXPECT_EQ(report::csv({r}), "seq,scope,name,round,end,verdict,first_arrival_unix_ms,rank,node,late_ms,after_first_ms,"
                              "run\n"
                              "1,'-job,e,0,release,,-5,3,\"'=x\"\",y\",0,12,\n");  // one arrival: its own median
}

TEST(Report, BinsRanksByNodeThenEqualGroups) {
  auto rounds = rounds_with_slow_rank(3);
  EXPECT_EQ(report::bin_ranks(rounds, 16).labels.size(), 16u);  // one per rank
  auto by_node = report::bin_ranks(rounds, 10);
  EXPECT_EQ(by_node.labels, (std::vector<std::string>{"nodeA", "nodeB"}));
  EXPECT_NE(by_node.how.find("per node"), std::string::npos);
  auto groups = report::bin_ranks(rounds, 1);
  EXPECT_EQ(groups.labels.size(), 1u);
}

TEST(Report, HeatmapFitsTheWidthInUtf8AndAscii) {
  auto rounds = rounds_with_slow_rank(3);
  for (std::size_t width : {40u, 80u, 200u}) {
    std::string ascii = report::heatmap(rounds, width, false);
    std::size_t pos = 0;
    while (pos < ascii.size()) {
      std::size_t nl = ascii.find('\n', pos);
      std::string line = ascii.substr(pos, nl - pos);
      if (line.find('|') != std::string::npos) {
        EXPECT_LE(line.size(), width) << line;
      }
      pos = nl + 1;
    }
    for (unsigned char c : ascii) EXPECT_LT(c, 0x80);
  }
  std::string u = report::heatmap(rounds, 80, true);
  EXPECT_NE(u.find("█"), std::string::npos);
  EXPECT_NE(u.find("legend"), std::string::npos);
  std::string svg = report::svg(rounds);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

// A cell far past the scale's top (the 99th percentile) is drawn in the top
// shade. Its level was cast to int before it was clipped: 4e9 ms over a 1 ms
// scale overflowed (UBSan, found by the client fuzz target), and the cell
// came out blank on x86.
TEST(Report, HeatmapDrawsACellFarPastTheScaleInTheTopShade) {
  hist::history h;
  for (std::uint64_t g = 1; g <= 20; ++g) {
    round_record r = make_round(g, 16, 3, 0);
    for (auto& a : r.arrivals) a.at = 1000 + (a.rank == 5u ? 1 : 0);  // rank 5 always 1 ms late
    if (g == 7) r.arrivals[3].at = 1000 + 4'000'000'000LL;            // and rank 3 once, by 46 days
    r.ended = r.arrivals[3].at;
    h.add(r, 0);
  }
  std::vector<hist::round_view> rounds;
  h.each([&](const hist::round_view& r) { rounds.push_back(r); });
  std::string m = report::heatmap(rounds, 80, false);
  std::size_t top = 0, pos = 0;
  while (pos < m.size()) {
    std::size_t nl = m.find('\n', pos);
    std::string line = m.substr(pos, nl - pos);
    if (auto bar = line.find(" |"); bar != std::string::npos && line.find("legend") == std::string::npos)
      top += static_cast<std::size_t>(std::count(line.begin() + static_cast<std::ptrdiff_t>(bar), line.end(), '#'));
    pos = nl + 1;
  }
  EXPECT_EQ(top, 21u) << m;
}

// With 8 ranks the picture was 520 px wide and cut its own title and the
// legend's last entries (seen in rsvg-convert's PNG).
TEST(Report, SvgOfFewRanksIsWideEnoughForTitleAndLegend) {
  std::vector<hist::round_view> rounds;
  hist::history h;
  for (std::uint64_t g = 1; g <= 3; ++g) h.add(make_round(g, 8, 5, 400), 0);
  h.each([&](const hist::round_view& r) { rounds.push_back(r); });
  std::string svg = report::svg(rounds);
  auto at = svg.find("width=\"");
  ASSERT_NE(at, std::string::npos);
  double w = std::stod(svg.substr(at + 7));
  EXPECT_GE(w, 640.0);  // the title (about 460 px from x=16) and the legend (left 150 + 400 px) fit
}

// Issue #32 item 4: pictures of any history. 64 ranks over 15,625 rounds
// (a million records, about what the default history holds) gave a 119 MB
// SVG that rsvg-convert refused; 2,000 rounds gave 15.8 MB.
TEST(Report, SvgOfAMillionRecordsStaysUnderItsBudget) {
  for (auto [ranks, rounds_n] : {std::pair<std::uint32_t, std::uint64_t>{64, 15625}, {512, 2000}}) {
    hist::history h(1'000'000);
    for (std::uint64_t g = 1; g <= rounds_n; ++g) h.add(make_round(g, ranks, static_cast<std::uint32_t>(g % ranks), static_cast<std::int64_t>(400 + g % 7)), 0);
    std::vector<hist::round_view> rounds;
    h.each([&](const hist::round_view& r) { rounds.push_back(r); });
    std::string svg = report::svg(rounds);
    EXPECT_LT(svg.size(), 2'000'000u) << ranks << " ranks x " << rounds_n << " rounds";
    EXPECT_NE(svg.find("rounds to a row"), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
  }
}

// One 30 s hiccup of one rank washed the map pale: the scale stops at the
// 99th percentile, and what is past it has a colour of its own.
TEST(Report, OneHiccupDoesNotWashOutTheScale) {
  std::vector<std::vector<double>> cells(100, std::vector<double>(10, 0));
  for (auto& row : cells) row[3] = 400;  // the real straggler
  cells[50][7] = 30000;                   // one hiccup
  EXPECT_DOUBLE_EQ(report::scale_top(cells), 400);
  EXPECT_DOUBLE_EQ(report::scale_top({{0, 0}, {0, -1}}), 0);
  hist::history h;
  for (std::uint64_t g = 1; g <= 200; ++g) {
    auto r = make_round(g, 16, 3, 400);
    if (g == 100) r.arrivals[9].at = r.first + 30000;
    h.add(r, 0);
  }
  std::vector<hist::round_view> rounds;
  h.each([&](const hist::round_view& r) { rounds.push_back(r); });
  std::string svg = report::svg(rounds);
  EXPECT_NE(svg.find("fill=\"#5b1a8f\"><title>epoch100#1 column 9: +30.0 s"), std::string::npos);
  EXPECT_NE(svg.find("over +392 ms (99th percentile)"), std::string::npos);
  // Rank 3, late in every round, keeps the darkest colour of the scale.
  EXPECT_NE(svg.find("fill=\"#8c0a14\"><title>epoch1#1 column 3: +392 ms"), std::string::npos);
  // The "times last" strip: rank 3 was last 199 times, rank 9 once.
  EXPECT_NE(svg.find("column 3: last in 199 of 200 rounds"), std::string::npos);
  EXPECT_NE(svg.find("column 9: last in 1 of 200 rounds"), std::string::npos);
}

TEST(Report, TheTerminalHeatmapFitsTheHeightAndNodeLabelsStayWhole) {
  hist::history h;
  for (std::uint64_t g = 1; g <= 200; ++g) {
    round_record r = make_round(g, 40, 7, 900);
    for (auto& x : r.arrivals) x.node = fmt::format("gpu-a{:02}", *x.rank / 8);  // 5 nodes, 8 ranks each
    h.add(r, 0);
  }
  std::vector<hist::round_view> rounds;
  h.each([&](const hist::round_view& r) { rounds.push_back(r); });
  std::string m = report::heatmap(rounds, 30, false, 12);
  std::size_t grid_lines = 0;
  for (std::size_t pos = 0; (pos = m.find("|\n", pos)) != std::string::npos; ++pos) ++grid_lines;
  EXPECT_LE(grid_lines, 12u) << m;
  EXPECT_NE(m.find("rounds to a row"), std::string::npos);
  EXPECT_NE(m.find("gpu-a00"), std::string::npos) << m;  // not "gpu"
  // The tables for a terminal: the latest rounds only, and the summary last.
  auto a = report::analyze(rounds);
  std::string t = report::text_for_terminal(a, 6);
  EXPECT_NE(t.find("PER ROUND (200 rounds; the last 6 shown"), std::string::npos) << t;
  EXPECT_EQ(t.find("epoch194 "), std::string::npos);
  EXPECT_NE(t.find("epoch195 "), std::string::npos);
  std::string last_line = t.substr(t.rfind('\n', t.size() - 2) + 1);
  EXPECT_EQ(last_line.rfind("rank 7 (node gpu-a00) was the last rank in 200 of 200 rounds", 0), 0u) << last_line;
}

// Issue #32 item 2: every host start is a run of its own. A history file that
// several runs share keeps each round's run, through the file and back.
TEST(History, EachRoundKeepsItsRunThroughTheFileAndAFileOfBeforeRunsReads) {
  EXPECT_EQ(hist::new_run(nullptr, 1796582701, 4242), "20261206-184501-4242");
  EXPECT_EQ(hist::new_run("", 0, 7), "19700101-000000-7");
  EXPECT_EQ(hist::new_run("12345", 0, 7), "slurm-12345");
  EXPECT_EQ(hist::new_run("12345 x", 951782400, 7), "20000229-000000-7");  // not a run id: the clock's
  EXPECT_TRUE(hist::valid_run("slurm-12345_3"));
  EXPECT_FALSE(hist::valid_run(""));
  EXPECT_FALSE(hist::valid_run("a b"));
  EXPECT_FALSE(hist::valid_run(std::string(65, 'a')));
  hist::history h;
  h.set_run("run-a");
  h.add(make_round(1, 4, 3, 100), 0);
  h.set_run("run-b");
  h.add(make_round(2, 4, 3, 100), 0);
  std::string text = hist::file_header();
  h.each([&](const hist::round_view& r) { text += hist::format_round(r); });
  EXPECT_NE(text.find(" count=4 run=run-a\n"), std::string::npos) << text;
  std::vector<hist::round_view> back;
  std::vector<std::string> warnings;
  std::string error;
  ASSERT_TRUE(hist::parse_file(text, back, warnings, error)) << error;
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].run, "run-a");
  EXPECT_EQ(back[1].run, "run-b");
  // A file written before runs: its rounds have none.
  std::string old = hist::file_header() +
                    "ROUND seq=1 scope=s name=e gen=1 n=2 end=release verdict=- at=5 ms=9 withdrawn=0 timeouts=0 "
                    "count=2\nARR a=0@n1+0,1@n2+9\n";
  back.clear();
  ASSERT_TRUE(hist::parse_file(old, back, warnings, error)) << error;
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].run, "");
  // A bad run costs its round.
  std::string bad = hist::file_header() +
                    "ROUND seq=1 scope=s name=e gen=1 n=2 end=release verdict=- at=5 ms=9 withdrawn=0 timeouts=0 "
                    "count=1 run=a/b\nARR a=0@n1+0\n";
  back.clear();
  warnings.clear();
  ASSERT_TRUE(hist::parse_file(bad, back, warnings, error)) << error;
  EXPECT_TRUE(back.empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("bad run=a/b"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace tfb
