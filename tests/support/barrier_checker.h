#pragma once
// A model of the barrier rules that checks a barrier_set after every step:
// shared by the property test (tests/unit/barrier_test.cpp) and the fuzz
// target (fuzz/fuzz_barrier.cpp), which differ only in how they fail.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "barrier.h"
#include "journal.h"

namespace tfb::check {

using proto::verdict;
inline constexpr std::nullopt_t none = std::nullopt;
using opt_u32 = std::optional<std::uint32_t>;

inline peer_info peer(conn_id c) { return {"h" + std::to_string(c), static_cast<std::uint32_t>(1000 + c)}; }

/// A journal, one entry per line, for comparisons.
inline std::string dump_journal(const std::vector<journal_entry>& js) {
  std::string s;
  for (const auto& j : js) {
    s += std::to_string(static_cast<int>(j.what)) + " " + j.scope + "/" + j.name + "#" + std::to_string(j.gen) + " " +
         std::string(proto::to_string(j.v)) + " '" + j.message + "' chief=" + (j.chief_arrival ? "1" : "0") +
         " id=" + j.id + " " + j.host + ":" + std::to_string(j.pid) + " n=" + (j.n ? std::to_string(*j.n) : "-") +
         " rank=" + (j.rank ? std::to_string(*j.rank) : "-") + " ids=";
    for (const auto& i : j.ids) s += i + ",";
    if (!j.ranks.empty()) {
      s += " ranks=";
      for (const auto& r : j.ranks) s += (r ? std::to_string(*r) : "-") + ",";
    }
    s += "\n";
  }
  return s;
}

class checker {
 public:
  using fail_fn = std::function<void(const std::string&)>;
  struct stats {
    int releases = 0, allheres = 0, decided = 0, aborts = 0, errors = 0, leaves = 0, pruned = 0, one_step = 0,
        delivered = 0, rejoins = 0, rejoin_releases = 0, rejoin_waits = 0, snapshots = 0;
  };

  checker(barrier_set& bs, fail_fn fail) : bs_(bs), fail_(std::move(fail)) {}

  conn_id fresh() { return next_++; }
  /// Connections that may still LEAVE or close.
  std::vector<conn_id> open_conns() const {
    std::vector<conn_id> v;
    for (const auto& [c, m] : conns_)
      if (!m.gone) v.push_back(c);
    return v;
  }
  /// Connections whose last ARRIVE/DECIDE got an ERR: the host lets them try again.
  std::vector<conn_id> retry_conns() const {
    std::vector<conn_id> v;
    for (const auto& [c, m] : conns_)
      if (!m.gone && m.errored && (m.what == req::arrive || m.what == req::decide)) v.push_back(c);
    return v;
  }
  /// Closed connections whose participant may come back (same request, same id) on a new one.
  std::vector<conn_id> comeback_conns() const {
    std::set<std::string> live;
    for (const auto& [c, m] : conns_)
      if (!m.gone) live.insert(m.id);
    std::vector<conn_id> v;
    for (const auto& [c, m] : conns_)
      if (m.gone && !live.count(m.id) &&
          ((m.what == req::arrive && m.arr) || (m.what == req::decide && m.dec && !m.dec->name.empty())))
        v.push_back(c);
    return v;
  }
  const stats& counts() const { return stats_; }

  void arrive(conn_id c, const proto::arrive& a, millis now) {
    history_.push_back(fmt_req(c, proto::format_request(a)));
    conn_m& x = begin(c, req::arrive, {a.scope, a.name}, a.id);
    x.arr = a;
    x.chief = a.chief;
    bool was_aborted = touch(x.b).aborted;
    expectation ex = was_aborted ? expectation{} : predict(x.b, a.id, false);
    output out;
    bs_.arrive(c, a, peer(c), now, out);
    if (was_aborted && !(out.sends.size() == 1 && out.sends[0].to == c &&
                         std::holds_alternative<proto::aborted>(out.sends[0].msg)))
      fail("an arrival at an aborted barrier must get only ABORTED", out);
    if (ex.kind != expectation::nothing)
      check_rejoin(c, ex, out);
    else
      process(c, out);
    after(now, out);
  }

