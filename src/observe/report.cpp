#include "report.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace tfb::report {

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}
std::string rank_text(const std::optional<std::uint32_t>& r) { return r ? std::to_string(*r) : std::string("-"); }

struct tally {
  std::string ranks;
  std::optional<std::uint32_t> rank;
  std::string node;
  std::set<std::uint32_t> rank_set;
  std::uint32_t rounds = 0, last = 0, slowest = 0;
  std::vector<double> late;
};

std::vector<straggler> ranked(std::map<std::string, tally>& m, bool nodes) {
  std::vector<straggler> out;
  for (auto& [who, t] : m) {
    straggler s;
    s.who = who;
    s.rank_list.assign(t.rank_set.begin(), t.rank_set.end());
    if (nodes) s.ranks = proto::format_ranges(s.rank_list, 8);
    else s.ranks = t.ranks;
    s.rank = t.rank;
    s.node = t.node;
    s.rounds = t.rounds;
    s.last = t.last;
    s.slowest = t.slowest;
    s.median_ms = median(t.late);
    s.worst_ms = t.late.empty() ? 0 : *std::max_element(t.late.begin(), t.late.end());
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const straggler& a, const straggler& b) {
    if (a.last != b.last) return a.last > b.last;
    if (a.slowest != b.slowest) return a.slowest > b.slowest;
    return a.median_ms > b.median_ms;
  });
  return out;
}
}  // namespace

std::uint32_t median_offset(const hist::round_view& r) {
  if (r.arrivals.empty()) return 0;
  std::vector<std::uint32_t> v;
  v.reserve(r.arrivals.size());
  for (const auto& x : r.arrivals) v.push_back(x.offset_ms);
  auto m = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);  // the lower median: an arrival's own
  std::nth_element(v.begin(), m, v.end());
  return *m;
}

std::string lateness(double ms) {
  if (ms < 1000) return fmt::format("+{:.0f} ms", ms);
  if (ms < 60'000) return fmt::format("+{:.1f} s", ms / 1000);
  return fmt::format("+{:.1f} min", ms / 60'000);
}

analysis analyze(const std::vector<hist::round_view>& rounds, std::size_t last_few) {
  analysis a;
  std::map<std::string, tally> by_rank, by_node;
  for (const auto& r : rounds) {
    round_summary s;
    s.round = &r;
    std::vector<const hist::round_view::arrival*> order;
    for (const auto& x : r.arrivals) order.push_back(&x);
    std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) { return x->offset_ms > y->offset_ms; });
    if (!order.empty()) s.spread_ms = order.front()->offset_ms;
    const std::uint32_t med = s.median_ms = median_offset(r);
    for (std::size_t i = 0; i < order.size() && i < last_few; ++i)
      s.last.push_back({order[i]->rank, order[i]->node, late_after(order[i]->offset_ms, med), order[i]->offset_ms});
    a.rounds.push_back(std::move(s));
    if (order.size() < 2) continue;  // nobody is late in a round of one
    std::size_t slow = static_cast<std::size_t>(std::ceil(0.05 * static_cast<double>(order.size())));
    std::map<std::string, std::uint32_t> node_late;  // a node's lateness: its latest rank's
    std::set<std::string> slow_nodes;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto* x = order[i];
      std::string key = x->rank ? fmt::format("rank {}", *x->rank) : "rank -";
      tally& t = by_rank[key];
      t.ranks = x->node;
      t.rank = x->rank;
      t.node = x->node;
      ++t.rounds;
      if (i == 0) ++t.last;
      if (i < slow) ++t.slowest;
      t.late.push_back(late_after(x->offset_ms, med));
      auto& nl = node_late[x->node];
      nl = std::max(nl, late_after(x->offset_ms, med));
      tally& nt = by_node["node " + x->node];
      nt.node = x->node;
      if (x->rank) nt.rank_set.insert(*x->rank);
      if (i < slow && slow_nodes.insert(x->node).second) ++nt.slowest;
    }
    for (auto& [node, ms] : node_late) {
      tally& nt = by_node["node " + node];
      ++nt.rounds;
      nt.late.push_back(ms);
    }
    ++by_node["node " + order.front()->node].last;
  }
  a.ranks = ranked(by_rank, false);
  a.nodes = ranked(by_node, true);
  return a;
}

