#include "follower.h"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <optional>
#include <set>

#include "auth.h"

namespace tfb::store {

namespace {

template <class T>
bool number_of(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

/// Marks the end of host's incarnation inc (presence: its presence's text), counted as a host lost.
action marked_gone(const std::string& host, std::int64_t inc, std::string presence) {
  action a{action::kind::mark_gone, {}, false, host, inc, std::move(presence)};
  a.out.events.push_back(tfb::ev::store_host_lost{host, inc});
  return a;
}

/// A warning for the host's log.
void warn(std::vector<action>& acts, std::string text) {
  acts.push_back(action{action::kind::warn, {}, false, {}, 0, std::move(text)});
}

}  // namespace

std::string format_origin(const shared_settings& s) {
  return fmt::format("tfbarrier store sm={} max-barriers={} forget-after={}", state_machine_version, s.max_barriers,
                     s.forget_after);
}

bool parse_origin(std::string_view text, int& sm, shared_settings& out) {
  constexpr std::string_view head = "tfbarrier store ";
  if (!text.starts_with(head)) return false;
  text.remove_prefix(head.size());
  bool have_sm = false, have_max = false, have_forget = false;
  while (!text.empty()) {
    auto sp = text.find(' ');
    std::string_view w = text.substr(0, sp);
    text = sp == std::string_view::npos ? std::string_view() : text.substr(sp + 1);
    auto eq = w.find('=');
    if (eq == std::string_view::npos) return false;
    std::string_view k = w.substr(0, eq), v = w.substr(eq + 1);
    if (k == "sm")
      have_sm = number_of(v, sm);
    else if (k == "max-barriers")
      have_max = number_of(v, out.max_barriers);
    else if (k == "forget-after")
      have_forget = number_of(v, out.forget_after) && out.forget_after > 0;
    else
      return false;
  }
  // Version 2 and older wrote the version alone; from 3 on, both settings.
  return have_sm && (sm < 3 || (have_max && have_forget));
}

void catch_up_events(const layout& keys, const std::vector<kv>& all, const std::string* secret, catch_up& out) {
  using kind = layout::parsed::kind;
  std::set<std::pair<std::string, std::int64_t>> live, mentioned;
  std::map<std::pair<std::string, std::int64_t>, std::string> ended;
  for (const auto& k : all) {
    auto p = keys.parse(k.key);
    if (p.what == kind::host && leased(k)) {  // one without a lease counts for nothing (leased)
      out.live.push_back(k);
      live.emplace(p.host, k.create_revision);
    }
    // A key takes effect at its create_revision (first_version): one made
    // before the snapshot is in it, even if it was put again after.
    if (k.create_revision <= out.snap_rev) continue;
    if (p.what == kind::host || p.what == kind::input || p.what == kind::gone) {
      kv first = k;
      first.mod_revision = first.create_revision;
      first.version = 1;
      out.events.push_back(event{event::type::put, std::move(first), {}});
    }
    if (p.what == kind::input) mentioned.emplace(p.host, p.inc);
    if (p.what == kind::gone) {
      std::string presence, why;
      if (open_gone(k.key, k.value, secret, presence, why)) ended[{p.host, p.inc}] = presence;
    }
  }
  // A host that registered after the snapshot and has gone since: its
  // presence key is no more, but its inputs and end are. It was present from
  // its incarnation's revision on (that is what an incarnation is).
  for (const auto& [h, inc] : mentioned) ended.try_emplace({h, inc}, std::string());
  for (const auto& [hi, value] : ended) {
    const auto& [h, inc] = hi;
    if (inc <= out.snap_rev || live.count(hi)) continue;
    kv k;
    k.key = keys.host(h);
    k.create_revision = k.mod_revision = inc;
    k.version = 1;
    k.lease = lease_gone;  // it held one: its host registered
    k.value = value.empty() ? presence{state_machine_version, h.substr(0, h.rfind(':')), {}, 0}.format() : value;
    out.events.push_back(event{event::type::put, std::move(k), {}});
  }
  std::stable_sort(out.events.begin(), out.events.end(),
                   [](const event& a, const event& b) { return a.now.mod_revision < b.now.mod_revision; });
}

std::string seal_digest(std::string_view key, std::string_view hex, const std::string* secret) {
  std::string out = fmt::format("D {}", hex);
  if (secret) out += " mac=" + auth::hmac_hex(*secret, std::string(key) + "\n" + out);
  return out;
}

bool open_digest(std::string_view key, std::string_view value, const std::string* secret, std::string& hex,
                 std::string& error) {
  std::string_view body = value;
  if (secret) {
    auto at = value.rfind(" mac=");
    if (at == std::string_view::npos ||
        !auth::equal(value.substr(at + 5), auth::hmac_hex(*secret, std::string(key) + "\n" + std::string(value.substr(0, at))))) {
      error = "a digest without this job's MAC (written by someone without its secret)";
      return false;
    }
    body = value.substr(0, at);
  }
  if (!body.starts_with("D ") || body.size() != 2 + 64 ||
      body.substr(2).find_first_not_of("0123456789abcdef") != std::string_view::npos) {
    error = "not a digest";
    return false;
  }
  hex = body.substr(2);
  return true;
}

// Another host's digest of the state after revision R, which this host has
// applied too (the key was written after R): the same log must give the same
// state. A host that differs from the time keeper (the snapshots' writer)
// starts over from the newest snapshot, once per snapshot; the keeper, or a
// host that has started over from that snapshot already, says so only.
void follower::compare_digest(const layout::parsed& k, const event& ev, std::vector<action>& acts) {
  std::string hex, error;
  if (k.host == self_) return;
  if (!open_digest(ev.now.key, ev.now.value, secret_, hex, error)) {
    acts.push_back(action{action::kind::warn, {}, false, {}, 0,
                          fmt::format("warning: store: {} not compared: {}", ev.now.key, error)});
    return;
  }
  auto mine = own_.find(k.inc);
  if (mine == own_.end()) return;
  ++compared_;
  if (mine->second == hex) return;
  ++diverged_;
  const auto& incs = r_.incarnations();
  bool from_keeper = !incs.empty() && incs.begin()->first == k.host && !keeper();
  // The keeper writes its snapshot of the state at R (the digest point) as
  // its digest: start over from it once it is there, once per snapshot.
  bool again = from_keeper && k.inc > started_from_;
  if (again) pending_restart_ = std::max(pending_restart_, k.inc);
  action& d = acts.emplace_back(action{
      action::kind::diverged, {}, false, k.host, 0,
      fmt::format("error: store: this host's state after revision {} differs from host {}'s (digest {} here, {} "
                  "there): the hosts no longer agree on the barriers, so their participants may get different "
                  "outcomes. {}",
                  k.inc, k.host, mine->second.substr(0, 16), hex.substr(0, 16),
                  again ? fmt::format("This host starts over from host {}'s snapshot at revision {}", k.host, k.inc)
                  : from_keeper ? std::string("This host started over from that snapshot already: check who else "
                                              "writes under the prefix, and that every host runs the same "
                                              "tfbarrier")
                                : std::string("The host that differs from the snapshots' writer starts over"))});
  d.out.events.push_back(tfb::ev::store_diverged{k.host, k.inc});  // counted (events_out.h)
  restart_if_due(acts);
}

void follower::restart_if_due(std::vector<action>& acts) {
  if (pending_restart_ == 0 || newest_snap_ < pending_restart_) return;
  acts.push_back(action{action::kind::diverged, {}, false, {}, 1,
                        fmt::format("warning: store: starting over from the snapshot at revision {}, since this "
                                    "host's state differed from the snapshots' writer's",
                                    newest_snap_)});
  started_from_ = newest_snap_;
  pending_restart_ = 0;
}

// A step applied here once already, before a catch-up started over: its
// replies go out again (a participant may have missed them), but its log
// lines, history records and counts were kept the first time.
void follower::forget_records(output& out) {
  out.events.clear();
  out.rounds.clear();
  out.ended.clear();
  out.counted = {};
}

std::vector<action> follower::on_events(const std::vector<event>& evs) {
  std::vector<action> acts;
  for (const auto& ev : evs) apply(ev, acts);
  return acts;
}

void follower::apply(const event& ev, std::vector<action>& acts) {
  using kind = layout::parsed::kind;
  auto k = keys_.parse(ev.now.key);
  bool put = ev.what == event::type::put;
  applied_rev_ = std::max(applied_rev_, ev.now.mod_revision);
  if (put && refused(k, ev, acts)) return;
  if (k.what == kind::host && put) {
    presence p;
    if (!presence::parse(ev.now.value, p)) {
      warn(acts, fmt::format("warning: store: {} holds no presence I understand; ignored", ev.now.key));
      return;
    }
    r_.host_up(k.host, ev.now.create_revision, p);
  } else if (k.what == kind::host) {
    presence_deleted(k, ev, acts);
  } else if (k.what == kind::gone && put) {
    apply_gone(k, ev, acts);
  } else if (k.what == kind::input && put) {
    apply_input(k, ev, acts);
  } else if (k.what == kind::snap && put) {
    since_snapshot_ = 0;  // a snapshot was taken (by the host whose turn it is)
    newest_snap_ = std::max(newest_snap_, k.inc);
    restart_if_due(acts);
  } else if (k.what == kind::digest && put) {
    compare_digest(k, ev, acts);
  }
}

bool follower::refused(const layout::parsed& k, const event& ev, std::vector<action>& acts) {
  using kind = layout::parsed::kind;
  if (k.what == kind::host && !first_version(ev.now) && !leased(ev.now) && leased(ev.prev)) {
    // Put again without its lease: it would not go when its host does. Its
    // host, alive, registers again (its new key has a lease, and the end of
    // this one withdraws its participants); a host that is gone cannot.
    bool mine = k.host == self_ && ev.now.create_revision == r_.incarnation() && r_.incarnation() != 0;
    warn(acts,
         fmt::format("warning: store: {} was put again without its lease, so it would not expire when host {} goes; "
                     "{}. Someone else writes under this prefix (use etcd's authentication: docs/store.md, "
                     "\"Authorization\")",
                     ev.now.key, k.host,
                     mine ? "this host registers again" : "that host registers again if it is alive; if not, its "
                                                          "participants stay counted until the key is deleted"));
    if (mine)
      acts.push_back(action{action::kind::fenced, {}, false, {}, 0,
                            "this host's presence in the store was put again without its lease"});
    return true;
  }
  if ((k.what == kind::host || k.what == kind::input || k.what == kind::gone) && !first_version(ev.now)) {
    warn(acts,
         fmt::format("warning: store: {} was put again (version {}); only its first version counts, on every host "
                     "alike: someone else writes under this prefix",
                     ev.now.key, ev.now.version));
    return true;
  }
  if (k.what == kind::host && !leased(ev.now)) {
    // Not put by a host (a host's presence has its lease): it would never go.
    if (unleased_.emplace(ev.now.key, ev.now.create_revision).second)
      warn(acts,
           fmt::format("warning: store: {} was put without a lease, so it would never expire: ignored, host {} is "
                       "not counted as present by it. A host puts its presence with a lease; someone else writes "
                       "under this prefix (use etcd's authentication: docs/store.md, \"Authorization\")",
                       ev.now.key, k.host));
    return true;
  }
  return false;
}

void follower::presence_deleted(const layout::parsed& k, const event& ev, std::vector<action>& acts) {
  // The presence went (its lease expired, or its host left). Its end is
  // applied where the gone key lands in the log, the same place on every host.
  // A key that never had a lease counted for nothing: nothing ends.
  if (ev.prev.version == 1 && !leased(ev.prev) && !ev.prev.key.empty()) return;
  std::int64_t inc = ev.prev.create_revision ? ev.prev.create_revision : r_.incarnation_of(k.host);
  if (inc != 0) acts.push_back(marked_gone(k.host, inc, ev.prev.value));
  if (k.host == self_ && inc == r_.incarnation() && inc != 0)
    acts.push_back(action{action::kind::fenced, {}, false, {}, 0,
                          "this host's presence in the store was deleted (its lease expired)"});
}

void follower::apply_gone(const layout::parsed& k, const event& ev, std::vector<action>& acts) {
  std::string presence, error;
  if (!open_gone(ev.now.key, ev.now.value, secret_, presence, error)) {
    warn(acts, fmt::format("warning: store: {} not applied: {}", ev.now.key, error));
    return;
  }
  action a{action::kind::deliver, {}, ev.now.mod_revision <= replayed_upto_, {}, 0, {}};
  a.out.events.push_back(tfb::ev::store_host_left{k.host, k.inc});
  r_.host_down(k.host, k.inc, a.out);
  if (a.replayed) forget_records(a.out);
  acts.push_back(std::move(a));
}

void follower::apply_input(const layout::parsed& k, const event& ev, std::vector<action>& acts) {
  bool a_replayed = ev.now.mod_revision <= replayed_upto_;  // applied once already: its digest was written
  action a{action::kind::deliver, {}, a_replayed, {}, 0, {}};
  std::string error;
  bool applied = r_.apply_batch(k.host, k.inc, k.seq, ev.now.key, ev.now.value, secret_, a.out, error);
  if (!applied) warn(acts, fmt::format("warning: store: {} not applied: {}", ev.now.key, error));
  if (a_replayed) forget_records(a.out);
  acts.push_back(std::move(a));
  ++since_snapshot_;
  if (applied && r_.batches() % digest_every_ == 0 && !a_replayed) {
    // Every k batches of the log: the same revision on every host.
    action d{action::kind::digest, {}, false, {}, ev.now.mod_revision, {}};
    d.state = r_.dump();
    d.text = auth::sha256_hex(d.state);
    own_[d.inc] = d.text;
    while (own_.size() > 16) own_.erase(own_.begin());
    acts.push_back(std::move(d));
  }
}

std::vector<action> follower::on_catch_up(catch_up cu) {
  std::vector<action> acts;
  if (cu.again)
    acts.push_back(action{action::kind::close_all, {}, false, {}, 0,
                          fmt::format("warning: store: starting over from the snapshot at revision {}; closing every "
                                      "connection, whose participants connect and arrive again",
                                      cu.snap_rev)});
  std::string error;
  std::string text = cu.snapshot;
  if (text.empty() && cu.again) {  // no snapshot yet: from the empty state
    barrier_set empty;
    text = replica(self_, empty).dump();
  }
  if (!text.empty() && !r_.load(text, error)) {
    acts.push_back(action{action::kind::fail, {}, false, {}, 0,
                          fmt::format("cannot start from the snapshot at revision {}: {}", cu.snap_rev, error)});
    return acts;
  }
  if (!cu.snapshot.empty())
    acts.push_back(action{action::kind::note, {}, false, {}, 0,
                          cu.history ? fmt::format("store: started from the snapshot at revision {}, then etcd's "
                                                   "history after it",
                                                   cu.snap_rev)
                                     : fmt::format("store: started from the snapshot at revision {}, then {} events "
                                                   "up to revision {}",
                                                   cu.snap_rev, cu.events.size(), cu.revision)});
  replayed_upto_ = cu.again ? applied_rev_ : 0;
  applied_rev_ = cu.snap_rev;
  newest_snap_ = std::max(newest_snap_, cu.snap_rev);
  started_from_ = cu.snap_rev;
  pending_restart_ = 0;
  own_.clear();  // digests of the state it had
  since_snapshot_ = 0;
  idle_.clear();
  if (!cu.history) {
    for (const auto& ev : cu.events) apply(ev, acts);
    replayed_upto_ = 0;
    applied_rev_ = std::max(applied_rev_, cu.revision);
  }
  // Hosts present in the state whose presence is gone, with nobody left to
  // say so (every host was down): mark their end now.
  for (const auto& [h, inc] : r_.incarnations()) {
    bool live = std::any_of(cu.live.begin(), cu.live.end(), [&, h = std::cref(h), inc = inc](const kv& k) {
      return keys_.parse(k.key).host == h.get() && k.create_revision == inc;
    });
    if (live) continue;
    auto p = r_.hosts().find(h);
    acts.push_back(marked_gone(h, inc, p == r_.hosts().end() ? std::string() : p->second.format()));
  }
  return acts;
}

bool refuse_when_behind(const door_input& in, std::size_t backlog, std::size_t max, output& out) {
  if (backlog <= max) return false;
  std::optional<conn_id> c;
  if (const auto* a = std::get_if<input::arrive>(&in)) c = a->c;
  if (const auto* d = std::get_if<input::decide>(&in)) c = d->c;
  if (const auto* b = std::get_if<input::abort>(&in)) c = b->c;
  if (!c) return false;
  out.sends.push_back({*c, proto::error_reply{proto::error_kind::busy,
                                              "this host's writes to the store are far behind (etcd is slow or "
                                              "away); try again shortly"}});
  return true;
}

bool follower::keeper() const {
  const auto& incs = r_.incarnations();
  return r_.incarnation() != 0 && !incs.empty() && incs.begin()->first == self_ &&
         r_.present(self_, r_.incarnation());
}

std::vector<input::forget> follower::tick(millis mono_now, millis forget_after) {
  std::vector<input::forget> out;
  if (!keeper()) {
    idle_.clear();
    return out;
  }
  decltype(idle_) next;
  for (auto& b : r_.state().idle_barriers()) {
    std::pair<std::string, std::string> k{b.scope, b.name};
    seen s{b.gen, b.last_activity, mono_now};
    auto it = idle_.find(k);
    if (it != idle_.end() && it->second.gen == b.gen && it->second.last_activity == b.last_activity) s = it->second;
    if (mono_now - s.since >= forget_after) {
      out.push_back(input::forget{std::move(b)});
      s.since = mono_now;  // asked: again after another forget_after, should the input be lost
    }
    next.emplace(std::move(k), s);
  }
  idle_.swap(next);
  return out;
}

bool renew_overdue(const renewals& r, std::int64_t now, std::int64_t deadline) {
  if (now - r.renewed_at <= deadline) return false;
  return r.last_failed || (r.renewing_since != 0 && now - r.renewing_since > deadline / 3);
}

bool renew_watch::check(std::int64_t now, const renewals& r) {
  if (checked_ && now - last_check_ > 5 * every_) grace_until_ = now + deadline_ / 3;
  checked_ = true;
  last_check_ = now;
  return now >= grace_until_ && renew_overdue(r, now, deadline_);
}

}  // namespace tfb::store
