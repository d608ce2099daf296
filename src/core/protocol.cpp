#include "protocol.h"

#include <charconv>
#include <fmt/format.h>

#include "text.h"

namespace tfb::proto {
namespace {

bool is_key_char(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }
bool is_verb_char(char c) { return c >= 'A' && c <= 'Z'; }
bool is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

template <class T>
std::optional<T> to_uint(std::string_view s) {
  T v{};
  if (s.empty() || s.size() > 20) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Bytes of a bad line quoted back in an ERR: printable ASCII as is, the rest
// as \xNN, so that the ERR's own text stays valid (UTF-8, no controls).
std::string ascii(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

std::string opt_num(const std::optional<std::uint32_t>& v) { return v ? std::to_string(*v) : "-"; }

void add(line& l, std::string key, std::string value) {
  l.fields.emplace_back(std::move(key), value.empty() ? "-" : std::move(value));
}

struct field_error {
  std::string text;
};

// Typed access to fields, collecting the first error.
class reader {
 public:
  explicit reader(const line& l) : l_(l) {}
  std::string required(std::string_view key) {
    const std::string* v = l_.get(key);
    if (!v) {
      fail(fmt::format("{} needs the field {}=", l_.verb, key));
      return {};
    }
    return *v;
  }
  std::string optional_str(std::string_view key, std::string fallback = {}) {
    const std::string* v = l_.get(key);
    if (!v || *v == "-") return fallback;
    return *v;
  }
  std::optional<std::uint32_t> optional_u32(std::string_view key, std::uint32_t min, std::uint32_t max) {
    const std::string* v = l_.get(key);
    if (!v || *v == "-") return std::nullopt;
    auto n = to_uint<std::uint32_t>(*v);
    if (!n || *n < min || *n > max) {
      fail(fmt::format("{}={} is not a number from {} to {}", key, *v, min, max));
      return std::nullopt;
    }
    return n;
  }
  std::uint64_t u64(std::string_view key) {
    std::string s = required(key);
    if (!ok()) return 0;
    auto n = to_uint<std::uint64_t>(s);
    if (!n) fail(fmt::format("{}={} is not a number", key, s));
    return n.value_or(0);
  }
  bool flag(std::string_view key, bool fallback) {
    const std::string* v = l_.get(key);
    if (!v || *v == "-") return fallback;
    if (*v == "1") return true;
    if (*v == "0") return false;
    fail(fmt::format("{}={} must be 0 or 1", key, *v));
    return fallback;
  }
  void fail(std::string text) {
    if (!error_) error_ = std::move(text);
  }
  bool ok() const { return !error_; }
  const std::string& error() const { return *error_; }

 private:
  const line& l_;
  std::optional<std::string> error_;
};

std::string check_name(reader& r, std::string_view key, bool allow_empty) {
  std::string v = r.required(key);
  if (!r.ok()) return {};
  if (v == "-" && allow_empty) return {};
  if (!valid_name(v)) r.fail(fmt::format("{}={} is not a valid name (1-128 of A-Z a-z 0-9 . _ : -)", key, v));
  return v;
}

}  // namespace

const std::string* line::get(std::string_view key) const {
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > max_name || s == "-") return false;  // "-" means "none" on the wire
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

bool valid_id(std::string_view s) {
  if (s.empty() || s.size() > max_id) return false;
  for (char c : s)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

std::string text_problem(std::string_view s) {
  if (s.size() > max_text) return fmt::format("is {} bytes, more than the limit of {}", s.size(), max_text);
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f)
      return fmt::format("holds a control character (\\x{:02x} at byte {}); use one line of printable text", c, i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    auto [len, cp] = decode_utf8(s, i);
    if (len == 0) return fmt::format("is not valid UTF-8 (byte \\x{:02x} at {})", c, i);
    if (cp >= 0x80 && cp <= 0x9f)  // C1 controls: some terminals take U+009B as an escape
      return fmt::format("holds a control character (U+{:04X} at byte {}); use one line of printable text", cp, i);
    i += len;
  }
  return {};
}

bool valid_text(std::string_view s) { return text_problem(s).empty(); }

bool valid_value(std::string_view s) {
  if (s.empty() || s.size() > max_value) return false;
  for (unsigned char c : s)
    if (c <= 0x20 || c >= 0x7f || c == '=') return false;
  return true;
}

std::optional<line> parse_line(std::string_view raw, std::string& error) {
  if (raw.size() + 1 > max_line) {
    error = fmt::format("line of {} bytes is longer than the limit of {}", raw.size() + 1, max_line);
    return std::nullopt;
  }
  line l;
  std::size_t i = 0;
  while (i < raw.size() && raw[i] != ' ') {
    if (!is_verb_char(raw[i])) {
      error = "a line must start with an upper-case verb";
      return std::nullopt;
    }
    l.verb.push_back(raw[i++]);
  }
  if (l.verb.empty()) {
    error = "empty line";
    return std::nullopt;
  }
  while (i < raw.size()) {
    // raw[i] == ' '
    ++i;
    if (i < raw.size() && raw[i] == ':') {
      std::string_view text = raw.substr(i + 1);
      if (std::string why = text_problem(text); !why.empty()) {
        error = "trailing text " + why;  // ASCII: bad bytes are shown as \xNN
        return std::nullopt;
      }
      l.text = std::string(text);
      return l;
    }
    std::size_t end = raw.find(' ', i);
    if (end == std::string_view::npos) end = raw.size();
    std::string_view tok = raw.substr(i, end - i);
    std::size_t eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      error = fmt::format("expected key=value, got '{}'", ascii(tok.substr(0, 64)));
      return std::nullopt;
    }
    std::string_view key = tok.substr(0, eq), value = tok.substr(eq + 1);
    for (char c : key)
      if (!is_key_char(c)) {
        error = fmt::format("bad key '{}'", ascii(key.substr(0, 64)));
        return std::nullopt;
      }
    if (!valid_value(value)) {
      error = fmt::format("bad value for {}: 1-{} printable bytes without spaces or '='", key, max_value);
      return std::nullopt;
    }
    // A key given twice would let two readers of one line disagree on which
    // value counts (ARRIVE name=a name=b): refused.
    for (const auto& f : l.fields)
      if (f.first == key) {
        error = fmt::format("the key {} is given twice", ascii(key.substr(0, 64)));
        return std::nullopt;
      }
    l.fields.emplace_back(std::string(key), std::string(value));
    i = end;
  }
  return l;
}

std::string format_line(const line& l) {
  std::string out = l.verb;
  for (const auto& [k, v] : l.fields) {
    out += ' ';
    out += k;
    out += '=';
    out += v.empty() ? "-" : v;
  }
  if (l.text && !l.text->empty()) {
    out += " :";
    out += *l.text;
  }
  out += '\n';
  return out;
}

std::string_view to_string(verdict v) {
  switch (v) {
    case verdict::continue_: return "continue";
    case verdict::stop: return "stop";
    case verdict::none: break;
  }
  return "none";
}

std::optional<verdict> parse_verdict(std::string_view s) {
  if (s == "continue") return verdict::continue_;
  if (s == "stop") return verdict::stop;
  return std::nullopt;
}

namespace {
// The wire words of each enum, one table each: to_string and parse_* read the same table.
template <class E>
using names = std::pair<E, std::string_view>;

constexpr names<round_state> state_names[] = {
    {round_state::open, "open"}, {round_state::gathered, "gathered"}, {round_state::aborted, "aborted"}};

constexpr names<departure> departure_names[] = {
    {departure::left, "left"}, {departure::disconnected, "disconnected"}, {departure::unresponsive, "unresponsive"}, {departure::lost, "lost"}};

constexpr names<error_kind> kind_names[] = {
    {error_kind::version, "VERSION"},     {error_kind::handshake, "HANDSHAKE"},
    {error_kind::toolong, "TOOLONG"},     {error_kind::badrequest, "BADREQUEST"},
    {error_kind::timeout, "TIMEOUT"},     {error_kind::conflict, "CONFLICT"},
    {error_kind::needn, "NEEDN"},         {error_kind::ambiguous, "AMBIGUOUS"},
    {error_kind::aborted, "ABORTED"},     {error_kind::busy, "BUSY"},
    {error_kind::auth, "AUTH"},
};

/// The word for e; `fallback` only for a value outside the enum.
template <class E, std::size_t N>
std::string_view word_of(const names<E> (&table)[N], E e, std::string_view fallback) {
  for (auto [value, word] : table)
    if (value == e) return word;
  return fallback;
}

template <class E, std::size_t N>
std::optional<E> value_of(const names<E> (&table)[N], std::string_view s) {
  for (auto [value, word] : table)
    if (word == s) return value;
  return std::nullopt;
}
}  // namespace

std::string_view to_string(round_state s) { return word_of(state_names, s, "open"); }
std::optional<round_state> parse_round_state(std::string_view s) { return value_of(state_names, s); }

std::string_view to_string(departure d) { return word_of(departure_names, d, "disconnected"); }
std::optional<departure> parse_departure(std::string_view s) { return value_of(departure_names, s); }

std::string_view to_string(error_kind k) { return word_of(kind_names, k, "BADREQUEST"); }
std::optional<error_kind> parse_error_kind(std::string_view s) { return value_of(kind_names, s); }

bool closes_connection(error_kind k) {
  switch (k) {
    case error_kind::version:
    case error_kind::handshake:
    case error_kind::toolong:
    case error_kind::badrequest:
    case error_kind::timeout:
    case error_kind::busy:
    case error_kind::auth: return true;
    default: return false;
  }
}

namespace {
// One parser per request verb: its fields into the request, the first problem into r.
request parse_hello(reader& r, const line&) {
  hello h;
  std::string v = r.required("v");
  if (r.ok()) {
    auto n = to_uint<std::uint32_t>(v);
    if (!n) r.fail(fmt::format("v={} is not a protocol version", v));
    h.version = n.value_or(0);
  }
  h.host = r.optional_str("host", "?");
  if (auto pid = r.optional_u32("pid", 0, 0x7fffffff)) h.pid = *pid;
  if (auto ka = r.optional_u32("keepalive", 0, 3'600'000)) h.keepalive_ms = *ka;
  h.nonce = r.optional_str("nonce");
  return h;
}

request parse_arrive(reader& r, const line&) {
  arrive a;
  a.name = check_name(r, "name", false);
  a.scope = check_name(r, "scope", false);
  a.id = r.required("id");
  if (r.ok() && !valid_id(a.id)) r.fail(fmt::format("id={} is not 1-64 letters and digits", a.id));
  a.n = r.optional_u32("n", 1, max_n);
  a.rank = r.optional_u32("rank", 0, max_n - 1);
  a.chief = r.flag("chief", false);
  a.decide = r.flag("decide", false);
  a.within_ms = r.optional_u32("within", 1, max_within_ms);
  if (r.ok() && (a.decide || a.within_ms) && !a.chief)
    r.fail(fmt::format("{} is for the chief: it needs chief=1", a.decide ? "decide=1" : "within"));
  if (r.ok() && a.n && a.rank && *a.rank >= *a.n)
    r.fail(fmt::format("rank={} is not below n={}", *a.rank, *a.n));
  return a;
}

request parse_decide(reader& r, const line& l) {
  decide d;
  d.name = check_name(r, "name", true);
  d.scope = check_name(r, "scope", false);
  d.id = r.required("id");
  if (r.ok() && !valid_id(d.id)) r.fail(fmt::format("id={} is not 1-64 letters and digits", d.id));
  std::string v = r.required("verdict");
  if (r.ok()) {
    auto pv = parse_verdict(v);
    if (!pv) r.fail(fmt::format("verdict={} must be continue or stop", v));
    d.v = pv.value_or(verdict::none);
  }
  d.n = r.optional_u32("n", 1, max_n);
  d.rank = r.optional_u32("rank", 0, max_n - 1);
  if (r.ok() && d.n && d.rank && *d.rank >= *d.n)
    r.fail(fmt::format("rank={} is not below n={}", *d.rank, *d.n));
  d.wait = r.flag("wait", true);
  d.message = l.text.value_or("");
  return d;
}

request parse_abort(reader& r, const line& l) {
  abort_req a;
  a.scope = check_name(r, "scope", false);
  a.name = check_name(r, "name", false);
  a.reason = l.text.value_or("");
  return a;
}

request parse_status(reader& r, const line&) {
  status_req s;
  std::string scope = r.optional_str("scope", "*");
  if (scope != "*" && !valid_name(scope)) r.fail(fmt::format("scope={} is not a valid scope", scope));
  s.scope = scope;
  s.name = r.optional_str("name");
  if (!s.name.empty() && !valid_name(s.name)) r.fail(fmt::format("name={} is not a valid name", s.name));
  s.detail = r.flag("detail", false);
  s.last = r.flag("last", false);
  return s;
}

request parse_leave(reader& r, const line&) {
  // why= is optional, and a value other than timeout is ignored like an unknown key.
  return leave{r.optional_str("why") == "timeout" ? "timeout" : ""};
}

request parse_history(reader& r, const line&) {
  history_req h;
  std::string scope = r.optional_str("scope", "*");
  if (scope != "*" && !valid_name(scope)) r.fail(fmt::format("scope={} is not a valid scope", scope));
  h.scope = scope;
  h.name = r.optional_str("name");
  if (h.name.size() > max_name) r.fail("name= is longer than 128 bytes");
  if (auto v = r.optional_str("last"); !v.empty()) {
    auto n = to_uint<std::uint64_t>(v);
    if (!n) r.fail(fmt::format("last={} is not a number", v));
    h.last = n.value_or(0);
  }
  if (auto v = r.optional_str("from"); !v.empty()) {
    auto n = to_uint<std::uint64_t>(v);
    if (!n) r.fail(fmt::format("from={} is not a number", v));
    h.from = n.value_or(0);
  }
  return h;
}

request parse_ping(reader&, const line&) { return ping{}; }

request parse_auth(reader& r, const line&) {
  auth_req a{r.optional_str("proof"), r.optional_str("cred")};
  if (a.proof.empty() && a.cred.empty()) r.fail("AUTH needs proof= or cred=");
  return a;
}

using request_parser = request (*)(reader& r, const line& l);

constexpr std::pair<std::string_view, request_parser> request_parsers[] = {
    {"HELLO", parse_hello},   {"ARRIVE", parse_arrive}, {"DECIDE", parse_decide},   {"ABORT", parse_abort},
    {"STATUS", parse_status}, {"LEAVE", parse_leave},   {"HISTORY", parse_history}, {"PING", parse_ping},
    {"AUTH", parse_auth},
};
}  // namespace

std::variant<request, request_error> parse_request(std::string_view raw) {
  std::string err;
  auto l = parse_line(raw, err);
  if (!l) {
    if (raw.size() + 1 > max_line) return request_error{error_kind::toolong, err};
    return request_error{error_kind::badrequest, err};
  }
  for (auto [verb, parse] : request_parsers) {
    if (l->verb != verb) continue;
    reader r(*l);
    request out = parse(r, *l);
    if (!r.ok()) return request_error{error_kind::badrequest, r.error()};
    return out;
  }
  return request_error{error_kind::badrequest,
                       fmt::format("unknown request '{}'; see docs/protocol.md", l->verb.substr(0, 32))};
}

std::string format_request(const request& req) {
  line l;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, hello>) {
          l.verb = "HELLO";
          add(l, "v", std::to_string(m.version));
          add(l, "host", m.host);
          add(l, "pid", std::to_string(m.pid));
          if (m.keepalive_ms) add(l, "keepalive", std::to_string(m.keepalive_ms));
          if (!m.nonce.empty()) add(l, "nonce", m.nonce);
        } else if constexpr (std::is_same_v<T, arrive>) {
          l.verb = "ARRIVE";
          add(l, "name", m.name);
          add(l, "scope", m.scope);
          add(l, "id", m.id);
          add(l, "n", opt_num(m.n));
          add(l, "rank", opt_num(m.rank));
          add(l, "chief", m.chief ? "1" : "0");
          if (m.decide) add(l, "decide", "1");
          if (m.within_ms) add(l, "within", std::to_string(*m.within_ms));
        } else if constexpr (std::is_same_v<T, decide>) {
          l.verb = "DECIDE";
          add(l, "scope", m.scope);
          add(l, "id", m.id);
          add(l, "verdict", std::string(to_string(m.v)));
          add(l, "name", m.name);
          add(l, "n", opt_num(m.n));
          add(l, "rank", opt_num(m.rank));
          add(l, "wait", m.wait ? "1" : "0");
          if (!m.message.empty()) l.text = m.message;
        } else if constexpr (std::is_same_v<T, abort_req>) {
          l.verb = "ABORT";
          add(l, "scope", m.scope);
          add(l, "name", m.name);
          if (!m.reason.empty()) l.text = m.reason;
        } else if constexpr (std::is_same_v<T, status_req>) {
          l.verb = "STATUS";
          add(l, "scope", m.scope);
          add(l, "name", m.name);
          add(l, "detail", m.detail ? "1" : "0");
          if (m.last) add(l, "last", "1");
        } else if constexpr (std::is_same_v<T, leave>) {
          l.verb = "LEAVE";
          if (!m.why.empty()) add(l, "why", m.why);
        } else if constexpr (std::is_same_v<T, history_req>) {
          l.verb = "HISTORY";
          add(l, "scope", m.scope);
          add(l, "name", m.name);
          if (m.last) add(l, "last", std::to_string(m.last));
          if (m.from) add(l, "from", std::to_string(m.from));
        } else if constexpr (std::is_same_v<T, auth_req>) {
          l.verb = "AUTH";
          if (!m.proof.empty()) add(l, "proof", m.proof);
          if (!m.cred.empty()) add(l, "cred", m.cred);
        } else {
          l.verb = "PING";
        }
      },
      req);
  return format_line(l);
}

