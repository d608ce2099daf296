// The store's follower (src/store/follower.h, issue #31): the rules by which a host
// turns the store's log into state, tested in memory against a simulated
// etcd (revisions, versions, deletes, a key's history), as etcd's raft
// library tests itself with many nodes in one process.
#include "follower.h"
#include "seeds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace tfb::store {
namespace {

input::arrive arrival(conn_id c, const std::string& name, std::uint32_t n, std::uint32_t rank, millis now) {
  proto::arrive a;
  a.name = name;
  a.scope = "job";
  a.n = n;
  a.rank = rank;
  a.id = "p" + std::to_string(rank) + "c" + std::to_string(c);
  return input::arrive{c, a, peer_info{"node" + std::to_string(rank), 100 + rank}, now};
}

/// etcd's key space in memory: revisions, versions, create_revision, and the
/// event of every change (what a watch from revision 1 brings).
struct sim_etcd {
  std::int64_t rev = 1;
  std::map<std::string, kv> keys;
  std::vector<event> log;
  std::map<std::string, std::map<std::int64_t, std::string>> first;  ///< key -> create_revision -> first value
  std::map<std::string, std::map<std::int64_t, std::int64_t>> first_lease;  ///< key -> create_revision -> its lease

  std::int64_t put(const std::string& k, const std::string& v, std::int64_t lease = 0) {
    ++rev;
    kv prev;
    auto it = keys.find(k);
    if (it != keys.end()) prev = it->second;
    kv now{k, v, it == keys.end() ? rev : prev.create_revision, rev, it == keys.end() ? 1 : prev.version + 1, lease};
    keys[k] = now;
    if (now.version == 1) first[k][rev] = v;
    if (now.version == 1) first_lease[k][rev] = lease;
    log.push_back(event{event::type::put, now, prev});
    return rev;
  }
  void del(const std::string& k) {
    auto it = keys.find(k);
    if (it == keys.end()) return;
    ++rev;
    kv gone;
    gone.key = k;
    gone.mod_revision = rev;
    log.push_back(event{event::type::del, gone, it->second});
    keys.erase(it);
  }
  /// Every key at revision at (replayed from the log), each put again
  /// holding its first version's value, as link::read_catch_up reads it.
  std::vector<kv> range_at(std::int64_t at) const {
    std::map<std::string, kv> m;
    for (const auto& e : log) {
      if (e.now.mod_revision > at) break;
      if (e.what == event::type::put)
        m[e.now.key] = e.now;
      else
        m.erase(e.now.key);
    }
    std::vector<kv> out;
    for (auto& [k, v] : m) {
      kv x = v;
      if (x.version > 1) x.value = first.at(k).at(x.create_revision);
      if (x.version > 1) x.lease = first_lease.at(k).at(x.create_revision);
      out.push_back(x);
    }
    return out;
  }
};

/// A host of the store in memory: a replica and its follower.
struct sim_host {
  barrier_set state;
  replica r;
  follower f;
  sim_host(const layout& keys, const std::string& self, const std::string* secret)
      : r(self, state), f(keys, self, r) {
    f.set_secret(secret);
  }
};

const layout keys{"/t"};
const std::string secret = "job key";

std::string sealed(const std::string& key, const std::vector<door_input>& ins) {
  std::vector<std::string> lines;
  for (const auto& in : ins) lines.push_back(encode(in));
  return seal_batch(lines, key, &secret);
}

TEST(SharedSettings, TheOriginRecordCarriesThemAndAnOlderOneIsKnownByItsVersion) {
  shared_settings s{12, 4000}, back;
  int sm = 0;
  ASSERT_TRUE(parse_origin(format_origin(s), sm, back));
  EXPECT_EQ(sm, state_machine_version);
  EXPECT_EQ(back, s);
  EXPECT_EQ(format_origin(s), "tfbarrier store sm=4 max-barriers=12 forget-after=4000");
  ASSERT_TRUE(parse_origin("tfbarrier store sm=2", sm, back));  // version 2 wrote the version alone
  EXPECT_EQ(sm, 2);
  EXPECT_FALSE(parse_origin("tfbarrier store sm=3", sm, back));  // from 3 on, the settings are there
  EXPECT_FALSE(parse_origin("tfbarrier store sm=3 max-barriers=1 forget-after=0", sm, back));
  EXPECT_FALSE(parse_origin("hello", sm, back));
  EXPECT_FALSE(parse_origin("tfbarrier store sm=3 max-barriers=1 forget-after=5 colour=red", sm, back));
}

/// Hosts A (the keeper: the smallest name) and B, registered in a simulated etcd.
struct two_hosts {
  sim_etcd etcd;
  sim_host a{keys, "A:1", &secret}, b{keys, "B:1", &secret};
  std::int64_t inc_a = 0, inc_b = 0;
  std::uint64_t seq_a = 0, seq_b = 0;
  two_hosts() {
    inc_a = etcd.put(keys.host("A:1"), presence{state_machine_version, "a", "x:1", 1}.format(), 7);
    inc_b = etcd.put(keys.host("B:1"), presence{state_machine_version, "b", "y:1", 2}.format(), 8);
    a.r.set_incarnation(inc_a);
    b.r.set_incarnation(inc_b);
    feed();
  }
  std::size_t fed = 0;
  void feed() {
    std::vector<event> evs(etcd.log.begin() + static_cast<std::ptrdiff_t>(fed), etcd.log.end());
    fed = etcd.log.size();
    a.f.on_events(evs);
    b.f.on_events(evs);
  }
  void write(bool from_a, const std::vector<door_input>& ins) {
    std::string k = from_a ? keys.input("A:1", inc_a, seq_a++) : keys.input("B:1", inc_b, seq_b++);
    etcd.put(k, sealed(k, ins));
    feed();
  }
};

std::size_t count_of(const std::vector<action>& acts, action::kind what, const std::string& text = {}) {
  return static_cast<std::size_t>(std::count_if(acts.begin(), acts.end(), [&](const action& a) {
    return a.what == what && a.text.find(text) != std::string::npos;
  }));
}

// Issue #31 item 9: a presence key put by someone else, without a lease,
// would never expire; it counts for nothing, on the watch and in catch-up
// alike, and is reported once.
TEST(Follower, APresenceKeyWithoutALeaseIsIgnoredAndReportedOnce) {
  two_hosts t;
  std::string forged = keys.host("C:1");
  std::int64_t at = t.etcd.put(forged, presence{state_machine_version, "c", "z:1", 3}.format());  // lease 0
  std::vector<event> evs(t.etcd.log.end() - 1, t.etcd.log.end());
  auto acts = t.a.f.on_events(evs);
  EXPECT_EQ(count_of(acts, action::kind::warn, forged + " was put without a lease"), 1u);
  EXPECT_EQ(t.a.r.incarnation_of("C:1"), 0);
  EXPECT_FALSE(t.a.r.present("C:1", at));
  // Seen again (a watch resumed from before it): not reported again.
  EXPECT_EQ(count_of(t.a.f.on_events(evs), action::kind::warn), 0u);
  t.fed = t.etcd.log.size();
  t.b.f.on_events(evs);
  // Deleted: it ended nothing, since it counted for nothing.
  t.etcd.del(forged);
  std::vector<event> del(t.etcd.log.end() - 1, t.etcd.log.end());
  EXPECT_EQ(count_of(t.a.f.on_events(del), action::kind::mark_gone), 0u);
  // A host that catches up while the key is there does the same.
  t.etcd.put(forged, presence{state_machine_version, "c", "z:1", 3}.format());
  sim_host late{keys, "D:1", &secret};
  catch_up cu;
  std::vector<kv> all = t.etcd.range_at(t.etcd.rev);
  catch_up_events(keys, all, &secret, cu);
  cu.revision = t.etcd.rev;
  auto late_acts = late.f.on_catch_up(cu);
  EXPECT_EQ(count_of(late_acts, action::kind::warn, "was put without a lease"), 1u);
  EXPECT_EQ(late.r.incarnation_of("C:1"), 0);
  EXPECT_EQ(late.r.incarnation_of("A:1"), t.inc_a);
  EXPECT_EQ(count_of(late_acts, action::kind::mark_gone), 0u);
  for (const auto& k : cu.live) EXPECT_NE(k.key, forged);
}

// A host's own presence put again without its lease would not go with it:
// the host registers again (fenced); the others say so.
TEST(Follower, APresencePutAgainWithoutItsLeaseMakesItsHostRegisterAgain) {
  two_hosts t;
  std::string a_key = keys.host("A:1");
  t.etcd.put(a_key, t.etcd.keys.at(a_key).value);  // same bytes, lease 0: `etcdctl put` of what it read
  std::vector<event> evs(t.etcd.log.end() - 1, t.etcd.log.end());
  auto on_a = t.a.f.on_events(evs);
  auto on_b = t.b.f.on_events(evs);
  EXPECT_EQ(count_of(on_a, action::kind::fenced, "put again without its lease"), 1u);
  EXPECT_EQ(count_of(on_a, action::kind::warn, "this host registers again"), 1u);
  EXPECT_EQ(count_of(on_b, action::kind::fenced), 0u);
  EXPECT_EQ(count_of(on_b, action::kind::warn, "was put again without its lease"), 1u);
  // Put again with its lease (etcdctl put --ignore-lease): only the first version counts, as before.
  t.etcd.put(keys.host("B:1"), t.etcd.keys.at(keys.host("B:1")).value, 8);
  std::vector<event> again(t.etcd.log.end() - 1, t.etcd.log.end());
  EXPECT_EQ(count_of(t.b.f.on_events(again), action::kind::fenced), 0u);
}

TEST(Follower, OneHostKeepsTimeOnItsOwnClockAndNoInputsTimeForgetsABarrier) {
  two_hosts t;
  const millis hour = 3'600'000;
  // B's clock is an hour ahead: its inputs say so. Under version 2 its prune
  // input forgot every barrier at once; here no input's time decides.
  t.write(false, {arrival(1, "e", 2, 0, 5 * hour)});
  t.write(true, {arrival(1, "e", 2, 1, 1000)});  // released
  ASSERT_EQ(t.a.state.barrier_count(), 1u);
  EXPECT_TRUE(t.a.f.keeper());
  EXPECT_FALSE(t.b.f.keeper());
  EXPECT_TRUE(t.b.f.tick(0, 10'000).empty());
  EXPECT_TRUE(t.b.f.tick(50 * hour, 10'000).empty());  // not B's to judge
  EXPECT_TRUE(t.a.f.tick(100, 10'000).empty());          // seen idle at 100
  EXPECT_TRUE(t.a.f.tick(10'099, 10'000).empty());
  auto fs = t.a.f.tick(10'100, 10'000);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].which.name, "e");
  t.write(true, {fs[0]});
  EXPECT_EQ(t.a.state.barrier_count(), 0u);
  EXPECT_EQ(t.b.state.barrier_count(), 0u);
  EXPECT_EQ(t.a.r.dump(), t.b.r.dump());
}

TEST(Follower, StatusOfAnArrivalFromAHostAheadShowsNoNegativeAge) {
  // Found by store.bats with libfaketime: age_ms=-3584564, which no client parses.
  two_hosts t;
  t.write(false, {arrival(1, "e", 2, 0, 3'600'000)});  // B: an hour ahead
  auto st = t.a.state.status(proto::status_req{"*", "e", true}, 1000);
  ASSERT_EQ(st.barriers.size(), 1u);
  EXPECT_EQ(st.barriers[0].age_ms, 0);
  ASSERT_EQ(st.barriers[0].members.size(), 1u);
  EXPECT_EQ(st.barriers[0].members[0].age_ms, 0);
  EXPECT_EQ(proto::format_reply(st).find("=-"), std::string::npos) << proto::format_reply(st);
}

TEST(Follower, AForgetWrittenBeforeANewArrivalIsAppliedChangesNothing) {
  two_hosts t;
  t.write(true, {arrival(1, "e", 2, 0, 1000), arrival(2, "e", 2, 1, 1000)});  // released
  t.a.f.tick(0, 10);
  auto fs = t.a.f.tick(10, 10);
  ASSERT_EQ(fs.size(), 1u);
  // A participant arrives through B before the forget is written: the barrier
  // is in use again, so the forget (of the barrier as it was) is a no-op.
  t.write(false, {arrival(5, "e", 2, 0, 2000)});
  t.write(true, {fs[0]});
  EXPECT_EQ(t.a.state.barrier_count(), 1u);
  EXPECT_EQ(t.b.state.barrier_count(), 1u);
  EXPECT_EQ(t.b.state.waiting(), 1u);
  // Once released and idle again, the keeper measures from then.
  t.write(false, {arrival(6, "e", 2, 1, 2001)});
  EXPECT_TRUE(t.a.f.tick(20, 10).empty());
  EXPECT_EQ(t.a.f.tick(30, 10).size(), 1u);
}

// Starting over (a compacted revision, or a divergence): the state is built
// again from the log, and the steps this host applied already give their
// replies again (a participant may have missed them), but not their log
// lines, history records or counts: those were delivered the first time.
TEST(Follower, StartingOverRepliesAgainButLogsRecordsAndCountsNothingTwice) {
  two_hosts t;
  t.write(true, {arrival(1, "e", 2, 0, 1000)});
  t.write(false, {arrival(2, "e", 2, 1, 1001)});  // released
  catch_up cu;
  cu.revision = t.etcd.rev;
  cu.again = true;
  cu.history = false;
  catch_up_events(keys, t.etcd.range_at(t.etcd.rev), &secret, cu);
  auto acts = t.a.f.on_catch_up(cu);
  std::size_t replies = 0, delivered = 0;
  for (const auto& a : acts) {
    if (a.what != action::kind::deliver) continue;
    ++delivered;
    EXPECT_TRUE(a.replayed);
    EXPECT_TRUE(a.out.events.empty());
    EXPECT_TRUE(a.out.rounds.empty());
    EXPECT_EQ(a.out.counted.arrivals, 0u);
    replies += a.out.sends.size();
  }
  EXPECT_GE(delivered, 2u);
  EXPECT_GE(replies, 1u);  // rank 0's RELEASE, to A's connection 1
  EXPECT_EQ(acts.front().what, action::kind::close_all);
  // What follows is new: logged and counted.
  std::string k = keys.input("A:1", t.inc_a, t.seq_a++);
  t.etcd.put(k, sealed(k, {arrival(3, "e", 2, 0, 2000)}));
  auto more = t.a.f.on_events({t.etcd.log.back()});
  auto d = std::find_if(more.begin(), more.end(), [](const action& a) { return a.what == action::kind::deliver; });
  ASSERT_NE(d, more.end());
  EXPECT_FALSE(d->replayed);
  EXPECT_FALSE(d->out.events.empty());
  EXPECT_EQ(d->out.counted.arrivals, 1u);
}

TEST(Follower, AtTheStoresLimitANewBarrierIsRefusedOnEveryHostWhateverTheClocks) {
  two_hosts t;
  for (auto* h : {&t.a, &t.b}) h->state.limit(2, barrier_set::never_forget);
  t.write(true, {arrival(1, "e1", 1, 0, 1000)});
  t.write(false, {arrival(1, "e2", 1, 0, 3'600'000 + 1000)});  // an hour ahead
  t.write(true, {arrival(2, "e3", 1, 0, 99'000'000)});
  EXPECT_EQ(t.a.state.barrier_count(), 2u);
  EXPECT_EQ(t.b.state.barrier_count(), 2u);
  EXPECT_EQ(t.a.r.dump(), t.b.r.dump());
}

TEST(Follower, AKeyPutAgainCountsOnceAtItsFirstVersionOnTheWatchAndInCatchUp) {
  two_hosts t;
  std::string k = keys.input("A:1", t.inc_a, t.seq_a++);
  t.etcd.put(k, sealed(k, {arrival(1, "e", 2, 0, 1000)}));
  t.feed();
  // Someone who can write to etcd puts the batch again, same bytes.
  t.etcd.put(k, t.etcd.keys[k].value);
  t.feed();
  // A host that catches up now sees the key at version 2.
  sim_host c{keys, "C:1", &secret};
  catch_up cu;
  cu.revision = t.etcd.rev;
  catch_up_events(keys, t.etcd.range_at(t.etcd.rev), &secret, cu);
  c.f.on_catch_up(cu);
  EXPECT_EQ(c.r.dump(), t.a.r.dump());
  EXPECT_EQ(c.state.waiting(), 1u);  // version 2's catch-up skipped it: 0 here, 1 on the others
}

TEST(Follower, EveryKBatchesEachHostDigestsItsStateAndAHostThatDiffersFromTheKeeperStartsOver) {
  two_hosts t;
  // C runs by another limit than the store's (as a host's own --max-barriers
  // did before issue #31): the same log, another state.
  sim_host c{keys, "C:1", &secret};
  c.state.limit(1, barrier_set::never_forget);
  c.f.on_events(t.etcd.log);
  for (auto* h : {&t.a, &t.b, &c}) h->f.set_digest_every(2);
  t.fed = t.etcd.log.size();
  auto step = [&](bool from_a, const std::vector<door_input>& ins) {
    std::string k = from_a ? keys.input("A:1", t.inc_a, t.seq_a++) : keys.input("B:1", t.inc_b, t.seq_b++);
    t.etcd.put(k, sealed(k, ins));
    std::vector<event> evs(t.etcd.log.begin() + static_cast<std::ptrdiff_t>(t.fed), t.etcd.log.end());
    t.fed = t.etcd.log.size();
    std::vector<std::vector<action>> acts;
    for (auto* h : {&t.a, &t.b, &c}) acts.push_back(h->f.on_events(evs));
    return acts;
  };
  auto digest_of = [](const std::vector<action>& acts) {
    for (const auto& a : acts)
      if (a.what == action::kind::digest) return a;
    return action{};
  };
  step(true, {arrival(1, "e1", 1, 0, 1000)});
  auto acts = step(false, {arrival(1, "e2", 1, 0, 2000)});  // the second batch: a digest point; C refused e2
  action da = digest_of(acts[0]), db = digest_of(acts[1]), dc = digest_of(acts[2]);
  ASSERT_EQ(da.what, action::kind::digest);
  EXPECT_EQ(da.inc, t.etcd.rev);
  EXPECT_EQ(da.text, db.text);
  EXPECT_EQ(da.state, t.a.r.dump());
  EXPECT_NE(dc.text, da.text);
  // A writes its digest; B agrees, C finds it differs from the keeper's and starts over.
  std::string key = keys.digest(da.inc, "A:1");
  t.etcd.put(key, seal_digest(key, da.text, &secret));
  std::vector<event> evs(t.etcd.log.end() - 1, t.etcd.log.end());
  EXPECT_TRUE(t.b.f.on_events(evs).empty());
  EXPECT_EQ(t.b.f.digests_compared(), 1u);
  auto cs = c.f.on_events(evs);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].what, action::kind::diverged);
  EXPECT_EQ(cs[0].inc, 0);  // said and counted; the keeper's snapshot of that state is not written yet
  EXPECT_NE(cs[0].text.find("differs from host A:1's"), std::string::npos) << cs[0].text;
  EXPECT_NE(cs[0].text.find("starts over from host A:1's snapshot at revision"), std::string::npos) << cs[0].text;
  EXPECT_EQ(c.f.divergences(), 1u);
  t.etcd.put(keys.snap(da.inc), "chunks=1 bytes=1");  // the keeper's snapshot at that revision
  cs = c.f.on_events({t.etcd.log.back()});
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].what, action::kind::diverged);
  EXPECT_EQ(cs[0].inc, 1);  // start over now
  catch_up cu;  // (the link reads the store again from that snapshot)
  cu.snapshot = da.state;
  cu.snap_rev = da.inc;
  cu.history = true;
  c.f.on_catch_up(cu);
  EXPECT_EQ(c.r.dump(), t.a.r.dump());
  EXPECT_TRUE(c.f.on_events(evs).empty());  // its digests were of the state it had
  // A digest without the job's MAC is not compared.
  t.etcd.put(key, "D " + std::string(64, 'a'));
  cs = c.f.on_events({t.etcd.log.back()});
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].what, action::kind::warn);
}

