#include "history.h"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

namespace tfb::hist {

std::string_view to_string(round_record::ending e) { return e == round_record::ending::abort ? "abort" : "release"; }

namespace {
// What a node label may hold: a line value's bytes (protocol.cpp's
// valid_value), less ',', which separates arrivals in an ARR line.
bool label_byte(unsigned char c) { return c > 0x20 && c < 0x7f && c != '=' && c != ','; }
bool is_label(std::string_view s) {
  if (s.empty() || s.size() > max_node) return false;
  for (unsigned char c : s)
    if (!label_byte(c)) return false;
  return true;
}
}  // namespace

// The longest arrival, "4294967295@NODE+4294967295", fits in one ARR value.
static_assert(10 + 1 + max_node + 1 + 10 <= proto::max_value);

std::string node_label(std::string_view node) {
  if (node.empty()) return "?";
  std::string s(node);
  for (char& c : s)
    if (!label_byte(static_cast<unsigned char>(c))) c = '_';
  if (s.size() > max_node) {
    std::uint32_t h = 2166136261u;  // FNV-1a of the whole name
    for (unsigned char c : node) h = (h ^ c) * 16777619u;
    s.resize(max_node - 9);
    s += fmt::format("~{:08x}", h);
  }
  return s;
}

bool glob_match(std::string_view p, std::string_view s) {
  // Iterative, with one backtrack point: linear for the patterns people type.
  std::size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi;
      ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::uint32_t history::intern(std::vector<std::string>& table, std::unordered_map<std::string, std::uint32_t>& index,
                              const std::string& s) {
  auto [it, inserted] = index.try_emplace(s, static_cast<std::uint32_t>(table.size()));
  if (inserted) table.push_back(s);
  return it->second;
}

namespace {
std::uint32_t clamp_u32(std::int64_t v) {
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(v, 0, UINT32_MAX));
}
}  // namespace

std::uint64_t history::add(const round_record& r, std::int64_t wall_first_ms) {
  round_header h{};
  h.seq = next_seq_++;
  h.gen = r.gen;
  h.first = dropped_ + arrivals_.size();
  h.at_ms = wall_first_ms;
  h.scope = intern(names_, name_index_, r.scope);
  h.name = intern(names_, name_index_, r.name);
  h.run = run_;
  h.n = r.n.value_or(0);
  h.count = static_cast<std::uint32_t>(r.arrivals.size());
  h.duration_ms = clamp_u32(r.ended - r.first);
  h.withdrawn = r.withdrawn;
  h.timeouts = r.timeouts;
  h.end = r.end;
  h.v = r.v;
  for (const auto& a : r.arrivals)
    arrivals_.push_back(arrival_rec{a.rank.value_or(no_rank), intern(nodes_, node_index_, node_label(a.node)),
                                    clamp_u32(a.at - r.first), static_cast<std::uint32_t>(h.seq)});
  rounds_.push_back(h);
  note_newest(h);
  trim();
  return h.seq;
}

void history::add(const round_view& r) {
  round_header h{};
  h.seq = r.seq;
  next_seq_ = std::max(next_seq_, r.seq + 1);
  h.gen = r.gen;
  h.first = dropped_ + arrivals_.size();
  h.at_ms = r.at_ms;
  h.scope = intern(names_, name_index_, r.scope);
  h.name = intern(names_, name_index_, r.name);
  h.run = intern(names_, name_index_, r.run);
  h.n = r.n.value_or(0);
  h.count = static_cast<std::uint32_t>(r.arrivals.size());
  h.duration_ms = r.duration_ms;
  h.withdrawn = r.withdrawn;
  h.timeouts = r.timeouts;
  h.end = r.end;
  h.v = r.v;
  for (const auto& a : r.arrivals)
    arrivals_.push_back(arrival_rec{a.rank.value_or(no_rank), intern(nodes_, node_index_, node_label(a.node)),
                                    a.offset_ms, static_cast<std::uint32_t>(h.seq)});
  rounds_.push_back(h);
  note_newest(h);
  trim();
}

void history::note_newest(const round_header& h) {
  std::uint64_t& seq = newest_[std::uint64_t{h.scope} << 32 | h.name];
  seq = std::max(seq, h.seq);
}

void history::fill_last(proto::barrier_info& b, std::int64_t now_ms) const {
  auto scope = name_index_.find(b.scope), name = name_index_.find(b.name);
  if (b.gen < 2 || scope == name_index_.end() || name == name_index_.end()) return;
  auto seq = newest_.find(std::uint64_t{scope->second} << 32 | name->second);
  if (seq == newest_.end()) return;
  auto h = std::lower_bound(rounds_.begin(), rounds_.end(), seq->second,
                            [](const round_header& x, std::uint64_t s) { return x.seq < s; });
  if (h == rounds_.end() || h->seq != seq->second || h->gen + 1 != b.gen || h->end != round_record::ending::release)
    return;
  proto::barrier_info::last_round last;
  last.gen = h->gen;
  last.v = h->v;
  std::int64_t released = h->at_ms + h->duration_ms;
  last.ago_ms = now_ms > released ? now_ms - released : 0;
  last.took_ms = h->duration_ms;
  std::size_t base = static_cast<std::size_t>(h->first - dropped_);
  if (h->count > 0) {
    const arrival_rec& a = arrivals_[base + h->count - 1];  // in arrival order: the last is last
    if (a.rank != no_rank) last.rank = a.rank;
    last.node = nodes_[a.node];
  }
  b.last = std::make_shared<const proto::barrier_info::last_round>(std::move(last));
  std::size_t unknown = 0;
  for (const auto& rn : b.missing_nodes) unknown += rn.node.empty();
  for (std::size_t i = 0; i < h->count && unknown > 0; ++i) {
    const arrival_rec& a = arrivals_[base + i];
    for (auto& rn : b.missing_nodes)
      if (rn.node.empty() && rn.rank == a.rank) {
        rn.node = nodes_[a.node];
        --unknown;
      }
  }
}

void history::trim() {
  // The oldest rounds go first; the newest round stays even when it alone is past capacity.
  while (rounds_.size() > 1 && arrivals_.size() > capacity_) {
    std::uint32_t c = rounds_.front().count;
    arrivals_.erase(arrivals_.begin(), arrivals_.begin() + c);
    dropped_ += c;
    rounds_.pop_front();
  }
  if (rounds_.size() == 1 && arrivals_.size() > capacity_ && capacity_ > 0) {
    // One round bigger than the whole history: keep its first `capacity_` arrivals.
    std::size_t extra = arrivals_.size() - capacity_;
    arrivals_.erase(arrivals_.end() - static_cast<std::ptrdiff_t>(extra), arrivals_.end());
    rounds_.front().count = static_cast<std::uint32_t>(capacity_);
  }
}

std::size_t history::memory_bytes() const {
  std::size_t b = arrivals_.size() * sizeof(arrival_rec) + rounds_.size() * sizeof(round_header);
  for (const auto& s : nodes_) b += sizeof(std::string) + (s.size() > 15 ? s.capacity() : 0) + 32;  // + map node
  for (const auto& s : names_) b += sizeof(std::string) + (s.size() > 15 ? s.capacity() : 0) + 32;
  return b + newest_.size() * 32;  // fill_last's index: a map node each
}

round_view history::view(const round_header& h) const {
  round_view r;
  r.seq = h.seq;
  r.scope = names_[h.scope];
  r.name = names_[h.name];
  r.gen = h.gen;
  if (h.n) r.n = h.n;
  r.end = h.end;
  r.v = h.v;
  r.at_ms = h.at_ms;
  r.duration_ms = h.duration_ms;
  r.withdrawn = h.withdrawn;
  r.timeouts = h.timeouts;
  r.run = names_[h.run];
  r.arrivals.reserve(h.count);
  std::size_t base = static_cast<std::size_t>(h.first - dropped_);
  for (std::size_t i = 0; i < h.count; ++i) {
    const arrival_rec& a = arrivals_[base + i];
    r.arrivals.push_back({a.rank == no_rank ? std::nullopt : std::optional<std::uint32_t>(a.rank), nodes_[a.node],
                          a.offset});
  }
  return r;
}

std::vector<std::uint64_t> history::select(const query& q) const {
  std::vector<std::uint64_t> out;
  for (const auto& h : rounds_) {
    if (q.scope != "*" && names_[h.scope] != q.scope) continue;
    if (!q.name.empty() && !glob_match(q.name, names_[h.name])) continue;
    out.push_back(h.seq);
  }
  if (q.last && out.size() > q.last) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(q.last));
  return out;
}

