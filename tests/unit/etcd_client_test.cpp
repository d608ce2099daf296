// The etcd client (src/store/etcd_client.cpp) against real etcd, started by
// tests/tools/etcd-cluster in a temporary directory and stopped by PID.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "store_client.h"

namespace {

using namespace tfb::store;
using namespace std::chrono_literals;

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  std::array<char, 512> buf{};
  while (auto n = fread(buf.data(), 1, buf.size(), f)) out.append(buf.data(), n);
  int rc = pclose(f);
  EXPECT_EQ(rc, 0) << cmd << ": " << out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::size_t start = 0;
  for (;;) {
    auto c = s.find(',', start);
    v.push_back(s.substr(start, c - start));
    if (c == std::string::npos) return v;
    start = c + 1;
  }
}

/// A port nobody listens on (bound, never listened on, held open by this test).
std::string dead_endpoint() { return "http://127.0.0.1:1"; }

class cluster {
 public:
  /// n members; extra: more options for each (ETCD_EXTRA of etcd-cluster).
  explicit cluster(int n, const std::string& extra = {}) {
    char tmpl[] = "/tmp/tfb-etcd-XXXXXX";
    dir_ = mkdtemp(tmpl);
    endpoints_ = run("ETCD_EXTRA='" + extra + "' " + std::string(TFB_ETCD_CLUSTER) + " start " + dir_ + " " +
                     std::to_string(n));
  }
  /// SIGSTOP (freeze) or SIGCONT (thaw) member i.
  void freeze(int i) const { run(std::string(TFB_ETCD_CLUSTER) + " freeze " + dir_ + " " + std::to_string(i)); }
  void thaw(int i) const { run(std::string(TFB_ETCD_CLUSTER) + " thaw " + dir_ + " " + std::to_string(i)); }
  /// A member that is not the leader (freezing the leader would add an election to what is measured).
  int follower() const { return (std::stoi(run(std::string(TFB_ETCD_CLUSTER) + " leader " + dir_)) + 1) % 3; }
  ~cluster() {
    run(std::string(TFB_ETCD_CLUSTER) + " stop " + dir_);
    std::filesystem::remove_all(dir_);
  }
  std::vector<std::string> endpoints() const { return split(endpoints_); }
  std::string ctl(const std::string& args) const {
    return run("ETCDCTL_API=3 etcdctl --endpoints " + endpoints_ + " " + args + " 2>&1");
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, endpoints_;
};

std::unique_ptr<client> make(const std::vector<std::string>& eps, std::chrono::milliseconds timeout = 2000ms,
                             std::size_t first = 0) {
  client_config cfg;
  cfg.endpoints = eps;
  cfg.timeout = timeout;
  cfg.first = first;
  std::string error;
  std::unique_ptr<client> c(tfb_etcd_client_new(&cfg, &error));
  EXPECT_TRUE(c) << error;
  return c;
}

class etcd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { one_ = new cluster(1); }
  static void TearDownTestSuite() {
    delete one_;
    one_ = nullptr;
  }
  static cluster* one_;
  /// A key prefix of this test's own.
  std::string p() const { return std::string("/t/") + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/"; }
};
cluster* etcd::one_ = nullptr;

op put(std::string k, std::string v, std::int64_t lease = 0) {
  op o;
  o.what = op::type::put;
  o.key = std::move(k);
  o.value = std::move(v);
  o.lease = lease;
  return o;
}
op get(std::string k, std::string end = {}) {
  op o;
  o.what = op::type::range;
  o.key = std::move(k);
  o.range_end = std::move(end);
  return o;
}
op del(std::string k, std::string end = {}) {
  op o;
  o.what = op::type::del;
  o.key = std::move(k);
  o.range_end = std::move(end);
  return o;
}
compare cmp(std::string k, compare::target t, std::int64_t n) {
  compare c;
  c.key = std::move(k);
  c.what = t;
  c.number = n;
  return c;
}

}  // namespace

TEST(etcd_prefix_end, increments_the_last_byte_below_ff) {
  EXPECT_EQ(prefix_end("abc"), "abd");
  EXPECT_EQ(prefix_end(std::string("a\xff", 2)), "b");
  EXPECT_EQ(prefix_end(std::string("\xff\xff", 2)), std::string(1, '\0'));
}