namespace {
/// The one answer people look for: the last node and the last rank.
std::string headline(const analysis& a) {
  std::string out;
  std::size_t n = a.rounds.size();
  if (!a.nodes.empty() && a.nodes.front().last > 0 && a.nodes.size() > 1) {
    const auto& s = a.nodes.front();
    out += fmt::format("{} (ranks {}) was the last node in {} of {} rounds, median {}\n", s.who, s.ranks, s.last, n,
                       lateness(s.median_ms));
  }
  if (!a.ranks.empty() && a.ranks.front().last > 0) {
    const auto& s = a.ranks.front();
    out += fmt::format("{} (node {}) was the last rank in {} of {} rounds, median {}\n", s.who, s.ranks, s.last, n,
                       lateness(s.median_ms));
  }
  return out;
}

/// The per-round table, its latest max_rounds rows (0: all), and the stragglers.
std::string tables(const analysis& a, std::size_t top, std::size_t max_rounds) {
  std::string out;
  std::size_t n = a.rounds.size();
  std::size_t skip = max_rounds && n > max_rounds ? n - max_rounds : 0;
  out += fmt::format("\nPER ROUND ({} rounds{})\n", n,
                     skip ? fmt::format("; the last {} shown: --last K, --json or --csv for the rest", n - skip) : "");
  out += fmt::format("{:<12} {:<16} {:>5} {:<8} {:<8} {:>6} {:>10}  {}\n", "SCOPE", "NAME", "ROUND", "END", "VERDICT",
                     "RANKS", "SPREAD", "LAST (rank@node after the median)");
  for (std::size_t i = skip; i < n; ++i) {
    const auto& s = a.rounds[i];
    const auto& r = *s.round;
    std::string last;
    for (const auto& l : s.last)
      last += fmt::format("{}{}@{} {}", last.empty() ? "" : ", ", rank_text(l.rank), l.node, lateness(l.late_ms));
    std::string extra;
    if (r.withdrawn) extra += fmt::format("; {} withdrew", r.withdrawn);
    if (r.timeouts) extra += fmt::format(" ({} timed out)", r.timeouts);
    out += fmt::format("{:<12} {:<16} {:>5} {:<8} {:<8} {:>6} {:>10}  {}{}\n", r.scope, r.name, r.gen,
                       hist::to_string(r.end), r.v == proto::verdict::none ? "-" : proto::to_string(r.v),
                       r.arrivals.size(), lateness(s.spread_ms).substr(1), last, extra);
  }
  auto table = [&](const char* title, const std::vector<straggler>& v, const char* what) {
    out += fmt::format("\nSTRAGGLERS BY {} (top {})\n", title, std::min(top, v.size()));
    out += fmt::format("{:<24} {:<16} {:>6} {:>6} {:>8} {:>10} {:>10}\n", title, what, "ROUNDS", "LAST", "SLOW5%",
                       "MEDIAN", "WORST");
    for (std::size_t i = 0; i < v.size() && i < top; ++i) {
      const auto& s = v[i];
      out += fmt::format("{:<24} {:<16} {:>6} {:>6} {:>8} {:>10} {:>10}\n", s.who, s.ranks, s.rounds, s.last,
                         s.slowest, lateness(s.median_ms), lateness(s.worst_ms));
    }
  };
  table("RANK", a.ranks, "NODE");
  table("NODE", a.nodes, "RANKS");
  return out;
}
}  // namespace

std::string text(const analysis& a, std::size_t top) {
  if (a.rounds.empty()) return "no finished rounds recorded\n";
  return headline(a) + tables(a, top, 0);
}

std::string text_for_terminal(const analysis& a, std::size_t max_rounds, std::size_t top, std::size_t width) {
  if (a.rounds.empty()) return "no finished rounds recorded\n";
  std::string h = headline(a);
  std::string all = tables(a, top, max_rounds), out;
  for (std::size_t pos = 0; pos < all.size();) {  // the tables' lines, each cut to the width
    std::size_t nl = all.find('\n', pos);
    std::size_t len = (nl == std::string::npos ? all.size() : nl) - pos;
    if (width && len > width) {
      len = width;
      while (len > 0 && (static_cast<unsigned char>(all[pos + len]) & 0xC0) == 0x80) --len;  // not mid-character
    }
    out.append(all, pos, len);
    out += '\n';
    pos = nl == std::string::npos ? all.size() : nl + 1;
  }
  return out + (h.empty() ? "" : "\n" + h);
}