std::optional<round_view> history::get(std::uint64_t seq) const {
  auto it = std::lower_bound(rounds_.begin(), rounds_.end(), seq,
                             [](const round_header& h, std::uint64_t s) { return h.seq < s; });
  if (it == rounds_.end() || it->seq != seq) return std::nullopt;
  return view(*it);
}

void history::each(const std::function<void(const round_view&)>& f) const {
  for (const auto& h : rounds_) f(view(h));
}

std::vector<std::string> history::page(const std::vector<std::uint64_t>& seqs, std::size_t from, std::size_t max_bytes,
                                       std::optional<std::size_t>& next) const {
  std::vector<std::string> lines;
  std::size_t bytes = 0;
  std::size_t i = from;
  next.reset();
  for (; i < seqs.size(); ++i) {
    if (bytes >= max_bytes) {
      next = i;
      break;
    }
    auto r = get(seqs[i]);
    if (!r) continue;  // dropped meanwhile
    std::string text = format_round(*r);
    bytes += text.size();
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t nl = text.find('\n', pos);
      lines.push_back(text.substr(pos, nl - pos));
      pos = nl + 1;
    }
  }
  return lines;
}

bool valid_run(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && c != '.' && c != '_' && c != ':' && c != '-') return false;
  }
  return true;
}