TEST_F(etcd, binary_keys_and_values_round_trip) {
  auto c = make(one_->endpoints());
  const std::string key = p() + std::string("k\n\0\xff\xfe", 5);
  const std::string value = std::string("v\0\n\x80\xc3(", 6) + std::string(1000, 'x');
  txn_result r;
  tfb::error error;
  ASSERT_TRUE(c->txn({}, {put(key, value)}, {}, r, error)) << error.text;
  EXPECT_TRUE(r.succeeded);
  std::vector<kv> out;
  std::int64_t rev = 0;
  ASSERT_TRUE(c->range(p(), prefix_end(p()), out, rev, error)) << error.text;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, key);
  EXPECT_EQ(out[0].value, value);
  EXPECT_EQ(out[0].version, 1);
  EXPECT_EQ(out[0].mod_revision, r.revision);
  EXPECT_EQ(rev, r.revision);
}

TEST_F(etcd, txn_compares_version_and_create_revision_and_returns_ranges) {
  auto c = make(one_->endpoints());
  const std::string k = p() + "k";
  txn_result r;
  tfb::error error;
  ASSERT_TRUE(c->txn({cmp(k, compare::target::version, 0)}, {put(k, "1"), get(k)}, {get(k)}, r, error)) << error.text;
  EXPECT_TRUE(r.succeeded);
  ASSERT_EQ(r.ranges.size(), 2u);
  EXPECT_TRUE(r.ranges[0].empty());
  ASSERT_EQ(r.ranges[1].size(), 1u);
  EXPECT_EQ(r.ranges[1][0].value, "1");
  const std::int64_t created = r.ranges[1][0].create_revision;
  EXPECT_EQ(created, r.revision);

  ASSERT_TRUE(c->txn({cmp(k, compare::target::version, 0)}, {put(k, "2")}, {get(k)}, r, error)) << error.text;
  EXPECT_FALSE(r.succeeded);
  ASSERT_EQ(r.ranges.size(), 1u);
  ASSERT_EQ(r.ranges[0].size(), 1u);
  EXPECT_EQ(r.ranges[0][0].value, "1");

  ASSERT_TRUE(c->txn({cmp(k, compare::target::create_revision, created)}, {put(k, "3")}, {}, r, error)) << error.text;
  EXPECT_TRUE(r.succeeded);
  ASSERT_TRUE(c->txn({cmp(k, compare::target::create_revision, created + 1)}, {put(k, "4")}, {}, r, error)) << error.text;
  EXPECT_FALSE(r.succeeded);
  compare v;
  v.key = k;
  v.what = compare::target::value;
  v.value = "3";
  ASSERT_TRUE(c->txn({v}, {del(k)}, {}, r, error)) << error.text;
  EXPECT_TRUE(r.succeeded);
  std::vector<kv> out;
  std::int64_t rev = 0;
  ASSERT_TRUE(c->range(k, "", out, rev, error)) << error.text;
  EXPECT_TRUE(out.empty());
}

TEST_F(etcd, lease_grant_keepalive_revoke) {
  auto c = make(one_->endpoints());
  tfb::error error;
  std::int64_t id = 0, ttl = 0;
  ASSERT_TRUE(c->grant(30, id, error)) << error.text;
  EXPECT_NE(id, 0);
  ASSERT_TRUE(c->keepalive(id, ttl, error)) << error.text;
  EXPECT_GT(ttl, 20);
  txn_result r;
  const std::string k = p() + "leased";
  ASSERT_TRUE(c->txn({}, {put(k, "x", id)}, {}, r, error)) << error.text;
  std::vector<kv> out;
  std::int64_t rev = 0;
  ASSERT_TRUE(c->range(k, "", out, rev, error)) << error.text;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].lease, id);
  ASSERT_TRUE(c->revoke(id, error)) << error.text;
  ASSERT_TRUE(c->range(k, "", out, rev, error)) << error.text;
  EXPECT_TRUE(out.empty());
  // A revoked (or expired) lease: keepalive says ttl 0; revoke says what etcd said.
  ttl = 99;
  ASSERT_TRUE(c->keepalive(id, ttl, error)) << error.text;
  EXPECT_EQ(ttl, 0);
  EXPECT_FALSE(c->revoke(id, error));
  EXPECT_EQ(error.text, "etcd at " + one_->endpoints()[0] + ": etcdserver: requested lease not found");
  // A put with a lease that does not exist fails with etcd's words.
  EXPECT_FALSE(c->txn({}, {put(k, "x", id)}, {}, r, error));
  EXPECT_NE(error.text.find("lease not found"), std::string::npos) << error.text;
}

TEST_F(etcd, lease_expires) {
  auto c = make(one_->endpoints());
  tfb::error error;
  std::int64_t id = 0, ttl = 0;
  ASSERT_TRUE(c->grant(1, id, error)) << error.text;
  std::this_thread::sleep_for(2500ms);
  ttl = 99;
  ASSERT_TRUE(c->keepalive(id, ttl, error)) << error.text;
  EXPECT_EQ(ttl, 0);
}