std::string format_ranges(const std::vector<std::uint32_t>& sorted, std::size_t max_ranges) {
  std::string out;
  std::size_t ranges = 0;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (ranges == max_ranges) {
      out += "+";
      return out;
    }
    if (!out.empty()) out += ',';
    if (j == i)
      out += std::to_string(sorted[i]);
    else
      out += fmt::format("{}-{}", sorted[i], sorted[j]);
    ++ranges;
    i = j + 1;
  }
  return out;
}

std::vector<std::uint32_t> expand_ranges(std::string_view text, bool& cut) {
  constexpr std::size_t most = 1'000'000;
  std::vector<std::uint32_t> out;
  cut = text.ends_with('+');
  while (!text.empty() && out.size() < most) {
    std::string_view item = text.substr(0, text.find(','));
    text.remove_prefix(std::min(text.size(), item.size() + 1));
    std::uint32_t lo = 0, hi = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), lo);
    if (ec != std::errc()) continue;  // "+" or garbage
    hi = lo;
    if (end < item.data() + item.size() && *end == '-' &&
        std::from_chars(end + 1, item.data() + item.size(), hi).ec != std::errc())
      continue;
    for (std::uint64_t r = lo; r <= hi && out.size() < most; ++r) out.push_back(static_cast<std::uint32_t>(r));
  }
  return out;
}