std::string new_run(const char* slurm_job_id, std::int64_t unix_seconds, long pid) {
  if (slurm_job_id && *slurm_job_id) {
    std::string r = std::string("slurm-") + slurm_job_id;
    if (valid_run(r)) return r;
  }
  // UTC, by arithmetic (Howard Hinnant's days_from_civil, inverted): no
  // gmtime_r, whose import every command would bind at start, wait included.
  std::int64_t days = unix_seconds / 86400, secs = unix_seconds % 86400;
  if (secs < 0) {
    secs += 86400;
    --days;
  }
  std::int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
  std::int64_t doe = z - era * 146097, yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  std::int64_t day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9;
  std::int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}-{}", year, month, day, secs / 3600, secs / 60 % 60, secs % 60,
                     pid);
}

std::string format_round(const round_view& r) {
  std::string out = fmt::format(
      "ROUND seq={} scope={} name={} gen={} n={} end={} verdict={} at={} ms={} withdrawn={} timeouts={} count={}\n",
      r.seq, r.scope, r.name, r.gen, r.n ? std::to_string(*r.n) : "-", to_string(r.end),
      r.v == proto::verdict::none ? std::string_view("-") : proto::to_string(r.v), r.at_ms, r.duration_ms, r.withdrawn,
      r.timeouts, r.arrivals.size());
  if (!r.run.empty()) out.insert(out.size() - 1, " run=" + r.run);
  // Split by bytes: each ARR value stays within what parse_line takes.
  std::string value, item;
  auto line = [&] {
    out += "ARR a=";
    out += value;
    out += '\n';
    value.clear();
  };
  for (const auto& a : r.arrivals) {
    item.clear();
    if (a.rank)
      fmt::format_to(std::back_inserter(item), "{}", *a.rank);
    else
      item += '-';
    item += '@';
    if (is_label(a.node))
      item += a.node;
    else
      item += node_label(a.node);
    fmt::format_to(std::back_inserter(item), "+{}", a.offset_ms);
    if (!value.empty() && value.size() + 1 + item.size() > proto::max_value) line();
    if (!value.empty()) value += ',';
    value += item;
  }
  if (!value.empty()) line();
  return out;
}