/// Random logs: hosts register and expire, write batches (arrivals,
/// departures, aborts, forgets), someone puts keys again or deletes and puts
/// them again, a host writes snapshots and deletes what they cover. A host
/// that catches up at any revision, then watches, ends in the state of one
/// that watched from the start.
TEST(Follower, CatchingUpFromAnyRevisionEndsWhereWatchingLiveEnds) {
  for (unsigned seed = 1, all = test::seeds(25); seed <= all; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    sim_etcd etcd;
    sim_host live{keys, "Z:9", &secret};
    struct writer {
      std::string name;
      std::int64_t inc = 0;
      std::uint64_t seq = 0;
      conn_id next_c = 1;
    };
    std::vector<writer> hosts{{"A:1"}, {"B:1"}, {"C:1"}};
    std::size_t fed = 0;
    std::map<std::int64_t, std::string> snaps;  // revision -> the state then
    std::set<std::int64_t> deletes;              // revisions at which an applied batch was deleted (not by a snapshot)
    auto feed = [&] {
      std::vector<event> evs(etcd.log.begin() + static_cast<std::ptrdiff_t>(fed), etcd.log.end());
      fed = etcd.log.size();
      for (auto& a : live.f.on_events(evs))  // the first host to see an end writes it
        if (a.what == action::kind::mark_gone && !etcd.keys.count(keys.gone(a.host, a.inc)))
          etcd.put(keys.gone(a.host, a.inc), seal_gone(keys.gone(a.host, a.inc), a.text, &secret));
    };
    for (int step = 0; step < 120; ++step) {
      writer& w = hosts[static_cast<std::size_t>(pick(3))];
      int what = pick(20);
      if (w.inc == 0 || what == 0) {  // (re)register: a new incarnation; the old one's lease expires
        if (w.inc != 0) etcd.del(keys.host(w.name));
        feed();
        w.inc = etcd.put(keys.host(w.name), presence{state_machine_version, "n", "a", 1}.format(), 5);
        w.seq = 0;
      } else if (what == 1 && !etcd.log.empty()) {  // a key put again, same bytes
        auto it = etcd.keys.begin();
        std::advance(it, pick(static_cast<int>(etcd.keys.size())));
        if (keys.parse(it->first).what != layout::parsed::kind::snap_chunk) etcd.put(it->first, it->second.value);
      } else if (what == 2) {  // a batch deleted and put again: a new key, a replay
        for (auto& [k, v] : etcd.keys)
          if (keys.parse(k).what == layout::parsed::kind::input) {
            std::string key = k, value = v.value;
            etcd.del(key);
            deletes.insert(etcd.rev);
            etcd.put(key, value);
            break;
          }
      } else if (what == 3) {  // a snapshot of the live state, and what it covers deleted
        std::int64_t at = live.f.applied();
        snaps[at] = live.r.dump();
        etcd.put(keys.snap(at), "marker");
        std::vector<std::string> covered;
        for (auto& [k, v] : etcd.keys) {
          auto p = keys.parse(k).what;
          if ((p == layout::parsed::kind::input || p == layout::parsed::kind::gone) && v.mod_revision <= at)
            covered.push_back(k);
        }
        for (auto& k : covered) etcd.del(k);
      } else {  // a batch of one to three inputs
        std::vector<door_input> ins;
        for (int i = pick(3); i >= 0; --i) {
          millis now = 1000 * step + (pick(2) ? 3'600'000 : -3'600'000);  // clocks an hour apart
          std::string name = "e" + std::to_string(pick(3));
          int kind = pick(6);
          conn_id c = w.next_c++;
          if (kind <= 2)
            ins.push_back(arrival(c, name, 2 + static_cast<std::uint32_t>(pick(2)), static_cast<std::uint32_t>(pick(3)), now));
          else if (kind == 3)
            ins.push_back(input::leave{static_cast<conn_id>(1 + pick(static_cast<int>(c))), departure::disconnected, now});
          else if (kind == 4)
            ins.push_back(input::abort{c, proto::abort_req{"job", name, "x"}, now});
          else
            for (auto& b : live.state.idle_barriers()) ins.push_back(input::forget{b});
        }
        std::string k = keys.input(w.name, w.inc, w.seq++);
        etcd.put(k, sealed(k, ins));
      }
      feed();
    }
    // From every revision: the newest snapshot at or before it, then the keys there, then the watch.
    for (std::int64_t at = 1; at <= etcd.rev; at += 1 + pick(4)) {
      for (bool history : {true, false}) {
        sim_host late{keys, "Y:9", &secret};
        catch_up cu;
        cu.revision = at;
        cu.history = history;
        auto there = etcd.range_at(at);
        for (auto& [r, text] : snaps) {
          bool written = std::any_of(there.begin(), there.end(), [&, r = r](const kv& k) { return k.key == keys.snap(r); });
          if (written) {
            cu.snapshot = text;
            cu.snap_rev = r;
          }
        }
        // From the keys as they are (the history compacted), a batch deleted
        // since the snapshot is not seen, even if put back: docs/store.md says so.
        if (!history && deletes.upper_bound(cu.snap_rev) != deletes.upper_bound(at)) continue;
        if (!history) catch_up_events(keys, there, &secret, cu);
        late.f.on_catch_up(cu);
        std::vector<event> rest;  // the watch: from after the snapshot with history, else after the read
        for (auto& e : etcd.log)
          if (e.now.mod_revision > (history ? cu.snap_rev : at)) rest.push_back(e);
        late.f.on_events(rest);
        ASSERT_EQ(late.r.dump(), live.r.dump()) << "seed " << seed << ", caught up at revision " << at << " of "
                                                << etcd.rev << (history ? " from history" : " from the keys");
      }
    }
  }
}

