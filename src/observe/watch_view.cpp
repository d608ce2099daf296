// What `tfbarrier status --watch` draws, pure (watch_view.h).
#include "watch_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>

#include "duration.h"
#include "text.h"

namespace tfb::watch {
namespace {

std::size_t columns(std::string_view s) {
  std::size_t n = 0;
  for (char ch : s)
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++n;
  return n;
}

std::string arrivals(const proto::barrier_info& b) {
  return fmt::format("{}/{}", b.arrived, b.n ? std::to_string(*b.n) : "?");
}

// A line as runs of text, each with its SGR parameters ("" plain): cut to a
// width by its text alone, and painted or not at the end.
struct span {
  std::string text;
  std::string_view sgr;
};
using row = std::vector<span>;

namespace sgr {
constexpr std::string_view none = "", bold = "1", dim = "2", red = "31", green = "32", yellow = "33", cyan = "36",
                           alarm = "1;97;41";  // bold white on red
}  // namespace sgr

// Cuts a row to width columns (fit's ellipsis ends it when cut).
row fit_row(const row& r, std::size_t width, bool utf8) {
  std::string all;
  for (const auto& sp : r) all += sp.text;
  if (columns(all) <= width) return r;
  std::string cut = fit(all, width, utf8);
  std::string_view ellipsis = width == 0 ? "" : utf8 ? "\u2026" : "~";
  std::string_view body(cut.data(), cut.size() - ellipsis.size());
  row out;
  for (const auto& sp : r) {
    if (body.empty()) break;
    std::size_t take = std::min(sp.text.size(), body.size());
    out.push_back({std::string(body.substr(0, take)), sp.sgr});
    body.remove_prefix(take);
  }
  if (!ellipsis.empty()) out.push_back({std::string(ellipsis), out.empty() ? sgr::none : out.back().sgr});
  return out;
}

std::string paint(const row& r, bool colour) {
  std::string s;
  for (const auto& sp : r) {
    if (colour && !sp.sgr.empty() && !sp.text.empty())
      s += fmt::format("\033[{}m{}\033[0m", sp.sgr, sp.text);
    else
      s += sp.text;
  }
  return s;
}

std::string_view state_colour(proto::round_state st) {
  switch (st) {
    case proto::round_state::open: return sgr::yellow;
    case proto::round_state::gathered: return sgr::cyan;
    case proto::round_state::aborted: return sgr::red;
  }
  return sgr::none;
}

// The second line of a barrier: who is missing (or the abort's reason); none
// for a round that nobody has reached yet.
std::optional<row> missing_row(const proto::barrier_info& b) {
  // What came from the host (an abort's reason, node names) is escaped: shown, never obeyed.
  if (b.state == proto::round_state::aborted)
    return row{{"  ", sgr::none},
               {printable(fmt::format("aborted{}{}", b.reason.empty() ? "" : ": ", b.reason)), sgr::red}};
  if (b.state == proto::round_state::gathered) return row{{"  all here; waiting for the chief's verdict", sgr::cyan}};
  if (b.arrived == 0) return std::nullopt;
  if (b.missing)
    return row{{"  missing ranks: ", sgr::none},
               {b.missing->empty() ? "none" : printable(missing_ranks(b)), b.missing->empty() ? sgr::none : sgr::red}};
  if (b.n && *b.n > b.arrived) return row{{fmt::format("  missing: {} (unranked)", *b.n - b.arrived), sgr::none}};
  return row{{"  missing: -", sgr::none}};
}

// The third: the barrier's last released round.
row last_row(const proto::barrier_info::last_round& l) {
  std::string who = l.rank ? fmt::format("{}@{}", *l.rank, l.node) : fmt::format("{} (no rank)", l.node);
  return row{{fmt::format("  last round r{}: ", l.gen), sgr::dim},
             {fmt::format("released {} ago", format_duration(duration(l.ago_ms))), sgr::none},
             {fmt::format(", took {}, verdict ", format_duration(duration(l.took_ms))), sgr::dim},
             {std::string(proto::to_string(l.v)), l.v == proto::verdict::stop ? sgr::red : sgr::green},
             {", last in ", sgr::dim},
             {printable(who), sgr::bold}};
}

// The lines of one barrier.
std::vector<row> barrier_rows(const proto::barrier_info& b, std::size_t width, bool utf8) {
  std::vector<row> rows;
  std::string name = fit(printable(fmt::format("{} r{}", b.name, b.gen)), std::max<std::size_t>(width / 3, 12), utf8);
  std::string right = fmt::format(" {} {} {}  chief {}  verdict {}", arrivals(b), proto::to_string(b.state),
                                  format_duration(duration(b.age_ms)), b.chief ? "yes" : "no", proto::to_string(b.v));
  std::size_t used = columns(name) + 1 + columns(right) + 2;
  row first{{name, sgr::bold}, {" ", sgr::none}};
  if (b.state != proto::round_state::aborted && used + 10 <= width) {
    std::uint32_t n = b.n.value_or(0);
    std::uint32_t arrived = b.state == proto::round_state::gathered && n ? n : b.arrived;
    // The bar's filled part green, the rest plain: split where the glyphs change.
    std::string drawn = bar(arrived, n, width - used, utf8);
    std::size_t inner = width - used;
    std::size_t full = n == 0 ? 0 : static_cast<std::size_t>(static_cast<std::uint64_t>(std::min(arrived, n)) * inner / n);
    std::size_t glyph = utf8 ? 3 : 1;
    first.push_back({"[", sgr::none});
    first.push_back({drawn.substr(1, full * glyph), sgr::green});
    first.push_back({drawn.substr(1 + full * glyph), sgr::none});
  }
  first.push_back({fmt::format(" {} ", arrivals(b)), sgr::none});
  first.push_back({std::string(proto::to_string(b.state)), state_colour(b.state)});
  first.push_back({right.substr(1 + arrivals(b).size() + 1 + proto::to_string(b.state).size()), sgr::none});
  rows.push_back(std::move(first));
  if (auto m = missing_row(b)) rows.push_back(std::move(*m));
  if (b.last) rows.push_back(last_row(*b.last));
  return rows;
}

}  // namespace

std::string missing_ranks(const proto::barrier_info& b) {
  if (!b.missing) return "-";
  bool any = std::any_of(b.missing_nodes.begin(), b.missing_nodes.end(), [](const auto& rn) { return !rn.node.empty(); });
  if (!any) return *b.missing;
  std::string out;
  std::uint32_t upto = 0;
  for (const auto& rn : b.missing_nodes) {
    if (!out.empty()) out += ' ';
    out += rn.node.empty() ? std::to_string(rn.rank) : fmt::format("{}@{}", rn.rank, rn.node);
    upto = std::max(upto, rn.rank);
  }
  // The rest of the ranges, past the ranks named above.
  std::string rest;
  std::string_view text = *b.missing;
  bool cut = text.ends_with('+');
  if (cut) text.remove_suffix(1);
  while (!text.empty()) {
    std::string_view item = text.substr(0, text.find(','));
    text.remove_prefix(std::min(text.size(), item.size() + 1));
    auto dash = item.find('-');
    std::uint32_t lo = 0, hi = 0;
    std::from_chars(item.data(), item.data() + item.size(), lo);
    hi = lo;
    if (dash != std::string_view::npos) std::from_chars(item.data() + dash + 1, item.data() + item.size(), hi);
    if (hi <= upto) continue;
    lo = std::max(lo, upto + 1);
    rest += (rest.empty() ? "" : ",") + (lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi));
  }
  if (cut) rest += '+';
  if (!rest.empty()) out += ' ' + rest;
  return out;
}