namespace {
/// A STATUS reply: BARRIER blocks with their MEMBER, GONE and MISSING lines, then END.
void format_status(const status_reply& m, std::string& out) {
  for (const auto& b : m.barriers) {
    line bl;
    bl.verb = "BARRIER";
    add(bl, "scope", b.scope);
    add(bl, "name", b.name);
    add(bl, "gen", std::to_string(b.gen));
    add(bl, "state", std::string(to_string(b.state)));
    add(bl, "n", opt_num(b.n));
    add(bl, "arrived", std::to_string(b.arrived));
    add(bl, "chief", b.chief ? "1" : "0");
    add(bl, "verdict", std::string(to_string(b.v)));
    add(bl, "age_ms", std::to_string(b.age_ms));
    if (b.last) {
      add(bl, "last_gen", std::to_string(b.last->gen));
      add(bl, "last_verdict", std::string(to_string(b.last->v)));
      add(bl, "last_ago_ms", std::to_string(b.last->ago_ms));
      add(bl, "last_ms", std::to_string(b.last->took_ms));
      add(bl, "last_rank", opt_num(b.last->rank));
      add(bl, "last_node", b.last->node.substr(0, max_value));
    }
    if (!b.reason.empty()) bl.text = b.reason;
    out += format_line(bl);
    std::size_t count = 0;
    for (const auto& mem : b.members) {
      if (++count > max_member_lines) break;
      line ml;
      ml.verb = "MEMBER";
      add(ml, "rank", opt_num(mem.rank));
      add(ml, "host", mem.host);
      add(ml, "pid", std::to_string(mem.pid));
      add(ml, "chief", mem.chief ? "1" : "0");
      add(ml, "age_ms", std::to_string(mem.age_ms));
      if (!mem.via.empty()) add(ml, "via", mem.via);
      out += format_line(ml);
    }
    for (const auto& g : b.gone) {
      line gl;
      gl.verb = "GONE";
      add(gl, "rank", opt_num(g.rank));
      add(gl, "host", g.host);
      add(gl, "pid", std::to_string(g.pid));
      add(gl, "how", std::string(to_string(g.how)));
      add(gl, "ago_ms", std::to_string(g.ago_ms));
      out += format_line(gl);
    }
    if (b.missing) {
      line ms;
      ms.verb = "MISSING";
      add(ms, "ranks", *b.missing);
      // As many RANK@NODE as fit in one value; a node with ',' or no name is left out.
      std::string nodes;
      std::size_t named = 0;
      for (const auto& rn : b.missing_nodes) {
        if (++named > max_missing_nodes) break;
        if (rn.node.empty() || rn.node.find(',') != std::string::npos || !valid_value(rn.node)) continue;
        std::string item = fmt::format("{}@{}", rn.rank, rn.node);
        if (nodes.size() + 1 + item.size() > max_value) break;
        nodes += (nodes.empty() ? "" : ",") + item;
      }
      if (!nodes.empty()) add(ms, "nodes", nodes);
      out += format_line(ms);
    }
  }
  out += "END\n";
}

/// A HISTORY page: its lines as they are, then HEND.
void format_history(const history_page& m, std::string& out) {
  for (const auto& hl : m.lines) {
    out += hl;
    out += '\n';
  }
  out += m.next ? fmt::format("HEND next={}\n", *m.next) : std::string("HEND\n");
}

/// An ERR line. The kind is a bare word after the verb: "ERR CONFLICT :text".
void format_error(const error_reply& m, std::string& out) {
  std::string s = fmt::format("ERR {}", to_string(m.kind));
  if (!m.text.empty()) {
    std::string text = m.text.substr(0, max_text);
    // Error texts may quote what a client sent: keep the line a valid protocol line.
    for (char& ch : text)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
    s += " :" + text;
  }
  out += s + "\n";
}
}  // namespace