namespace {
template <class T>
std::optional<T> number(std::string_view s) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}
}  // namespace

namespace {
/// The value of key k in l, or null with error set.
const std::string* need(const proto::line& l, std::string_view k, std::string& error) {
  const std::string* v = l.get(k);
  if (!v) error = fmt::format("{} lacks {}=", l.verb, k);
  return v;
}
}  // namespace

bool round_parser::feed(std::string_view raw, std::string& error) {
  if (skipping_ && raw.starts_with("ARR ")) return true;  // the rest of a dropped round
  skipping_ = false;
  std::string cut;
  if (pending_ && raw.starts_with("ROUND ")) {
    // The previous round's ARR lines stopped short: it goes; this one is read.
    cut = fmt::format("round {} lists {} of its count={} arrivals", pending_->seq, pending_->arrivals.size(),
                      expected_);
    pending_.reset();
  }
  if (feed_line(raw, error)) {
    if (cut.empty()) return true;
    error = std::move(cut);
    return false;
  }
  if (pending_) error += fmt::format(" (round {} skipped)", pending_->seq);
  pending_.reset();
  skipping_ = true;
  if (!cut.empty()) error = cut + "; " + error;
  return false;
}

bool round_parser::feed_line(std::string_view raw, std::string& error) {
  std::string why;
  auto l = proto::parse_line(raw, why);
  if (!l) {
    error = why;
    return false;
  }
  if (l->verb == "ROUND") return feed_round(*l, error);
  if (l->verb == "ARR") return feed_arrivals(*l, error);
  error = fmt::format("unexpected line '{}'", l->verb.substr(0, 32));
  return false;
}

bool round_parser::feed_round(const proto::line& l, std::string& error) {
  auto field = [&](std::string_view k) { return need(l, k, error); };
  if (pending_) {
    error = fmt::format("a ROUND came before the {} arrivals of round {} were listed", expected_, pending_->seq);
    return false;
  }
  round_view r;
  const std::string *seq = field("seq"), *scope = field("scope"), *name = field("name"), *gen = field("gen"),
                    *n = field("n"), *end = field("end"), *verdict = field("verdict"), *at = field("at"),
                    *ms = field("ms"), *wd = field("withdrawn"), *to = field("timeouts"), *count = field("count");
  if (!error.empty()) return false;
  auto bad = [&](std::string_view k, const std::string& v) {
    error = fmt::format("ROUND has a bad {}={}", k, v);
    return false;
  };
  auto s = number<std::uint64_t>(*seq);
  if (!s || *s == 0) return bad("seq", *seq);
  r.seq = *s;
  if (!proto::valid_name(*scope)) return bad("scope", *scope);
  if (!proto::valid_name(*name)) return bad("name", *name);
  r.scope = *scope;
  r.name = *name;
  auto g = number<std::uint64_t>(*gen);
  if (!g) return bad("gen", *gen);
  r.gen = *g;
  if (*n != "-") {
    auto nn = number<std::uint32_t>(*n);
    if (!nn || *nn == 0 || *nn > proto::max_n) return bad("n", *n);
    r.n = *nn;
  }
  if (*end == "release") r.end = round_record::ending::release;
  else if (*end == "abort") r.end = round_record::ending::abort;
  else return bad("end", *end);
  if (*verdict == "-") r.v = proto::verdict::none;
  else if (auto v = proto::parse_verdict(*verdict)) r.v = *v;
  else return bad("verdict", *verdict);
  auto a = number<std::int64_t>(*at);
  if (!a) return bad("at", *at);
  r.at_ms = *a;
  auto d = number<std::uint32_t>(*ms);
  if (!d) return bad("ms", *ms);
  r.duration_ms = *d;
  auto w = number<std::uint32_t>(*wd);
  if (!w) return bad("withdrawn", *wd);
  r.withdrawn = *w;
  auto t = number<std::uint32_t>(*to);
  if (!t) return bad("timeouts", *to);
  r.timeouts = *t;
  auto c = number<std::uint32_t>(*count);
  if (!c || *c > proto::max_n) return bad("count", *count);
  if (const std::string* run = l.get("run")) {  // absent in a file of before runs
    if (!valid_run(*run)) return bad("run", *run);
    r.run = *run;
  }
  expected_ = *c;
  r.arrivals.reserve(*c);
  if (expected_ == 0) {
    done_.push_back(std::move(r));
  } else {
    pending_ = std::move(r);
  }
  return true;
}