TEST_F(etcd, watch_from_a_past_revision_in_order_with_prev_kv) {
  auto c = make(one_->endpoints());
  tfb::error error;
  txn_result r;
  const std::string a = p() + "a", b = p() + "b";
  ASSERT_TRUE(c->txn({}, {put(a, "1")}, {}, r, error)) << error.text;
  const std::int64_t start = r.revision;
  ASSERT_TRUE(c->txn({}, {put(b, "2"), put(a, "3")}, {}, r, error)) << error.text;
  ASSERT_TRUE(c->txn({}, {del(a)}, {}, r, error)) << error.text;
  const std::int64_t last = r.revision;
  std::vector<event> seen;
  auto end = c->watch(p(), prefix_end(p()), start, [&](const std::vector<event>& evs) {
    seen.insert(seen.end(), evs.begin(), evs.end());
    return seen.size() < 4;
  }, error);
  EXPECT_EQ(end, watch_end::cancelled) << error.text;
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].what, event::type::put);
  EXPECT_EQ(seen[0].now.key, a);
  EXPECT_EQ(seen[0].now.mod_revision, start);
  EXPECT_TRUE(seen[0].prev.key.empty());
  EXPECT_EQ(seen[1].now.key, b);
  EXPECT_EQ(seen[2].now.key, a);
  EXPECT_EQ(seen[2].now.value, "3");
  EXPECT_EQ(seen[2].prev.value, "1");
  EXPECT_EQ(seen[3].what, event::type::del);
  EXPECT_EQ(seen[3].now.key, a);
  EXPECT_EQ(seen[3].now.mod_revision, last);
  EXPECT_EQ(seen[3].prev.value, "3");
  // The same client still works after a watch.
  std::vector<kv> out;
  std::int64_t rev = 0;
  EXPECT_TRUE(c->range(b, "", out, rev, error)) << error.text;
}

TEST_F(etcd, watch_delivers_live_events_and_cancel_returns_promptly) {
  auto c = make(one_->endpoints());
  auto writer = make(one_->endpoints());
  tfb::error error;
  std::atomic<int> got{0};
  std::thread t([&] {
    std::this_thread::sleep_for(300ms);
    txn_result r;
    tfb::error e;
    EXPECT_TRUE(writer->txn({}, {put(p() + "live", "x")}, {}, r, e)) << e.text;
  });
  std::chrono::steady_clock::time_point cancelled_at;
  std::thread canceller([&] {
    for (int i = 0; i < 100 && got.load() == 0; ++i) std::this_thread::sleep_for(50ms);
    std::this_thread::sleep_for(1500ms);  // a watch with no traffic
    cancelled_at = std::chrono::steady_clock::now();
    c->cancel();
  });
  auto end = c->watch(p(), prefix_end(p()), 0, [&](const std::vector<event>& evs) {
    got += int(evs.size());
    return true;
  }, error);
  auto returned = std::chrono::steady_clock::now();
  t.join();
  canceller.join();
  EXPECT_EQ(end, watch_end::cancelled) << error.text;
  EXPECT_EQ(got.load(), 1);
  EXPECT_LT(returned - cancelled_at, 1s);
}

TEST_F(etcd, interrupt_ends_a_quiet_watch_promptly_and_the_next_watch_resumes) {
  auto c = make(one_->endpoints());
  auto writer = make(one_->endpoints());
  tfb::error error;
  txn_result r;
  ASSERT_TRUE(writer->txn({}, {put(p() + "a", "1")}, {}, r, error)) << error.text;
  std::chrono::steady_clock::time_point interrupted_at;
  std::thread interrupter([&] {
    std::this_thread::sleep_for(1500ms);  // the watch has had its event, and has no traffic
    interrupted_at = std::chrono::steady_clock::now();
    c->interrupt();
  });
  int got = 0;
  auto end = c->watch(p(), prefix_end(p()), r.revision, [&](const std::vector<event>& evs) {
    got += int(evs.size());
    return true;
  }, error);
  auto returned = std::chrono::steady_clock::now();
  interrupter.join();
  EXPECT_EQ(end, watch_end::interrupted) << error.text;
  EXPECT_EQ(got, 1);
  EXPECT_LT(returned - interrupted_at, 1500ms);
  // Not sticky, unlike cancel(): the next watch brings what was written meanwhile.
  ASSERT_TRUE(writer->txn({}, {put(p() + "b", "2")}, {}, r, error)) << error.text;
  std::vector<event> seen;
  end = c->watch(p(), prefix_end(p()), r.revision, [&](const std::vector<event>& evs) {
    seen = evs;
    return false;
  }, error);
  EXPECT_EQ(end, watch_end::cancelled) << error.text;
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].now.key, p() + "b");
  // An interrupt with no watch under way ends the next one at once; other calls do not see it.
  c->interrupt();
  std::vector<kv> out;
  std::int64_t rev = 0;
  EXPECT_TRUE(c->range(p() + "a", "", out, rev, error)) << error.text;
  end = c->watch(p(), prefix_end(p()), 0, [](const std::vector<event>&) { return true; }, error);
  EXPECT_EQ(end, watch_end::interrupted);
}