  void decide(conn_id c, const proto::decide& d, millis now) {
    history_.push_back(fmt_req(c, proto::format_request(d)));
    conn_m& x = begin(c, req::decide, {d.scope, d.name}, d.id);
    x.dec = d;
    x.wait = d.wait;
    x.v = d.v;
    x.message = d.message;
    bool was_aborted = false;
    expectation ex;
    if (!d.name.empty()) {
      was_aborted = touch(x.b).aborted;
      if (!was_aborted) ex = predict(x.b, d.id, true);
    }
    output out;
    bs_.decide(c, d, peer(c), now, out);
    if (was_aborted &&
        !(out.sends.size() == 1 && out.sends[0].to == c && is_err(out.sends[0].msg, proto::error_kind::aborted)))
      fail("DECIDE at an aborted barrier must get only ERR ABORTED", out);
    if (ex.kind != expectation::nothing)
      check_rejoin(c, ex, out);
    else
      process(c, out);
    after(now, out);
  }

  /// The participant of closed connection `old` comes back on connection c with the same request.
  void comeback(conn_id old, conn_id c, millis now) {
    history_.push_back(std::to_string(c) + ": <comes back as " + std::to_string(old) + ">");
    conn_m& o = conns_[old];
    if (o.what == req::arrive && o.arr) {
      proto::arrive a = *o.arr;
      arrive(c, a, now);
    } else if (o.what == req::decide && o.dec) {
      proto::decide d = *o.dec;
      decide(c, d, now);
    }
  }

  void abort(conn_id c, const proto::abort_req& a, millis now) {
    history_.push_back(fmt_req(c, proto::format_request(a)));
    conn_m& x = begin(c, req::abort, {a.scope, a.name}, "");
    touch(x.b);
    output out;
    bs_.abort(c, a, now, out);
    process(c, out);
    barrier_m& b = barriers_[x.b];
    b.aborted = true;
    for (auto& [g, r] : b.rounds) r.aborted = true;
    for (const auto& [cc, m] : conns_)
      if (m.waiting && !m.gone && m.has_round && m.b == x.b && m.epoch == b.epoch)
        fail("connection " + std::to_string(cc) + " still waits on an aborted barrier", out);
    step_aborts_ = 1;
    ++stats_.aborts;
    after(now, out);
  }

  void leave(conn_id c, departure how, millis now) {
    static const char* how_text[] = {"LEAVE", "<closed>", "<unresponsive>"};
    history_.push_back(std::to_string(c) + ": " + how_text[static_cast<int>(how)]);
    conn_m& x = conns_[c];
    if (x.gone) return;
    output out;
    bs_.leave(c, how, now, out);
    bool expect_named = x.waiting && x.has_round;
    if (how == departure::left) {
      bool ok = out.sends.size() == 1 && out.sends[0].to == c;
      const auto* l = ok ? std::get_if<proto::left>(&out.sends[0].msg) : nullptr;
      if (!l)
        fail("LEAVE must get exactly one LEFT", out);
      else if (expect_named ? (l->name != x.b.second || l->gen != x.gen) : (!l->name.empty() || l->gen != 0))
        fail("LEFT names the wrong round", out);
    } else if (!out.sends.empty()) {
      fail("a closed connection must cause no messages", out);
    }
    if (x.waiting && x.has_round) {
      if (round_m* r = round_of(x)) {
        if (x.member && !r->complete && !r->durable.count(x.id)) {
          r->present.erase(x.id);
          if (r->departed.size() < 64) r->departed.push_back({rank_of(x), x.id});  // the host keeps 64
        }
        if (!x.member) r->deciders.erase(c);
      }
    }
    x.gone = true;
    x.waiting = false;
    ++stats_.leaves;
    after(now, out);
  }

  void prune(millis now, millis max_idle) {
    history_.push_back("prune " + std::to_string(now) + " " + std::to_string(max_idle));
    std::size_t removed = bs_.prune(now, max_idle);
    std::size_t forgotten = 0;
    for (auto& [k, b] : barriers_) {
      if (!b.exists) continue;
      if (!bs_.status(proto::status_req{k.first, k.second, false}, now).barriers.empty()) continue;
      ++forgotten;
      for (const auto& [c, m] : conns_)
        if (m.waiting && !m.gone && m.has_round && m.b == k && m.epoch == b.epoch)
          fail_(fmt_history() + "prune forgot " + k.first + "/" + k.second + " while connection " +
                std::to_string(c) + " waits on it");
      b = barrier_m{};
      b.epoch = ++epochs_;
    }
    if (forgotten != removed)
      fail_(fmt_history() + "prune said " + std::to_string(removed) + " but " + std::to_string(forgotten) +
            " barriers are gone");
    stats_.pruned += static_cast<int>(removed);
    if (removed) journal_complete_ = false;  // the journal does not record what was forgotten
    after(now, output{});
  }

