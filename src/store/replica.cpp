#include "replica.h"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

#include "auth.h"
#include "state_text.h"
#include "store_client.h"

namespace tfb::store {

namespace {

template <typename T>
bool number(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

/// Splits off the first space-separated word of s.
std::string_view word(std::string_view& s) {
  auto sp = s.find(' ');
  std::string_view w = s.substr(0, sp);
  s = sp == std::string_view::npos ? std::string_view{} : s.substr(sp + 1);
  return w;
}

std::string peer_word(const std::string& host) { return host.empty() ? "-" : host; }

/// The request at the end of an input line, which must be of type T.
template <typename T>
bool request_of(std::string_view text, T& out, std::string& error) {
  auto parsed = proto::parse_request(text);
  if (auto* e = std::get_if<proto::request_error>(&parsed)) {
    error = "bad request in input: " + e->text;
    return false;
  }
  auto* r = std::get_if<T>(&std::get<proto::request>(parsed));
  if (!r) {
    error = "input of the wrong kind: " + std::string(text.substr(0, 16));
    return false;
  }
  out = std::move(*r);
  return true;
}

std::string without_newline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      ++end.back();
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string layout::input(std::string_view h, std::int64_t inc, std::uint64_t seq) const {
  return fmt::format("{}{}/{}/{:016x}", inputs(), h, inc, seq);
}

std::string layout::gone(std::string_view h, std::int64_t inc) const { return fmt::format("{}{}/{}", gones(), h, inc); }

std::string layout::digest(std::int64_t rev, std::string_view h) const {
  return fmt::format("{}{:016x}/{}", digests(), rev, h);
}

std::string layout::snap(std::int64_t rev) const { return fmt::format("{}{:016x}", snaps(), rev); }

std::string layout::snap_chunk(std::int64_t rev, std::size_t i) const {
  return fmt::format("{}{:016x}/{:04x}", snaps(), rev, i);
}

layout::parsed layout::parse(std::string_view key) const {
  parsed p;
  if (!key.starts_with(prefix) || key.size() == prefix.size() || key[prefix.size()] != '/') return p;
  std::string_view rest = key.substr(prefix.size() + 1);
  // "H/INC" then, for inputs, "/SEQ" (hex)
  auto host_inc = [&](std::string_view r, bool with_seq) {
    auto a = r.find('/');
    if (a == std::string_view::npos || a == 0) return false;
    auto b = r.find('/', a + 1);
    if (with_seq != (b != std::string_view::npos)) return false;
    if (!number(r.substr(a + 1, b == std::string_view::npos ? b : b - a - 1), p.inc)) return false;
    if (with_seq) {
      std::string_view s = r.substr(b + 1);
      auto [q, ec] = std::from_chars(s.data(), s.data() + s.size(), p.seq, 16);
      if (ec != std::errc{} || q != s.data() + s.size()) return false;
    }
    p.host = r.substr(0, a);
    return true;
  };
  if (rest == "origin") {
    p.what = parsed::kind::origin;
  } else if (rest.starts_with("host/")) {
    p.what = parsed::kind::host;
    p.host = rest.substr(5);
  } else if (rest.starts_with("in/")) {
    if (host_inc(rest.substr(3), true)) p.what = parsed::kind::input;
  } else if (rest.starts_with("gone/")) {
    if (host_inc(rest.substr(5), false)) p.what = parsed::kind::gone;
  } else if (rest.starts_with("digest/")) {
    rest.remove_prefix(7);
    auto slash = rest.find('/');
    std::string_view r = rest.substr(0, slash);
    auto [q, ec] = std::from_chars(r.data(), r.data() + r.size(), p.inc, 16);
    if (ec == std::errc{} && q == r.data() + r.size() && r.size() == 16 && slash != std::string_view::npos &&
        slash + 1 < rest.size()) {
      p.what = parsed::kind::digest;
      p.host = rest.substr(slash + 1);
    }
  } else if (rest.starts_with("snap/")) {
    rest.remove_prefix(5);
    auto slash = rest.find('/');
    std::string_view r = rest.substr(0, slash);
    auto [q, ec] = std::from_chars(r.data(), r.data() + r.size(), p.inc, 16);
    if (ec != std::errc{} || q != r.data() + r.size() || r.size() != 16) return p;
    if (slash == std::string_view::npos) {
      p.what = parsed::kind::snap;
    } else {
      std::string_view i = rest.substr(slash + 1);
      auto [q2, ec2] = std::from_chars(i.data(), i.data() + i.size(), p.seq, 16);
      if (ec2 == std::errc{} && q2 == i.data() + i.size() && i.size() == 4) p.what = parsed::kind::snap_chunk;
    }
  }
  return p;
}

std::string host_key(std::string_view node, std::string_view port) {
  std::string out;
  for (char ch : node)  // a key name: no '/', no spaces
    out += (ch == '/' || ch == ' ' || static_cast<unsigned char>(ch) < 0x21) ? '_' : ch;
  return fmt::format("{}:{}", out.empty() ? "host" : out, port);
}

std::string presence::format() const {
  return fmt::format("sm={} pid={} node={} addr={}", sm, pid, peer_word(node), peer_word(address));
}

bool presence::parse(std::string_view text, presence& out) {
  bool ok = true;
  while (!text.empty()) {
    std::string_view w = word(text);
    auto eq = w.find('=');
    if (eq == std::string_view::npos) return false;
    std::string_view k = w.substr(0, eq), v = w.substr(eq + 1);
    if (k == "sm")
      ok = ok && number(v, out.sm);
    else if (k == "pid")
      ok = ok && number(v, out.pid);
    else if (k == "node")
      out.node = v;
    else if (k == "addr")
      out.address = v;
  }
  return ok && out.sm > 0;
}

std::string key_record::format() const {
  return munge.empty() ? fmt::format("tfbarrier key id={}", id) : fmt::format("tfbarrier key id={} munge={}", id, munge);
}

bool key_record::parse(std::string_view text, key_record& out) {
  out = {};
  constexpr std::string_view head = "tfbarrier key ";
  if (!text.starts_with(head)) return false;
  text.remove_prefix(head.size());
  while (!text.empty()) {
    std::string_view w = word(text);
    auto eq = w.find('=');
    if (eq == std::string_view::npos) return false;
    std::string_view k = w.substr(0, eq), v = w.substr(eq + 1);  // a credential holds '=' of its own
    if (k == "id")
      out.id = v;
    else if (k == "munge")
      out.munge = v;
  }
  bool hex = out.id.size() == 16 && out.id.find_first_not_of("0123456789abcdef") == std::string::npos;
  return (hex || (out.id == "none" && out.munge.empty())) && (out.munge.empty() || hex);
}

std::string key_record::source() const {
  if (id == "none") return "no key (--insecure: inputs carry no MAC)";
  if (!munge.empty()) return "a key shared through MUNGE";
  return fmt::format("a secret file (key {})", id);
}

std::string key_id(const std::string* secret) {
  if (!secret) return "none";
  return auth::hmac_hex(*secret, "tfbarrier store key id").substr(0, 16);
}

std::string encode(const door_input& in) {
  return std::visit(
      [](const auto& m) -> std::string {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, input::arrive>)
          return fmt::format("A {} {} {} {} {}", m.c, m.now, m.peer.pid, peer_word(m.peer.host),
                             without_newline(proto::format_request(m.req)));
        else if constexpr (std::is_same_v<T, input::decide>)
          return fmt::format("D {} {} {} {} {}", m.c, m.now, m.peer.pid, peer_word(m.peer.host),
                             without_newline(proto::format_request(m.req)));
        else if constexpr (std::is_same_v<T, input::abort>)
          return fmt::format("X {} {} {}", m.c, m.now, without_newline(proto::format_request(m.req)));
        else if constexpr (std::is_same_v<T, input::leave>)
          return fmt::format("L {} {} {} {}", m.c, m.now, proto::to_string(m.how), m.timed_out ? 1 : 0);
        else if constexpr (std::is_same_v<T, input::prune>)
          return fmt::format("P {} {}", m.now, m.max_idle);
        else if constexpr (std::is_same_v<T, input::forget>)
          return fmt::format("F {} {} {} {}", m.which.gen, m.which.last_activity, m.which.scope, m.which.name);
        else if constexpr (std::is_same_v<T, input::expire>)
          return fmt::format("E {} {} {} {} {}", m.now, m.which.gen, m.which.within, m.which.scope, m.which.name);
        else
          return {};  // shutdown: one host's own, not shared
      },
      in);
}

bool decode(std::string_view line, door_input& in, std::string& error) {
  std::string_view rest = line;
  std::string_view kind = word(rest);
  error.clear();
  auto fail = [&](std::string_view what) {
    if (error.empty()) error = fmt::format("malformed input ({}): '{}'", what, line.substr(0, 80));
    return false;
  };
  if (kind == "P") {
    input::prune p;
    if (!number(word(rest), p.now) || !number(word(rest), p.max_idle) || !rest.empty()) return fail("prune");
    in = p;
    return true;
  }
  if (kind == "E") {
    input::expire e;
    if (!number(word(rest), e.now) || !number(word(rest), e.which.gen) || !number(word(rest), e.which.within))
      return fail("expire");
    e.which.scope = word(rest);
    e.which.name = word(rest);
    if (!proto::valid_name(e.which.scope) || !proto::valid_name(e.which.name) || !rest.empty()) return fail("expire");
    in = e;
    return true;
  }
  if (kind == "F") {
    input::forget f;
    if (!number(word(rest), f.which.gen) || !number(word(rest), f.which.last_activity)) return fail("forget");
    f.which.scope = word(rest);
    f.which.name = word(rest);
    if (!proto::valid_name(f.which.scope) || !proto::valid_name(f.which.name) || !rest.empty()) return fail("forget");
    in = f;
    return true;
  }
  conn_id c = 0;
  millis now = 0;
  if (!number(word(rest), c) || !number(word(rest), now)) return fail("connection and time");
  if (kind == "A" || kind == "D") {
    peer_info peer;
    if (!number(word(rest), peer.pid)) return fail("pid");
    std::string_view host = word(rest);
    if (host.empty()) return fail("host");
    if (host != "-") peer.host = host;
    if (kind == "A") {
      proto::arrive req;
      if (!request_of(rest, req, error)) return fail("request");
      in = input::arrive{c, std::move(req), std::move(peer), now};
    } else {
      proto::decide req;
      if (!request_of(rest, req, error)) return fail("request");
      in = input::decide{c, std::move(req), std::move(peer), now};
    }
    return true;
  }
  if (kind == "X") {
    proto::abort_req req;
    if (!request_of(rest, req, error)) return fail("request");
    in = input::abort{c, std::move(req), now};
    return true;
  }
  if (kind == "L") {
    auto how = proto::parse_departure(word(rest));
    std::string_view t = word(rest);
    if (!how || (t != "0" && t != "1") || !rest.empty()) return fail("leave");
    in = input::leave{c, *how, now, t == "1"};
    return true;
  }
  return fail("kind");
}

std::string seal_batch(const std::vector<std::string>& lines, std::string_view key, const std::string* secret) {
  std::string body;
  for (const auto& l : lines) {
    body += l;
    body += '\n';
  }
  if (secret) body += "M " + auth::hmac_hex(*secret, std::string(key) + "\n" + body) + "\n";
  return body;
}

bool open_batch(std::string_view value, std::string_view key, const std::string* secret,
                std::vector<std::string_view>& lines, std::string& error) {
  lines.clear();
  std::string_view body = value;
  if (secret) {
    // The MAC is the last line: "M <hex>\n", over the key and every line before it.
    auto at = value.rfind("M ", value.size() >= 2 ? value.size() - 2 : 0);
    if (at == std::string_view::npos || (at != 0 && value[at - 1] != '\n') || !value.ends_with('\n')) {
      error = "a batch without a MAC (written by a host without this secret?)";
      return false;
    }
    body = value.substr(0, at);
    std::string_view mac = value.substr(at + 2, value.size() - at - 3);
    if (!auth::equal(mac, auth::hmac_hex(*secret, std::string(key) + "\n" + std::string(body)))) {
      error = "a batch whose MAC is wrong (written by someone without this job's secret)";
      return false;
    }
  }
  while (!body.empty()) {
    auto nl = body.find('\n');
    if (nl == std::string_view::npos) {
      error = "a batch whose last line is cut";
      return false;
    }
    lines.push_back(body.substr(0, nl));
    body.remove_prefix(nl + 1);
  }
  return true;
}

std::string seal_gone(std::string_view key, std::string_view presence, const std::string* secret) {
  std::string out(presence);
  if (secret) out += " mac=" + auth::hmac_hex(*secret, std::string(key) + "\n" + std::string(presence));
  return out;
}

bool open_gone(std::string_view key, std::string_view value, const std::string* secret, std::string& presence,
               std::string& error) {
  presence = value;
  if (!secret) return true;
  auto at = value.rfind(" mac=");
  if (at == std::string_view::npos) {
    error = "an end of a host without a MAC (written by someone without this job's secret?)";
    return false;
  }
  presence = value.substr(0, at);
  if (!auth::equal(value.substr(at + 5), auth::hmac_hex(*secret, std::string(key) + "\n" + presence))) {
    error = "an end of a host whose MAC is wrong (written by someone without this job's secret)";
    return false;
  }
  return true;
}

conn_id replica::replica_id(const std::string& h, std::int64_t inc, conn_id c) {
  auto [it, fresh] = ids_.try_emplace(gid{h, inc, c}, next_);
  if (fresh) back_.emplace(next_++, it->first);
  return it->second;
}

bool replica::own(conn_id rid) {
  auto it = back_.find(rid);
  if (it != back_.end() && it->second.host == self_ && it->second.inc == self_inc_) return true;
  // Called where rid's wait has ended (barrier_set::release, abort) with no reply
  // built for it: route() will not see it, so its identity goes here.
  forget(rid);
  return false;
}

void replica::forget(conn_id rid) {
  auto it = back_.find(rid);
  if (it == back_.end()) return;
  ids_.erase(it->second);
  back_.erase(it);
}

void replica::host_up(const std::string& h, std::int64_t inc, const presence& p) {
  hosts_[h] = p;
  incs_.emplace(h, inc);
}

void replica::host_down(const std::string& h, std::int64_t inc, output& out) {
  incs_.erase({h, inc});
  next_seq_.erase({h, inc});
  if (incarnation_of(h) == 0) hosts_.erase(h);
  // Every participant that came through (h, inc): lost with that host. A
  // participant that came back through a newer incarnation is someone else.
  std::size_t from = out.sends.size();
  std::vector<conn_id> lost;
  for (auto it = ids_.lower_bound(gid{h, inc, 0}); it != ids_.end() && it->first.host == h && it->first.inc == inc;
       ++it)
    lost.push_back(it->second);
  for (conn_id rid : lost) state_.leave(rid, departure::lost, last_now_, out);
  route(out, from);
  for (conn_id rid : lost) forget(rid);
}

bool replica::apply_batch(const std::string& h, std::int64_t inc, std::uint64_t seq, std::string_view key,
                          std::string_view value, const std::string* secret, output& out, std::string& error) {
  std::vector<std::string_view> lines;
  if (!open_batch(value, key, secret, lines, error)) return false;
  std::vector<door_input> inputs(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (!decode(lines[i], inputs[i], error)) return false;
  if (!present(h, inc)) {
    // Written by an incarnation that has gone (a batch that raced its host's
    // lease): its participants were withdrawn, and it is fenced. Ignored.
    error = fmt::format("a batch of {} incarnation {}, which is not present", h, inc);
    return false;
  }
  // A host writes each sequence once, in order; the MAC binds a batch to its
  // key, so a forger can only put an old batch again, which is refused.
  std::uint64_t& next = next_seq_[{h, inc}];
  if (seq < next) {
    error = fmt::format("batch {} of {} incarnation {} again, after batch {} was applied: a replay", seq, h, inc,
                        next - 1);
    return false;
  }
  next = seq + 1;
  ++batches_;
  for (const auto& in : inputs) apply(h, inc, in, out);
  return true;
}

void replica::apply(const std::string& h, std::int64_t inc, const door_input& in, output& out) {
  std::size_t from = out.sends.size();
  // A release of 40,000 on each of 8 hosts: each builds only its own replies.
  out.only_to = &own_;
  out.journaled = false;  // the store is the record (route)
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, input::prune>) {
          // State-machine version 2's forgetting, by the writer's clock: not
          // applied (a skewed host forgot every barrier). input::forget is.
        } else if constexpr (std::is_same_v<T, input::forget>) {
          state_.forget(m.which, out);
        } else if constexpr (std::is_same_v<T, input::expire>) {
          state_.expire(m.which, m.now, out);
        } else if constexpr (!std::is_same_v<T, input::shutdown>) {
          last_now_ = std::max(last_now_, m.now);
          conn_id rid = replica_id(h, inc, m.c);
          if constexpr (std::is_same_v<T, input::arrive> || std::is_same_v<T, input::decide>) {
            // One wait per connection: a host never sends a second ARRIVE or
            // DECIDE on a connection that waits, so such a line is not one of
            // a host's, and is dropped (everywhere alike). Applied, it would
            // leave a member that no departure reaches (found by fuzz_store).
            // The one exception: the chief of `wait --decide-by` gives its verdict on its connection.
            if (state_.is_waiting(rid) && !(std::is_same_v<T, input::decide> && state_.decides_on(rid))) return;
            state_.came_through(h);  // for status: the host each participant came through
            if constexpr (std::is_same_v<T, input::arrive>)
              state_.arrive(rid, m.req, m.peer, m.now, out);
            else
              state_.decide(rid, m.req, m.peer, m.now, out);
          } else if constexpr (std::is_same_v<T, input::abort>)
            state_.abort(rid, m.req, m.now, out);
          else
            state_.leave(rid, m.how, m.now, out, m.timed_out);
        }
      },
      in);
  out.only_to = nullptr;
  route(out, from);
  // A connection that left is closed on its host: nothing more can come from it.
  if (const auto* l = std::get_if<input::leave>(&in); l && l->how != departure::left) {
    auto it = ids_.find(gid{h, inc, l->c});
    if (it != ids_.end()) forget(it->second);
  }
}

