// A store's replicas (src/store/replica.h, docs/store.md): inputs written as lines,
// batches sealed, and hosts that apply the same log reaching the same
// barriers, each replying only to its own participants.
#include "replica.h"

#include <gtest/gtest.h>

#include "store_client.h"

namespace tfb::store {
namespace {

using proto::verdict;

input::arrive arrival(conn_id c, const std::string& name, std::uint32_t n, std::uint32_t rank, millis now,
                      const std::string& id = "") {
  proto::arrive a;
  a.name = name;
  a.scope = "job";
  a.n = n;
  a.rank = rank;
  a.id = id.empty() ? "p" + std::to_string(rank) : id;
  return input::arrive{c, a, peer_info{"node" + std::to_string(rank), 100 + rank}, now};
}

std::string lines_to(const output& o, conn_id c) {
  std::string s;
  for (const auto& e : o.sends)
    if (e.to == c) s += proto::format_reply(e.msg);
  return s;
}

TEST(StoreInputs, EveryKindRoundTrips) {
  proto::decide d;
  d.scope = "job";
  d.name = "epoch3";
  d.v = verdict::stop;
  d.message = "loss went up: stop now";
  d.rank = 0;
  d.id = "chief0";
  proto::decide any;  // "the one round that awaits a verdict": no name
  any.scope = "job";
  any.id = "x1";
  any.v = verdict::continue_;
  any.wait = false;
  proto::abort_req ab{"job", "e", "node 4 died"};
  std::vector<door_input> ins{arrival(7, "e", 4, 2, 1234), input::decide{9, d, peer_info{"n0", 5}, 99}, input::decide{9, any, peer_info{"", 5}, 99},
                              input::abort{3, ab, 77}, input::leave{7, departure::unresponsive, 1300, true},
                              input::leave{8, departure::lost, 1, false}, input::prune{5000, 60000},
                              input::expire{decide_deadline{"job", "epoch3", 4, 2000}, 5000}};
  for (const auto& in : ins) {
    std::string line = encode(in);
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    door_input back;
    std::string error;
    ASSERT_TRUE(decode(line, back, error)) << line << ": " << error;
    EXPECT_EQ(encode(back), line);
    EXPECT_EQ(back.index(), in.index());
  }
  EXPECT_EQ(encode(input::shutdown{"bye"}), "");  // one host's own: not shared
}

TEST(StoreInputs, MalformedLinesAreRefusedWithAReason) {
  door_input in;
  std::string error;
  for (std::string_view bad : {"", "Z 1 2", "A x 2 3 h ARRIVE name=a", "A 1 2 3 h PING", "L 1 2 gone 0",
                               "L 1 2 left 2", "P 1", "P 1 2 3", "X 1 2 ARRIVE name=a n=2",
                               "A 1 2 3 h ARRIVE name=a name=b n=2", "E 5", "E 5 4 2000 job", "E 5 4 2000 job e x",
                               "E 5 x 2000 job e"}) {
    EXPECT_FALSE(decode(bad, in, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(StoreBatches, AMacBindsTheLinesToTheirKey) {
  std::string secret = "s3cret", key = "/t/in/h:1/5/0000000000000000";
  std::vector<std::string> lines{encode(arrival(1, "e", 2, 0, 10)), encode(arrival(2, "e", 2, 1, 11))};
  std::string value = seal_batch(lines, key, &secret);
  std::vector<std::string_view> got;
  std::string error;
  ASSERT_TRUE(open_batch(value, key, &secret, got, error)) << error;
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], lines[1]);
  // Replayed under another key, changed, or signed with another secret: refused.
  EXPECT_FALSE(open_batch(value, "/t/in/h:1/5/0000000000000001", &secret, got, error));
  std::string changed = value;
  changed[changed.find("n=2")] = 'x';
  EXPECT_FALSE(open_batch(changed, key, &secret, got, error));
  std::string other = "other";
  EXPECT_FALSE(open_batch(value, key, &other, got, error));
  EXPECT_FALSE(open_batch(seal_batch(lines, key, nullptr), key, &secret, got, error));
  EXPECT_NE(error.find("MAC"), std::string::npos);
  // Without a secret, the lines as they are.
  ASSERT_TRUE(open_batch(seal_batch(lines, key, nullptr), key, nullptr, got, error));
  EXPECT_EQ(got.size(), 2u);
}

TEST(StoreGone, AnEndCarriesAMacWithASecret) {
  std::string secret = "s", key = "/t/gone/h:1/5", presence = "sm=1 pid=2 node=n addr=a", got, error;
  std::string sealed = seal_gone(key, presence, &secret);
  ASSERT_TRUE(open_gone(key, sealed, &secret, got, error)) << error;
  EXPECT_EQ(got, presence);
  EXPECT_FALSE(open_gone("/t/gone/h:1/6", sealed, &secret, got, error));  // another incarnation's
  EXPECT_FALSE(open_gone(key, presence, &secret, got, error));            // none
  EXPECT_NE(error.find("MAC"), std::string::npos);
  std::string other = "o";
  EXPECT_FALSE(open_gone(key, sealed, &other, got, error));
  ASSERT_TRUE(open_gone(key, seal_gone(key, presence, nullptr), nullptr, got, error));
  EXPECT_EQ(got, presence);
}

TEST(StoreLayout, KeysParseBack) {
  layout l{"/tfb/job1"};
  auto p = l.parse(l.input("node1:7727", 42, 3));
  EXPECT_EQ(p.what, layout::parsed::kind::input);
  EXPECT_EQ(p.host, "node1:7727");
  EXPECT_EQ(p.inc, 42);
  EXPECT_EQ(l.parse(l.host("node2:1")).what, layout::parsed::kind::host);
  EXPECT_EQ(l.parse(l.origin()).what, layout::parsed::kind::origin);
  EXPECT_EQ(l.parse("/tfb/job10/origin").what, layout::parsed::kind::other);
  EXPECT_EQ(l.parse("/tfb/job1/in/broken").what, layout::parsed::kind::other);
  EXPECT_EQ(host_key("a/b c", "7"), "a_b_c:7");
  p = l.parse(l.gone("node1:7727", 42));
  EXPECT_EQ(p.what, layout::parsed::kind::gone);
  EXPECT_EQ(p.host, "node1:7727");
  EXPECT_EQ(p.inc, 42);
  p = l.parse(l.snap(0x1234));
  EXPECT_EQ(p.what, layout::parsed::kind::snap);
  EXPECT_EQ(p.inc, 0x1234);
  p = l.parse(l.snap_chunk(0x1234, 3));
  EXPECT_EQ(p.what, layout::parsed::kind::snap_chunk);
  EXPECT_EQ(p.seq, 3u);
  EXPECT_EQ(l.parse(l.input("h:1", 4, 0xab)).seq, 0xabu);
  for (std::string_view bad : {"/tfb/job1/gone/h:1", "/tfb/job1/gone/h:1/x", "/tfb/job1/snap/12", "/tfb/job1/snap/0000000000000012/1",
                               "/tfb/job1/in/h:1/4", "/tfb/job1/in/h:1/4/zz"})
    EXPECT_EQ(l.parse(bad).what, layout::parsed::kind::other) << bad;
  EXPECT_EQ(prefix_end("/a/"), "/a0");
}

TEST(StorePresence, FormatsAndParses) {
  presence p{state_machine_version, "node1", "10.0.0.1:7727", 42}, q;
  ASSERT_TRUE(presence::parse(p.format(), q));
  EXPECT_EQ(q.node, "node1");
  EXPECT_EQ(q.address, "10.0.0.1:7727");
  EXPECT_EQ(q.pid, 42u);
  EXPECT_FALSE(presence::parse("garbage", q));
}

TEST(StoreKey, ARecordNamesItsKeyAndHoldsASealedOne) {
  std::string secret = "0123", other = "0124";
  key_record r{key_id(&secret), "MUNGE:AbC+/==:"}, q;
  ASSERT_TRUE(key_record::parse(r.format(), q));
  EXPECT_EQ(q.id, r.id);
  EXPECT_EQ(q.munge, "MUNGE:AbC+/==:");  // a credential's own '=' stay
  EXPECT_EQ(q.source(), "a key shared through MUNGE");
  // The name is 16 hex digits, the same for the same key, another for another.
  EXPECT_EQ(key_id(&secret).size(), 16u);
  EXPECT_EQ(key_id(&secret), key_id(&secret));
  EXPECT_NE(key_id(&secret), key_id(&other));
  EXPECT_EQ(key_id(&secret).find(secret), std::string::npos);
  ASSERT_TRUE(key_record::parse(key_record{key_id(&secret), {}}.format(), q));
  EXPECT_TRUE(q.munge.empty());
  EXPECT_EQ(q.source(), "a secret file (key " + key_id(&secret) + ")");
  ASSERT_TRUE(key_record::parse(key_record{key_id(nullptr), {}}.format(), q));
  EXPECT_EQ(q.id, "none");
  // Not a record: another program's value, a name that is not one, a sealed key with no name.
  EXPECT_FALSE(key_record::parse("hello", q));
  EXPECT_FALSE(key_record::parse("tfbarrier key id=xyz", q));
  EXPECT_FALSE(key_record::parse("tfbarrier key id=none munge=MUNGE:x:", q));
  EXPECT_FALSE(key_record::parse("tfbarrier key munge=MUNGE:x:", q));
  EXPECT_FALSE(key_record::parse("tfbarrier key id", q));
}

/// Hosts A and B, each with a replica, fed the same log.
struct two_hosts {
  barrier_set sa, sb;
  replica a{"A:1", sa}, b{"B:1", sb};
  std::string secret = "k";
  std::uint64_t seq = 0;
  two_hosts() {
    presence p{state_machine_version, "n", "x", 1};
    for (auto* r : {&a, &b}) {
      r->host_up("A:1", 10, p);
      r->host_up("B:1", 11, p);
    }
    a.set_incarnation(10);
    b.set_incarnation(11);
  }
  /// host h (incarnation inc) writes one batch; both apply it.
  std::pair<output, output> write(const std::string& h, std::int64_t inc, const std::vector<door_input>& ins) {
    std::vector<std::string> lines;
    for (const auto& in : ins) lines.push_back(encode(in));
    std::uint64_t n = seq++;
    std::string key = layout{"/t"}.input(h, inc, n);
    std::string value = seal_batch(lines, key, &secret);
    std::pair<output, output> out;
    std::string error;
    EXPECT_TRUE(a.apply_batch(h, inc, n, key, value, &secret, out.first, error)) << error;
    EXPECT_TRUE(b.apply_batch(h, inc, n, key, value, &secret, out.second, error)) << error;
    return out;
  }
};

TEST(Replica, TwoHostsReachTheSameReleaseAndEachRepliesToItsOwn) {
  two_hosts t;
  auto [a1, b1] = t.write("A:1", 10, {arrival(1, "e", 2, 0, 100)});
  EXPECT_EQ(lines_to(a1, 1), "WAITING name=e gen=1 arrived=1 n=2\n");
  // Every host's status names the host each participant came through.
  auto st = t.sb.status(proto::status_req{"*", "e", true}, 100);
  ASSERT_EQ(st.barriers.size(), 1u);
  ASSERT_EQ(st.barriers[0].members.size(), 1u);
  EXPECT_EQ(st.barriers[0].members[0].via, "A:1");
  EXPECT_NE(proto::format_reply(st).find("MEMBER rank=0 host=node0 pid=100 chief=0 age_ms=0 via=A:1\n"),
            std::string::npos) << proto::format_reply(st);
  EXPECT_TRUE(t.a.waiting_here(1));
  EXPECT_FALSE(t.b.waiting_here(1));  // B's connection 1 is not A's
  EXPECT_TRUE(b1.sends.empty());  // A's participant is not B's to answer
  // B's participant has the same local connection id 1: another participant.
  auto [a2, b2] = t.write("B:1", 11, {arrival(1, "e", 2, 1, 130)});
  EXPECT_NE(lines_to(a2, 1).find("RELEASE name=e gen=1"), std::string::npos) << lines_to(a2, 1);
  EXPECT_NE(lines_to(b2, 1).find("RELEASE name=e gen=1"), std::string::npos) << lines_to(b2, 1);
  EXPECT_EQ(a2.sends.size(), 1u);
  EXPECT_EQ(b2.sends.size(), 2u);  // WAITING and RELEASE
  proto::status_req all{"*", "", true};
  EXPECT_EQ(proto::format_reply(t.sa.status(all, 200)), proto::format_reply(t.sb.status(all, 200)));
  // Released: nothing more comes to them, so no identity is kept, and their departure would change nothing.
  EXPECT_EQ(t.a.identities(), 0u);
  EXPECT_EQ(t.b.identities(), 0u);
  EXPECT_FALSE(t.a.waiting_here(1));
}

TEST(Replica, EachHostBuildsOnlyItsOwnRepliesOfAReleaseOrAnAbort) {
  two_hosts t;
  // Three of A's, one of B's: at the release, A builds three replies and B one.
  t.write("A:1", 10, {arrival(1, "e", 4, 0, 100), arrival(2, "e", 4, 1, 100), arrival(3, "e", 4, 2, 100)});
  auto [a1, b1] = t.write("B:1", 11, {arrival(7, "e", 4, 3, 101)});
  ASSERT_EQ(a1.sends.size(), 3u);
  for (const auto& e : a1.sends) EXPECT_NE(e.to, 7u);
  for (conn_id c : {1, 2, 3}) EXPECT_NE(lines_to(a1, c).find("RELEASE name=e gen=1"), std::string::npos);
  ASSERT_EQ(b1.sends.size(), 2u);  // its WAITING, then its RELEASE
  EXPECT_NE(lines_to(b1, 7).find("RELEASE name=e gen=1"), std::string::npos);
  EXPECT_EQ(t.a.identities(), 0u);  // B's participant, unseen by A, is forgotten all the same
  EXPECT_EQ(t.b.identities(), 0u);
  // An abort from B of a round with members on both: A tells its own only.
  t.write("A:1", 10, {arrival(4, "f", 3, 0, 200)});
  t.write("B:1", 11, {arrival(8, "f", 3, 1, 201)});
  proto::abort_req ab{"job", "f", "bad data"};
  auto [a2, b2] = t.write("B:1", 11, {input::abort{9, ab, 202}});
  ASSERT_EQ(a2.sends.size(), 1u);
  EXPECT_NE(lines_to(a2, 4).find("ABORTED name=f"), std::string::npos) << lines_to(a2, 4);
  EXPECT_NE(lines_to(b2, 8).find("ABORTED name=f"), std::string::npos) << lines_to(b2, 8);
  EXPECT_NE(lines_to(b2, 9).find("ABORTED name=f gen=1 notified=2"), std::string::npos) << lines_to(b2, 9);
  EXPECT_EQ(t.a.identities(), 0u);
  EXPECT_EQ(t.b.identities(), 0u);
  proto::status_req all{"*", "", true};
  EXPECT_EQ(proto::format_reply(t.sa.status(all, 300)), proto::format_reply(t.sb.status(all, 300)));
}

TEST(Replica, AVerdictFromOneHostReachesTheOther) {
  two_hosts t;
  auto chief = arrival(1, "e", 2, 0, 100);
  chief.req.chief = true;
  t.write("A:1", 10, {chief});
  auto [a0, b0] = t.write("B:1", 11, {arrival(4, "e", 2, 1, 101)});
  EXPECT_NE(lines_to(a0, 1).find("ALLHERE name=e"), std::string::npos) << lines_to(a0, 1);  // A's chief
  EXPECT_TRUE(b0.sends.size() == 1);  // B's participant: WAITING only
  proto::decide d;
  d.scope = "job";
  d.name = "e";
  d.v = verdict::stop;
  d.message = "enough";
  d.id = "decider";
  auto [a, b] = t.write("A:1", 10, {input::decide{2, d, peer_info{"n0", 9}, 102}});
  EXPECT_NE(lines_to(b, 4).find("RELEASE name=e gen=1 verdict=stop"), std::string::npos) << lines_to(b, 4);
  EXPECT_TRUE(lines_to(b, 2).empty());  // B has no connection 2 of its own
  EXPECT_NE(lines_to(a, 2).find("DECIDED name=e gen=1 verdict=stop"), std::string::npos) << lines_to(a, 2);
}

TEST(Replica, AnOldBatchPutAgainIsARefusedReplayOnEveryHostAndAfterASnapshot) {
  // Host A's participant arrives (batch 0) and leaves (batch 1). Someone who
  // can write to etcd puts batch 0 again: its MAC is right, but applied, it
  // would count the participant that left, and release rank 1 without it.
  two_hosts t;
  t.seq = 0;
  t.write("A:1", 10, {arrival(1, "e", 2, 0, 100)});
  t.write("A:1", 10, {input::leave{1, departure::disconnected, 101}});
  std::string key = layout{"/t"}.input("A:1", 10, 0);
  std::string old = seal_batch({encode(arrival(1, "e", 2, 0, 100))}, key, &t.secret);
  barrier_set sc;
  replica c{"C:1", sc};
  std::string error;
  ASSERT_TRUE(c.load(t.a.dump(), error)) << error;  // a host that starts from a snapshot now
  for (auto* r : {&t.a, &t.b, &c}) {
    output out;
    EXPECT_FALSE(r->apply_batch("A:1", 10, 0, key, old, &t.secret, out, error));
    EXPECT_NE(error.find("batch 0 of A:1 incarnation 10 again, after batch 1 was applied: a replay"),
              std::string::npos)
        << error;
  }
  EXPECT_EQ(t.a.dump(), c.dump());
  auto [a, b] = t.write("B:1", 11, {arrival(4, "e", 2, 1, 102)});
  EXPECT_EQ(lines_to(b, 4).find("RELEASE"), std::string::npos) << lines_to(b, 4);
  // The next batch of A is applied as ever; a new incarnation starts from 0.
  t.seq = 2;
  t.write("A:1", 10, {arrival(2, "e", 2, 0, 103)});
  presence p{state_machine_version, "n", "x", 1};
  t.a.host_up("A:1", 20, p);
  output out;
  std::string k20 = layout{"/t"}.input("A:1", 20, 0);
  EXPECT_TRUE(t.a.apply_batch("A:1", 20, 0, k20, seal_batch({encode(arrival(9, "f", 2, 0, 104))}, k20, &t.secret),
                              &t.secret, out, error))
      << error;
}

TEST(Replica, ALostHostWithdrawsOnlyItsOwnIncarnation) {
  two_hosts t;
  t.write("A:1", 10, {arrival(1, "e", 3, 0, 100)});
  t.write("B:1", 11, {arrival(1, "e", 3, 1, 100, "b1")});
  // B restarts as incarnation 20 and its participant arrives again through it.
  presence p{state_machine_version, "n", "x", 2};
  t.a.host_up("B:1", 20, p);
  t.b.host_up("B:1", 20, p);
  t.b.set_incarnation(20);
  t.write("B:1", 20, {arrival(1, "e", 3, 1, 150, "b1")});
  output oa, ob;
  t.a.host_down("B:1", 11, oa);  // the old lease expires late: the participant stays
  t.b.host_down("B:1", 11, ob);
  proto::status_req all{"*", "e", true};
  auto st = t.sa.status(all, 200);
  ASSERT_EQ(st.barriers.size(), 1u);
  EXPECT_EQ(st.barriers[0].arrived, 2u);
  // The new incarnation goes: rank 1 is lost with it, named as such.
  output oc;
  t.a.host_down("B:1", 20, oc);
  st = t.sa.status(all, 200);
  EXPECT_EQ(st.barriers[0].arrived, 1u);
  ASSERT_EQ(st.barriers[0].gone.size(), 1u);
  EXPECT_EQ(st.barriers[0].gone[0].how, departure::lost);
  EXPECT_EQ(t.a.identities(), 1u);
}

TEST(Replica, ABatchOfAnIncarnationThatIsGoneIsNotApplied) {
  two_hosts t;
  output out;
  t.a.host_down("B:1", 11, out);
  std::string key = layout{"/t"}.input("B:1", 11, 0);
  std::string error;
  EXPECT_FALSE(t.a.apply_batch("B:1", 11, 0, key, seal_batch({encode(arrival(1, "e", 2, 1, 5))}, key, &t.secret),
                               &t.secret, out, error));
  EXPECT_NE(error.find("not present"), std::string::npos) << error;
  EXPECT_EQ(t.sa.barrier_count(), 0u);
  // Nor a forged one, nor a malformed one: nothing of it is applied.
  key = layout{"/t"}.input("A:1", 10, 0);
  EXPECT_FALSE(t.a.apply_batch("A:1", 10, 0, key, seal_batch({encode(arrival(1, "e", 2, 1, 5))}, key, nullptr),
                               &t.secret, out, error));
  EXPECT_FALSE(t.a.apply_batch("A:1", 10, 0, key,
                               seal_batch({encode(arrival(1, "e", 2, 1, 5)), "A junk"}, key, &t.secret), &t.secret,
                               out, error));
  EXPECT_EQ(t.sa.barrier_count(), 0u);
}

TEST(Replica, AClosedConnectionIsForgottenAndRepliesToOthersAreDropped) {
  two_hosts t;
  t.write("A:1", 10, {arrival(1, "e", 2, 0, 100), input::leave{1, departure::disconnected, 110, false}});
  EXPECT_EQ(t.a.identities(), 0u);
  EXPECT_EQ(t.sa.waiting(), 0u);
}

}  // namespace
}  // namespace tfb::store