  /// restore(snapshot()) describes the same state: its snapshot is the same.
  void check_snapshot(millis now) {
    auto s1 = bs_.snapshot();
    barrier_set copy;
    for (const auto& e : s1) {
      // Through the file's own format, as serve --state-dir writes and reads it.
      std::string line = to_journal_line(e), err;
      line.pop_back();
      auto back = from_journal_line(line, err);
      if (!back || dump_journal({*back}) != dump_journal({e})) {
        fail_(fmt_history() + "a journal line does not read back: " + line + (back ? "" : ": " + err));
        return;
      }
      copy.restore(*back, now);
    }
    auto s2 = copy.snapshot();
    if (dump_journal(s1) != dump_journal(s2))
      fail_(fmt_history() + "snapshot -> restore -> snapshot differs:\n" + dump_journal(s1) + "vs\n" +
            dump_journal(s2));
    if (journal_complete_) {
      // Replaying every journal entry so far (as after a crash) gives the same durable state.
      barrier_set replayed;
      for (const auto& e : journal_) replayed.restore(e, now);
      auto s3 = replayed.snapshot();
      if (dump_journal(s1) != dump_journal(s3))
        fail_(fmt_history() + "replaying the journal gives another state:\n" + dump_journal(s1) + "vs\n" +
              dump_journal(s3));
    }
    if (copy.active()) fail_("a restored state has connections waiting");
    ++stats_.snapshots;
  }

  /// Ends the run: every waiting connection gets exactly one SHUTDOWN.
  void shutdown() {
    output out;
    bs_.shutdown("bye", out);
    std::set<conn_id> want, got;
    for (const auto& [c, m] : conns_)
      if (m.waiting && !m.gone) want.insert(c);
    for (const auto& e : out.sends) {
      if (!std::holds_alternative<proto::shutdown>(e.msg)) fail("shutdown sent something else", out);
      if (!got.insert(e.to).second) fail("SHUTDOWN twice to one connection", out);
    }
    if (want != got) fail("SHUTDOWN must reach exactly the waiting connections", out);
    if (bs_.active()) fail_("active() after shutdown");
  }

 private:
  enum class req { idle, arrive, decide, abort };
  using bkey = std::pair<std::string, std::string>;  // scope, name
  using vpair = std::pair<verdict, std::string>;
  struct round_m {
    opt_u32 n;
    std::set<std::string> present, durable, chiefs, decider_ids;  // participant ids
    std::set<conn_id> deciders;                                   // waiting decider connections
    std::optional<vpair> decided, released;
    bool complete = false, aborted = false;
    std::vector<std::pair<opt_u32, std::string>> departed;  // rank, id: who withdrew and has not come back
  };
  struct barrier_m {
    std::uint64_t epoch = 0;
    bool exists = false, aborted = false;
    std::map<std::uint64_t, round_m> rounds;
    std::deque<std::uint64_t> recent;  // released rounds, newest first (the host remembers 8)
  };
  struct conn_m {
    req what = req::idle;
    std::string id;
    bkey b;
    std::uint64_t epoch = 0, gen = 0;
    bool has_round = false, member = false, chief = false, wait = false;
    verdict v = verdict::none;
    std::string message;
    int finals = 0;
    bool waiting = false, gone = false, errored = false;
    std::optional<proto::arrive> arr;
    std::optional<proto::decide> dec;
  };
  struct expectation {
    enum kind_t { nothing, release, allhere, again, decider } kind = nothing;
    std::uint64_t gen = 0;
  };
  using round_id = std::tuple<std::string, std::string, std::uint64_t, std::uint64_t>;

  static bool is_err(const proto::reply& r, proto::error_kind k) {
    const auto* e = std::get_if<proto::error_reply>(&r);
    return e && e->kind == k;
  }
  static std::string fmt_req(conn_id c, std::string line) {
    line.pop_back();
    return std::to_string(c) + ": " + line;
  }
  std::string fmt_history() const {
    std::string s = "history (last 40):\n";
    std::size_t from = history_.size() > 40 ? history_.size() - 40 : 0;
    for (std::size_t i = from; i < history_.size(); ++i) s += "  " + history_[i] + "\n";
    return s;
  }
  void fail(const std::string& what, const output& out) {
    std::string s = fmt_history() + "output:\n";
    for (const auto& e : out.sends) s += "  -> " + std::to_string(e.to) + ": " + proto::format_reply(e.msg);
    fail_(s + "violation: " + what);
  }