std::string format_reply(const reply& rep) {
  std::string out;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        line l;
        if constexpr (std::is_same_v<T, hello_reply>) {
          l.verb = "HELLO";
          add(l, "v", std::to_string(m.version));
          add(l, "server", m.server);
          add(l, "auth", m.auth);
          if (!m.store.empty()) add(l, "store", m.store);
          if (!m.nonce.empty()) add(l, "nonce", m.nonce);
          if (!m.proof.empty()) add(l, "proof", m.proof);
          if (!m.cred.empty()) add(l, "cred", m.cred);
        } else if constexpr (std::is_same_v<T, waiting>) {
          l.verb = "WAITING";
          add(l, "name", m.name);
          add(l, "gen", std::to_string(m.gen));
          add(l, "arrived", std::to_string(m.arrived));
          add(l, "n", opt_num(m.n));
        } else if constexpr (std::is_same_v<T, release>) {
          l.verb = "RELEASE";
          add(l, "name", m.name);
          add(l, "gen", std::to_string(m.gen));
          add(l, "verdict", std::string(to_string(m.v)));
          if (m.delivered) add(l, "delivered", std::to_string(*m.delivered));
          if (!m.message.empty()) l.text = m.message;
        } else if constexpr (std::is_same_v<T, all_here>) {
          l.verb = "ALLHERE";
          add(l, "name", m.name);
          add(l, "gen", std::to_string(m.gen));
          add(l, "arrived", std::to_string(m.arrived));
          add(l, "n", std::to_string(m.n));
        } else if constexpr (std::is_same_v<T, aborted>) {
          l.verb = "ABORTED";
          add(l, "name", m.name);
          add(l, "gen", std::to_string(m.gen));
          if (m.notified) add(l, "notified", std::to_string(*m.notified));
          if (!m.reason.empty()) l.text = m.reason;
        } else if constexpr (std::is_same_v<T, decided>) {
          l.verb = "DECIDED";
          add(l, "name", m.name);
          add(l, "gen", std::to_string(m.gen));
          add(l, "verdict", std::string(to_string(m.v)));
          add(l, "arrived", std::to_string(m.arrived));
          add(l, "n", opt_num(m.n));
        } else if constexpr (std::is_same_v<T, left>) {
          l.verb = "LEFT";
          add(l, "name", m.name);
          add(l, "gen", std::to_string(m.gen));
        } else if constexpr (std::is_same_v<T, shutdown>) {
          l.verb = "SHUTDOWN";
          if (!m.text.empty()) l.text = m.text;
        } else if constexpr (std::is_same_v<T, pong>) {
          l.verb = "PONG";
        } else if constexpr (std::is_same_v<T, history_page>) {
          format_history(m, out);
          return;
        } else if constexpr (std::is_same_v<T, error_reply>) {
          format_error(m, out);
          return;
        } else if constexpr (std::is_same_v<T, status_reply>) {
          format_status(m, out);
          return;
        }
        out += format_line(l);
      },
      rep);
  return out;
}

