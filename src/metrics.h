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

/// Everything the host counts. A few words, not per participant or round.
struct counters {
  std::uint64_t released_continue = 0, released_stop = 0;
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
};

/// What is read at the moment of a scrape.
struct gauges {
  std::uint64_t waiting = 0;      ///< participants (and deciders) waiting
  std::uint64_t connections = 0;  ///< barrier-protocol connections open
  std::uint64_t barriers = 0;     ///< barriers held
};

/// The text exposition format 0.0.4 of all metrics, ending in a newline.
std::string format(const counters& c, const gauges& g, std::string_view version);

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
