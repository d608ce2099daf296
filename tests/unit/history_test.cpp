// The arrival history (history.h) and the report made of it (report.h).
#include <gtest/gtest.h>

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
  std::string error;
  EXPECT_FALSE(hist::parse_file("hello\n", out, error));
  EXPECT_EQ(error, "1: not a tfbarrier history file (no TFBHISTORY header)");
  EXPECT_FALSE(hist::parse_file("TFBHISTORY v=9\n", out, error));
  EXPECT_NE(error.find("v=9"), std::string::npos);
  std::string good = hist::file_header() +
                     "ROUND seq=1 scope=s name=e gen=1 n=2 end=release verdict=continue at=5 ms=9 withdrawn=0 "
                     "timeouts=0 count=2\nARR a=0@n1+0,1@n2+9\n";
  ASSERT_TRUE(hist::parse_file(good, out, error)) << error;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(hist::parse_file(good + "ARR a=1@x+3\n", out, error));
  EXPECT_EQ(error, "4: an ARR line outside a round");
  EXPECT_FALSE(hist::parse_file(hist::file_header() + "ROUND seq=1 scope=s name=e gen=1 n=2 end=maybe verdict=- at=5 "
                                                    "ms=9 withdrawn=0 timeouts=0 count=0\n",
                                out, error));
  EXPECT_EQ(error, "2: ROUND has a bad end=maybe");
  EXPECT_FALSE(hist::parse_file(hist::file_header() + "ROUND seq=1 scope=s name=e gen=1 n=2 end=abort verdict=- at=5 "
                                                    "ms=9 withdrawn=0 timeouts=0 count=1\nARR a=5@x+1\n",
                                out, error));
  EXPECT_EQ(error, "3: bad rank in arrival '5@x+1'");
  // A torn last line (the host died mid-append) is not an error.
  out.clear();
  EXPECT_TRUE(hist::parse_file(good + "ROUND seq=2 sco", out, error));
  EXPECT_EQ(out.size(), 1u);
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
  EXPECT_DOUBLE_EQ(a.ranks[0].median_ms, 3200);
  EXPECT_EQ(a.nodes[0].who, "node nodeA");
  EXPECT_EQ(a.nodes[0].ranks, "0-7");
  std::string t = report::text(a);
  EXPECT_NE(t.find("node nodeA (ranks 0-7) was the last node in 20 of 20 rounds, median +3.2 s"), std::string::npos) << t;
  EXPECT_NE(report::csv(rounds).find("seq,scope,name,round,end,verdict"), std::string::npos);
  EXPECT_NE(report::json(a).find("\"slowest_5pct\""), std::string::npos);
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

}  // namespace
}  // namespace tfb