std::string json(const analysis& a) {
  using nlohmann::json;
  json rounds = json::array();
  for (const auto& s : a.rounds) {
    const auto& r = *s.round;
    json arr = json::array();
    for (const auto& x : r.arrivals)
      arr.push_back({{"rank", x.rank ? json(*x.rank) : json(nullptr)}, {"node", x.node},
                     {"late_ms", late_after(x.offset_ms, s.median_ms)}, {"after_first_ms", x.offset_ms}});
    rounds.push_back({{"seq", r.seq}, {"scope", r.scope}, {"name", r.name}, {"round", r.gen},
                      {"n", r.n ? json(*r.n) : json(nullptr)}, {"end", hist::to_string(r.end)},
                      {"verdict", r.v == proto::verdict::none ? json(nullptr) : json(proto::to_string(r.v))},
                      {"first_arrival_unix_ms", r.at_ms}, {"duration_ms", r.duration_ms},
                      {"run", r.run.empty() ? json(nullptr) : json(r.run)},
                      {"spread_ms", s.spread_ms}, {"median_arrival_ms", s.median_ms}, {"withdrawn", r.withdrawn},
                      {"timeouts", r.timeouts},
                      {"arrivals", arr}});
  }
  // Typed for machines: a rank is a number (null without one), a node's
  // ranks an array, the node a field of its own; "who" is for people.
  auto list = [](const std::vector<straggler>& v, bool nodes) {
    json out = json::array();
    for (const auto& s : v) {
      json e{{"who", s.who}, {"node", s.node}};
      if (nodes) e["ranks"] = s.rank_list;
      else e["rank"] = s.rank ? json(*s.rank) : json(nullptr);
      e.update({{"rounds", s.rounds}, {"last", s.last}, {"slowest_5pct", s.slowest}, {"median_ms", s.median_ms},
                {"worst_ms", s.worst_ms}});
      out.push_back(std::move(e));
    }
    return out;
  };
  json j{{"rounds", rounds}, {"stragglers", {{"ranks", list(a.ranks, false)}, {"nodes", list(a.nodes, true)}}}};
  // ASCII (\u202e for U+202E): a terminal shows it as it is, and a JSON reader decodes it alike.
  return j.dump(2, ' ', true, json::error_handler_t::replace) + "\n";
}

std::string csv_text(std::string_view s) {
  std::string out;
  // OWASP's rule against CSV injection: a text that a spreadsheet would take
  // for a formula starts with a "'" instead.
  if (!s.empty() && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r'))
    out += '\'';
  out += s;
  if (out.find_first_of(",\"\r\n") == std::string::npos) return out;
  // RFC 4180: quoted, with '"' doubled.
  std::string q = "\"";
  for (char c : out) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + '"';
}

std::string csv(const std::vector<hist::round_view>& rounds) {
  // Numbers as they are (they cannot start a formula: only digits and, for
  // the unix time, a '-'); every text field through csv_text.
  // late_ms: after the round's median arrival; after_first_ms: after its first.
  std::string out = "seq,scope,name,round,end,verdict,first_arrival_unix_ms,rank,node,late_ms,after_first_ms,run\n";
  for (const auto& r : rounds) {
    const std::uint32_t med = median_offset(r);
    for (const auto& x : r.arrivals)
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", r.seq, csv_text(r.scope), csv_text(r.name), r.gen,
                         hist::to_string(r.end), r.v == proto::verdict::none ? "" : proto::to_string(r.v), r.at_ms,
                         x.rank ? std::to_string(*x.rank) : "", csv_text(x.node), late_after(x.offset_ms, med),
                         x.offset_ms, csv_text(r.run));
  }
  return out;
}