TEST_F(etcd, watch_of_a_compacted_revision) {
  auto c = make(one_->endpoints());
  tfb::error error;
  txn_result r;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c->txn({}, {put(p() + "k", std::to_string(i))}, {}, r, error)) << error.text;
  one_->ctl("compact " + std::to_string(r.revision));
  auto end = c->watch(p(), prefix_end(p()), r.revision - 2, [](const std::vector<event>&) { return true; }, error);
  EXPECT_EQ(end, watch_end::compacted);
  EXPECT_NE(error.text.find("compacted"), std::string::npos) << error.text;
}

TEST_F(etcd, fails_over_from_a_dead_endpoint) {
  auto c = make({dead_endpoint(), one_->endpoints()[0]});
  tfb::error error;
  txn_result r;
  ASSERT_TRUE(c->txn({}, {put(p() + "k", "v")}, {}, r, error)) << error.text;
  std::vector<event> seen;
  auto end = c->watch(p(), prefix_end(p()), r.revision, [&](const std::vector<event>& evs) {
    seen = evs;
    return false;
  }, error);
  EXPECT_EQ(end, watch_end::cancelled) << error.text;
  EXPECT_EQ(seen.size(), 1u);
  auto d = make({dead_endpoint(), one_->endpoints()[0]});
  end = d->watch(p(), prefix_end(p()), r.revision, [&](const std::vector<event>& evs) {
    seen = evs;
    return false;
  }, error);
  EXPECT_EQ(end, watch_end::cancelled) << error.text;
}

TEST_F(etcd, a_clear_error_when_no_endpoint_answers) {
  auto c = make({dead_endpoint(), "http://127.0.0.1:2"});
  tfb::error error;
  std::int64_t id = 0;
  EXPECT_FALSE(c->grant(5, id, error));
  EXPECT_NE(error.text.find("no etcd endpoint answered"), std::string::npos) << error.text;
  EXPECT_NE(error.text.find("http://127.0.0.1:1"), std::string::npos) << error.text;
  EXPECT_NE(error.text.find("http://127.0.0.1:2"), std::string::npos) << error.text;
  // What to do: check etcd and the address (and TLS, given none); not a TLS refusal (exit 69, not 77).
  EXPECT_NE(error.text.find("check that etcd runs (`etcdctl --endpoints=http://127.0.0.1:1,http://127.0.0.1:2 endpoint "
                       "health`)"),
            std::string::npos)
      << error.text;
  EXPECT_NE(error.text.find("a TLS etcd also needs --store-ca"), std::string::npos) << error.text;
  EXPECT_EQ(error.kind, tfb::error_kind::store_unreachable);  // out of reach, not refused
  auto end = c->watch("a", "", 0, [](const std::vector<event>&) { return true; }, error);
  EXPECT_EQ(end, watch_end::failed);
  EXPECT_NE(error.text.find("no etcd endpoint answered the watch"), std::string::npos) << error.text;
}

TEST(etcd_cluster3, survives_the_loss_of_a_member) {
  cluster three(3);
  auto eps = three.endpoints();
  auto c = make(eps);
  tfb::error error;
  txn_result r;
  ASSERT_TRUE(c->txn({}, {put("/k", "1")}, {}, r, error)) << error.text;
  // Kill the member the client uses (the first): the next call moves on.
  run(std::string(TFB_ETCD_CLUSTER) + " kill " + three.dir() + " 0");
  bool ok = false;
  for (int i = 0; i < 20 && !ok; ++i) {
    ok = c->txn({}, {put("/k", "2")}, {}, r, error);
    if (!ok) std::this_thread::sleep_for(250ms);
  }
  EXPECT_TRUE(ok) << error.text;
  std::vector<kv> out;
  std::int64_t rev = 0;
  ASSERT_TRUE(c->range("/k", "", out, rev, error)) << error.text;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].value, "2");
}

