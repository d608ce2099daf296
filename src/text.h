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

}  // namespace tfb
