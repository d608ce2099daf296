#pragma once
// The host's metrics (`serve --metrics`, `--metrics-textfile`), pure: the
// counters and histograms the host keeps, their Prometheus text exposition
// (format 0.0.4), and a small, strictly bounded HTTP/1.x request reader for
// `GET /metrics` with the answer it gets. No sockets, no clock: host.cpp
// feeds the events and the bytes, and writes what comes back
// (docs/monitoring.md). No barrier or scope labels: a series per barrier
// name (one per epoch) would grow without bound.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tfb::metrics {

/// A histogram of durations, in seconds, with fixed upper bounds.
template <std::size_t N>
struct histogram {
  std::array<double, N> bounds;       ///< upper bounds, ascending; +Inf is implicit
  std::array<std::uint64_t, N> in{};  ///< observations per bucket (not cumulative)
  std::uint64_t count = 0;
  double sum = 0;
  void observe(double seconds) {
    for (std::size_t i = 0; i < N; ++i)
      if (seconds <= bounds[i]) {
        ++in[i];
        break;
      }
    ++count;
    sum += seconds;
  }
};

/// At most this many nodes get a series of their own in
/// tfbarrier_node_last_total; later ones are counted under node="_other",
/// so that the series stay bounded at any job size.
inline constexpr std::size_t max_node_series = 32;

/// Everything the host counts. A few words, not per participant or round
/// (the per-node counter is bounded by max_node_series).
struct counters {
  std::uint64_t released_continue = 0, released_stop = 0;
  std::uint64_t released_undecided = 0;  ///< released with no verdict given (no chief): verdict="none"
  std::uint64_t arrivals = 0, withdrawals = 0, disconnects = 0;  ///< barrier.h's tally
  std::map<std::string, std::uint64_t, std::less<>> last_by_node;  ///< released rounds whose last arrival was on the node
  std::uint64_t last_other = 0;  ///< ... on a node past max_node_series
  // With a store (docs/store.md):
  std::uint64_t store_write_errors = 0;   ///< writes to etcd that failed (each is retried)
  std::uint64_t store_watch_restarts = 0;  ///< the watch broke and was resumed
  std::uint64_t store_hosts_lost = 0;     ///< other hosts whose presence went and whose participants were withdrawn
  std::uint64_t aborted = 0;     ///< rounds ended by ABORT
  std::uint64_t timed_out = 0;   ///< participants that gave up at their --timeout (count_timeout)
  std::uint64_t auth_failures = 0;
  std::uint64_t store_divergences = 0;  ///< a store's host found its state differs from another's (digests)
  /// First to last arrival of a released round.
  histogram<12> spread{{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  /// From reading the request that released a round (its last arrival, or
  /// the chief's verdict) to its replies handed to the kernel.
  histogram<12> latency{{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}};

  /// A participant gave up at its --timeout (a LEAVE that says so).
  void count_timeout() { ++timed_out; }
  /// A released round's last arrival was on this node.
  void count_last(std::string_view node);
};

/// The standard process_* metrics, read from /proc by the host (sys).
struct process_stats {
  double cpu_seconds = 0;          ///< user and system
  double start_time_seconds = 0;   ///< since the Unix epoch
  std::uint64_t resident_bytes = 0, virtual_bytes = 0;
  std::uint64_t open_fds = 0, max_fds = 0;
};

/// What is read at the moment of a scrape.
struct gauges {
  std::uint64_t waiting = 0;      ///< participants (and deciders) waiting
  std::uint64_t connections = 0;  ///< barrier-protocol connections open
  std::uint64_t barriers = 0;     ///< barriers with a round under way (barrier_set::open_count)
  std::uint64_t barriers_held = 0;  ///< barriers held, idle ones too
  double oldest_open_seconds = 0;   ///< age of the oldest round under way; 0 when none is
  std::optional<process_stats> process;  ///< when /proc could be read
  bool store = false;               ///< with a store: the store_* gauges below mean something
  std::uint64_t store_apply_lag = 0;     ///< revisions etcd has that this host has not applied
  std::uint64_t store_backlog_bytes = 0;  ///< inputs queued for etcd, not yet written
};

/// The text exposition format 0.0.4 of all metrics, ending in a newline.
/// labels: label pairs put on every series (`host="127.0.0.1:31000"`), or
/// empty: a textfile's, since node_exporter drops series that two files
/// on one node both export.
std::string format(const counters& c, const gauges& g, std::string_view version, std::string_view labels = {});
/// A label value escaped for the exposition (backslash, quote, newline).
std::string label_value(std::string_view v);

// ---- HTTP ----

inline constexpr std::size_t max_request_head = 8192;  ///< request line and headers

struct http_request {
  std::string method, target;
  std::optional<std::string> authorization;  ///< the Authorization header's value
};

/// Reads one request head from the bytes received so far.
struct http_parse {
  enum class state {
    incomplete,  ///< no end of head yet (and under the limit): read more
    complete,    ///< req holds the request
    bad,         ///< malformed: 400
    too_large,   ///< no end of head within max_request_head: 431
  } st = state::incomplete;
  http_request req;
};
http_parse parse_request(std::string_view received);

/// The whole response (status line, headers, body; Connection: close) to a
/// request. token: the bearer token required (nullopt: none). body: the
/// exposition, made only when the request may have it.
template <typename Body>
std::string respond(const http_request& r, const std::optional<std::string>& token, Body&& body);

/// A response with this status and a plain-text body (a sentence).
std::string response(int status, std::string_view body, std::string_view content_type = "text/plain; charset=utf-8",
                     std::string_view extra_headers = {});
/// 400 or 431 for a head that cannot be served.
std::string refusal(http_parse::state st);
/// Whether the Authorization value is "Bearer TOKEN" (compared in constant time).
bool bearer_matches(const std::optional<std::string>& authorization, std::string_view token);

/// 405/404/401, or empty when the request may have the metrics.
std::string check(const http_request& r, const std::optional<std::string>& token);

template <typename Body>
std::string respond(const http_request& r, const std::optional<std::string>& token, Body&& body) {
  std::string refused = check(r, token);
  if (!refused.empty()) return refused;
  std::string text = body();
  if (r.method == "HEAD") {
    std::string head = response(200, text, "text/plain; version=0.0.4; charset=utf-8");
    return head.substr(0, head.size() - text.size());
  }
  return response(200, text, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace tfb::metrics