namespace {
std::optional<std::uint32_t> opt_field(reader& r, std::string_view key) { return r.optional_u32(key, 0, 0xffffffffu); }
}  // namespace

namespace {
/// One line inside a STATUS block (l, read by r), added to st: true at its END.
bool read_status_line(status_reply& st, const line& l, reader& r) {
  const std::string& verb = l.verb;
  if (verb == "BARRIER") {
    barrier_info b;
    b.scope = r.optional_str("scope");
    b.name = r.optional_str("name");
    b.gen = r.u64("gen");
    auto state = parse_round_state(r.optional_str("state"));
    if (!state) r.fail("BARRIER without a valid state");
    b.state = state.value_or(round_state::open);
    b.n = opt_field(r, "n");
    b.arrived = opt_field(r, "arrived").value_or(0);
    b.chief = r.flag("chief", false);
    b.v = parse_verdict(r.optional_str("verdict")).value_or(verdict::none);
    b.age_ms = static_cast<std::int64_t>(r.u64("age_ms"));
    b.reason = l.text.value_or("");
    if (l.get("last_gen")) {  // STATUS last=1
      barrier_info::last_round last;
      last.gen = r.u64("last_gen");
      last.v = parse_verdict(r.optional_str("last_verdict")).value_or(verdict::continue_);
      last.ago_ms = static_cast<std::int64_t>(r.u64("last_ago_ms"));
      last.took_ms = static_cast<std::int64_t>(r.u64("last_ms"));
      last.rank = opt_field(r, "last_rank");
      last.node = r.optional_str("last_node");
      b.last = std::make_shared<const barrier_info::last_round>(std::move(last));
    }
    st.barriers.push_back(std::move(b));
  } else if (verb == "MEMBER" && !st.barriers.empty()) {
    barrier_info::member m;
    m.rank = opt_field(r, "rank");
    m.host = r.optional_str("host");
    m.pid = opt_field(r, "pid").value_or(0);
    m.chief = r.flag("chief", false);
    m.age_ms = static_cast<std::int64_t>(r.u64("age_ms"));
    m.via = r.optional_str("via");
    st.barriers.back().members.push_back(std::move(m));
  } else if (verb == "GONE" && !st.barriers.empty()) {
    barrier_info::gone_member g;
    g.rank = opt_field(r, "rank");
    g.host = r.optional_str("host");
    g.pid = opt_field(r, "pid").value_or(0);
    auto how = parse_departure(r.optional_str("how"));
    if (!how) r.fail("GONE without a valid how");
    g.how = how.value_or(departure::disconnected);
    g.ago_ms = static_cast<std::int64_t>(r.u64("ago_ms"));
    st.barriers.back().gone.push_back(std::move(g));
  } else if (verb == "MISSING" && !st.barriers.empty()) {
    st.barriers.back().missing = r.optional_str("ranks");
    // nodes=RANK@NODE,...: at most max_missing_nodes kept; an item that is not one is skipped.
    std::string held = r.optional_str("nodes");
    std::string_view nodes = held;
    auto& out = st.barriers.back().missing_nodes;
    while (!nodes.empty() && out.size() < max_missing_nodes) {
      std::string_view item = nodes.substr(0, nodes.find(','));
      nodes.remove_prefix(std::min(nodes.size(), item.size() + 1));
      auto at = item.find('@');
      std::uint32_t rank = 0;
      if (at == std::string_view::npos || at == 0 || at + 1 == item.size() ||
          std::from_chars(item.data(), item.data() + at, rank).ptr != item.data() + at)
        continue;
      out.push_back({rank, std::string(item.substr(at + 1))});
    }
  } else if (verb == "END") {
    return true;
  } else {
    r.fail(fmt::format("unexpected '{}' inside a STATUS reply", verb));
  }
  return false;
}

}  // namespace

