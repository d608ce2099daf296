#pragma once
// Quoting what a user typed inside an error message.
#include <cstddef>
#include <fmt/format.h>
#include <string>
#include <string_view>

namespace tfb {

/// "value" with quotes and backslashes escaped, control bytes as \xNN, and
/// anything past max_chars cut to "...": safe to print whatever came in.
inline std::string quote_text(std::string_view s, std::size_t max_chars = 80) {
  std::string out = "\"";
  std::size_t n = 0;
  for (char c : s) {
    if (n++ == max_chars) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

/// TEXT with every control byte but newline and tab shown as \xNN: for a
/// whole message that may carry what came in unquoted (CLI11's "The following
/// argument was not expected: ..."), so that nothing reaches a terminal as an
/// escape sequence.
inline std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out;
}

}  // namespace tfb
