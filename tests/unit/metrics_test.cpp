// The metrics' exposition text and the bounded HTTP request reader (metrics.h).
#include "metrics.h"

#include <gtest/gtest.h>

#include <string>

using namespace tfb::metrics;

TEST(Metrics, ExpositionHasEveryFamilyWithHelpAndType) {
  counters c;
  c.released_continue = 3;
  c.released_stop = 1;
  c.aborted = 2;
  c.count_timeout();
  c.auth_failures = 5;
  c.spread.observe(0.003);
  c.spread.observe(100);  // past every bound: only +Inf
  c.latency.observe(0.0002);
  gauges g{7, 9, 4};
  std::string t = format(c, g, "1.2.3");
  EXPECT_NE(t.find("tfbarrier_rounds_released_total{verdict=\"continue\"} 3\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_rounds_released_total{verdict=\"stop\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_rounds_aborted_total 2\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_participants_timed_out_total 1\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_authentication_failures_total 5\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_participants_waiting 7\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_connections 9\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_barriers 4\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_build_info{version=\"1.2.3\"} 1\n"), std::string::npos);
  // Buckets are cumulative; +Inf equals the count.
  EXPECT_NE(t.find("tfbarrier_arrival_spread_seconds_bucket{le=\"0.001\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_arrival_spread_seconds_bucket{le=\"0.01\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_arrival_spread_seconds_bucket{le=\"60\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_arrival_spread_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_arrival_spread_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_release_latency_seconds_bucket{le=\"0.00025\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE tfbarrier_release_latency_seconds histogram\n"), std::string::npos);
  EXPECT_EQ(t.back(), '\n');
  // Every sample's family has a HELP and a TYPE line before it.
  for (const char* fam : {"tfbarrier_rounds_released_total", "tfbarrier_rounds_aborted_total",
                          "tfbarrier_participants_waiting", "tfbarrier_build_info"}) {
    auto help = t.find(std::string("# HELP ") + fam + " ");
    auto type = t.find(std::string("# TYPE ") + fam + " ");
    auto sample = t.find(std::string("\n") + fam);
    ASSERT_NE(help, std::string::npos) << fam;
    EXPECT_LT(help, type);
    EXPECT_LT(type, sample);
  }
}