  conn_m& begin(conn_id c, req what, bkey b, std::string id) {
    conn_m& x = conns_[c];
    x.what = what;
    x.b = std::move(b);
    x.id = std::move(id);
    x.has_round = x.member = x.chief = x.wait = x.errored = x.waiting = false;
    x.finals = 0;
    x.arr.reset();
    x.dec.reset();
    step_released_.clear();
    step_gathered_.clear();
    step_verdicts_ = 0;
    step_aborts_ = 0;
    return x;
  }
  barrier_m& touch(const bkey& k) {
    barrier_m& b = barriers_[k];
    if (!b.exists) {
      b.exists = true;
      if (b.epoch == 0) b.epoch = ++epochs_;
    }
    return b;
  }
  round_m& round(const bkey& k, std::uint64_t gen) { return barriers_[k].rounds[gen]; }
  round_m* round_of(const conn_m& x) {
    auto it = barriers_.find(x.b);
    if (!x.has_round || it == barriers_.end() || it->second.epoch != x.epoch) return nullptr;
    return &it->second.rounds[x.gen];
  }
  round_id rid(const conn_m& x) const { return {x.b.first, x.b.second, x.epoch, x.gen}; }
  void final_reply(conn_m& x, conn_id c, const output& out) {
    if (++x.finals > 1) fail("two final replies to connection " + std::to_string(c) + " for one request", out);
    x.waiting = false;
  }
  static opt_u32 rank_of(const conn_m& x) {
    if (x.what == req::arrive && x.arr) return x.arr->rank;
    if (x.what == req::decide && x.dec) return x.dec->rank;
    return std::nullopt;
  }
  /// A withdrawn rank (or, unranked, the same id) that arrives again is no longer gone.
  static void came_back(round_m& r, const conn_m& x) {
    opt_u32 rank = rank_of(x);
    std::erase_if(r.departed, [&](const auto& g) { return rank ? g.first == rank : !g.first && g.second == x.id; });
  }
  void join(conn_m& x, const bkey& k, std::uint64_t gen) {
    x.b = k;
    x.gen = gen;
    x.epoch = barriers_[k].epoch;
    x.has_round = true;
  }
  bool chief_present(const round_m& r, const std::string& except = "") const {
    for (const auto& id : r.present)
      if (id != except && r.chiefs.count(id)) return true;
    return false;
  }
  void mark_released(const bkey& k, std::uint64_t gen, const vpair& p) {
    barrier_m& b = barriers_[k];
    round_m& r = b.rounds[gen];
    r.complete = true;
    r.released = p;
    b.recent.push_front(gen);
    if (b.recent.size() > 8) b.recent.pop_back();
    step_released_.emplace_back(k, gen);
  }

  /// What the host does with a participant id it already knows (docs/protocol.md, "Coming back").
  expectation predict(const bkey& k, const std::string& id, bool is_decide) {
    barrier_m& b = barriers_[k];
    for (std::uint64_t g : b.recent) {
      round_m& r = b.rounds[g];
      if (r.present.count(id) || r.decider_ids.count(id)) return {expectation::release, g};
    }
    for (auto& [g, r] : b.rounds) {  // in gen order: the gathered rounds, then the open one
      if (r.released || r.aborted) continue;
      if (r.present.count(id)) {
        if (r.complete && r.chiefs.count(id) && !r.durable.count(id)) return {expectation::allhere, g};
        return {expectation::again, g};
      }
      if (is_decide && r.decider_ids.count(id)) return {expectation::decider, g};
    }
    return {};
  }