binning bin_ranks(const std::vector<hist::round_view>& rounds, std::size_t columns) {
  // Each rank's node: the one it last arrived from.
  std::map<std::uint32_t, std::string> node_of;
  for (const auto& r : rounds)
    for (const auto& x : r.arrivals)
      if (x.rank) node_of[*x.rank] = x.node;
  binning b;
  columns = std::max<std::size_t>(columns, 1);
  if (node_of.size() <= columns) {
    for (auto& [rank, node] : node_of) {
      b.labels.push_back(std::to_string(rank));
      b.members.push_back({rank});
    }
    b.how = "one column per rank";
    return b;
  }
  std::map<std::string, std::vector<std::uint32_t>> by_node;  // in order of their first rank
  std::vector<std::string> node_order;
  for (auto& [rank, node] : node_of) {
    auto& v = by_node[node];
    if (v.empty()) node_order.push_back(node);
    v.push_back(rank);
  }
  if (node_order.size() <= columns && node_order.size() > 1) {
    for (const auto& node : node_order) {
      b.labels.push_back(node);
      b.members.push_back(by_node[node]);
    }
    b.how = fmt::format("one column per node ({} nodes), the latest of its ranks", node_order.size());
    return b;
  }
  std::vector<std::uint32_t> all;
  for (auto& [rank, node] : node_of) all.push_back(rank);
  std::size_t per = (all.size() + columns - 1) / columns;
  for (std::size_t i = 0; i < all.size(); i += per) {
    std::size_t end = std::min(all.size(), i + per);
    b.members.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(i), all.begin() + static_cast<std::ptrdiff_t>(end));
    b.labels.push_back(fmt::format("{}-{}", all[i], all[end - 1]));
  }
  b.how = fmt::format("one column per {} ranks in order, the latest of them", per);
  b.groups = true;
  return b;
}

std::vector<std::pair<std::size_t, std::size_t>> bin_rows(std::size_t rounds, std::size_t max_rows) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t per = max_rows == 0 || rounds <= max_rows ? 1 : (rounds + max_rows - 1) / max_rows;
  for (std::size_t i = 0; i < rounds; i += per) out.emplace_back(i, std::min(rounds, i + per));
  return out;
}

double scale_top(const std::vector<std::vector<double>>& cells) {
  std::vector<double> v;
  for (const auto& row : cells)
    for (double x : row)
      if (x >= 0) v.push_back(x);
  if (v.empty()) return 0;
  auto at = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) * 99 / 100);
  std::nth_element(v.begin(), at, v.end());
  double p99 = *at;
  return p99 > 0 ? p99 : *std::max_element(v.begin(), v.end());
}

namespace {
/// Per row of rounds (bin_rows), per column: the latest lateness of its ranks
/// (after each round's median arrival), or -1 when none arrived. last: per
/// column, the rounds whose last arrival was one of its ranks.
std::vector<std::vector<double>> grid(const std::vector<hist::round_view>& rounds, const binning& b,
                                      const std::vector<std::pair<std::size_t, std::size_t>>& rows,
                                      std::vector<std::uint32_t>* last = nullptr) {
  std::map<std::uint32_t, std::size_t> col;
  for (std::size_t c = 0; c < b.members.size(); ++c)
    for (auto rank : b.members[c]) col[rank] = c;
  if (last) last->assign(b.members.size(), 0);
  std::vector<std::vector<double>> g;
  for (auto [begin, end] : rows) {
    std::vector<double> row(b.members.size(), -1);
    for (std::size_t i = begin; i < end; ++i) {
      const auto& r = rounds[i];
      const std::uint32_t med = median_offset(r);
      const hist::round_view::arrival* latest = nullptr;
      for (const auto& x : r.arrivals) {
        if (!latest || x.offset_ms > latest->offset_ms) latest = &x;
        if (!x.rank) continue;
        auto it = col.find(*x.rank);
        if (it == col.end()) continue;
        row[it->second] = std::max(row[it->second], static_cast<double>(late_after(x.offset_ms, med)));
      }
      if (last && latest && latest->rank && r.arrivals.size() > 1)
        if (auto it = col.find(*latest->rank); it != col.end()) ++(*last)[it->second];
    }
    g.push_back(std::move(row));
  }
  return g;
}
std::string round_label(const hist::round_view& r) { return fmt::format("{}#{}", r.name, r.gen); }
/// A row's label: its round, or for several "first+K" (K more after it).
std::string row_label(const std::vector<hist::round_view>& rounds, std::pair<std::size_t, std::size_t> row) {
  std::string l = round_label(rounds[row.first]);
  if (row.second - row.first > 1) l += fmt::format("+{}", row.second - row.first - 1);
  return l;
}
}  // namespace

