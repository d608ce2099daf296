#include "events_out.h"

#include <fmt/format.h>

namespace tfb::observe {
namespace {

std::string label(const ev::round_id& r) {
  if (r.scope == "default") return fmt::format("{}#{}", r.name, r.gen);
  return fmt::format("{}/{}#{}", r.scope, r.name, r.gen);
}

std::string describe(const ev::who& m) {
  std::string who = m.rank ? fmt::format("rank {}", *m.rank) : std::string("a participant without rank");
  return fmt::format("{} ({} pid {})", who, m.host, m.pid);
}

/// ": text", or nothing for an empty text.
std::string colon(const std::string& text) { return text.empty() ? std::string() : ": " + text; }

/// The line of each kind, in the words the log has always had.
struct render {
  std::string operator()(const ev::barrier_refused& e) const {
    return fmt::format("refused a new barrier {}/{}: {} barriers, the limit", e.scope, e.name, e.count);
  }
  std::string operator()(const ev::barrier_evicted& e) const {
    return fmt::format("forgot barrier {}/{} to make room (--max-barriers {})", e.scope, e.name, e.max);
  }
  std::string operator()(const ev::barrier_forgotten& e) const {
    return fmt::format("forgot barrier {}/{} (idle for the store's --forget-after)", e.scope, e.name);
  }
  std::string operator()(const ev::rejoined_late& e) const {
    return fmt::format("rejoin {}: participant {} came back after the release; told the outcome", label(e.round),
                       e.id);
  }
  std::string operator()(const ev::rejoined& e) const {
    return fmt::format("rejoin {}: {} came back", label(e.round), describe(e.member));
  }
  std::string operator()(const ev::conflict& e) const {
    return fmt::format("conflict {}: {} pid {}: {}", label(e.round), e.host, e.pid, e.text);
  }
  std::string operator()(const ev::arrived& e) const {
    return fmt::format("arrive {}: {}{}, {}/{}", label(e.round), describe(e.member), e.chief ? " as chief" : "",
                       e.count, e.n);
  }
  std::string operator()(const ev::arrived_deciding& e) const {
    return fmt::format("arrive {}: {} as chief with verdict {}, {}/{}", label(e.round), describe(e.member),
                       proto::to_string(e.v), e.count, e.n);
  }
  std::string operator()(const ev::gathered& e) const {
    return fmt::format("gathered {}: all {} present; waiting for the chief's verdict ({})", label(e.round), e.n,
                       describe(e.chief));
  }
  std::string operator()(const ev::verdict_given& e) const {
    return fmt::format("verdict {}: {} from {}{}", label(e.round), proto::to_string(e.v), e.by, colon(e.message));
  }
  std::string operator()(const ev::released& e) const {
    return fmt::format("release {}: {} participant{}, verdict {}{}", label(e.round), e.n, e.n == 1 ? "" : "s",
                       proto::to_string(e.v), colon(e.message));
  }
  std::string operator()(const ev::aborted& e) const {
    return fmt::format("abort {}: {} participant{} told{}", label(e.round), e.told, e.told == 1 ? "" : "s",
                       colon(e.reason));
  }
  std::string operator()(const ev::withdrew& e) const {
    return fmt::format("leave {}: {} withdrew ({}), {}/{}", label(e.round), describe(e.member),
                       proto::to_string(e.how), e.left, e.n ? std::to_string(*e.n) : "?");
  }
  std::string operator()(const ev::journal_not_compacted& e) const {
    return fmt::format("warning: cannot compact the journal {}: {}", e.path, e.why);
  }
  std::string operator()(const ev::store_host_left& e) const {
    return fmt::format("store: host {} left (incarnation {}); its participants of open rounds are withdrawn", e.host,
                       e.inc);
  }
  std::string operator()(const ev::bad_client& e) const {
    if (e.what.empty()) return fmt::format("bad client {}: it does not read its replies; closing", e.remote);
    return fmt::format("bad client {}: {}", e.remote, e.what);
  }
  std::string operator()(const ev::client_silent& e) const {
    return fmt::format("client {} sent nothing for {}; closing", e.remote, e.silent);
  }
  std::string operator()(const ev::connection_evicted& e) const {
    return fmt::format("warning: {} connections open (limit {}): closing the oldest that has not authenticated, "
                       "from {}, to make room for one from {}",
                       e.open, e.limit, e.oldest, e.newcomer);
  }
  // Counted only: no line.
  std::string operator()(const ev::store_host_lost&) const { return {}; }
  std::string operator()(const ev::store_diverged&) const { return {}; }
  std::string operator()(const ev::auth_failed&) const { return {}; }
  std::string operator()(const ev::timeout_leave&) const { return {}; }
};

}  // namespace

std::string line(const ev::event& e) { return std::visit(render{}, e); }

severity severity_of(const ev::event& e) {
  bool warning = std::holds_alternative<ev::journal_not_compacted>(e) ||
                 std::holds_alternative<ev::connection_evicted>(e);
  return warning ? severity::warning : severity::info;
}

void log_writer::operator()(const ev::event& e) const {
  if (quiet_ && severity_of(e) != severity::warning) return;
  std::string text = line(e);
  if (!text.empty()) write_(text);
}

void count(metrics::counters& c, const ev::event& e) {
  if (std::holds_alternative<ev::auth_failed>(e))
    ++c.auth_failures;
  else if (std::holds_alternative<ev::timeout_leave>(e))
    c.count_timeout();
  else if (std::holds_alternative<ev::store_host_lost>(e))
    ++c.store_hosts_lost;
  else if (std::holds_alternative<ev::store_diverged>(e))
    ++c.store_divergences;
}

std::size_t count(metrics::counters& c, tally& t, std::vector<round_end>& ended) {
  c.arrivals += t.arrivals;
  c.withdrawals += t.withdrawals;
  c.disconnects += t.disconnects;
  t = {};
  std::size_t released = 0;
  for (const auto& e : ended) {
    if (e.aborted) {
      ++c.aborted;
      continue;
    }
    ++(!e.decided ? c.released_undecided : e.v == proto::verdict::stop ? c.released_stop : c.released_continue);
    if (!e.last_node.empty()) c.count_last(e.last_node);
    if (e.spread >= 0) c.spread.observe(static_cast<double>(e.spread) / 1000.0);
    ++released;
  }
  ended.clear();
  return released;
}

void history_feed::take(std::vector<round_record>& rounds, std::int64_t wall, millis mono) {
  for (auto& r : rounds) {
    std::int64_t wall_first = wall - (mono - r.first);
    pending_.emplace_back(std::move(r), wall_first);
  }
  rounds.clear();
}

void history_feed::drain(const std::function<void(const round_record&, std::int64_t)>& add) {
  for (const auto& [r, wall_first] : pending_) add(r, wall_first);
  pending_.clear();
}

}  // namespace tfb::observe