bool round_parser::feed_arrivals(const proto::line& l, std::string& error) {
  if (!pending_) {
    error = "an ARR line outside a round";
    return false;
  }
  const std::string* a = need(l, "a", error);
  if (!a) return false;
  std::string_view rest = *a;
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    std::size_t at = item.find('@'), plus = item.rfind('+');
    if (at == std::string_view::npos || plus == std::string_view::npos || plus < at + 2) {
      error = fmt::format("bad arrival '{}' (expected RANK@NODE+MS)", item.substr(0, 64));
      return false;
    }
    round_view::arrival ar;
    std::string_view rank = item.substr(0, at);
    if (rank != "-") {
      auto rk = number<std::uint32_t>(rank);
      if (!rk || (pending_->n && *rk >= *pending_->n)) {
        error = fmt::format("bad rank in arrival '{}'", item.substr(0, 64));
        return false;
      }
      ar.rank = *rk;
    }
    ar.node = std::string(item.substr(at + 1, plus - at - 1));
    auto off = number<std::uint32_t>(item.substr(plus + 1));
    if (!off) {
      error = fmt::format("bad offset in arrival '{}'", item.substr(0, 64));
      return false;
    }
    ar.offset_ms = *off;
    if (pending_->arrivals.size() >= expected_) {
      error = fmt::format("round {} lists more than its count={} arrivals", pending_->seq, expected_);
      return false;
    }
    pending_->arrivals.push_back(std::move(ar));
  }
  if (pending_->arrivals.size() == expected_) {
    done_.push_back(std::move(*pending_));
    pending_.reset();
  }
  return true;
}

std::string file_header() { return fmt::format("TFBHISTORY v={}\n", format_version); }

bool parse_file(std::string_view text, std::vector<round_view>& out, std::vector<std::string>& warnings,
                std::string& error) {
  round_parser p;
  std::size_t line_no = 0, pos = 0, bad = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    ++line_no;
    if (nl == std::string_view::npos) {
      // A torn last line (the host died while appending): the rounds before it stand.
      break;
    }
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line_no == 1) {
      if (line != fmt::format("TFBHISTORY v={}", format_version)) {
        error = line.starts_with("TFBHISTORY ")
                    ? fmt::format("1: history format '{}' is not the one this tfbarrier reads (v={})",
                                  line.substr(11, 32), format_version)
                    : "1: not a tfbarrier history file (no TFBHISTORY header)";
        return false;
      }
      continue;
    }
    std::string why;
    if (!p.feed(line, why) && ++bad <= max_warnings) warnings.push_back(fmt::format("{}: {}", line_no, why));
    for (auto& r : p.take()) out.push_back(std::move(r));
  }
  if (line_no == 0) {
    error = "1: empty file (no TFBHISTORY header)";
    return false;
  }
  if (bad > max_warnings) warnings.push_back(fmt::format("and {} more bad lines", bad - max_warnings));
  return true;
}

}  // namespace tfb::hist
