#include "barrier.h"

#include <algorithm>
#include <fmt/format.h>

#include "duration.h"

namespace tfb {

using proto::verdict;

namespace {
constexpr std::size_t max_recent_rounds = 8;   // released rounds remembered per barrier
constexpr std::size_t max_departed = 64;       // departures remembered per round
constexpr conn_id restored_conn_base = conn_id{1} << 62;  // members restored from the journal have no connection
}  // namespace

journal_entry barrier_set::entry(journal_entry::kind what, const barrier& b, std::uint64_t gen, verdict v,
                                 const std::string& message) {
  journal_entry j;
  j.what = what;
  j.scope = b.scope;
  j.name = b.name;
  j.gen = gen;
  j.v = v;
  j.message = message;
  return j;
}

journal_entry barrier_set::gathered_entry(const barrier& b, const round& r) {
  journal_entry j = entry(journal_entry::kind::gathered, b, r.gen, verdict::none, {});
  j.n = r.n;
  if (r.within >= 0) j.within = r.within;
  chief_arrival(j, r.members.at(*r.chief));
  std::vector<std::pair<std::string, std::optional<std::uint32_t>>> present;
  present.reserve(r.members.size());
  for (const auto& [c, m] : r.members) present.emplace_back(m.id, m.rank);
  std::sort(present.begin(), present.end());
  for (auto& [id, rank] : present) {
    j.ids.push_back(std::move(id));
    j.ranks.push_back(rank);
  }
  return j;
}

void barrier_set::chief_arrival(journal_entry& j, const member& m) {
  j.chief_arrival = true;
  j.id = m.id;
  j.host = m.host;
  j.pid = m.pid;
  j.rank = m.rank;
}

std::string barrier_set::describe(const member& m) {
  std::string who = m.rank ? fmt::format("rank {}", *m.rank) : std::string("a participant without rank");
  return fmt::format("{} ({} pid {})", who, m.host, m.pid);
}

barrier_set::barrier& barrier_set::get(const std::string& scope, const std::string& name, millis now) {
  auto [it, inserted] = barriers_.try_emplace(key{scope, name});
  barrier& b = it->second;
  if (inserted) {
    b.scope = scope;
    b.name = name;
    b.open.opened = now;
  }
  b.last_activity = now;
  return b;
}

bool barrier_set::make_room(conn_id c, const std::string& scope, const std::string& name, millis now,
                            output& out) {
  if (max_barriers_ == 0 || barriers_.size() < max_barriers_ || barriers_.count(key{scope, name}) != 0) return true;
  auto victim = barriers_.end();
  for (auto it = barriers_.begin(); it != barriers_.end(); ++it) {
    const barrier& b = it->second;
    if (busy(b) || now - b.last_activity <= keep_recent_) continue;
    if (victim == barriers_.end()) {
      victim = it;
      continue;
    }
    const barrier& v = victim->second;
    // Finished rounds go before aborts (an abort is what a late participant must still hear).
    if (b.aborted != v.aborted ? !b.aborted : b.last_activity < v.last_activity) victim = it;
  }
  if (victim == barriers_.end() && keep_recent_ == never_forget) {
    out.sends.push_back({c, proto::error_reply{proto::error_kind::busy,
                                               fmt::format("the store holds {} barriers, its limit (serve "
                                                           "--max-barriers, one for every host of the store); "
                                                           "barriers idle for the store's --forget-after are "
                                                           "forgotten: try again later, or use a new prefix with a "
                                                           "higher limit",
                                                           barriers_.size())}});
    out.events.push_back(ev::barrier_refused{scope, name, barriers_.size()});
    return false;
  }
  if (victim == barriers_.end()) {
    out.sends.push_back({c, proto::error_reply{proto::error_kind::busy,
                                               fmt::format("the host holds {} barriers, its limit (serve "
                                                           "--max-barriers), and each was active within the last {} "
                                                           "s; try again later, or raise the limit",
                                                           barriers_.size(), keep_recent_ / 1000)}});
    out.events.push_back(ev::barrier_refused{scope, name, barriers_.size()});
    return false;
  }
  out.events.push_back(ev::barrier_evicted{victim->second.scope, victim->second.name, max_barriers_});
  barriers_.erase(victim);
  return true;
}

barrier_set::round* barrier_set::find_round(barrier& b, std::uint64_t gen) {
  if (b.open.gen == gen) return &b.open;
  auto it = b.gathered.find(gen);
  return it == b.gathered.end() ? nullptr : &it->second;
}

void barrier_set::move_member(round& r, conn_id from, conn_id to, const key* k) {
  auto node = r.members.extract(from);
  node.key() = to;
  member& m = node.mapped();
  m.connected = true;
  if (m.rank) r.by_rank[*m.rank] = to;
  r.by_id[m.id] = to;
  if (r.chief == from) r.chief = to;
  r.members.insert(std::move(node));
  where_.erase(from);
  where_[to] = location{k, r.gen, true};
}

// A participant that comes back with the same id (after a lost connection, or
// a host restart) is the same participant: it is never counted twice.
bool barrier_set::rejoin(barrier& b, conn_id c, const std::string& id, bool is_decide, const peer_info& p,
                         output& out, bool decides) {
  for (const finished& f : b.recent) {
    if (!std::binary_search(f.ids.begin(), f.ids.end(), id)) continue;
    // Released while it was away: it gets that round's outcome, not a new round.
    out.sends.push_back({c, proto::release{b.name, f.gen, f.v,
                                           is_decide ? std::optional<std::uint32_t>(0) : std::nullopt, f.message}});
    out.events.push_back(ev::rejoined_late{round_of(b, f.gen), id});
    return true;
  }
  const key* k = &barriers_.find(key{b.scope, b.name})->first;
  auto try_round = [&](round& r) -> bool {
    auto it = r.by_id.find(id);
    if (it == r.by_id.end()) {
      if (is_decide && std::find(r.decider_ids.begin(), r.decider_ids.end(), id) != r.decider_ids.end()) {
        out.sends.push_back({c, proto::decided{b.name, r.gen, r.v, static_cast<std::uint32_t>(r.members.size()), r.n}});
        r.deciders.push_back(c);
        where_[c] = location{k, r.gen, false};
        return true;
      }
      return false;
    }
    member& m = r.members.at(it->second);
    if (m.host.empty()) {  // restored from the journal's record of a gathered round, which keeps ids and ranks only
      m.host = p.host;
      m.pid = p.pid;
    }
    m.via = via_now_;  // it came back, maybe through another host of the store
    out.events.push_back(ev::rejoined{round_of(b, r.gen), who_of(m)});
    if (r.gathered && m.chief && !m.durable) {
      if (decides) {  // wait --decide-by: the new connection is the one that decides (and must stay)
        move_member(r, it->second, c, k);
        r.members.at(c).decides = true;
      }
      out.sends.push_back({c, proto::all_here{b.name, r.gen, *r.n, *r.n}});
      return true;
    }
    bool durable = m.durable;
    move_member(r, it->second, c, k);
    auto count = static_cast<std::uint32_t>(r.members.size());
    if (durable) {
      r.members.at(c).wants_release = true;
      out.sends.push_back({c, proto::decided{b.name, r.gen, r.v, count, r.n}});
    } else {
      out.sends.push_back({c, proto::waiting{b.name, r.gen, count, r.n}});
    }
    return true;
  };
  for (auto& [g, r] : b.gathered)
    if (try_round(r)) return true;
  return try_round(b.open);
}

bool barrier_set::check_join(barrier& b, conn_id c, const std::optional<std::uint32_t>& n,
                             const std::optional<std::uint32_t>& rank, bool chief, const peer_info& p,
                             output& out) {
  round& r = b.open;
  auto conflict = [&](std::string text) {
    out.events.push_back(ev::conflict{round_of(b, r.gen), p.host, p.pid, text});
    out.sends.push_back({c, proto::error_reply{proto::error_kind::conflict, std::move(text)}});
    return false;
  };
  if (n && r.n && *n != *r.n)
    return conflict(fmt::format("barrier {} round {} has n={} (set by {}); you asked for n={}", b.name, r.gen,
                                *r.n, r.n_by, *n));
  if (!n && !r.n) {
    out.sends.push_back({c, proto::error_reply{proto::error_kind::needn,
                                               fmt::format("barrier {} has nobody waiting, so its size is unknown; "
                                                           "give --n N (or set TFBARRIER_N)",
                                                           b.name)}});
    return false;
  }
  std::uint32_t size = n ? *n : *r.n;
  if (rank && *rank >= size)
    return conflict(fmt::format("rank {} is beyond barrier {} round {}'s n={} (ranks are 0 to {})", *rank, b.name,
                                r.gen, size, size - 1));
  if (rank) {
    auto it = r.by_rank.find(*rank);
    if (it != r.by_rank.end()) {
      const member& holder = r.members.at(it->second);
      return conflict(fmt::format("rank {} of barrier {} round {} is already held by {} pid {}", *rank, b.name,
                                  r.gen, holder.host, holder.pid));
    }
  }
  if (chief && r.chief) {
    const member& holder = r.members.at(*r.chief);
    return conflict(fmt::format("barrier {} round {} already has a chief: {}", b.name, r.gen, describe(holder)));
  }
  return true;
}

// The round's age runs from its first arrival, and goes on if all withdraw.
void barrier_set::first_arrival(round& r, millis now) {
  if (r.started) return;
  r.started = true;
  r.opened = now;
}

void barrier_set::add_member(barrier& b, conn_id c, member m, millis now) {
  round& r = b.open;
  first_arrival(r, now);
  // Who comes back (the same rank, or an unranked participant with its id) is no longer gone.
  std::erase_if(r.departed, [&](const gone& g) { return m.rank ? g.rank == m.rank : !g.rank && g.id == m.id; });
  m.since = now;
  if (m.rank) r.by_rank.emplace(*m.rank, c);
  if (m.chief) r.chief = c;
  r.by_id[m.id] = c;
  r.members.emplace(c, std::move(m));
  where_[c] = location{&barriers_.find(key{b.scope, b.name})->first, r.gen, true};
}

void barrier_set::arrive(conn_id c, const proto::arrive& a, const peer_info& p, millis now, output& out) {
  if (!make_room(c, a.scope, a.name, now, out)) return;
  barrier& b = get(a.scope, a.name, now);
  round& r = b.open;
  if (b.aborted) {
    out.sends.push_back({c, proto::aborted{b.name, b.aborted_gen, std::nullopt, b.abort_reason}});
    return;
  }
  if (rejoin(b, c, a.id, false, p, out, a.decide)) return;
  if (!check_join(b, c, a.n, a.rank, a.chief, p, out)) return;
  if (!r.n) {
    r.n = a.n;
    r.n_by = a.rank ? fmt::format("rank {} on {} pid {}", *a.rank, p.host, p.pid)
                    : fmt::format("{} pid {}", p.host, p.pid);
  }
  member m;
  m.rank = a.rank;
  m.host = p.host;
  m.pid = p.pid;
  m.via = via_now_;
  m.id = a.id;
  m.chief = a.chief;
  m.decides = a.chief && a.decide;
  if (a.chief) r.within = a.within_ms ? millis{*a.within_ms} : -1;
  ev::who who = who_of(m);
  add_member(b, c, std::move(m), now);
  ++out.counted.arrivals;
  auto count = static_cast<std::uint32_t>(r.members.size());
  out.events.push_back(ev::arrived{round_of(b, r.gen), std::move(who), a.chief, count, *r.n});
  out.sends.push_back({c, proto::waiting{b.name, r.gen, count, r.n}});
  if (count == *r.n) complete(b, now, out);
}

// All n are present in b.open: release it, or hand it to the chief.
void barrier_set::complete(barrier& b, millis now, output& out) {
  round& r = b.open;
  std::uint64_t next = r.gen + 1;
  r.complete_at = now;
  if (r.v == verdict::none && r.chief) {
    r.gathered = true;
    member& chief = r.members.at(*r.chief);
    out.events.push_back(ev::gathered{round_of(b, r.gen), *r.n, who_of(chief)});
    out.sends.push_back({*r.chief, proto::all_here{b.name, r.gen, *r.n, *r.n}});
    if (!chief.decides) {
      where_.erase(*r.chief);  // the chief's wait ends here; its arrival stands
      chief.connected = false;
    }  // else its connection stays, and gives the verdict (or its closing aborts the round)
    if (r.within >= 0) {
      r.deadline = now + r.within;  // for status; the abort is measured by the hosts (expire)
      out.deadlines.push_back(decide_deadline{b.scope, b.name, r.gen, r.within});
    }
    // Journaled before ALLHERE goes out: after a crash the round is still complete,
    // and the chief's `decide` (with or without --n) finds it waiting for its verdict.
    out.journal.push_back(gathered_entry(b, r));
    b.gathered.emplace(r.gen, std::move(r));
  } else {
    if (r.v == verdict::none) r.v = verdict::continue_;
    release(b, r, now, out);
  }
  b.open = round{};
  b.open.gen = next;
  b.open.opened = now;
}

// The arrival record of a round that ended (docs/protocol.md, HISTORY).
void barrier_set::record(const barrier& b, const round& r, round_record::ending e, millis now, output& out) {
  if (!r.started) return;
  round_record rec;
  rec.scope = b.scope;
  rec.name = b.name;
  rec.gen = r.gen;
  rec.n = r.n;
  rec.end = e;
  rec.v = e == round_record::ending::release ? r.v : verdict::none;
  rec.first = r.opened;
  rec.ended = now;
  rec.withdrawn = r.withdrawn;
  rec.timeouts = r.timeouts;
  // In arrival order (then by rank), sorted through small keys rather than by
  // moving the records' strings about.
  struct arrival_key {
    millis at;
    std::uint32_t rank;
    const member* m;
  };
  std::vector<arrival_key> order;
  order.reserve(r.members.size());
  for (const auto& [c, m] : r.members) order.push_back({m.since, m.rank.value_or(UINT32_MAX), &m});
  std::sort(order.begin(), order.end(),
            [](const auto& x, const auto& y) { return x.at != y.at ? x.at < y.at : x.rank < y.rank; });
  rec.arrivals.reserve(order.size());
  for (const auto& k : order) rec.arrivals.push_back({k.m->rank, k.m->host, k.at});
  out.rounds.push_back(std::move(rec));
}

// Who a release let go (members and deciders), sorted. Taken from the round,
// which ends with this release: sorted through pointers, then moved.
std::vector<std::string> barrier_set::released_ids(round& r) {
  std::vector<std::string*> order;
  order.reserve(r.members.size() + r.decider_ids.size());
  for (auto& [c, m] : r.members) order.push_back(&m.id);
  for (auto& id : r.decider_ids) order.push_back(&id);
  std::sort(order.begin(), order.end(), [](const std::string* x, const std::string* y) { return *x < *y; });
  std::vector<std::string> ids;
  ids.reserve(order.size());
  for (auto* id : order) ids.push_back(std::move(*id));
  return ids;
}

// A round that ended: freed with the output, after the replies went.
void barrier_set::retire(round&& r, output& out) { out.retired.push_back(std::make_shared<round>(std::move(r))); }

void barrier_set::release(barrier& b, round& r, millis now, output& out) {
  record(b, r, round_record::ending::release, now, out);
  std::uint32_t delivered = 0;
  std::vector<conn_id> want_count;
  out.sends.reserve(out.sends.size() + (out.only_to ? 0 : r.members.size() + r.deciders.size()));
  for (auto& [c, m] : r.members) {
    if (!m.connected) continue;
    where_.erase(c);
    if (m.wants_release) {
      want_count.push_back(c);
      continue;
    }
    if (!out.wanted(c)) {
      ++delivered;
      continue;
    }
    if (m.chief && !m.durable && !m.decides) {
      // A chief that arrived with `wait --chief` is told all are here, as it asked.
      out.sends.push_back({c, proto::all_here{b.name, r.gen, *r.n, *r.n}});
    } else {
      out.sends.push_back({c, proto::release{b.name, r.gen, r.v, std::nullopt, r.message}});
    }
    ++delivered;
  }
  for (conn_id c : r.deciders) where_.erase(c);
  want_count.insert(want_count.end(), r.deciders.begin(), r.deciders.end());
  finished f{r.gen, r.v, r.message, released_ids(r)};
  journal_entry j = entry(journal_entry::kind::release, b, r.gen, r.v, r.message);
  if (out.journaled) j.ids = f.ids;
  out.journal.push_back(std::move(j));
  b.recent.push_front(std::move(f));
  if (b.recent.size() > max_recent_rounds) {
    out.retired.push_back(std::make_shared<finished>(std::move(b.recent.back())));
    b.recent.pop_back();
  }
  round_end ended{false, r.v, r.started && r.complete_at >= r.opened ? r.complete_at - r.opened : -1,
                  !r.verdict_by.empty(), {}};
  const member* last = nullptr;
  for (const auto& [c, m] : r.members)
    if (!last || m.since > last->since || (m.since == last->since && m.host > last->host)) last = &m;
  if (last) ended.last_node = last->host;
  out.ended.push_back(std::move(ended));
  for (conn_id c : want_count)
    if (out.wanted(c)) out.sends.push_back({c, proto::release{b.name, r.gen, r.v, delivered, r.message}});
  out.events.push_back(ev::released{round_of(b, r.gen), *r.n, r.v, r.message});
  retire(std::move(r), out);
}

void barrier_set::deliver_verdict(barrier& b, round& r, verdict v, const std::string& message,
                                  const std::string& by, const std::string& decider_id, conn_id decider, bool wait,
                                  output& out) {
  r.v = v;
  r.message = message;
  r.verdict_by = by;
  r.decider_ids.push_back(decider_id);
  journal_entry j = entry(journal_entry::kind::verdict, b, r.gen, v, message);
  j.id = decider_id;
  j.n = r.n;
  out.journal.push_back(std::move(j));
  auto arrived = static_cast<std::uint32_t>(r.members.size());
  out.events.push_back(ev::verdict_given{round_of(b, r.gen), v, by, message});
  out.sends.push_back({decider, proto::decided{b.name, r.gen, v, arrived, r.n}});
  if (wait) {
    r.deciders.push_back(decider);
    where_[decider] = location{&barriers_.find(key{b.scope, b.name})->first, r.gen, false};
  }
}

namespace {
/// Replies ERR (kind k) to connection c.
void reply_error(output& out, conn_id c, proto::error_kind k, std::string text) {
  out.sends.push_back({c, proto::error_reply{k, std::move(text)}});
}
}  // namespace

void barrier_set::decide(conn_id c, const proto::decide& d, const peer_info& p, millis now, output& out) {
  std::string by = fmt::format("{} pid {}", p.host, p.pid);
  if (auto w = where_.find(c); w != where_.end() && w->second.member) {
    // The chief of `wait --decide-by` gives its verdict on the connection it arrived with.
    decide_as_member(c, w->second, d, by, now, out);
    return;
  }
  barrier* bp = decided_barrier(c, d, now, out);
  if (!bp) return;
  barrier& b = *bp;
  if (b.aborted) {
    reply_error(out, c, proto::error_kind::aborted,
                fmt::format("barrier {} was aborted{}{}", b.name, b.abort_reason.empty() ? "" : ": ", b.abort_reason));
    return;
  }
  if (rejoin(b, c, d.id, true, p, out)) return;
  // A gathered round (chief told ALLHERE) takes the verdict and releases.
  for (auto it = b.gathered.begin(); it != b.gathered.end(); ++it) {
    round& r = it->second;
    if (r.v != verdict::none) continue;
    deliver_verdict(b, r, d.v, d.message, by, d.id, c, d.wait, out);
    release(b, r, now, out);
    b.gathered.erase(it);
    return;
  }
  round& r = b.open;
  if (r.v != verdict::none) {
    decide_again(b, r, c, d, out);
    return;
  }
  if (r.chief) {
    // The chief waits (wait --chief); this verdict is given in advance.
    if (d.n && r.n && *d.n != *r.n) {
      reply_error(out, c, proto::error_kind::conflict,
                  fmt::format("barrier {} round {} has n={} (set by {}); you asked for n={}", b.name, r.gen, *r.n,
                              r.n_by, *d.n));
      return;
    }
    deliver_verdict(b, r, d.v, d.message, by, d.id, c, d.wait, out);
    return;
  }
  // No chief yet: this DECIDE is the chief's arrival, with its verdict.
  decide_on_arrival(b, c, d, p, by, now, out);
}

void barrier_set::decide_as_member(conn_id c, location at, const proto::decide& d, const std::string& by, millis now,
                                   output& out) {
  barrier& b = barriers_.at(*at.k);
  auto g = b.gathered.find(at.gen);
  member* m = nullptr;
  if (g != b.gathered.end()) {
    auto mit = g->second.members.find(c);
    if (mit != g->second.members.end() && mit->second.decides && g->second.v == verdict::none) m = &mit->second;
  }
  if (!m) {
    reply_error(out, c, proto::error_kind::badrequest,
                "this connection waits in a round and decides none: a DECIDE after "
                "ARRIVE needs ARRIVE decide=1, and all present");
    return;
  }
  if (!d.name.empty() && d.name != b.name) {
    reply_error(out, c, proto::error_kind::conflict,
                fmt::format("this connection is the chief of barrier {}, not of {}", b.name, d.name));
    return;
  }
  round& r = g->second;
  b.last_activity = now;
  m->durable = true;  // its verdict is given: it is counted for good, and told the release
  m->wants_release = true;
  deliver_verdict(b, r, d.v, d.message, by, m->id, c, false, out);
  r.decider_ids.pop_back();  // the chief's own id is a member's, already remembered
  release(b, r, now, out);
  b.gathered.erase(g);
}

barrier_set::barrier* barrier_set::decided_barrier(conn_id c, const proto::decide& d, millis now, output& out) {
  if (!d.name.empty()) {
    if (!make_room(c, d.scope, d.name, now, out)) return nullptr;
    return &get(d.scope, d.name, now);
  }
  // Pick the one round of this scope that awaits a verdict, else the one open round.
  std::vector<barrier*> awaiting, open;
  for (auto& [k, b] : barriers_) {
    if (k.first != d.scope || b.aborted) continue;
    bool awaits = std::any_of(b.gathered.begin(), b.gathered.end(),
                              [](const auto& g) { return g.second.v == verdict::none; });
    if (awaits || (b.open.chief && b.open.v == verdict::none)) awaiting.push_back(&b);
    else if (!b.open.members.empty() && b.open.v == verdict::none) open.push_back(&b);
  }
  auto& pick = awaiting.empty() ? open : awaiting;
  if (pick.size() != 1) {
    std::string names;
    for (barrier* b : pick) names += (names.empty() ? "" : ", ") + b->name;
    if (pick.empty())
      reply_error(out, c, proto::error_kind::ambiguous,
                  fmt::format("no barrier of scope {} awaits a verdict or has an open round; give --name NAME",
                              d.scope));
    else if (!awaiting.empty())
      reply_error(out, c, proto::error_kind::ambiguous,
                  fmt::format("{} barriers of scope {} await a verdict ({}); give --name NAME", pick.size(), d.scope,
                              names));
    else
      reply_error(out, c, proto::error_kind::ambiguous,
                  fmt::format("none awaits a verdict, and {} barriers of scope {} have an open round ({}); give "
                              "--name NAME",
                              pick.size(), d.scope, names));
    return nullptr;
  }
  pick.front()->last_activity = now;
  return pick.front();
}

void barrier_set::decide_again(barrier& b, round& r, conn_id c, const proto::decide& d, output& out) {
  if (r.v != d.v || r.message != d.message) {
    reply_error(out, c, proto::error_kind::conflict,
                r.v != d.v ? fmt::format("barrier {} round {} already has the verdict {} (from {}); you sent {}",
                                         b.name, r.gen, proto::to_string(r.v), r.verdict_by, proto::to_string(d.v))
                           : fmt::format("barrier {} round {} already has the verdict {} (from {}) with another "
                                         "message",
                                         b.name, r.gen, proto::to_string(r.v), r.verdict_by));
    return;
  }
  // The same verdict again (a retry): acknowledge it, and remember the decider
  // like any other, so that coming back after the release it is told the outcome.
  if (std::find(r.decider_ids.begin(), r.decider_ids.end(), d.id) == r.decider_ids.end())
    r.decider_ids.push_back(d.id);
  out.sends.push_back({c, proto::decided{b.name, r.gen, r.v, static_cast<std::uint32_t>(r.members.size()), r.n}});
  if (d.wait) {
    r.deciders.push_back(c);
    where_[c] = location{&barriers_.find(key{b.scope, b.name})->first, r.gen, false};
  }
}

void barrier_set::decide_on_arrival(barrier& b, conn_id c, const proto::decide& d, const peer_info& p,
                                    const std::string& by, millis now, output& out) {
  round& r = b.open;
  if (!check_join(b, c, d.n, d.rank, true, p, out)) return;
  if (!r.n) {
    r.n = d.n;
    r.n_by = fmt::format("the chief on {} pid {}", p.host, p.pid);
  }
  member m;
  m.rank = d.rank;
  m.host = p.host;
  m.pid = p.pid;
  m.via = via_now_;
  m.id = d.id;
  m.chief = true;
  m.durable = true;
  m.wants_release = d.wait;
  m.connected = d.wait;
  ev::who who = who_of(m);
  add_member(b, c, std::move(m), now);
  if (!d.wait) where_.erase(c);
  r.v = d.v;
  r.message = d.message;
  r.verdict_by = by;
  journal_entry j = entry(journal_entry::kind::verdict, b, r.gen, d.v, d.message);
  chief_arrival(j, r.members.at(c));
  j.n = r.n;
  out.journal.push_back(std::move(j));
  auto count = static_cast<std::uint32_t>(r.members.size());
  out.events.push_back(ev::arrived_deciding{round_of(b, r.gen), std::move(who), d.v, count, *r.n});
  out.sends.push_back({c, proto::decided{b.name, r.gen, d.v, count, r.n}});
  if (count == *r.n) complete(b, now, out);
}

void barrier_set::abort(conn_id c, const proto::abort_req& a, millis now, output& out) {
  if (!make_room(c, a.scope, a.name, now, out)) return;
  barrier& b = get(a.scope, a.name, now);
  std::uint32_t notified = abort_barrier(b, a.reason, now, out);
  out.sends.push_back({c, proto::aborted{b.name, b.aborted_gen, notified, b.abort_reason}});
}

std::uint32_t barrier_set::abort_barrier(barrier& b, const std::string& reason, millis now, output& out) {
  std::uint32_t notified = 0;
  auto notify = [&](round& r) {
    for (auto& [mc, m] : r.members) {
      if (!m.connected) continue;
      where_.erase(mc);
      if (out.wanted(mc)) out.sends.push_back({mc, proto::aborted{b.name, r.gen, std::nullopt, reason}});
      ++notified;
    }
    for (conn_id dc : r.deciders) {
      where_.erase(dc);
      if (out.wanted(dc)) out.sends.push_back({dc, proto::aborted{b.name, r.gen, std::nullopt, reason}});
    }
  };
  for (auto& [g, r] : b.gathered) {
    notify(r);
    record(b, r, round_record::ending::abort, now, out);
  }
  notify(b.open);
  record(b, b.open, round_record::ending::abort, now, out);
  if (!b.aborted) {
    out.ended.push_back(round_end{true, verdict::none, -1, false, {}});
    b.aborted = true;
    b.aborted_gen = b.gathered.empty() ? b.open.gen : b.gathered.begin()->first;
    b.abort_reason = reason;
  }
  out.journal.push_back(entry(journal_entry::kind::abort, b, b.aborted_gen, verdict::none, b.abort_reason));
  b.gathered.clear();
  std::uint64_t gen = b.open.gen;
  b.open = round{};
  b.open.gen = gen;
  out.events.push_back(ev::aborted{round_of(b, b.aborted_gen), notified, reason});
  return notified;
}

std::string barrier_set::chief_words(const member& m) {
  return m.rank ? fmt::format("the chief (rank {} on {})", *m.rank, m.host)
                : fmt::format("the chief ({} pid {})", m.host, m.pid);
}

void barrier_set::expire(const decide_deadline& which, millis now, output& out) {
  auto it = barriers_.find(key{which.scope, which.name});
  if (it == barriers_.end() || it->second.aborted) return;
  barrier& b = it->second;
  auto g = b.gathered.find(which.gen);
  if (g == b.gathered.end()) return;
  round& r = g->second;
  if (r.within < 0 || r.v != verdict::none) return;
  std::string chief = r.chief && r.members.count(*r.chief) ? chief_words(r.members.at(*r.chief)) : "the chief";
  b.last_activity = now;
  abort_barrier(b,
                fmt::format("{} gave no verdict within {} of all arriving (its --decide-timeout or --decide-within)",
                            chief, format_duration(duration(r.within))),
                now, out);
}

bool barrier_set::decides_on(conn_id c) const {
  auto w = where_.find(c);
  if (w == where_.end() || !w->second.member) return false;
  const barrier& b = barriers_.at(*w->second.k);
  auto g = b.gathered.find(w->second.gen);
  if (g == b.gathered.end() || g->second.v != verdict::none) return false;
  auto m = g->second.members.find(c);
  return m != g->second.members.end() && m->second.decides;
}

std::vector<decide_deadline> barrier_set::pending_deadlines() const {
  std::vector<decide_deadline> all;
  for (const auto& [k, b] : barriers_) {
    if (b.aborted) continue;
    for (const auto& [g, r] : b.gathered)
      if (r.within >= 0 && r.v == verdict::none) all.push_back(decide_deadline{b.scope, b.name, g, r.within});
  }
  return all;
}

void barrier_set::leave(conn_id c, departure how, millis now, output& out, bool timed_out) {
  bool explicit_leave = how == departure::left;
  auto it = where_.find(c);
  if (it == where_.end()) {
    if (explicit_leave) out.sends.push_back({c, proto::left{"", 0}});
    return;
  }
  location loc = it->second;
  where_.erase(it);
  barrier& b = barriers_.at(*loc.k);
  b.last_activity = now;
  round* r = find_round(b, loc.gen);
  if (explicit_leave) out.sends.push_back({c, proto::left{b.name, loc.gen}});
  if (!r) return;
  if (!loc.member) {
    std::erase(r->deciders, c);
    return;
  }
  auto mit = r->members.find(c);
  if (mit == r->members.end()) return;
  member& m = mit->second;
  if (r->gathered || m.durable) {
    // Counted for good: all were present, or the verdict was acknowledged.
    m.connected = false;
    if (r->gathered && m.decides && !m.durable && r->v == verdict::none) {
      // The chief of `wait --decide-by` went before its verdict: nobody else
      // will give one, so the others hear it now, not at their --timeout.
      std::string why = how == departure::left           ? "withdrew while deciding"
                        : how == departure::unresponsive ? "died while deciding (it stopped answering)"
                        : how == departure::lost         ? "died while deciding (its host of the store was lost)"
                                                         : "died while deciding";
      abort_barrier(b, fmt::format("{} {}", chief_words(m), why), now, out);
    }
    return;
  }
  out.events.push_back(ev::withdrew{round_of(b, r->gen), who_of(m), how, r->members.size() - 1, r->n});
  if (r->departed.size() < max_departed) r->departed.push_back(gone{m.rank, m.host, m.pid, how, now, m.id});
  ++r->withdrawn;
  ++(explicit_leave ? out.counted.withdrawals : out.counted.disconnects);
  if (timed_out) ++r->timeouts;
  if (m.rank) r->by_rank.erase(*m.rank);
  r->by_id.erase(m.id);
  if (r->chief == c) r->chief.reset();
  r->members.erase(mit);
  if (r->members.empty() && r->v == verdict::none) {
    // An empty round forgets its size: the next arrival fixes it anew.
    r->n.reset();
    r->n_by.clear();
  }
}

std::size_t barrier_set::open_count() const {
  std::size_t n = 0;
  for (const auto& [k, b] : barriers_)
    if (busy(b)) ++n;
  return n;
}

std::optional<millis> barrier_set::oldest_open() const {
  std::optional<millis> oldest;
  auto consider = [&](const round& r) {
    if (!oldest || r.opened < *oldest) oldest = r.opened;
  };
  for (const auto& [k, b] : barriers_) {
    if (!b.open.members.empty() || !b.open.deciders.empty()) consider(b.open);
    for (const auto& [gen, r] : b.gathered) consider(r);
  }
  return oldest;
}

void barrier_set::came_through(std::string_view host) {
  auto it = std::find(vias_.begin(), vias_.end(), host);
  if (it == vias_.end()) it = vias_.insert(vias_.end(), std::string(host));  // a few hosts: a list is enough
  via_now_ = static_cast<std::uint32_t>(it - vias_.begin());
}

void barrier_set::shutdown(std::string_view text, output& out) {
  for (auto& [c, loc] : where_) out.sends.push_back({c, proto::shutdown{std::string(text)}});
  where_.clear();
}

namespace {
// With a store, a time in the state may come from another host's clock,
// ahead of this one's: an age is never negative (the protocol's are counts).
millis age(millis now, millis since) { return now > since ? now - since : 0; }
}  // namespace

proto::status_reply barrier_set::status(const proto::status_req& s, millis now) const {
  proto::status_reply out;
  auto describe_round = [&](const barrier& b, const round& r, proto::round_state state) {
    proto::barrier_info info;
    info.scope = b.scope;
    info.name = b.name;
    info.gen = r.gen;
    info.state = state;
    info.n = r.n;
    info.arrived = static_cast<std::uint32_t>(r.members.size());
    info.chief = r.chief.has_value();
    info.v = r.v;
    info.age_ms = age(now, r.opened);
    bool all_ranked = true;
    std::vector<std::uint32_t> ranks;
    for (const auto& [c, m] : r.members) {
      if (m.rank)
        ranks.push_back(*m.rank);
      else
        all_ranked = false;
      if (s.detail && info.members.size() < proto::max_member_lines)
        info.members.push_back({m.rank, m.host, m.pid, m.chief, age(now, m.since), vias_[m.via]});
    }
    std::sort(info.members.begin(), info.members.end(), [](const auto& x, const auto& y) {
      return x.rank.value_or(UINT32_MAX) < y.rank.value_or(UINT32_MAX);
    });
    if (s.detail)
      for (const gone& g : r.departed) info.gone.push_back({g.rank, g.host, g.pid, g.how, age(now, g.when)});
    if (r.n && all_ranked) {
      std::sort(ranks.begin(), ranks.end());
      std::vector<std::uint32_t> missing;
      std::size_t j = 0;
      for (std::uint32_t i = 0; i < *r.n; ++i) {
        if (j < ranks.size() && ranks[j] == i)
          ++j;
        else
          missing.push_back(i);
      }
      info.missing = proto::format_ranges(missing, proto::max_missing_ranges);
      if (s.last) {
        // Where the first missing ranks were last seen: those that left this
        // round are known here; the host adds the others from its history.
        for (std::size_t i = 0; i < missing.size() && i < proto::max_missing_nodes; ++i) {
          std::string node;
          for (const gone& g : r.departed)
            if (g.rank == missing[i]) node = hist::node_label(g.host);
          info.missing_nodes.push_back({missing[i], std::move(node)});
        }
      }
    }
    out.barriers.push_back(std::move(info));
  };
  for (const auto& [k, b] : barriers_) {
    if (s.scope != "*" && k.first != s.scope) continue;
    if (!s.name.empty() && k.second != s.name) continue;
    if (b.aborted) {
      proto::barrier_info info;
      info.scope = b.scope;
      info.name = b.name;
      info.gen = b.aborted_gen;
      info.state = proto::round_state::aborted;
      info.reason = b.abort_reason;
      info.age_ms = age(now, b.last_activity);
      out.barriers.push_back(std::move(info));
      continue;
    }
    for (const auto& [g, r] : b.gathered) describe_round(b, r, proto::round_state::gathered);
    // last=1 (status --watch) keeps a barrier on screen between its rounds.
    if (!b.open.members.empty() || !s.name.empty() || (s.last && b.gathered.empty()))
      describe_round(b, b.open, proto::round_state::open);
  }
  return out;
}

void barrier_set::restore(const journal_entry& e, millis now) {
  barrier& b = get(e.scope, e.name, now);
  switch (e.what) {
    case journal_entry::kind::release:
      restore_release(b, e, now);
      break;
    case journal_entry::kind::verdict:
      restore_verdict(b, e, now);
      break;
    case journal_entry::kind::gathered:
      restore_gathered(b, e, now);
      break;
    case journal_entry::kind::abort:
      b.aborted = true;
      b.aborted_gen = e.gen;
      b.abort_reason = e.message;
      b.open = round{};
      b.open.gen = e.gen;
      b.gathered.clear();
      break;
  }
}

void barrier_set::restore_release(barrier& b, const journal_entry& e, millis now) {
  finished f{e.gen, e.v, e.message, e.ids};
  std::sort(f.ids.begin(), f.ids.end());
  b.recent.push_front(std::move(f));
  if (b.recent.size() > max_recent_rounds) b.recent.pop_back();
  b.gathered.erase(e.gen);  // an older round may still wait for its verdict
  if (b.open.gen <= e.gen) {
    b.open = round{};
    b.open.gen = e.gen + 1;
    b.open.opened = now;
  }
}

void barrier_set::restore_verdict(barrier& b, const journal_entry& e, millis now) {
  if (b.open.gen > e.gen) return;  // already released
  if (b.open.gen < e.gen && b.open.members.empty()) b.open.gen = e.gen;
  round& r = b.open;
  r.v = e.v;
  r.message = e.message;
  r.verdict_by = "the journal";
  if (!r.n) r.n = e.n;
  if (r.n_by.empty()) r.n_by = "the chief (restored from the journal)";
  if (e.chief_arrival && !r.by_id.count(e.id)) {
    member m;
    m.rank = e.rank;
    m.host = e.host;
    m.pid = e.pid;
    m.id = e.id;
    m.chief = true;
    m.durable = true;
    m.connected = false;
    conn_id c = restored_conn_base + next_restored_++;
    first_arrival(r, now);
    if (m.rank) r.by_rank.emplace(*m.rank, c);
    r.chief = c;
    r.by_id[m.id] = c;
    m.since = now;
    r.members.emplace(c, std::move(m));
  } else if (!e.chief_arrival) {
    r.decider_ids.push_back(e.id);
  }
}

void barrier_set::restore_gathered(barrier& b, const journal_entry& e, millis now) {
  // A later round may have released while this one waited for its verdict, so only
  // a release of this very round (or this entry twice) makes the entry stale.
  bool released = std::any_of(b.recent.begin(), b.recent.end(), [&](const finished& f) { return f.gen == e.gen; });
  if (released || b.gathered.count(e.gen)) return;
  round r;
  r.gen = e.gen;
  r.n = e.n;
  r.n_by = "the round's members (restored from the journal)";
  r.gathered = true;
  r.opened = now;
  if (e.within) {  // the chief's decide deadline, in full again from the restart
    r.within = *e.within;
    r.deadline = now + r.within;
  }
  for (std::size_t i = 0; i < e.ids.size(); ++i) {
    member m;
    m.id = e.ids[i];
    m.rank = i < e.ranks.size() ? e.ranks[i] : std::nullopt;
    m.connected = false;
    m.since = now;
    if (m.id == e.id) {
      m.chief = true;
      m.host = e.host;
      m.pid = e.pid;
    }
    conn_id c = restored_conn_base + next_restored_++;
    if (m.chief) r.chief = c;
    if (m.rank) r.by_rank.emplace(*m.rank, c);
    r.by_id[m.id] = c;
    r.members.emplace(c, std::move(m));
  }
  b.gathered.emplace(e.gen, std::move(r));
  if (b.open.gen <= e.gen) {
    b.open = round{};
    b.open.gen = e.gen + 1;
    b.open.opened = now;
  }
}

std::vector<journal_entry> barrier_set::snapshot() const {
  std::vector<journal_entry> out;
  for (const auto& [k, b] : barriers_) {
    for (auto it = b.recent.rbegin(); it != b.recent.rend(); ++it) {
      out.push_back(entry(journal_entry::kind::release, b, it->gen, it->v, it->message));
      out.back().ids = it->ids;
    }
    if (b.aborted) {
      out.push_back(entry(journal_entry::kind::abort, b, b.aborted_gen, verdict::none, b.abort_reason));
      continue;
    }
    for (const auto& [g, gr] : b.gathered)
      if (gr.v == verdict::none && gr.chief) out.push_back(gathered_entry(b, gr));
    const round& r = b.open;
    if (r.v == verdict::none) continue;
    journal_entry j = entry(journal_entry::kind::verdict, b, r.gen, r.v, r.message);
    j.n = r.n;
    for (const auto& [c, m] : r.members)
      if (m.chief && m.durable) chief_arrival(j, m);
    if (!j.chief_arrival && !r.decider_ids.empty()) j.id = r.decider_ids.front();
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<barrier_set::idle_barrier> barrier_set::idle_barriers() const {
  std::vector<idle_barrier> out;
  for (const auto& [k, b] : barriers_)
    if (!busy(b)) out.push_back({b.scope, b.name, b.open.gen, b.last_activity});
  return out;
}

bool barrier_set::forget(const idle_barrier& which, output& out) {
  auto it = barriers_.find(key{which.scope, which.name});
  if (it == barriers_.end()) return false;
  const barrier& b = it->second;
  if (busy(b) || b.open.gen != which.gen || b.last_activity != which.last_activity) return false;
  out.events.push_back(ev::barrier_forgotten{b.scope, b.name});
  barriers_.erase(it);
  return true;
}

std::size_t barrier_set::prune(millis now, millis max_idle) {
  std::size_t removed = 0;
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    if (!busy(it->second) && now - it->second.last_activity > max_idle) {
      it = barriers_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

}  // namespace tfb