  void check_rejoin(conn_id c, const expectation& ex, const output& out) {
    conn_m& x = conns_[c];
    ++stats_.rejoins;
    if (out.sends.size() != 1 || out.sends[0].to != c) {
      fail("a participant that comes back must get exactly one reply", out);
      return;
    }
    const proto::reply& msg = out.sends[0].msg;
    round_m& r = round(x.b, ex.gen);
    switch (ex.kind) {
      case expectation::release: {
        const auto* rel = std::get_if<proto::release>(&msg);
        if (!rel || rel->gen != ex.gen || rel->name != x.b.second) {
          fail("a participant of a released round must be told that round's RELEASE", out);
          break;
        }
        if (!r.released || vpair{rel->v, rel->message} != *r.released) fail("told another outcome", out);
        if (x.what == req::decide ? rel->delivered != 0u : rel->delivered.has_value())
          fail("wrong delivered= for a late RELEASE", out);
        x.finals = 1;
        ++stats_.rejoin_releases;
        break;
      }
      case expectation::allhere: {
        const auto* h = std::get_if<proto::all_here>(&msg);
        if (!h || h->gen != ex.gen || h->name != x.b.second) fail("a gathered chief must be told ALLHERE again", out);
        join(x, x.b, ex.gen);
        x.member = x.chief = true;
        x.finals = 1;
        break;
      }
      case expectation::again: {
        bool durable = r.durable.count(x.id) > 0;
        if (durable) {
          const auto* d = std::get_if<proto::decided>(&msg);
          if (!d || d->gen != ex.gen || !r.decided || d->v != r.decided->first || d->arrived != r.present.size())
            fail("a durable chief that comes back must be told DECIDED again", out);
        } else {
          const auto* w = std::get_if<proto::waiting>(&msg);
          if (!w || w->gen != ex.gen || w->arrived != r.present.size() || w->n != r.n)
            fail("a participant that comes back must be told WAITING again, counted once", out);
        }
        join(x, x.b, ex.gen);
        x.member = true;
        x.chief = r.chiefs.count(x.id) > 0;
        x.waiting = true;  // the host waits for this connection now (even for a DECIDE wait=0)
        ++stats_.rejoin_waits;
        break;
      }
      case expectation::decider: {
        const auto* d = std::get_if<proto::decided>(&msg);
        if (!d || d->gen != ex.gen || !r.decided || d->v != r.decided->first || d->arrived != r.present.size())
          fail("a decider that comes back must be told DECIDED again", out);
        join(x, x.b, ex.gen);
        r.deciders.insert(c);
        x.waiting = true;
        break;
      }
      case expectation::nothing: break;
    }
  }