TEST(Metrics, LabelValueIsEscaped) {
  std::string t = format(counters{}, gauges{}, "a\"b\\c\nd");
  EXPECT_NE(t.find("tfbarrier_build_info{version=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos);
}

TEST(Http, ReadsARequestHead) {
  auto p = parse_request("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization:  Bearer abc \r\n\r\n");
  ASSERT_EQ(p.st, http_parse::state::complete);
  EXPECT_EQ(p.req.method, "GET");
  EXPECT_EQ(p.req.target, "/metrics");
  EXPECT_EQ(p.req.authorization, "Bearer abc");
  auto bare = parse_request("GET /metrics HTTP/1.0\n\n");
  EXPECT_EQ(bare.st, http_parse::state::complete);
}

TEST(Http, IncompleteUntilTheEndOfTheHead) {
  EXPECT_EQ(parse_request("").st, http_parse::state::incomplete);
  EXPECT_EQ(parse_request("GET /metrics HTTP/1.1\r\nHost: x\r\n").st, http_parse::state::incomplete);
}

TEST(Http, TooLargeHeadIsRefused) {
  std::string big = "GET /metrics HTTP/1.1\r\nX: " + std::string(max_request_head, 'a');
  EXPECT_EQ(parse_request(big).st, http_parse::state::too_large);
  EXPECT_EQ(parse_request(big + "\r\n\r\n").st, http_parse::state::too_large);
  EXPECT_NE(refusal(http_parse::state::too_large).find("HTTP/1.1 431 "), std::string::npos);
}

TEST(Http, MalformedRequestsAreBad) {
  for (const char* r : {"GARBAGE\r\n\r\n", "GET /metrics\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n",
                        "GET /metrics HTTP/2\r\n\r\n", "G(T /metrics HTTP/1.1\r\n\r\n",
                        "GET /metrics HTTP/1.1\r\nno colon\r\n\r\n", "GET /metrics HTTP/1.1\r\n: v\r\n\r\n",
                        "GET /metrics HTTP/1.1\r\nAuthorization: a\r\nauthorization: b\r\n\r\n",
                        "GET /met\x01rics HTTP/1.1\r\n\r\n"})
    EXPECT_EQ(parse_request(r).st, http_parse::state::bad) << r;
  EXPECT_NE(refusal(http_parse::state::bad).find("HTTP/1.1 400 "), std::string::npos);
}

TEST(Http, Routes) {
  auto body = [] { return std::string("x 1\n"); };
  http_request get{"GET", "/metrics", std::nullopt};
  std::string ok = respond(get, std::nullopt, body);
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(ok.find("Content-Length: 4\r\n"), std::string::npos);
  EXPECT_EQ(ok.substr(ok.size() - 4), "x 1\n");
  EXPECT_EQ(respond(http_request{"GET", "/metrics?x=1", std::nullopt}, std::nullopt, body).rfind("HTTP/1.1 200", 0),
            0u);
  std::string head = respond(http_request{"HEAD", "/metrics", std::nullopt}, std::nullopt, body);
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(head.find("x 1"), std::string::npos);
  EXPECT_EQ(respond(http_request{"GET", "/", std::nullopt}, std::nullopt, body).rfind("HTTP/1.1 404", 0), 0u);
  std::string post = respond(http_request{"POST", "/metrics", std::nullopt}, std::nullopt, body);
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_NE(post.find("Allow: GET, HEAD\r\n"), std::string::npos);
}

TEST(Http, BearerToken) {
  bool made = false;
  auto body = [&] {
    made = true;
    return std::string("x 1\n");
  };
  std::optional<std::string> token = "s3cret";
  EXPECT_EQ(respond(http_request{"GET", "/metrics", std::nullopt}, token, body).rfind("HTTP/1.1 401", 0), 0u);
  EXPECT_EQ(respond(http_request{"GET", "/metrics", "Bearer wrong"}, token, body).rfind("HTTP/1.1 401", 0), 0u);
  EXPECT_EQ(respond(http_request{"GET", "/metrics", "Basic s3cret"}, token, body).rfind("HTTP/1.1 401", 0), 0u);
  EXPECT_EQ(respond(http_request{"GET", "/metrics", "Bearer s3cre"}, token, body).rfind("HTTP/1.1 401", 0), 0u);
  EXPECT_FALSE(made);  // nothing is made for a refused request
  EXPECT_EQ(respond(http_request{"GET", "/metrics", "Bearer s3cret"}, token, body).rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(respond(http_request{"GET", "/metrics", "bearer s3cret"}, token, body).rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_TRUE(made);
}

// Issue #32 item 7: rounds released with no verdict are verdict="none", not "continue".
TEST(Metrics, RoundsWithoutAVerdictAreNone) {
  counters c;
  c.released_continue = 2;
  c.released_undecided = 5;
  std::string t = format(c, gauges{}, "1");
  EXPECT_NE(t.find("tfbarrier_rounds_released_total{verdict=\"continue\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_rounds_released_total{verdict=\"none\"} 5\n"), std::string::npos);
}

// Issue #32 item 7: a series per node, bounded at any job size.
TEST(Metrics, PerNodeLastIsBounded) {
  counters c;
  for (int i = 0; i < 1000; ++i) c.count_last("node" + std::to_string(i));
  c.count_last("node3");
  c.count_last("a\"b");
  EXPECT_EQ(c.last_by_node.size(), max_node_series);
  EXPECT_EQ(c.last_other, 1000 - max_node_series + 1);
  std::string t = format(c, gauges{}, "1");
  EXPECT_NE(t.find("tfbarrier_node_last_total{node=\"node3\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_node_last_total{node=\"_other\"} 969\n"), std::string::npos);
  std::size_t series = 0;
  for (std::size_t at = 0; (at = t.find("\ntfbarrier_node_last_total{", at)) != std::string::npos; ++at) ++series;
  EXPECT_EQ(series, max_node_series + 1);
}

// Issue #32 item 7: a textfile's labels are on every sample, histograms' too,
// so that two hosts' files on one node never export the same series.
TEST(Metrics, LabelsGoOnEverySample) {
  counters c;
  c.spread.observe(0.5);
  c.count_last("n1");
  gauges g;
  g.store = true;
  g.process = process_stats{1.5, 1.7e9, 4096, 8192, 7, 1024};
  std::string t = format(c, g, "1", "host=\"127.0.0.1:31000\"");
  std::size_t samples = 0, at = 0;
  while (at < t.size()) {
    std::size_t e = t.find('\n', at);
    std::string line = t.substr(at, e - at);
    at = e + 1;
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    EXPECT_NE(line.find("host=\"127.0.0.1:31000\"}"), std::string::npos) << line;
  }
  EXPECT_GT(samples, 40u);
  EXPECT_NE(t.find("tfbarrier_rounds_aborted_total{host=\"127.0.0.1:31000\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_node_last_total{node=\"n1\",host=\"127.0.0.1:31000\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("process_open_fds{host=\"127.0.0.1:31000\"} 7\n"), std::string::npos);
  EXPECT_NE(t.find("tfbarrier_store_apply_lag_revisions{host="), std::string::npos);
}

// The store's and the process's families appear only when they mean something.
TEST(Metrics, StoreAndProcessFamiliesOnlyWhenKnown) {
  std::string t = format(counters{}, gauges{}, "1");
  EXPECT_EQ(t.find("tfbarrier_store_"), std::string::npos);
  EXPECT_EQ(t.find("process_"), std::string::npos);
  gauges g;
  g.store = true;
  g.store_apply_lag = 12;
  g.process = process_stats{};
  t = format(counters{}, g, "1");
  EXPECT_NE(t.find("tfbarrier_store_apply_lag_revisions 12\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE process_start_time_seconds gauge\n"), std::string::npos);
}