std::optional<reply> reply_reader::feed(std::string_view raw, std::string& error) {
  if (too_long_) {
    error = "the stream went on past a reply that was too long";
    return std::nullopt;
  }
  auto out = read(raw, error);
  if (!partial().empty()) {
    // A reply that does not end is refused before it grows the client far.
    bytes_ += cost(raw);
    if (bytes_ > max_bytes_) {
      std::string_view kind = partial();
      error = fmt::format("sent a {} reply over {} without its end", kind,
                          max_bytes_ >= (1u << 20) ? fmt::format("{} MiB", max_bytes_ >> 20)
                                                   : fmt::format("{} bytes", max_bytes_));
      status_.reset();
      history_.reset();
      too_long_ = true;
      return std::nullopt;
    }
  } else {
    bytes_ = 0;
  }
  return out;
}

std::size_t reply_reader::cost(std::string_view raw) {
  std::size_t record = raw.starts_with("BARRIER ")  ? sizeof(barrier_info) + (raw.find(" last_gen=") != std::string_view::npos
                                                                  ? 2 * sizeof(barrier_info::last_round)  // with its control block
                                                                  : 0)
                       : raw.starts_with("MEMBER ") ? sizeof(barrier_info::member)
                       : raw.starts_with("GONE ")   ? sizeof(barrier_info::gone_member)
                                                    : sizeof(std::string);  // MISSING, a HISTORY line
  return raw.size() + 1 + record;
}