  void process(conn_id actor, const output& out) {
    std::map<round_id, std::uint32_t> member_finals;
    std::vector<std::pair<round_id, std::uint32_t>> delivered;
    std::set<round_id> released_now;
    std::uint32_t abort_members = 0;
    opt_u32 notified;
    conn_m& a = conns_[actor];
    for (const auto& e : out.sends) {
      auto it = conns_.find(e.to);
      if (it == conns_.end()) {
        fail("a message to a connection that never spoke", out);
        continue;
      }
      conn_m& x = it->second;
      if (x.gone) fail("a message to connection " + std::to_string(e.to) + " after it left", out);
      bool to_actor = e.to == actor;

      if (const auto* w = std::get_if<proto::waiting>(&e.msg)) {
        if (!to_actor || x.what != req::arrive || x.has_round || x.finals) {
          fail("unexpected WAITING", out);
          continue;
        }
        if (w->name != x.b.second) fail("WAITING for another barrier", out);
        round_m& r = round(x.b, w->gen);
        if (r.complete || r.aborted || barriers_[x.b].aborted) fail("WAITING in a finished round", out);
        if (!w->n) fail("WAITING without n", out);
        if (!r.present.empty() && r.n && w->n != r.n) fail("WAITING with another n than the round's", out);
        r.n = w->n;
        if (!r.present.insert(x.id).second) fail("one id counted twice", out);
        came_back(r, x);
        if (x.chief) {
          if (chief_present(r, x.id)) fail("a second chief in one round", out);
          r.chiefs.insert(x.id);
        }
        if (w->arrived != r.present.size())
          fail("WAITING arrived=" + std::to_string(w->arrived) + " but the model counts " +
                   std::to_string(r.present.size()),
               out);
        join(x, x.b, w->gen);
        x.member = true;
        x.waiting = true;
      } else if (const auto* d = std::get_if<proto::decided>(&e.msg)) {
        if (!to_actor || x.what != req::decide || x.has_round || x.finals) {
          fail("unexpected DECIDED", out);
          continue;
        }
        ++stats_.decided;
        if (!x.b.second.empty() && d->name != x.b.second) fail("DECIDED for another barrier", out);
        bkey k{x.b.first, d->name};
        touch(k);
        if (barriers_[k].aborted) fail("DECIDED on an aborted barrier", out);
        round_m& r = round(k, d->gen);
        if (r.aborted || r.released) fail("DECIDED for a finished round", out);
        if (d->v != x.v) fail("DECIDED with another verdict than asked", out);
        join(x, k, d->gen);
        vpair p{x.v, x.message};
        if (d->arrived == r.present.size() + 1) {  // the chief's arrival
          if (r.complete) fail("a chief's arrival in a complete round", out);
          if (chief_present(r)) fail("a second chief in one round", out);
          if (r.decided) fail("a chief's arrival in a round that has a verdict", out);
          r.present.insert(x.id);
          came_back(r, x);
          r.durable.insert(x.id);
          r.chiefs.insert(x.id);
          x.member = x.chief = true;
          if (!d->n) fail("DECIDED arrival without n", out);
          if (r.present.size() > 1 && r.n && d->n != r.n) fail("DECIDED with another n than the round's", out);
          r.n = d->n;
          r.decided = p;
          ++step_verdicts_;
          ++stats_.one_step;
          if (r.n && r.present.size() == *r.n) mark_released(k, d->gen, p);
        } else if (d->arrived == r.present.size()) {
          r.decider_ids.insert(x.id);
          if (x.wait) r.deciders.insert(actor);
          if (!r.decided) {
            r.decided = p;
            ++step_verdicts_;
          } else if (*r.decided != p) {
            fail("a second, different verdict was accepted", out);
          }
          if (r.complete) mark_released(k, d->gen, p);  // a gathered round releases at once
        } else {
          fail("DECIDED arrived=" + std::to_string(d->arrived) + " but the model counts " +
                   std::to_string(r.present.size()),
               out);
        }
        x.waiting = x.wait;
      } else if (const auto* h = std::get_if<proto::all_here>(&e.msg)) {
        round_m* r = round_of(x);
        if (!r || !x.member || !x.chief || x.what != req::arrive || h->name != x.b.second || h->gen != x.gen) {
          fail("ALLHERE to a connection that is not the round's waiting chief", out);
          continue;
        }
        ++stats_.allheres;
        final_reply(x, e.to, out);
        if (r->aborted) fail("ALLHERE in an aborted round", out);
        if (!r->n || h->n != *r->n || h->arrived != h->n) fail("ALLHERE with wrong counts", out);
        if (!r->complete) {
          if (!r->n || r->present.size() != *r->n)
            fail("ALLHERE with " + std::to_string(r->present.size()) + " present", out);
          r->complete = true;
          step_gathered_.emplace_back(x.b, x.gen);
        }
        ++member_finals[rid(x)];
      } else if (const auto* rel = std::get_if<proto::release>(&e.msg)) {
        round_m* r = round_of(x);
        if (!r || rel->name != x.b.second || rel->gen != x.gen) {
          fail("RELEASE to a connection that does not wait on that round", out);
          continue;
        }
        ++stats_.releases;
        final_reply(x, e.to, out);
        if (r->aborted) fail("RELEASE in an aborted round", out);
        if (!x.member && !r->deciders.count(e.to))
          fail("RELEASE to a connection that is neither member nor decider", out);
        vpair p{rel->v, rel->message};
        if (!r->released) {
          if (!r->n || r->present.size() != *r->n)
            fail("RELEASE with only " + std::to_string(r->present.size()) + " of " +
                     (r->n ? std::to_string(*r->n) : "?") + " present",
                 out);
          if (r->decided ? *r->decided != p : p != vpair{verdict::continue_, ""})
            fail("RELEASE with a verdict nobody gave", out);
          mark_released(x.b, x.gen, p);
        } else if (*r->released != p) {
          fail("two participants of one round released with different verdicts", out);
        }
        if (x.what == req::decide) {
          if (!rel->delivered)
            fail("RELEASE to a decider without delivered=", out);
          else
            delivered.emplace_back(rid(x), *rel->delivered);
          ++stats_.delivered;
        } else {
          if (rel->delivered) fail("RELEASE to a member with delivered=", out);
          ++member_finals[rid(x)];
        }
        released_now.insert(rid(x));
      } else if (const auto* ab = std::get_if<proto::aborted>(&e.msg)) {
        if (to_actor && x.what == req::abort) {
          if (!ab->notified) fail("ABORT reply without notified=", out);
          notified = ab->notified;
          final_reply(x, e.to, out);
        } else if (to_actor && x.what == req::arrive) {
          if (!barriers_[x.b].aborted) fail("ABORTED to an arrival at a barrier that was not aborted", out);
          final_reply(x, e.to, out);
        } else {
          if (a.what != req::abort || !x.has_round || x.b != a.b || ab->gen != x.gen || !x.waiting || ab->notified)
            fail("ABORTED to a connection that does not wait on the aborted barrier", out);
          if (x.member) ++abort_members;
          final_reply(x, e.to, out);
        }
      } else if (const auto* er = std::get_if<proto::error_reply>(&e.msg)) {
        if (!to_actor || (x.what != req::arrive && x.what != req::decide) || out.sends.size() != 1) {
          fail("an ERR that is not the only reply to the request", out);
          continue;
        }
        if (er->kind == proto::error_kind::aborted && (x.b.second.empty() || !barriers_[x.b].aborted))
          fail("ERR ABORTED for a barrier that was not aborted", out);
        if (er->text.empty()) fail("ERR without text", out);
        ++stats_.errors;
        final_reply(x, e.to, out);
        x.errored = true;
      } else {
        fail("an unexpected kind of message", out);
      }
    }
    for (const auto& [id, n] : delivered)
      if (n != member_finals[id])
        fail("delivered=" + std::to_string(n) + " but " + std::to_string(member_finals[id]) + " members were told",
             out);
    if (notified && *notified != abort_members)
      fail("notified=" + std::to_string(*notified) + " but " + std::to_string(abort_members) + " members were told",
           out);
    for (const auto& [c, m] : conns_)
      if (m.waiting && !m.gone && m.has_round && released_now.count(rid(m)))
        fail("connection " + std::to_string(c) + " was not released with its round", out);
  }