std::string replica::dump() const {
  std::string out;
  text_state::writer w(out);
  w.word("replica").num(state_machine_version).num(next_).num(last_now_).num(batches_).end();
  // The incarnations only: what a presence says (pid, address) is for this
  // host's display, and a host that caught up may know less of it.
  for (const auto& [h, inc] : incs_) {
    auto seq = next_seq_.find({h, inc});
    w.word("host").str(h).num(inc).num(seq == next_seq_.end() ? 0 : seq->second).end();
  }
  std::vector<std::pair<conn_id, const gid*>> ids;
  ids.reserve(ids_.size());
  for (const auto& [g, rid] : ids_) ids.emplace_back(rid, &g);
  std::sort(ids.begin(), ids.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [rid, g] : ids) w.word("id").num(rid).str(g->host).num(g->inc).num(g->c).end();
  w.word("state").end();
  return out + state_.dump();
}

bool replica::load(std::string_view text, std::string& error) {
  std::set<std::pair<std::string, std::int64_t>> incs;
  std::map<std::pair<std::string, std::int64_t>, std::uint64_t> next_seq;
  std::map<gid, conn_id> ids;
  std::unordered_map<conn_id, gid> back;
  conn_id next = 0;
  millis last_now = 0;
  std::uint64_t batches = 0;
  int line_no = 0;
  std::size_t state_at = std::string_view::npos;
  std::string_view rest = text;
  auto fail = [&](std::string_view what) {
    error = fmt::format("snapshot line {}: {}", line_no, what);
    return false;
  };
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    if (nl == std::string_view::npos) return fail("cut short");
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    ++line_no;
    text_state::reader r(line);
    std::string_view kind;
    r.word(kind);
    if (line_no == 1) {
      int sm = 0;
      if (kind != "replica" || !r.num(sm)) return fail("not a snapshot");
      if (sm != state_machine_version)
        return fail(fmt::format("a snapshot of state-machine version {}, and this host runs {}", sm,
                                state_machine_version));
      if (!r.num(next) || !r.num(last_now) || !r.num(batches) || !r.at_end()) return fail("not a snapshot");
      continue;
    }
    if (kind == "host") {
      std::string h;
      std::int64_t inc = 0;
      std::uint64_t seq = 0;
      if (!r.str(h) || !r.num(inc) || !r.num(seq) || !r.at_end() || inc <= 0 || !incs.emplace(h, inc).second)
        return fail("a malformed host");
      if (seq > 0) next_seq.emplace(std::pair{h, inc}, seq);
    } else if (kind == "id") {
      conn_id rid = 0;
      gid g;
      if (!r.num(rid) || !r.str(g.host) || !r.num(g.inc) || !r.num(g.c) || !r.at_end() || rid == 0 || rid >= next)
        return fail("a malformed identity");
      // Identities of an incarnation go with it (host_down), so each names one that is present.
      if (incs.count({g.host, g.inc}) == 0)
        return fail("an identity of an incarnation that is not present");
      if (!ids.emplace(g, rid).second || !back.emplace(rid, g).second) return fail("an identity twice");
    } else if (kind == "state" && r.at_end()) {
      state_at = text.size() - rest.size();
      break;
    } else {
      return fail("an unknown line");
    }
  }
  if (state_at == std::string_view::npos) return fail("no state");
  barrier_set loaded;
  if (!loaded.load(text.substr(state_at), error)) return false;
  if (!loaded.connections_below(next)) return fail("a connection the identities have not reached");
  loaded.limit(state_.max_barriers(), state_.keep_recent());
  state_ = std::move(loaded);
  std::erase_if(hosts_, [&](const auto& h) {  // display only: what is known
    auto it = incs.lower_bound({h.first, 0});
    return it == incs.end() || it->first != h.first;
  });
  incs_ = std::move(incs);
  next_seq_ = std::move(next_seq);
  ids_ = std::move(ids);
  back_ = std::move(back);
  next_ = next;
  last_now_ = last_now;
  batches_ = batches;
  return true;
}

bool replica::waiting_here(conn_id c) const {
  auto it = ids_.find(gid{self_, self_inc_, c});
  return it != ids_.end() && state_.is_waiting(it->second);
}

void replica::route(output& out, std::size_t from) {
  std::size_t keep = from;
  std::vector<conn_id> done;
  for (std::size_t i = from; i < out.sends.size(); ++i) {
    conn_id rid = out.sends[i].to;
    // Released, aborted or refused: nothing more comes to it, so its identity goes
    // (a departure written for it later makes a fresh one, which changes nothing and goes too).
    if (!state_.is_waiting(rid)) done.push_back(rid);
    auto it = back_.find(rid);
    if (it == back_.end() || it->second.host != self_ || it->second.inc != self_inc_) continue;
    out.sends[i].to = it->second.c;
    if (keep != i) out.sends[keep] = std::move(out.sends[i]);
    ++keep;
  }
  out.sends.erase(out.sends.begin() + static_cast<std::ptrdiff_t>(keep), out.sends.end());
  out.journal.clear();  // the store is the record
  for (conn_id rid : done) forget(rid);
}

}  // namespace tfb::store