namespace {
/// An ERR line, read before the key=value parser: its kind is a bare word.
error_reply read_error(std::string_view raw) {
  std::string_view rest = raw.size() > 4 ? raw.substr(4) : std::string_view{};
  std::string_view kind = rest.substr(0, rest.find(' '));
  std::string text;
  auto colon = rest.find(" :");
  if (colon != std::string_view::npos) text = std::string(rest.substr(colon + 2));
  auto k = parse_error_kind(kind);
  return error_reply{k.value_or(error_kind::badrequest), text.empty() ? std::string(rest) : text};
}

/// One line of a HISTORY page (raw, parsed as l, read by r), added to page: the page at its HEND.
std::optional<reply> read_history_line(std::optional<history_page>& page, std::string_view raw, const line& l,
                                       reader& r) {
  const std::string& verb = l.verb;
  if (!page) page = history_page{};
  if (verb == "ROUND" || verb == "ARR") {
    page->lines.emplace_back(raw);  // "ROUND" or "ARR" alone: round_parser says why it is bad
  } else if (verb == "HEND") {
    if (l.get("next")) page->next = r.u64("next");
    std::optional<reply> out = std::move(*page);
    page.reset();
    return out;
  } else {
    r.fail(fmt::format("unexpected '{}' inside a HISTORY reply", verb.substr(0, 32)));
  }
  return std::nullopt;
}

/// A reply of one line (l, read by r), but ERR, STATUS and HISTORY.
std::optional<reply> read_one_line_reply(const line& l, reader& r) {
  auto name = [&] { return r.optional_str("name"); };
  const std::string& verb = l.verb;
  if (verb == "HELLO") {
    hello_reply h;
    h.version = opt_field(r, "v").value_or(0);
    h.server = r.optional_str("server");
    h.auth = r.optional_str("auth", "none");
    h.nonce = r.optional_str("nonce");
    h.proof = r.optional_str("proof");
    h.cred = r.optional_str("cred");
    h.store = r.optional_str("store");
    return h;
  } else if (verb == "WAITING") {
    return waiting{name(), r.u64("gen"), opt_field(r, "arrived").value_or(0), opt_field(r, "n")};
  } else if (verb == "RELEASE") {
    release rel;
    rel.name = name();
    rel.gen = r.u64("gen");
    auto v = parse_verdict(r.optional_str("verdict"));
    if (!v) r.fail("RELEASE without a valid verdict");
    rel.v = v.value_or(verdict::continue_);
    rel.delivered = opt_field(r, "delivered");
    rel.message = l.text.value_or("");
    return rel;
  } else if (verb == "ALLHERE") {
    return all_here{name(), r.u64("gen"), opt_field(r, "arrived").value_or(0), opt_field(r, "n").value_or(0)};
  } else if (verb == "ABORTED") {
    return aborted{name(), r.u64("gen"), opt_field(r, "notified"), l.text.value_or("")};
  } else if (verb == "DECIDED") {
    decided d;
    d.name = name();
    d.gen = r.u64("gen");
    d.v = parse_verdict(r.optional_str("verdict")).value_or(verdict::none);
    d.arrived = opt_field(r, "arrived").value_or(0);
    d.n = opt_field(r, "n");
    return d;
  } else if (verb == "LEFT") {
    return left{name(), r.u64("gen")};
  } else if (verb == "SHUTDOWN") {
    return shutdown{l.text.value_or("")};
  } else if (verb == "PONG") {
    return pong{};
  }
  r.fail(fmt::format("unknown reply '{}'", verb.substr(0, 32)));
  return std::nullopt;
}
}  // namespace