  void check_journal(const output& out) {
    std::size_t releases = 0, verdicts = 0, aborts = 0, gathers = 0;
    // A chief told ALLHERE in the step that releases its round (a verdict given in
    // advance) did not gather a round: only the others are journaled as gathered.
    std::erase_if(step_gathered_, [&](const auto& g) {
      return std::find(step_released_.begin(), step_released_.end(), g) != step_released_.end();
    });
    for (const auto& j : out.journal) {
      switch (j.what) {
        case journal_entry::kind::release: {
          ++releases;
          bkey k{j.scope, j.name};
          if (std::find(step_released_.begin(), step_released_.end(), std::make_pair(k, j.gen)) ==
              step_released_.end()) {
            fail("a release journaled that the model did not see", out);
            break;
          }
          round_m& r = round(k, j.gen);
          std::set<std::string> ids(r.present);
          ids.insert(r.decider_ids.begin(), r.decider_ids.end());
          if (j.ids != std::vector<std::string>(ids.begin(), ids.end()))
            fail("the journaled release lists other participants", out);
          if (!r.released || vpair{j.v, j.message} != *r.released) fail("the journaled release has another verdict", out);
          break;
        }
        case journal_entry::kind::verdict: ++verdicts; break;
        case journal_entry::kind::abort: ++aborts; break;
        case journal_entry::kind::gathered: {
          ++gathers;
          bkey k{j.scope, j.name};
          if (std::find(step_gathered_.begin(), step_gathered_.end(), std::make_pair(k, j.gen)) ==
              step_gathered_.end()) {
            fail("a gathered round journaled that the model did not see gather", out);
            break;
          }
          round_m& r = round(k, j.gen);
          if (j.ids != std::vector<std::string>(r.present.begin(), r.present.end()))
            fail("the journaled gathered round lists other participants", out);
          if (!j.n || !r.n || *j.n != *r.n || j.ranks.size() != j.ids.size())
            fail("the journaled gathered round has another n", out);
          break;
        }
      }
    }
    if (gathers != step_gathered_.size())
      fail(std::to_string(step_gathered_.size()) + " rounds gathered but " + std::to_string(gathers) + " journaled",
           out);
    if (releases != step_released_.size())
      fail(std::to_string(step_released_.size()) + " rounds released but " + std::to_string(releases) + " journaled",
           out);
    if (verdicts != step_verdicts_)
      fail(std::to_string(step_verdicts_) + " verdicts given but " + std::to_string(verdicts) + " journaled", out);
    if (aborts != step_aborts_) fail("an abort not journaled (or journaled without abort)", out);
  }

  void after(millis now, const output& out) {
    check_journal(out);
    journal_.insert(journal_.end(), out.journal.begin(), out.journal.end());
    step_released_.clear();
    step_gathered_.clear();
    step_verdicts_ = step_aborts_ = 0;
    bool waiting = false;
    for (const auto& [c, m] : conns_) waiting = waiting || (m.waiting && !m.gone);
    if (bs_.active() != waiting)
      fail_(fmt_history() + "active() is " + (bs_.active() ? "true" : "false") + " but the model says " +
            (waiting ? "true" : "false"));
    std::size_t exist = 0;
    for (auto& [k, b] : barriers_) {
      if (!b.exists) continue;
      ++exist;
      for (auto& [g, r] : b.rounds)
        if (!b.aborted && !r.complete && r.n && !r.present.empty() && r.present.size() >= *r.n)
          fail_(fmt_history() + "round " + k.second + "#" + std::to_string(g) + " has all " + std::to_string(*r.n) +
                " present but was not completed");
      check_status(k, b, now);
    }
    if (bs_.barrier_count() != exist)
      fail_(fmt_history() + "barrier_count() is " + std::to_string(bs_.barrier_count()) + ", the model has " +
            std::to_string(exist));
  }

