// What `tfbarrier status --watch` draws, pure (watch_view.h).
#include "watch_view.h"

#include <fmt/format.h>

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

std::string missing_line(const proto::barrier_info& b) {
  if (b.state == proto::round_state::aborted)
    return fmt::format("  aborted{}{}", b.reason.empty() ? "" : ": ", b.reason);
  if (b.state == proto::round_state::gathered) return "  all here; waiting for the chief's verdict";
  if (b.missing) return fmt::format("  missing ranks: {}", b.missing->empty() ? "none" : *b.missing);
  if (b.n && *b.n > b.arrived) return fmt::format("  missing: {} (unranked)", *b.n - b.arrived);
  return "  missing: -";
}

}  // namespace

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

std::vector<std::string> render(const proto::status_reply& st, std::string_view title, std::size_t width, bool utf8) {
  width = std::max<std::size_t>(width, 20);
  std::vector<std::string> lines;
  // What came from the host (names, an abort's reason) is escaped before it
  // is measured and cut: shown, never obeyed by the terminal.
  lines.push_back(fit(printable(title), width, utf8));
  if (st.barriers.empty()) lines.push_back("no barriers");
  for (const auto& b : st.barriers) {
    std::string name = fit(printable(fmt::format("{} r{}", b.name, b.gen)), std::max<std::size_t>(width / 3, 12), utf8);
    std::string right = fmt::format(" {} {} {}  chief {}  verdict {}", arrivals(b), proto::to_string(b.state),
                                    format_duration(duration(b.age_ms)), b.chief ? "yes" : "no",
                                    proto::to_string(b.v));
    std::size_t used = columns(name) + 1 + columns(right) + 2;
    std::string line = name + " ";
    if (b.state != proto::round_state::aborted && used + 10 <= width) {
      std::uint32_t n = b.n.value_or(0);
      std::uint32_t arrived = b.state == proto::round_state::gathered && n ? n : b.arrived;
      line += bar(arrived, n, width - used, utf8);
    }
    lines.push_back(fit(line + right, width, utf8));
    lines.push_back(fit(printable(missing_line(b)), width, utf8));
  }
  return lines;
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
