// The whole state as text (barrier_set::dump/load, replica::dump/load): a
// set loaded from another's dump, fed the same inputs after it, gives the
// same replies and reaches the same state. This is what makes a store's
// snapshot a safe place to start from (docs/store.md, "Catch-up").
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "door.h"
#include "replica.h"
#include "seeds.h"

namespace tfb {
namespace {

using proto::verdict;

/// An ARRIVE request of barrier scope/name, of n participants.
proto::arrive arrive_req(std::string scope, std::string name, std::uint32_t n, std::string id,
                         std::optional<std::uint32_t> rank = std::nullopt) {
  proto::arrive ar;
  ar.scope = std::move(scope);
  ar.name = std::move(name);
  ar.n = n;
  ar.id = std::move(id);
  ar.rank = rank;
  return ar;
}

/// Random but plausible inputs: a few barriers, ranks, chiefs, verdicts,
/// aborts, departures of every kind and forgetting; each arrival or decision
/// on a fresh connection, departures on connections used before.
class input_gen {
 public:
  explicit input_gen(unsigned seed) : rng_(seed) {}
  door_input next() {
    now_ += pick(0, 40);
    int what = pick(0, 99);
    std::string name = "b" + std::to_string(pick(0, 2));
    std::string scope = pick(0, 4) == 0 ? "other" : "job";
    if (what < 45 || used_.empty()) {
      proto::arrive a;
      a.name = name;
      a.scope = scope;
      if (pick(0, 3) != 0) a.n = static_cast<std::uint32_t>(pick(2, 3));
      if (pick(0, 4) != 0) a.rank = static_cast<std::uint32_t>(pick(0, 3));
      a.id = a.rank && pick(0, 2) != 0 ? "r" + std::to_string(*a.rank) : "p" + std::to_string(pick(0, 5));
      a.chief = pick(0, 5) == 0;
      return input::arrive{fresh(), a, peer_info{"node" + std::to_string(pick(0, 2)), 100u + static_cast<unsigned>(pick(0, 9))}, now_};
    }
    if (what < 62) {
      proto::decide d;
      d.name = pick(0, 3) == 0 ? "" : name;
      d.scope = scope;
      d.v = pick(0, 1) ? verdict::stop : verdict::continue_;
      d.message = pick(0, 2) == 0 ? "loss went up" : "";
      if (pick(0, 1)) d.rank = 0;
      if (pick(0, 1)) d.n = static_cast<std::uint32_t>(pick(2, 3));
      d.id = "c" + std::to_string(pick(0, 2));
      d.wait = pick(0, 1) == 0;
      return input::decide{fresh(), d, peer_info{"node0", 7}, now_};
    }
    if (what < 66) return input::abort{fresh(), proto::abort_req{scope, name, "node died"}, now_};
    if (what < 97) {
      conn_id c = used_[static_cast<std::size_t>(pick(0, static_cast<int>(used_.size()) - 1))];
      auto how = static_cast<departure>(pick(0, 3));
      return input::leave{c, how, now_, pick(0, 3) == 0};
    }
    return input::prune{now_, pick(0, 1) ? 50 : 100000};
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  conn_id fresh() {
    used_.push_back(++next_conn_);
    return next_conn_;
  }
  std::mt19937 rng_;
  millis now_ = 1000;
  conn_id next_conn_ = 0;
  std::vector<conn_id> used_;
};

/// What a step sent, in an order that does not depend on hash tables.
std::vector<std::string> sends_of(const output& out) {
  std::vector<std::string> v;
  for (const auto& e : out.sends) v.push_back(std::to_string(e.to) + " " + proto::format_reply(e.msg));
  std::sort(v.begin(), v.end());
  return v;
}

/// The round records and ends of a step (history and metrics), as text.
std::vector<std::string> records_of(const output& out) {
  std::vector<std::string> v;
  for (const auto& r : out.rounds) {
    std::string s = r.scope + "/" + r.name + "#" + std::to_string(r.gen) + " n=" + std::to_string(r.n.value_or(0)) +
                    " end=" + std::to_string(static_cast<int>(r.end)) + " v=" + std::to_string(static_cast<int>(r.v)) +
                    " " + std::to_string(r.first) + ".." + std::to_string(r.ended) +
                    " w=" + std::to_string(r.withdrawn) + " t=" + std::to_string(r.timeouts);
    for (const auto& a : r.arrivals) s += " " + std::to_string(a.rank.value_or(99)) + "@" + a.node + ":" + std::to_string(a.at);
    v.push_back(s);
  }
  for (const auto& e : out.ended)
    v.push_back("ended " + std::to_string(e.aborted) + " " + std::to_string(static_cast<int>(e.v)) + " " +
                std::to_string(e.spread));
  return v;
}

TEST(StateDump, ALoadedSetBehavesAsTheOneDumped) {
  int loads = 0;
  const unsigned seeds = test::seeds(300);
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    input_gen gen(seed);
    barrier_set a, b;
    a.limit(seed % 3 == 0 ? 2 : 0, 30);
    b.limit(a.max_barriers(), 30);
    local_door da(a), db(b);
    std::mt19937 cut(seed);
    int steps = 60 + static_cast<int>(seed % 60);
    int split = std::uniform_int_distribution<int>(0, steps)(cut);
    for (int i = 0; i < steps; ++i) {
      if (i == split) {
        std::string text = a.dump(), error;
        ASSERT_TRUE(b.load(text, error)) << "seed " << seed << ": " << error << "\n" << text;
        ASSERT_EQ(b.dump(), text) << "seed " << seed;
        ++loads;
      }
      door_input in = gen.next();
      output oa, ob;
      std::string error;
      ASSERT_TRUE(da.submit(in, oa, error));
      {
        // Every state the rules make loads (the loader's checks refuse only broken text).
        barrier_set scratch;
        ASSERT_TRUE(scratch.load(a.dump(), error)) << "seed " << seed << " step " << i << ": " << error << "\n" << a.dump();
      }
      if (i < split) continue;
      ASSERT_TRUE(db.submit(in, ob, error));
      ASSERT_EQ(sends_of(oa), sends_of(ob)) << "seed " << seed << " step " << i;
      ASSERT_EQ(oa.events, ob.events) << "seed " << seed << " step " << i;
      ASSERT_EQ(records_of(oa), records_of(ob)) << "seed " << seed << " step " << i;
    }
    if (split < steps) {
      EXPECT_EQ(a.dump(), b.dump()) << "seed " << seed;
      proto::status_req all{"*", "", true};
      // Status reads the same (members of equal rank may come in any order).
      auto sa = proto::format_reply(a.status(all, 5000)), sb = proto::format_reply(b.status(all, 5000));
      std::vector<std::string> la, lb;
      for (auto* p : {&sa, &sb}) {
        auto& l = p == &sa ? la : lb;
        std::size_t at = 0;
        while (at < p->size()) {
          auto nl = p->find('\n', at);
          l.push_back(p->substr(at, nl - at));
          at = nl == std::string::npos ? p->size() : nl + 1;
        }
        std::sort(l.begin(), l.end());
      }
      EXPECT_EQ(la, lb) << "seed " << seed;
    }
  }
  EXPECT_GT(loads, static_cast<int>(seeds * 250 / 300));
}

TEST(StateDump, StringsWithSpacesAndNewlinesRoundTrip) {
  barrier_set a, b;
  output out;
  a.arrive(1, arrive_req("s%2", "e 1", 3, ""), peer_info{"host\nwith newline", 4}, 10, out);
  proto::abort_req ab{"x", "y", "a reason\r\nwith = % signs"};
  a.abort(2, ab, 11, out);
  std::string error;
  ASSERT_TRUE(b.load(a.dump(), error)) << error;
  EXPECT_EQ(b.dump(), a.dump());
  EXPECT_EQ(a.dump().find("with newline"), std::string::npos);  // escaped: one line per record
}

TEST(StateDump, BrokenTextIsRefusedAndChangesNothing) {
  input_gen gen(7);
  barrier_set a;
  local_door da(a);
  for (int i = 0; i < 200; ++i) {
    output out;
    std::string error;
    da.submit(gen.next(), out, error);
  }
  std::string text = a.dump();
  barrier_set b;
  output out;
  b.arrive(1, arrive_req("job", "keep", 2, "me"), peer_info{"h", 1}, 1, out);
  const std::string before = b.dump();
  std::string error;
  // Every cut short, and a few lines changed: refused with a reason, b unchanged.
  for (std::size_t at = 0; at + 1 < text.size(); at += 1 + text.size() / 97) {
    EXPECT_FALSE(b.load(text.substr(0, at), error)) << at;
    EXPECT_FALSE(error.empty());
    EXPECT_EQ(b.dump(), before);
  }
  for (std::string bad : {std::string("set 1 0 0 1 =\nend\n"), std::string("set 2 0 5 1 =\nend\n"),
                          std::string("set 2 0 0 1 =\nmem 1 - =h 1 0 =i 0 0 1 0 0 0\nend\n"),
                          std::string("set 2 0 0 1 =\nbar =a =b 0 0 = 0\nend\n"),
                          std::string("set 2 0 0 1 =\nbar =a =b 0 0 = 0\nrnd open 1 2 = 9 0 = = 0 -1 1 0 0 0 -1 -1 0 0\nend\n"),
                          text + "end\n"}) {
    EXPECT_FALSE(b.load(bad, error)) << bad;
    EXPECT_EQ(b.dump(), before);
  }
}

TEST(StateDump, AHandWrittenSnapshotLoads) {
  // The seed of the fuzzer's corpus (fuzz/corpus/store/snapshot-1): the format as docs/store.md shows it.
  const std::string text =
      "replica 4 3 100 0\nhost =A:1 5 4\nhost =B:1 6 0\nid 1 =A:1 5 7\nid 2 =B:1 6 8\nstate\n"
      "set 2 0 1 2 = =A:1\nbar =job =e 0 0 = 100\nfin 1 1 = 2 =p0 =p1\n"
      "rnd open 2 3 =rank%200 - 0 = = 100 -1 1 0 0 0 -1 -1 0 0\nmem 1 0 =n 100 1 =p0 0 0 1 0 0 100\n"
      "gone 1 =n 101 1 99 =p1\nat 1 2 1\nend\n";
  barrier_set s;
  store::replica r("A:1", s);
  std::string error;
  ASSERT_TRUE(r.load(text, error)) << error;
  EXPECT_EQ(r.dump(), text);
  auto st = s.status(proto::status_req{"job", "e", true}, 200);
  ASSERT_EQ(st.barriers.size(), 1u);
  EXPECT_EQ(st.barriers[0].gen, 2u);
  EXPECT_EQ(st.barriers[0].arrived, 1u);
  EXPECT_EQ(st.barriers[0].members[0].via, "A:1");
  ASSERT_EQ(st.barriers[0].gone.size(), 1u);
}

// Snapshots that break the rules' invariants, each refused (found in review:
// one with n = 2^32-1 made status run out of memory; a connected member that
// waits nowhere could never be withdrawn).
TEST(StateDump, AnInconsistentSnapshotIsRefused) {
  const std::string base =
      "replica 4 3 100 0\nhost =A:1 5 0\nid 1 =A:1 5 7\nstate\n"
      "set 2 0 1 2 = =A:1\nbar =job =e 0 0 = 100\n"
      "rnd open 2 N =rank%200 - 0 = = 100 -1 1 0 0 0 -1 -1 0 0\nmem 1 0 =n 100 1 =p0 0 0 1 0 0 100\nAT\nend\n";
  auto text = [&](std::string n, std::string at) {
    std::string t = base;
    t.replace(t.find(" N "), 3, " " + n + " ");
    t.replace(t.find("AT\n"), 3, at.empty() ? "" : at + "\n");
    return t;
  };
  barrier_set s;
  store::replica r("A:1", s);
  std::string error;
  ASSERT_TRUE(r.load(text("3", "at 1 2 1"), error)) << error;
  for (auto [n, at] : std::vector<std::pair<std::string, std::string>>{
           {"4294967295", "at 1 2 1"}, {"1000001", "at 1 2 1"}, {"0", "at 1 2 1"}, {"1", "at 1 2 1"}, {"-", "at 1 2 1"},
           {"3", ""}, {"3", "at 1 1 1"}, {"3", "at 1 2 0"}}) {
    EXPECT_FALSE(r.load(text(n, at), error)) << "n=" << n << " " << at;
  }
  // Identities: of an incarnation that is not present, or beyond the next id.
  std::string t = text("3", "at 1 2 1");
  EXPECT_FALSE(r.load(std::string(t).replace(t.find("id 1 =A:1 5 7"), 13, "id 1 =A:1 4 7"), error));
  EXPECT_FALSE(r.load(std::string(t).replace(t.find("id 1 =A:1 5 7"), 13, "id 7 =A:1 5 7"), error));
  EXPECT_FALSE(r.load(std::string(t).replace(0, t.find('\n'), "replica 4 1 100 0"), error));  // member 1 >= next 1
}

TEST(StateDump, AHostBackBeforeItsOldEndIsWrittenDumpsBothIncarnations) {
  // Host A restarted: its new incarnation registers before anyone has written
  // the old one's end. Both are present until then, and a snapshot says so.
  barrier_set sa, sb;
  store::replica a("A:1", sa), b("B:1", sb);
  store::presence p{store::state_machine_version, "n", "x", 1};
  a.host_up("A:1", 5, p);
  output out;
  std::vector<std::string> lines{store::encode(input::arrive{1, arrive_req("job", "e", 2, "p0", 0u), peer_info{"n", 1}, 10})};
  std::string key = store::layout{"/t"}.input("A:1", 5, 0), error;
  ASSERT_TRUE(a.apply_batch("A:1", 5, 0, key, store::seal_batch(lines, key, nullptr), nullptr, out, error)) << error;
  a.host_up("A:1", 9, p);
  EXPECT_EQ(a.incarnation_of("A:1"), 9);
  EXPECT_TRUE(a.present("A:1", 5));
  ASSERT_TRUE(b.load(a.dump(), error)) << error;
  EXPECT_EQ(b.dump(), a.dump());
  // The old end comes: its participant is withdrawn on both, and the new incarnation stays.
  output oa, ob;
  a.host_down("A:1", 5, oa);
  b.host_down("A:1", 5, ob);
  EXPECT_EQ(b.dump(), a.dump());
  EXPECT_EQ(a.incarnation_of("A:1"), 9);
  EXPECT_EQ(sa.status(proto::status_req{"job", "e", true}, 20).barriers.at(0).arrived, 0u);
}

TEST(StateDump, ASecondArrivalOnAWaitingConnectionIsDroppedSoTheStateStaysWhole) {
  // fuzz_store: one connection arriving at two barriers left a member that
  // its host's end could not withdraw, and a snapshot of it would not load.
  barrier_set s;
  store::replica r("A:1", s);
  store::presence p{store::state_machine_version, "n", "x", 1};
  r.host_up("A:1", 5, p);
  std::string bytes =
      "A 1 10 7 n0 ARRIVE name=e scope=j id=a n=2 rank=0\nA 1 11 8 n1 ARRIVE name=e scope=k id=b n=3 rank=1\n", error;
  output out;
  ASSERT_TRUE(r.apply_batch("A:1", 5, 0, "k", bytes, nullptr, out, error)) << error;
  EXPECT_TRUE(s.status(proto::status_req{"k", "", false}, 20).barriers.empty());  // dropped: never made
  r.host_down("A:1", 5, out);
  EXPECT_EQ(s.status(proto::status_req{"j", "e", true}, 20).barriers.at(0).arrived, 0u);
  barrier_set s2;
  store::replica r2("B:1", s2);
  ASSERT_TRUE(r2.load(r.dump(), error)) << error;
}

TEST(StateDump, AReplicaLoadedFromASnapshotRoutesAsTheOthers) {
  // Host A applies the log from the start; host C loads A's snapshot
  // halfway and applies the rest: both reach the same state, and C answers
  // its own participants.
  barrier_set sa, sc;
  store::replica a("A:1", sa), c("C:1", sc);
  store::presence p{store::state_machine_version, "n", "x", 1};
  a.set_incarnation(10);
  output out;
  a.host_up("A:1", 10, p);
  a.host_up("C:1", 12, p);
  auto batch = [&](store::replica& r, const std::string& h, std::int64_t inc, std::uint64_t seq,
                   const std::vector<door_input>& ins, output& o) {
    std::vector<std::string> lines;
    for (const auto& in : ins) lines.push_back(store::encode(in));
    std::string key = store::layout{"/t"}.input(h, inc, seq), error;
    ASSERT_TRUE(r.apply_batch(h, inc, seq, key, store::seal_batch(lines, key, nullptr), nullptr, o, error)) << error;
  };
  auto arrive = [&](conn_id conn, std::uint32_t rank) {
    return input::arrive{conn, arrive_req("job", "e", 3, "r" + std::to_string(rank), rank), peer_info{"node", rank}, 100};
  };
  batch(a, "A:1", 10, 0, {arrive(1, 0)}, out);
  batch(a, "C:1", 12, 0, {arrive(5, 1)}, out);
  std::string snap = a.dump(), error;
  c.set_incarnation(12);
  ASSERT_TRUE(c.load(snap, error)) << error;
  EXPECT_EQ(c.dump(), snap);
  EXPECT_EQ(c.incarnation_of("A:1"), 10);
  output oa, oc;
  batch(a, "A:1", 10, 1, {arrive(2, 2)}, oa);
  batch(c, "A:1", 10, 1, {arrive(2, 2)}, oc);
  EXPECT_EQ(a.dump(), c.dump());
  // All three present: A tells its connections 1 and 2, C its connection 5.
  std::vector<conn_id> to_a, to_c;
  for (const auto& e : oa.sends)
    if (std::holds_alternative<proto::release>(e.msg)) to_a.push_back(e.to);
  for (const auto& e : oc.sends)
    if (std::holds_alternative<proto::release>(e.msg)) to_c.push_back(e.to);
  std::sort(to_a.begin(), to_a.end());
  EXPECT_EQ(to_a, (std::vector<conn_id>{1, 2}));
  EXPECT_EQ(to_c, (std::vector<conn_id>{5}));
  // A snapshot of another state-machine version is refused.
  std::string other = snap;
  other.replace(0, other.find('\n'), "replica 99 1 0");
  EXPECT_FALSE(c.load(other, error));
  EXPECT_NE(error.find("version"), std::string::npos) << error;
}

}  // namespace
}  // namespace tfb