// Issue #31 item 7: one frozen member of three (SIGSTOP: it accepts
// connections and answers nothing, as a paused VM or a black-holed link).
// Before, a request waited on it for the whole timeout and a watch on it
// waited for ever.
TEST(etcd_cluster3, a_frozen_member_costs_a_request_about_a_second_then_none) {
  cluster three(3);
  auto eps = three.endpoints();
  const int f = three.follower();
  auto c = make(eps, 5000ms, f);  // starts at member f
  tfb::error error;
  txn_result r;
  ASSERT_TRUE(c->txn({}, {put("/f", "1")}, {}, r, error)) << error.text;
  three.freeze(f);
  auto t0 = std::chrono::steady_clock::now();
  bool ok = c->txn({}, {put("/f", "2")}, {}, r, error);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(ok) << error.text;
  EXPECT_LT(took, 2500ms) << "a request waited on the frozen member";
  // It stays with the member that answered: the next request does not wait.
  t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c->txn({}, {put("/f", "3")}, {}, r, error)) << error.text;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 900ms);
  // A client that starts elsewhere never meets the frozen one.
  auto d = make(eps, 5000ms, f + 1);
  t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(d->txn({}, {put("/f", "4")}, {}, r, error)) << error.text;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 900ms);
  three.thaw(f);
}

TEST(etcd_cluster3, a_watch_on_a_frozen_member_ends_and_resumes_on_a_healthy_one) {
  cluster three(3);
  auto eps = three.endpoints();
  const int f = three.follower();
  auto c = make(eps, 2000ms, f);  // watches through member f
  auto w = make(eps, 2000ms, f + 1);
  tfb::error error;
  txn_result r;
  ASSERT_TRUE(w->txn({}, {put("/w/a", "1")}, {}, r, error)) << error.text;
  std::int64_t from = r.revision + 1;
  std::atomic<bool> ended{false};
  watch_end end = watch_end::cancelled;
  tfb::error werror;
  std::thread t([&] {
    end = c->watch("/w/", prefix_end("/w/"), from, [](const std::vector<event>&) { return true; }, werror);
    ended = true;
  });
  std::this_thread::sleep_for(300ms);
  three.freeze(f);
  auto t0 = std::chrono::steady_clock::now();
  while (!ended && std::chrono::steady_clock::now() - t0 < 8s) std::this_thread::sleep_for(50ms);
  auto took = std::chrono::steady_clock::now() - t0;
  if (!ended) c->cancel();  // the watch waited on the frozen member
  t.join();
  ASSERT_TRUE(ended.load()) << "the watch on a frozen member did not end";
  EXPECT_LT(took, 3500ms);
  EXPECT_EQ(end, watch_end::failed);
  EXPECT_NE(werror.text.find("did not answer a probe"), std::string::npos) << werror.text;
  // Resumed from its revision, on the next endpoint: nothing is missed.
  ASSERT_TRUE(w->txn({}, {put("/w/b", "2")}, {}, r, error)) << error.text;
  std::vector<std::string> keys;
  end = c->watch("/w/", prefix_end("/w/"), from, [&](const std::vector<event>& evs) {
    for (const auto& e : evs) keys.push_back(e.now.key);
    return keys.size() < 1;
  }, werror);
  EXPECT_EQ(end, watch_end::cancelled) << werror.text;
  EXPECT_EQ(keys, std::vector<std::string>{"/w/b"});
  three.thaw(f);
}

// Issue #31 item 8: a quiet prefix's watch learns how far etcd has got
// (progress notifications), so that it can resume after a compaction that
// another tenant made.
TEST(etcd_progress, a_quiet_watch_is_told_the_revision_etcd_has_reached) {
  cluster one(1, "--experimental-watch-progress-notify-interval=300ms");
  auto c = make(one.endpoints());
  auto o = make(one.endpoints());
  tfb::error error;
  txn_result r;
  ASSERT_TRUE(o->txn({}, {put("/mine/a", "1")}, {}, r, error)) << error.text;
  std::int64_t from = r.revision + 1;
  // Another tenant writes; under /mine/ nothing happens.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(o->txn({}, {put("/other/k", std::to_string(i))}, {}, r, error)) << error.text;
  const std::int64_t reached = r.revision;
  std::atomic<std::int64_t> told{0};
  std::thread t([&] {
    tfb::error e;
    c->watch("/mine/", prefix_end("/mine/"), from, [](const std::vector<event>&) { return true; }, e,
             [&](std::int64_t rev) { told = rev; });
  });
  for (int i = 0; i < 60 && told < reached; ++i) std::this_thread::sleep_for(100ms);
  c->cancel();
  t.join();
  EXPECT_GE(told.load(), reached);
}
