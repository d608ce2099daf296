// The whole state of a barrier_set as text, and back (barrier.h: dump, load):
// what a store's snapshot holds (docs/store.md, "Catch-up"). Unlike the
// journal's snapshot(), nothing is left out: open rounds with their members,
// deciders, departures, where each connection waits. A barrier_set loaded
// from a dump behaves exactly as the one dumped (tests/unit/state_dump_test.cpp).
#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "barrier.h"
#include "state_text.h"

namespace tfb {

namespace {
constexpr int dump_version = 2;  // 2: a round's decide deadline, a member that decides
constexpr std::size_t max_recent_rounds = 8;  // as barrier.cpp
constexpr std::size_t max_departed = 64;

int verdict_number(proto::verdict v) { return static_cast<int>(v); }
bool verdict_of(int n, proto::verdict& v) {
  if (n < 0 || n > 2) return false;
  v = static_cast<proto::verdict>(n);
  return true;
}
bool departure_of(int n, departure& d) {
  if (n < 0 || n > 3) return false;
  d = static_cast<departure>(n);
  return true;
}
}  // namespace

std::string barrier_set::dump() const {
  using text_state::writer;
  std::string out;
  writer w(out);
  w.word("set").num(dump_version).num(next_restored_).num(via_now_).num(vias_.size());
  for (const auto& v : vias_) w.str(v);
  w.end();
  // Where each connection waits, by barrier, in connection order (a dump is the same text on every host).
  std::map<const key*, std::vector<std::pair<conn_id, location>>> waits;
  std::vector<std::pair<conn_id, location>> all(where_.begin(), where_.end());
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& e : all) waits[e.second.k].push_back(e);
  auto dump_round = [&](std::string_view kind, const round& r) {
    w.word("rnd").word(kind).num(r.gen).opt(r.n).str(r.n_by);
    if (r.chief) w.num(*r.chief); else w.word("-");
    w.num(verdict_number(r.v)).str(r.message).str(r.verdict_by).num(r.opened).num(r.complete_at);
    w.flag(r.started).flag(r.gathered).num(r.withdrawn).num(r.timeouts).num(r.within).num(r.deadline);
    w.num(r.decider_ids.size());
    for (const auto& id : r.decider_ids) w.str(id);
    w.num(r.deciders.size());
    for (conn_id c : r.deciders) w.num(c);
    w.end();
    std::vector<conn_id> conns;
    conns.reserve(r.members.size());
    for (const auto& [c, m] : r.members) conns.push_back(c);
    std::sort(conns.begin(), conns.end());
    for (conn_id c : conns) {
      const member& m = r.members.at(c);
      w.word("mem").num(c).opt(m.rank).str(m.host).num(m.pid).num(m.via).str(m.id);
      w.flag(m.chief).flag(m.durable).flag(m.connected).flag(m.wants_release).flag(m.decides).num(m.since).end();
    }
    for (const gone& g : r.departed)
      w.word("gone").opt(g.rank).str(g.host).num(g.pid).num(static_cast<int>(g.how)).num(g.when).str(g.id).end();
  };
  for (const auto& [k, b] : barriers_) {
    w.word("bar").str(b.scope).str(b.name).flag(b.aborted).num(b.aborted_gen).str(b.abort_reason);
    w.num(b.last_activity).end();
    for (const finished& f : b.recent) {
      w.word("fin").num(f.gen).num(verdict_number(f.v)).str(f.message).num(f.ids.size());
      for (const auto& id : f.ids) w.str(id);
      w.end();
    }
    dump_round("open", b.open);
    for (const auto& [g, r] : b.gathered) dump_round("gathered", r);
    auto it = waits.find(&k);
    if (it == waits.end()) continue;
    for (const auto& [c, loc] : it->second) w.word("at").num(c).num(loc.gen).flag(loc.member).end();
  }
  w.word("end").end();
  return out;
}

/// The reading of one dump into a fresh set, kept apart from the set loaded
/// into until it is whole: one function per kind of line, then the checks.
struct barrier_set::loader {
  using reader = text_state::reader;
  barrier_set fresh;
  std::string error;
  int line_no = 0;
  barrier* b = nullptr;  ///< the barrier of the lines that follow its "bar" line
  round* r = nullptr;    ///< the round of the "mem" and "gone" lines that follow its "rnd" line
  bool have_set = false, ended = false;
  std::vector<std::tuple<conn_id, const key*, std::uint64_t, bool>> waits;

  bool fail(std::string_view what) {
    if (error.empty()) error = fmt::format("state line {}: {}", line_no, what);
    return false;
  }

  bool line(std::string_view text) {
    ++line_no;
    if (ended) return fail("text after the end");
    reader rd(text);
    std::string_view kind;
    rd.word(kind);
    if (!have_set) return set_line(kind, rd);
    if (kind == "bar") return bar_line(rd);
    if (kind == "end") {
      ended = rd.at_end();
      return ended || fail("a malformed end");
    }
    if (!b) return fail("a line before any barrier");
    if (kind == "fin") return fin_line(rd);
    if (kind == "rnd") return rnd_line(rd);
    if (kind == "mem") return mem_line(rd);
    if (kind == "gone") return gone_line(rd);
    if (kind == "at") return at_line(rd);
    return fail("an unknown line");
  }

