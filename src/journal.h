#pragma once
// The host's journal (serve --state-dir): one JSON object per line. Pure
// conversion here; host.cpp does the file I/O (append, flush, compact).
#include <optional>
#include <string>
#include <string_view>

#include "barrier.h"

namespace tfb {

inline constexpr int journal_format_version = 1;

/// The first line of every journal file.
std::string journal_header();
/// Checks a journal's first line; sets error when it is not a tfbarrier journal of this version.
bool check_journal_header(std::string_view line, std::string& error);

std::string to_journal_line(const journal_entry& e);  ///< with the newline
std::optional<journal_entry> from_journal_line(std::string_view line, std::string& error);

}  // namespace tfb