bool use_colour(bool tty, const char* term, const char* no_color) {
  return tty && term && *term && std::string_view(term) != "dumb" && !(no_color && *no_color);
}

bool utf8_locale(const char* lc_all, const char* lc_ctype, const char* lang) {
  const char* v = lc_all && *lc_all ? lc_all : lc_ctype && *lc_ctype ? lc_ctype : lang;
  if (!v) return false;
  std::string s;
  for (const char* p = v; *p; ++p) {
    char ch = *p;
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    if (ch != '-') s += ch;
  }
  return s.find("utf8") != std::string::npos;
}

std::string fit(std::string_view s, std::size_t width, bool utf8) {
  if (columns(s) <= width) return std::string(s);
  std::string_view ellipsis = utf8 ? "\u2026" : "~";
  if (width == 0) return {};
  std::size_t keep = width - 1, n = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == keep) break;
      ++n;
    }
  }
  return std::string(s.substr(0, i)) + std::string(ellipsis);
}

std::string bar(std::uint32_t arrived, std::uint32_t n, std::size_t width, bool utf8) {
  std::size_t full = n == 0 ? 0 : static_cast<std::size_t>(static_cast<std::uint64_t>(std::min(arrived, n)) * width / n);
  std::string s = "[";
  for (std::size_t i = 0; i < width; ++i) s += i < full ? (utf8 ? "\u2588" : "#") : (utf8 ? "\u2591" : ".");
  return s + "]";
}