std::string heatmap(const std::vector<hist::round_view>& rounds, std::size_t width, bool utf8,
                    std::size_t max_rows) {
  if (rounds.empty()) return "no finished rounds recorded\n";
  auto rows = bin_rows(rounds.size(), max_rows);
  std::size_t label_w = 4;
  for (const auto& row : rows) label_w = std::max(label_w, row_label(rounds, row).size());
  label_w = std::min<std::size_t>(label_w, 24);
  std::size_t cols = width > label_w + 3 ? width - label_w - 3 : 8;
  binning b = bin_ranks(rounds, cols);
  auto g = grid(rounds, b, rows);
  const double top = scale_top(g);
  static const char* const shades_u[] = {" ", "░", "▒", "▓", "█"};
  static const char* const shades_a[] = {" ", ".", ":", "+", "#"};
  const char* const* shades = utf8 ? shades_u : shades_a;
  const char* absent = utf8 ? "·" : "-";
  auto level = [&](double v) {
    if (!(top > 0)) return 0;
    // Clipped before the cast: the scale's top is the 99th percentile, and a
    // cell far past it overflowed the int (UBSan, the client fuzz target).
    double l = std::ceil(std::min(v / top, 1.0) * 4);
    return l > 0 ? static_cast<int>(l) : 0;
  };
  std::string out = fmt::format("Arrival lateness, rounds (rows{}) by ranks (columns): {}\n",
                                rows.size() < rounds.size()
                                    ? fmt::format(", {} rounds to a row, the worst of each column", rows[0].second)
                                    : "",
                                b.how);
  // Column ruler: every tenth column's label (a group of ranks: its first),
  // as much of it as fits before the next.
  std::string ruler(label_w + 2, ' ');
  for (std::size_t c = 0; c < b.labels.size(); c += 10) {
    std::string l = b.groups ? b.labels[c].substr(0, b.labels[c].find('-')) : b.labels[c];
    ruler.resize(label_w + 2 + c, ' ');
    ruler += l.substr(0, 9);
  }
  if (ruler.size() > width) ruler.resize(width);
  out += ruler + "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string label = row_label(rounds, rows[i]);
    if (label.size() > label_w) label = label.substr(label.size() - label_w);
    out += fmt::format("{:>{}} |", label, label_w);
    for (double v : g[i]) out += v < 0 ? absent : shades[level(v)];
    out += "|\n";
  }
  out += fmt::format("legend: '{}' on time (0 ms)", shades[0]);
  for (int l = 1; l <= 4; ++l)
    out += fmt::format(", '{}' up to {}{}", shades[l], lateness(top * l / 4), l == 4 ? " or more" : "");
  out += fmt::format(", '{}' did not arrive; after the round's median arrival\n", absent);
  return out;
}

namespace {
std::string colour(double f) {  // 0: pale yellow, 1: dark red
  f = std::clamp(f, 0.0, 1.0);
  // + 0.5 and a cast, not std::lround: that one import made the binary load
  // libm, which cost every wait 30,000 instructions and 15 page faults.
  auto mix = [&](double a, double b) { return static_cast<int>(a + (b - a) * f + 0.5); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(255, 140), mix(247, 10), mix(188, 20));
}
std::string esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

/// svg()'s "times last" strip at y strip, under columns cw wide from x left: per column, how many of the
/// rounds ended on one of its ranks (most: the most of any column).
void svg_times_last(std::string& out, const binning& b, const std::vector<std::uint32_t>& times_last,
                    std::size_t rounds, std::uint32_t most, double left, double cw, double strip) {
  out += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\" dominant-baseline=\"middle\">times last</text>\n",
                     left - 6, strip + 6);
  for (std::size_t c = 0; c < times_last.size(); ++c)
    out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"12\" fill=\"{}\"><title>column {}: "
                       "last in {} of {} rounds</title></rect>\n",
                       left + cw * static_cast<double>(c), strip, cw,
                       times_last[c] ? colour(most ? static_cast<double>(times_last[c]) / most : 0) : "#f4f4f4",
                       esc(b.labels[c]), times_last[c], rounds);
}