// Issue #31 item 10: what waits for etcd is bounded. Past the bound new work
// is refused with BUSY (its client backs off and tries again); a departure
// is always taken, so that no one who left is counted.
TEST(Follower, PastTheBacklogBoundNewWorkIsRefusedWithBusyAndADepartureIsTaken) {
  proto::arrive a;
  a.name = "b";
  a.n = 2;
  output out;
  EXPECT_FALSE(refuse_when_behind(input::arrive{7, a, {}, 0}, 100, 100, out));
  EXPECT_TRUE(out.sends.empty());
  EXPECT_TRUE(refuse_when_behind(input::arrive{7, a, {}, 0}, 101, 100, out));
  ASSERT_EQ(out.sends.size(), 1u);
  EXPECT_EQ(out.sends[0].to, 7u);
  const auto* e = std::get_if<proto::error_reply>(&out.sends[0].msg);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->kind, proto::error_kind::busy);
  EXPECT_NE(e->text.find("far behind"), std::string::npos);
  EXPECT_TRUE(refuse_when_behind(input::decide{8, proto::decide{}, {}, 0}, 101, 100, out));
  EXPECT_TRUE(refuse_when_behind(input::abort{9, proto::abort_req{}, 0}, 101, 100, out));
  EXPECT_FALSE(refuse_when_behind(input::leave{7, departure::left, 0}, 1 << 30, 100, out));
  EXPECT_FALSE(refuse_when_behind(input::leave{7, departure::disconnected, 0}, 1 << 30, 100, out));
  EXPECT_EQ(out.sends.size(), 3u);
}