std::optional<reply> reply_reader::read(std::string_view raw, std::string& error) {
  // ERR lines have a bare kind word: handle before the key=value parser.
  if (raw.starts_with("ERR ") || raw == "ERR") return read_error(raw);
  if ((history_ || raw.starts_with("ROUND ")) && (raw.starts_with("ROUND ") || raw.starts_with("ARR "))) {
    // A HISTORY page's lines are kept as they came: hist::round_parser checks
    // them, and a bad one costs its round, not the whole reply.
    if (!history_) history_ = history_page{};
    history_->lines.emplace_back(raw);
    return std::nullopt;
  }
  auto l = parse_line(raw, error);
  if (!l) return std::nullopt;
  reader r(*l);
  std::optional<reply> out;
  const std::string& verb = l->verb;
  if (history_ || verb == "ROUND" || verb == "HEND") {
    // A HISTORY page: its lines are kept as they came, for hist::round_parser.
    out = read_history_line(history_, raw, *l, r);
  } else if (status_) {
    if (read_status_line(*status_, *l, r)) {
      out = std::move(*status_);
      status_.reset();
    }
  } else if (verb == "BARRIER") {
    status_ = status_reply{};
    return read(raw, error);
  } else if (verb == "END") {
    out = status_reply{};
  } else {
    out = read_one_line_reply(*l, r);
  }
  if (!r.ok()) {
    error = r.error();
    return std::nullopt;
  }
  return out;
}

void line_splitter::feed(std::string_view bytes) {
  if (overflow_) return;
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  buf_.append(bytes);
  // Check the unfinished tail against the limit.
  std::size_t last_nl = buf_.rfind('\n');
  std::size_t tail_start = last_nl == std::string::npos ? pos_ : last_nl + 1;
  if (tail_start < pos_) tail_start = pos_;
  if (buf_.size() - tail_start >= max_line) overflow_ = true;
}

std::optional<std::string> line_splitter::next() {
  if (overflow_) return std::nullopt;
  std::size_t nl = buf_.find('\n', pos_);
  if (nl == std::string::npos) {
    if (pos_ == buf_.size()) {
      // Everything was taken: give the memory back. A participant then waits,
      // for minutes, with nothing to read, and a host holds thousands of them.
      std::string().swap(buf_);
      pos_ = 0;
    } else if (pos_ > 0) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    return std::nullopt;
  }
  if (nl + 1 - pos_ > max_line) {
    overflow_ = true;
    return std::nullopt;
  }
  std::size_t end = nl;
  if (end > pos_ && buf_[end - 1] == '\r') --end;
  std::string out = buf_.substr(pos_, end - pos_);
  pos_ = nl + 1;
  return out;
}

}  // namespace tfb::proto