  bool set_line(std::string_view kind, reader& rd) {
    int version = 0;
    std::size_t nv = 0;
    if (kind != "set" || !rd.num(version) || version != dump_version || !rd.num(fresh.next_restored_) ||
        !rd.num(fresh.via_now_) || !rd.num(nv) || nv == 0)
      return fail("not a state of this version");
    fresh.vias_.clear();
    for (std::size_t i = 0; i < nv; ++i) {
      std::string v;
      if (!rd.str(v)) return fail("a malformed host list");
      fresh.vias_.push_back(std::move(v));
    }
    if (!rd.at_end() || fresh.via_now_ >= fresh.vias_.size()) return fail("a malformed host list");
    have_set = true;
    return true;
  }

  bool bar_line(reader& rd) {
    std::string scope, name;
    if (!rd.str(scope) || !rd.str(name)) return fail("a malformed barrier");
    auto [it, fresh_key] = fresh.barriers_.try_emplace(key{scope, name});
    if (!fresh_key) return fail("a barrier twice");
    b = &it->second;
    b->scope = std::move(scope);
    b->name = std::move(name);
    r = nullptr;
    if (!rd.flag(b->aborted) || !rd.num(b->aborted_gen) || !rd.str(b->abort_reason) || !rd.num(b->last_activity) ||
        !rd.at_end())
      return fail("a malformed barrier");
    b->open.gen = 0;  // until its "rnd open" line
    return true;
  }

  bool fin_line(reader& rd) {
    finished f;
    int v = 0;
    std::size_t n = 0;
    if (!rd.num(f.gen) || !rd.num(v) || !verdict_of(v, f.v) || !rd.str(f.message) || !rd.num(n))
      return fail("a malformed finished round");
    for (std::size_t i = 0; i < n; ++i) {
      std::string id;
      if (!rd.str(id)) return fail("a malformed finished round");
      f.ids.push_back(std::move(id));
    }
    if (!rd.at_end() || !std::is_sorted(f.ids.begin(), f.ids.end()) || b->recent.size() >= max_recent_rounds)
      return fail("a malformed finished round");
    b->recent.push_back(std::move(f));
    return true;
  }

  bool rnd_line(reader& rd) {
    std::string_view which;
    round fresh_round;
    std::string why;
    if (!rd.word(which) || (which != "open" && which != "gathered") || !load_round(rd, fresh_round, why))
      return fail(why.empty() ? "a malformed round" : why);
    if (which == "open") {
      if (b->open.gen != 0 || fresh_round.gen == 0) return fail("a second open round");
      b->open = std::move(fresh_round);
      r = &b->open;
      return true;
    }
    if (b->open.gen == 0) return fail("a gathered round before the open one");
    auto [it, added] = b->gathered.emplace(fresh_round.gen, std::move(fresh_round));
    if (!added) return fail("a gathered round twice");
    r = &it->second;
    return true;
  }

  bool mem_line(reader& rd) {
    if (!r) return fail("a member outside a round");
    conn_id c = 0;
    member m;
    if (!rd.num(c) || !rd.opt(m.rank) || !rd.str(m.host) || !rd.num(m.pid) || !rd.num(m.via) || !rd.str(m.id) ||
        !rd.flag(m.chief) || !rd.flag(m.durable) || !rd.flag(m.connected) || !rd.flag(m.wants_release) ||
        !rd.flag(m.decides) || !rd.num(m.since) || !rd.at_end() || m.via >= fresh.vias_.size())
      return fail("a malformed member");
    if (m.rank && !r->by_rank.emplace(*m.rank, c).second) return fail("a rank twice in one round");
    if (!r->by_id.emplace(m.id, c).second) return fail("an id twice in one round");
    if (!r->members.emplace(c, std::move(m)).second) return fail("a member twice");
    return true;
  }

  bool gone_line(reader& rd) {
    if (!r) return fail("a departure outside a round");
    gone g;
    int how = 0;
    if (!rd.opt(g.rank) || !rd.str(g.host) || !rd.num(g.pid) || !rd.num(how) || !departure_of(how, g.how) ||
        !rd.num(g.when) || !rd.str(g.id) || !rd.at_end() || r->departed.size() >= max_departed)
      return fail("a malformed departure");
    r->departed.push_back(std::move(g));
    return true;
  }

  bool at_line(reader& rd) {
    conn_id c = 0;
    std::uint64_t gen = 0;
    bool is_member = false;
    if (!rd.num(c) || !rd.num(gen) || !rd.flag(is_member) || !rd.at_end()) return fail("a malformed wait");
    waits.emplace_back(c, &fresh.barriers_.find(key{b->scope, b->name})->first, gen, is_member);
    return true;
  }