// Issue #31 item 6: the renew deadline. A host whose renewals fail for
// longer than two thirds of its lease stops acting on its own, before etcd
// may expire the lease; one that is only slow, or was stopped and renews at
// once when it runs again, goes on.
TEST(Follower, ARenewalFailingPastTheRenewDeadlineFencesTheHostAndNothingElseDoes) {
  constexpr std::int64_t s = 1'000'000'000;
  const std::int64_t deadline = renew_deadline(6 * s);
  EXPECT_EQ(deadline, 4 * s);
  renewals r{10 * s, 0, false};
  // Renewed 4 s ago or less: never overdue, whatever the renewals do now.
  EXPECT_FALSE(renew_overdue({10 * s, 0, true}, 14 * s, deadline));
  // Past the deadline with nothing failing (no renewal was due): not overdue.
  EXPECT_FALSE(renew_overdue(r, 15 * s, deadline));
  // The last renewal failed: overdue.
  EXPECT_TRUE(renew_overdue({10 * s, 0, true}, 15 * s, deadline));
  // A renewal under way for a moment: not yet; for more than a third of the deadline: overdue.
  EXPECT_FALSE(renew_overdue({10 * s, 14 * s, false}, 15 * s, deadline));
  EXPECT_TRUE(renew_overdue({10 * s, 13 * s, false}, 15 * s, deadline));
}