std::vector<std::string> render(const screen_state& s, std::size_t width, std::size_t height, bool utf8,
                                bool colour) {
  width = std::max<std::size_t>(width, 20);
  std::vector<std::string> lines;
  auto put = [&](const row& r) { lines.push_back(paint(fit_row(r, width, utf8), colour)); };
  // What came from the host (names, an abort's reason) is escaped before it
  // is measured and cut: shown, never obeyed by the terminal.
  put(row{{printable(s.title), sgr::bold}});
  for (std::size_t i = 0; i < s.banner.size(); ++i)
    put(row{{printable(s.banner[i]), i == 0 ? sgr::alarm : sgr::red}});
  if (!s.status) return lines;
  if (s.status->barriers.empty()) put(row{{"no barriers", sgr::none}});
  std::size_t room = height == 0 ? SIZE_MAX : height > lines.size() ? height - lines.size() : 0;
  const auto& bs = s.status->barriers;
  for (std::size_t i = 0; i < bs.size(); ++i) {
    auto rows = barrier_rows(bs[i], width, utf8);
    // The last barrier shown leaves a line for the count of the others.
    bool last_one = i + 1 == bs.size();
    if (rows.size() + (last_one ? 0 : 1) > room) {
      std::size_t hidden = bs.size() - i;
      if (room > 0)
        put(row{{fmt::format("... and {} more barrier{} (use --name)", hidden, hidden == 1 ? "" : "s"), sgr::dim}});
      break;
    }
    for (const auto& r : rows) put(r);
    room -= rows.size();
  }
  return lines;
}

std::vector<std::string> render(const proto::status_reply& st, std::string_view title, std::size_t width, bool utf8) {
  return render(screen_state{std::string(title), &st, {}}, width, 0, utf8, false);
}

std::vector<std::string> table(const proto::status_reply& st, bool members) {
  std::vector<std::string> lines;
  // Every field came from the host: each line is shown escaped, never obeyed.
  auto show = [&](const std::string& line) { lines.push_back(printable(line)); };
  show(fmt::format("{:<12} {:<16} {:>5} {:<9} {:>9} {:<5} {:<8} {:>8}  {}", "SCOPE", "NAME", "ROUND", "STATE", "ARRIVED",
                   "CHIEF", "VERDICT", "OPEN FOR", "MISSING RANKS"));
  for (const auto& b : st.barriers) {
    // An aborted round is over: the host keeps its reason, not its arrivals.
    std::string arrived = b.state == proto::round_state::aborted ? "-" : arrivals(b);
    show(fmt::format("{:<12} {:<16} {:>5} {:<9} {:>9} {:<5} {:<8} {:>8}  {}", b.scope, b.name, b.gen,
                     proto::to_string(b.state), arrived, b.chief ? "yes" : "no", proto::to_string(b.v),
                     format_duration(duration(b.age_ms)), b.missing ? (b.missing->empty() ? "none" : *b.missing) : "-"));
    if (b.state == proto::round_state::aborted) show(fmt::format("    aborted{}{}", b.reason.empty() ? "" : ": ", b.reason));
    if (!members) continue;
    for (const auto& m : b.members) {
      std::string rank = m.rank ? fmt::format("rank {}", *m.rank) : "no rank";
      if (m.host.empty())  // restored from the host's journal; its host and pid come back with it
        show(fmt::format("    {:<10} present before the host restarted, not back yet{}", rank, m.chief ? " (chief)" : ""));
      else
        show(fmt::format("    {:<10} {} pid {}{}, arrived {} ago{}", rank, m.host, m.pid, m.chief ? " (chief)" : "",
                         format_duration(duration(m.age_ms)), m.via.empty() ? "" : " through the host " + m.via));
    }
    for (const auto& g : b.gone)
      show(fmt::format("    {:<10} {} pid {}: {} {} ago", g.rank ? fmt::format("rank {}", *g.rank) : "no rank", g.host,
                       g.pid, proto::to_string(g.how), format_duration(duration(g.ago_ms))));
  }
  return lines;
}

}  // namespace tfb::watch
