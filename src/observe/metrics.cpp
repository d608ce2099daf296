// The host's metrics as text (Prometheus exposition format 0.0.4), and the
// bounded HTTP request reader of `serve --metrics`. Pure: see metrics.h.
#include "metrics.h"

#include <fmt/format.h>

#include "auth.h"

namespace tfb::metrics {
namespace {

// Writes the exposition: families and their samples, every sample with the
// labels given to format() added to its own.
struct writer {
  std::string& out;
  std::string_view labels;

  void family(std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  template <typename V>
  void sample(std::string_view name, std::string_view own, V value) {
    out += name;
    if (!own.empty() || !labels.empty()) {
      out += '{';
      out += own;
      if (!own.empty() && !labels.empty()) out += ',';
      out += labels;
      out += '}';
    }
    out += fmt::format(" {}\n", value);
  }
  template <typename V>
  void one(std::string_view name, std::string_view type, std::string_view help, V value) {
    family(name, type, help);
    sample(name, {}, value);
  }
  template <std::size_t N>
  void histogram(std::string_view name, std::string_view help, const metrics::histogram<N>& h) {
    family(name, "histogram", help);
    std::uint64_t cumulative = 0;
    std::string bucket = fmt::format("{}_bucket", name);
    for (std::size_t i = 0; i < N; ++i) {
      cumulative += h.in[i];
      sample(bucket, fmt::format("le=\"{}\"", h.bounds[i]), cumulative);
    }
    sample(bucket, "le=\"+Inf\"", h.count);
    sample(fmt::format("{}_sum", name), {}, h.sum);
    sample(fmt::format("{}_count", name), {}, h.count);
  }
};

std::string_view reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

bool is_token_char(char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(ch) != std::string_view::npos;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string label_value(std::string_view v) {
  std::string s;
  for (char ch : v) {
    if (ch == '\\' || ch == '"') s += '\\';
    if (ch == '\n') {
      s += "\\n";
      continue;
    }
    s += ch;
  }
  return s;
}

void counters::count_last(std::string_view node) {
  auto it = last_by_node.find(node);
  if (it != last_by_node.end()) {
    ++it->second;
  } else if (last_by_node.size() < max_node_series && !node.empty()) {
    last_by_node.emplace(std::string(node), 1);
  } else {
    ++last_other;
  }
}

std::string format(const counters& c, const gauges& g, std::string_view version, std::string_view labels) {
  std::string out;
  out.reserve(6144);
  writer w{out, labels};
  w.family("tfbarrier_rounds_released_total", "counter",
           "Barrier rounds released, by verdict (none: released with no verdict given, as without a chief).");
  w.sample("tfbarrier_rounds_released_total", "verdict=\"continue\"", c.released_continue);
  w.sample("tfbarrier_rounds_released_total", "verdict=\"stop\"", c.released_stop);
  w.sample("tfbarrier_rounds_released_total", "verdict=\"none\"", c.released_undecided);
  w.one("tfbarrier_rounds_aborted_total", "counter", "Barrier rounds ended by an abort.", c.aborted);
  w.one("tfbarrier_arrivals_total", "counter", "Participants that arrived at a barrier and joined its round.",
        c.arrivals);
  w.one("tfbarrier_withdrawals_total", "counter",
        "Participants that left their round before it ended (LEAVE: Ctrl-C or their --timeout).", c.withdrawals);
  w.one("tfbarrier_disconnects_total", "counter",
        "Participants whose connection closed, went silent past its keep-alive, or whose host was lost, before "
        "their round ended.",
        c.disconnects);
  w.one("tfbarrier_participants_timed_out_total", "counter", "Participants that gave up waiting at their --timeout.",
        c.timed_out);
  w.family("tfbarrier_node_last_total", "counter",
           "Released rounds whose last arrival came from the node (at most 32 nodes; later ones count as _other).");
  for (const auto& [node, n] : c.last_by_node)
    w.sample("tfbarrier_node_last_total", fmt::format("node=\"{}\"", label_value(node)), n);
  w.sample("tfbarrier_node_last_total", "node=\"_other\"", c.last_other);
  w.one("tfbarrier_authentication_failures_total", "counter",
        "Connections refused because their authentication failed.", c.auth_failures);
  w.one("tfbarrier_participants_waiting", "gauge", "Participants (and deciders) waiting at a barrier now.", g.waiting);
  w.one("tfbarrier_connections", "gauge", "Barrier-protocol connections open now.", g.connections);
  w.one("tfbarrier_barriers", "gauge",
        "Barriers with a round under way now: someone waits in it, or the chief's verdict is awaited.", g.barriers);
  w.one("tfbarrier_barriers_held", "gauge", "Barriers the host holds now, idle ones included.", g.barriers_held);
  w.one("tfbarrier_oldest_open_round_age_seconds", "gauge",
        "Age of the oldest round under way (from its first arrival); 0 when none is.", g.oldest_open_seconds);
  w.histogram("tfbarrier_arrival_spread_seconds", "Time from the first to the last arrival of a released round.",
              c.spread);
  w.histogram("tfbarrier_release_latency_seconds",
              "Time from reading the request that released a round to its replies handed to the kernel.", c.latency);
  if (g.store) {
    w.one("tfbarrier_store_divergences_total", "counter",
          "Digests of another host of the store that differed from this host's at the same revision.",
          c.store_divergences);
    w.one("tfbarrier_store_write_errors_total", "counter", "Writes to etcd that failed (each is retried).",
          c.store_write_errors);
    w.one("tfbarrier_store_watch_restarts_total", "counter", "Times the store's watch broke and was resumed.",
          c.store_watch_restarts);
    w.one("tfbarrier_store_hosts_lost_total", "counter",
          "Hosts of the store whose presence went, and whose participants were withdrawn.", c.store_hosts_lost);
    w.one("tfbarrier_store_apply_lag_revisions", "gauge",
          "Revisions of the store etcd has that this host has not applied yet.", g.store_apply_lag);
    w.one("tfbarrier_store_backlog_bytes", "gauge", "Inputs queued for etcd and not yet written, in bytes.",
          g.store_backlog_bytes);
  }
  if (g.process) {
    const process_stats& p = *g.process;
    w.one("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", p.cpu_seconds);
    w.one("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", p.resident_bytes);
    w.one("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", p.virtual_bytes);
    w.one("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
          p.start_time_seconds);
    w.one("process_open_fds", "gauge", "Number of open file descriptors.", p.open_fds);
    w.one("process_max_fds", "gauge", "Maximum number of open file descriptors.", p.max_fds);
  }
  w.family("tfbarrier_build_info", "gauge", "The tfbarrier version of this host.");
  w.sample("tfbarrier_build_info", fmt::format("version=\"{}\"", label_value(version)), 1);
  return out;
}

http_parse parse_request(std::string_view received) {
  http_parse p;
  std::size_t end = received.find("\r\n\r\n");
  std::size_t bare = received.find("\n\n");
  std::size_t head_len = std::string_view::npos;
  if (end != std::string_view::npos) head_len = end;
  if (bare != std::string_view::npos && bare < head_len) head_len = bare;
  if (head_len == std::string_view::npos || head_len > max_request_head) {
    p.st = received.size() > max_request_head || head_len != std::string_view::npos ? http_parse::state::too_large
                                                                                    : http_parse::state::incomplete;
    return p;
  }
  std::string_view head = received.substr(0, head_len);
  p.st = http_parse::state::bad;
  // The request line: METHOD SP TARGET SP HTTP/1.x
  std::size_t nl = head.find('\n');
  std::string_view line = trim(head.substr(0, nl));
  std::size_t sp1 = line.find(' ');
  if (sp1 == 0 || sp1 == std::string_view::npos) return p;
  std::size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return p;
  std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                   version = line.substr(sp2 + 1);
  for (char ch : method)
    if (!is_token_char(ch)) return p;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return p;
  for (char ch : target)
    if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) return p;
  p.req.method = std::string(method);
  p.req.target = std::string(target);
  // Headers: NAME ":" VALUE, one a line (no obsolete line folding).
  std::string_view rest = nl == std::string_view::npos ? std::string_view() : head.substr(nl + 1);
  while (!rest.empty()) {
    std::size_t e = rest.find('\n');
    std::string_view h = rest.substr(0, e);
    rest = e == std::string_view::npos ? std::string_view() : rest.substr(e + 1);
    if (!h.empty() && h.back() == '\r') h.remove_suffix(1);
    if (h.empty()) continue;
    std::size_t colon = h.find(':');
    if (colon == 0 || colon == std::string_view::npos) return p;
    std::string_view name = h.substr(0, colon);
    for (char ch : name)
      if (!is_token_char(ch)) return p;
    if (iequals(name, "authorization")) {
      if (p.req.authorization) return p;  // two: ambiguous
      p.req.authorization = std::string(trim(h.substr(colon + 1)));
    }
  }
  p.st = http_parse::state::complete;
  return p;
}

std::string response(int status, std::string_view body, std::string_view content_type,
                     std::string_view extra_headers) {
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n{}",
                     status, reason(status), content_type, body.size(), extra_headers, body);
}

std::string refusal(http_parse::state st) {
  if (st == http_parse::state::too_large)
    return response(431, "the request line and headers may be 8 KiB at most\n");
  return response(400, "a malformed HTTP/1.x request; this endpoint serves GET /metrics\n");
}

bool bearer_matches(const std::optional<std::string>& authorization, std::string_view token) {
  if (!authorization) return false;
  std::string_view a = *authorization;
  if (a.size() < 7 || !iequals(a.substr(0, 7), "bearer ")) return false;
  // Compared as digests, so that neither the bytes nor the length of the
  // token shows in the time taken.
  return auth::equal(auth::hmac_hex("tfbarrier-metrics", trim(a.substr(7))), auth::hmac_hex("tfbarrier-metrics", token));
}

std::string check(const http_request& r, const std::optional<std::string>& token) {
  if (r.method != "GET" && r.method != "HEAD")
    return response(405, "only GET /metrics is served here\n", "text/plain; charset=utf-8", "Allow: GET, HEAD\r\n");
  std::string_view path = r.target;
  if (auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  if (path != "/metrics") return response(404, "not found: this endpoint serves GET /metrics\n");
  if (token && !bearer_matches(r.authorization, *token))
    return response(401, "this endpoint requires Authorization: Bearer TOKEN (serve --metrics-token-file)\n",
                    "text/plain; charset=utf-8", "WWW-Authenticate: Bearer\r\n");
  return {};
}

}  // namespace tfb::metrics
