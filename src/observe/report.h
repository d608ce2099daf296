#pragma once
// `tfbarrier report`: who is late (issue #21). Pure: rounds in (history.h),
// text, JSON, CSV, a terminal heatmap and an SVG out. No terminal, no files:
// cmd/report.cpp gives the width and whether the locale is UTF-8.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "history.h"

namespace tfb::report {

struct late_rank {
  std::optional<std::uint32_t> rank;
  std::string node;
  std::uint32_t late_ms = 0;         ///< after the round's median arrival (0 when not after it)
  std::uint32_t after_first_ms = 0;  ///< after the round's first arrival
};

/// Lateness is measured from a robust reference, the round's median arrival
/// (issue #32): when many processes start at once, "after the first"
/// paints every rank behind the quickest one late. The median of a round's
/// arrival offsets (after its first), or 0 for a round with none.
std::uint32_t median_offset(const hist::round_view& r);
/// How late arrival x was: after the round's median (median_offset), 0 when not.
inline std::uint32_t late_after(std::uint32_t offset_ms, std::uint32_t median_ms) {
  return offset_ms > median_ms ? offset_ms - median_ms : 0;
}

struct round_summary {
  const hist::round_view* round = nullptr;
  std::uint32_t spread_ms = 0;  ///< first to last arrival
  std::uint32_t median_ms = 0;  ///< the median arrival, after the first (median_offset)
  std::vector<late_rank> last;  ///< the last few, latest first
};

/// A rank or a node, across rounds.
struct straggler {
  std::string who;      ///< "rank 17" or "node gpu-a07"
  std::string ranks;    ///< a node's ranks as ranges ("48-55"); a rank's node
  /// The same, typed (issue #32 item 5): a rank's number (none for a
  /// participant without one) and node; a node's name and its ranks.
  std::optional<std::uint32_t> rank;
  std::string node;
  std::vector<std::uint32_t> rank_list;
  std::uint32_t rounds = 0;  ///< rounds it arrived in
  std::uint32_t last = 0;    ///< rounds it was last in (for a node: its rank was the last arrival)
  std::uint32_t slowest = 0; ///< rounds it was among the last ceil(5% of arrivals)
  double median_ms = 0, worst_ms = 0;  ///< its lateness after each round's median (a node's: its latest rank's)
};

struct analysis {
  std::vector<round_summary> rounds;
  std::vector<straggler> ranks, nodes;  ///< most often last first
};

/// Rounds must outlive the analysis (round_summary points into them).
analysis analyze(const std::vector<hist::round_view>& rounds, std::size_t last_few = 3);

/// "+3.2 s", "+850 ms".
std::string lateness(double ms);

/// Tables: per round, then stragglers by rank and by node, with a headline.
std::string text(const analysis& a, std::size_t top = 10);
std::string json(const analysis& a);
/// One row per arrival, with a header (RFC 4180).
std::string csv(const std::vector<hist::round_view>& rounds);
/// One text field of a CSV row: "'" before a first byte that starts a
/// spreadsheet formula (= + - @ TAB CR), then quoted ("" for ") when it holds
/// , " CR or LF.
std::string csv_text(std::string_view s);

/// How ranks become columns: one per rank, else one per node, else equal groups.
struct binning {
  std::vector<std::string> labels;                  ///< per column
  std::vector<std::vector<std::uint32_t>> members;  ///< per column: its ranks
  std::string how;                                  ///< for the legend
  bool groups = false;  ///< labels are rank ranges ("48-55"), not ranks or nodes
};
binning bin_ranks(const std::vector<hist::round_view>& rounds, std::size_t columns);

/// Rounds in rows, at most max_rows of them (0: one per round): consecutive
/// rounds share a row when there are more, [begin, end) each, oldest first.
std::vector<std::pair<std::size_t, std::size_t>> bin_rows(std::size_t rounds, std::size_t max_rows);

/// The colour scale's top: the 99th percentile of the cells' lateness (a
/// single 30 s hiccup must not wash out the rest), or their largest when
/// that is 0. Cells past it are drawn in the overflow colour.
double scale_top(const std::vector<std::vector<double>>& cells);

/// The heatmap for a terminal `width` columns wide (UTF-8 shades or ASCII),
/// in at most max_rows rows of rounds (0: one per round).
std::string heatmap(const std::vector<hist::round_view>& rounds, std::size_t width, bool utf8,
                    std::size_t max_rows = 0);
/// The same picture as an SVG document (at most about 1200 x 900 px, and
/// about svg_cell_budget cells: any history stays under about 2 MB), with a
/// "times last" strip under the columns.
std::string svg(const std::vector<hist::round_view>& rounds);
inline constexpr std::size_t svg_cell_budget = 8000;

/// text() for a terminal: at most max_rounds rows of the per-round table
/// (the latest), and the one-line summary last, where it stays on screen.
/// Each line is cut to width bytes (at a character's start), so that none wraps.
std::string text_for_terminal(const analysis& a, std::size_t max_rounds, std::size_t top = 10,
                              std::size_t width = 0);

}  // namespace tfb::report