  /// Every reference must hold: chiefs are members, each connection waits once.
  bool check_references() {
    for (const auto& entry : fresh.barriers_) {
      const barrier& bar = entry.second;
      if (bar.open.gen == 0) return (error = "a barrier without its open round"), false;
      auto chief_ok = [&](const round& rr) { return !rr.chief || rr.members.count(*rr.chief) != 0; };
      if (!chief_ok(bar.open) || !std::all_of(bar.gathered.begin(), bar.gathered.end(),
                                              [&](const auto& g) { return chief_ok(g.second); }))
        return (error = "a chief that is not a member"), false;
    }
    for (const auto& [c, k, gen, is_member] : waits) {
      // Kept as they were, even one whose round has gone: leave() tolerates those, so a loaded set must too.
      if (!fresh.where_.emplace(c, location{k, gen, is_member}).second)
        return (error = "a connection that waits twice"), false;
    }
    return true;
  }

  /// A round that breaks the rules' invariants, which every state they make
  /// holds (state_dump_test): such a text would make rounds that never complete, or worse.
  bool inconsistent(const barrier& bar, const round& rr, bool gathered) const {
    if (rr.n && (*rr.n == 0 || *rr.n > proto::max_n)) return true;
    if (!rr.members.empty() && !rr.n) return true;
    if (gathered ? (!rr.n || rr.members.size() != *rr.n || rr.gen >= bar.open.gen)
                 : (rr.n && rr.members.size() >= *rr.n))
      return true;
    for (const auto& [c, m] : rr.members) {
      if (m.rank && (!rr.n || *m.rank >= *rr.n)) return true;
      auto w = fresh.where_.find(c);
      if (m.connected && (w == fresh.where_.end() || w->second.gen != rr.gen || !w->second.member)) return true;
    }
    return false;
  }

  bool check_invariants() {
    for (const auto& entry : fresh.barriers_) {
      const barrier& bar = entry.second;
      if (inconsistent(bar, bar.open, false) ||
          std::any_of(bar.gathered.begin(), bar.gathered.end(),
                      [&](const auto& g) { return inconsistent(bar, g.second, true); }))
        return (error = fmt::format("an inconsistent round of barrier {}/{}", bar.scope, bar.name)), false;
    }
    return true;
  }
};

bool barrier_set::load_round(text_state::reader& r, round& out, std::string& error) {
  std::string_view chief;
  int v = 0;
  std::size_t count = 0;
  if (!r.num(out.gen) || !r.opt(out.n) || !r.str(out.n_by) || !r.word(chief) || !r.num(v) ||
      !verdict_of(v, out.v) || !r.str(out.message) || !r.str(out.verdict_by) || !r.num(out.opened) ||
      !r.num(out.complete_at) || !r.flag(out.started) || !r.flag(out.gathered) || !r.num(out.withdrawn) ||
      !r.num(out.timeouts) || !r.num(out.within) || !r.num(out.deadline) || !r.num(count)) {
    error = "a malformed round";
    return false;
  }
  if (chief != "-") {
    conn_id c = 0;
    auto [p, ec] = std::from_chars(chief.data(), chief.data() + chief.size(), c);
    if (ec != std::errc{} || p != chief.data() + chief.size()) {
      error = "a malformed chief";
      return false;
    }
    out.chief = c;
  }
  for (std::size_t i = 0; i < count; ++i) {
    std::string id;
    if (!r.str(id)) {
      error = "a malformed decider id";
      return false;
    }
    out.decider_ids.push_back(std::move(id));
  }
  if (!r.num(count)) {
    error = "a malformed decider count";
    return false;
  }
  for (std::size_t i = 0; i < count; ++i) {
    conn_id c = 0;
    if (!r.num(c)) {
      error = "a malformed decider";
      return false;
    }
    out.deciders.push_back(c);
  }
  if (!r.at_end()) {
    error = "a round line too long";
    return false;
  }
  return true;
}

bool barrier_set::load(std::string_view text, std::string& error) {
  loader l;
  l.fresh.max_barriers_ = max_barriers_;
  l.fresh.keep_recent_ = keep_recent_;
  bool ok = text_state::each_line(text, [&](std::string_view line) { return l.line(line); });
  if (ok && !l.ended) ok = l.fail("no end (cut short?)");
  if (!ok) {
    error = l.error.empty() ? "a state cut short (a line without its end)" : l.error;
    return false;
  }
  if (!l.check_references() || !l.check_invariants()) {
    error = l.error;
    return false;
  }
  *this = std::move(l.fresh);
  // where_ points at the keys of barriers_: a moved std::map keeps its nodes, so they hold.
  return true;
}

bool barrier_set::connections_below(conn_id limit) const {
  auto below = [&](conn_id c) { return c < limit; };
  for (const auto& [c, loc] : where_)
    if (!below(c)) return false;
  for (const auto& [k, b] : barriers_) {
    auto round_ok = [&](const round& r) {
      return std::all_of(r.members.begin(), r.members.end(), [&](const auto& m) { return below(m.first); }) &&
             std::all_of(r.deciders.begin(), r.deciders.end(), below);
    };
    if (!round_ok(b.open) ||
        !std::all_of(b.gathered.begin(), b.gathered.end(), [&](const auto& g) { return round_ok(g.second); }))
      return false;
  }
  return true;
}

}  // namespace tfb