/// svg()'s legend at (lx, ly), for a scale up to top (overflow: the colour above it): a gradient in five steps,
/// with values, then the overflow's and the absent's colours.
void svg_legend(std::string& out, double lx, double ly, double top, const std::string& overflow) {
  for (int s = 0; s <= 4; ++s) {
    out += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"60\" height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"10\">{}</text>\n",
                       lx + 70.0 * s, ly, colour(s / 4.0), lx + 70.0 * s, ly + 22, lateness(top * s / 4));
  }
  out += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"30\" height=\"12\" fill=\"{}\"/>"
                     "<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"10\">over {} (99th percentile)</text>\n",
                     lx + 360, ly, overflow, lx + 360, ly + 22, lateness(top));
  out += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"30\" height=\"12\" fill=\"#dddddd\"/>"
                     "<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"10\">absent</text>\n",
                     lx + 520, ly, lx + 520, ly + 22);
}
}  // namespace

std::string svg(const std::vector<hist::round_view>& rounds) {
  constexpr double max_w = 1000, max_h = 700, left = 150, top_m = 60, bottom = 140, right = 30;
  binning b = bin_ranks(rounds, 100);
  // Rows to the cell budget: any history stays under about 2 MB.
  auto rows = bin_rows(rounds.size(), std::clamp<std::size_t>(svg_cell_budget / std::max<std::size_t>(1, b.labels.size()), 1, 200));
  std::vector<std::uint32_t> times_last;
  auto g = grid(rounds, b, rows, &times_last);
  const double top = scale_top(g);
  const std::string overflow = "#5b1a8f";
  std::size_t nc = std::max<std::size_t>(b.labels.size(), 1), nr = std::max<std::size_t>(rows.size(), 1);
  double cw = std::clamp(max_w / static_cast<double>(nc), 2.0, 40.0);
  double ch = std::clamp(max_h / static_cast<double>(nr), 2.0, 28.0);
  double w = left + cw * static_cast<double>(nc) + right, h = top_m + ch * static_cast<double>(nr) + bottom;
  // Wide enough for the title and the legend (150 + 600 px) whatever the ranks.
  w = std::max(w, 780.0);
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.0f}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">Who is late? Arrival after each round's "
      "median arrival</text>\n"
      "<text x=\"{:.0f}\" y=\"44\" fill=\"#555\">{}</text>\n",
      w, h, w, h, 16.0, 16.0,
      esc(b.how + (rows.size() < rounds.size()
                       ? fmt::format("; {} rounds to a row, the worst of each column", rows[0].second - rows[0].first)
                       : "")));
  for (std::size_t i = 0; i < g.size(); ++i) {
    double y = top_m + ch * static_cast<double>(i);
    const std::string label = esc(row_label(rounds, rows[i]));
    for (std::size_t c = 0; c < g[i].size(); ++c) {
      double v = g[i][c];
      double x = left + cw * static_cast<double>(c);
      std::string fill = v < 0 ? "#dddddd" : v > top ? overflow : colour(top > 0 ? v / top : 0);
      out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} "
                         "column {}: {}</title></rect>\n",
                         x, y, cw, ch, fill, label, esc(b.labels[c]),
                         v < 0 ? std::string("did not arrive") : lateness(v));
    }
    // Label every row when they fit, else about 30 of them.
    std::size_t every = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(12.0 / ch)));
    if (i % every == 0)
      out += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>\n",
                         left - 6, y + ch / 2, label);
  }
  // "Times last": per column, how many rounds ended on one of its ranks.
  double strip = top_m + ch * static_cast<double>(nr) + 6;
  std::uint32_t most = times_last.empty() ? 0 : *std::max_element(times_last.begin(), times_last.end());
  svg_times_last(out, b, times_last, rounds.size(), most, left, cw, strip);
  std::size_t every_c = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(14.0 / cw)));
  double base = strip + 12;
  for (std::size_t c = 0; c < b.labels.size(); c += every_c) {
    double x = left + cw * (static_cast<double>(c) + 0.5);
    out += fmt::format("<text transform=\"translate({:.1f},{:.1f}) rotate(-60)\" text-anchor=\"end\" "
                       "font-size=\"10\">{}</text>\n",
                       x, base + 10, esc(b.labels[c]));
  }
  out += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">rank (binned: {})</text>\n",
                     left + cw * static_cast<double>(nc) / 2, h - 38, esc(b.how));
  out += fmt::format("<text transform=\"translate(16,{:.0f}) rotate(-90)\" text-anchor=\"middle\">round</text>\n",
                     top_m + ch * static_cast<double>(nr) / 2);
  // Legend: a gradient in five steps, with values.
  svg_legend(out, left, h - 24, top, overflow);
  out += "</svg>\n";
  return out;
}

}  // namespace tfb::report