  static std::optional<std::set<std::uint32_t>> parse_ranges(const std::string& s) {
    std::set<std::uint32_t> out;
    if (s.ends_with("+")) return std::nullopt;  // cut: not checkable
    std::stringstream in(s);
    std::string part;
    while (std::getline(in, part, ',')) {
      auto dash = part.find('-');
      auto lo = static_cast<std::uint32_t>(std::stoul(part.substr(0, dash)));
      auto hi = dash == std::string::npos ? lo : static_cast<std::uint32_t>(std::stoul(part.substr(dash + 1)));
      for (std::uint32_t i = lo; i <= hi; ++i) out.insert(i);
    }
    return out;
  }

  void check_status(const bkey& k, barrier_m& b, millis now) {
    auto st = bs_.status(proto::status_req{k.first, k.second, true}, now);
    auto bad = [&](const std::string& what) { fail_(fmt_history() + "STATUS " + k.second + ": " + what); };
    if (st.barriers.empty()) return bad("an existing barrier is missing");
    if (b.aborted) {
      if (st.barriers.size() != 1 || st.barriers[0].state != proto::round_state::aborted)
        bad("an aborted barrier not shown as aborted");
      return;
    }
    std::size_t open = 0;
    for (const auto& info : st.barriers) {
      if (info.scope != k.first || info.name != k.second) bad("another barrier listed");
      round_m& r = b.rounds[info.gen];
      if (info.arrived != r.present.size())
        bad("arrived=" + std::to_string(info.arrived) + " but the model counts " + std::to_string(r.present.size()));
      if (info.state == proto::round_state::gathered) {
        if (!r.complete || r.released) bad("gathered, but the model disagrees");
        if (!info.chief) bad("gathered without chief");
      } else if (info.state == proto::round_state::open) {
        ++open;
        if (r.complete) bad("a complete round shown as open");
      } else {
        bad("state=" + std::string(proto::to_string(info.state)));
      }
      if (info.chief != chief_present(r)) bad("chief flag disagrees with the model");
      if (info.v != (r.decided ? r.decided->first : verdict::none)) bad("verdict disagrees with the model");
      if (!r.present.empty() && info.n != r.n) bad("n disagrees with the model");
      if (info.age_ms < 0) bad("negative age");
      if (info.gone.size() != r.departed.size()) bad("GONE lines disagree with the model");
      {  // and name the same ranks (the reply has no ids; unranked ones are nullopt)
        std::multiset<opt_u32> shown, model;
        for (const auto& g : info.gone) shown.insert(g.rank);
        for (const auto& g : r.departed) model.insert(g.first);
        if (shown != model) bad("GONE lines name other ranks than the model's");
      }
      // MEMBER and MISSING agree with each other.
      if (info.members.size() != std::min<std::size_t>(info.arrived, proto::max_member_lines)) bad("MEMBER count");
      bool all_ranked = true;
      std::set<std::uint32_t> ranks;
      for (std::size_t i = 0; i < info.members.size(); ++i) {
        const auto& m = info.members[i];
        if (i && info.members[i - 1].rank.value_or(UINT32_MAX) > m.rank.value_or(UINT32_MAX)) bad("MEMBER not sorted");
        if (m.age_ms < 0) bad("negative member age");
        if (!m.rank)
          all_ranked = false;
        else if (!ranks.insert(*m.rank).second)
          bad("a rank held twice");
        else if (info.n && *m.rank >= *info.n)
          bad("a rank beyond n");
      }
      if (info.missing.has_value() != (info.n.has_value() && all_ranked)) bad("MISSING shown when it should not be, or not");
      if (info.missing && info.arrived <= proto::max_member_lines) {
        if (auto missing = parse_ranges(*info.missing)) {
          for (std::uint32_t m : *missing)
            if (ranks.count(m)) bad("a present rank listed as missing");
          if (missing->size() + ranks.size() != *info.n) bad("MEMBER and MISSING do not add up to n");
        }
      }
    }
    if (open != 1) bad("not exactly one open round");
  }

  barrier_set& bs_;
  fail_fn fail_;
  conn_id next_ = 1;
  std::uint64_t epochs_ = 0;
  std::map<conn_id, conn_m> conns_;
  std::map<bkey, barrier_m> barriers_;
  std::vector<std::string> history_;
  std::vector<std::pair<bkey, std::uint64_t>> step_released_;
  std::vector<std::pair<bkey, std::uint64_t>> step_gathered_;  ///< rounds whose chief was first told ALLHERE
  std::size_t step_verdicts_ = 0, step_aborts_ = 0;
  std::vector<journal_entry> journal_;
  bool journal_complete_ = true;
  stats stats_;
};

}  // namespace tfb::check
