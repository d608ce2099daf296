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

/// The lines of one refresh: the title, then per barrier a line with a
/// progress bar of arrivals, the arrivals, its state and age, the chief and
/// the verdict, and a line with the missing ranks (or the abort's reason).
/// No line is wider than width columns (at least 20 are assumed).
std::vector<std::string> render(const proto::status_reply& st, std::string_view title, std::size_t width, bool utf8);

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