TEST(Follower, AfterAGapInTheChecksTheKeeperGetsAThirdOfTheDeadline) {
  constexpr std::int64_t ms = 1'000'000;
  const std::int64_t deadline = 4000 * ms, every = 200 * ms;
  renew_watch w(deadline, every);
  // Checks every 200 ms; the renewals fail from 1 s on.
  renewals failing{1000 * ms, 0, true};
  std::int64_t t = 0;
  for (; t <= 5000 * ms; t += every) EXPECT_FALSE(w.check(t, failing)) << t;
  t = 5200 * ms;
  EXPECT_TRUE(w.check(t, failing));  // renewed 4.2 s ago, the last renewal failed
  // A host stopped (SIGSTOP) for 10 s: at its first check it is far past the
  // deadline with a renewal under way since before the stop, but it gets a
  // third of the deadline to finish it before that counts.
  renew_watch v(deadline, every);
  EXPECT_FALSE(v.check(1000 * ms, {1000 * ms, 0, false}));
  renewals stalled{1000 * ms, 1100 * ms, false};
  EXPECT_FALSE(v.check(11'000 * ms, stalled));
  EXPECT_FALSE(v.check(12'000 * ms, stalled));
  EXPECT_TRUE(v.check(12'400 * ms, stalled));  // grace over: the renewal still hangs
  // ...and when the keeper renews within the grace, nothing happens.
  renew_watch u(deadline, every);
  EXPECT_FALSE(u.check(1000 * ms, {1000 * ms, 0, false}));
  EXPECT_FALSE(u.check(11'000 * ms, stalled));
  EXPECT_FALSE(u.check(11'200 * ms, {11'100 * ms, 0, false}));
  EXPECT_FALSE(u.check(14'000 * ms, {11'100 * ms, 0, false}));
}

}  // namespace
}  // namespace tfb::store
