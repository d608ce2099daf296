#pragma once
// `tfbarrier status --watch`: what one refresh shows, pure. A function from
// the host's STATUS reply, the terminal's width and whether it can show
// UTF-8 to lines of text (no escape codes: the caller positions them).
// And the table that `status` prints.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "protocol.h"

namespace tfb::watch {

/// What one refresh of `status --watch` shows: the caller's title, a banner
/// while the host is lost, and the host's last STATUS reply (kept on screen,
/// under the banner, while the host is away).
struct screen_state {
  std::string title;
  const proto::status_reply* status = nullptr;  ///< null: no reply yet
  /// Empty while connected; else its lines, the first the headline
  /// ("lost the host at ADDR; reconnecting…"), drawn in reverse red.
  std::vector<std::string> banner;
};

/// The lines of one refresh: the title, the banner, then per barrier a line
/// with a progress bar of arrivals, the arrivals, its state and age, the
/// chief and the verdict; a line with the missing ranks (each with the node
/// it was last seen on, when the host knows it) or the abort's reason; and a
/// line with its last released round (released how long ago, how long it
/// took, the last to arrive as rank@node), when the host sent one. A round
/// nobody has reached yet has no missing line. No line is wider than width
/// columns (at least 20 are assumed); with height (0: no limit) the barriers
/// that do not fit become one line "... and K more barriers (use --name)".
/// With colour, lines carry SGR escapes (not counted in width); without,
/// none. A pure function of its arguments.
std::vector<std::string> render(const screen_state& s, std::size_t width, std::size_t height, bool utf8,
                                bool colour);
/// render() of one reply under a title, no banner, no height, no colour.
std::vector<std::string> render(const proto::status_reply& st, std::string_view title, std::size_t width, bool utf8);

/// Whether status --watch draws in colour (https://no-color.org): stdout is a
/// terminal, TERM is set and not "dumb", and NO_COLOR is unset or empty.
bool use_colour(bool tty, const char* term, const char* no_color);

/// "r2 3@node7 4@node7 9-11": the missing ranks with the nodes known for the
/// first of them (b.missing_nodes), then the rest of b.missing as ranges.
std::string missing_ranks(const proto::barrier_info& b);

/// What `status` prints without --watch: a header, a line per barrier (and
/// one for an abort's reason), and with `members` a line per member and per
/// departure. Each field is the host's, so each line is escaped (printable).
std::vector<std::string> table(const proto::status_reply& st, bool members);

/// Whether the locale's character set is UTF-8, from LC_ALL, LC_CTYPE and
/// LANG as the C library reads them (the first one set wins); null: unset.
bool utf8_locale(const char* lc_all, const char* lc_ctype, const char* lang);

/// s cut to at most width columns (code points), with an ellipsis when cut.
std::string fit(std::string_view s, std::size_t width, bool utf8);

/// The progress bar of `arrived` out of `n`, `width` columns between brackets.
std::string bar(std::uint32_t arrived, std::uint32_t n, std::size_t width, bool utf8);

}  // namespace tfb::watch
