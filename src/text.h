#pragma once
// Quoting what a user typed inside an error message, and printing it.
#include <cstddef>
#include <cstdio>
#include <fmt/format.h>
#include <iterator>
#include <string>
#include <string_view>

namespace tfb {

/// fmt::print that cannot end the process. fmt::print throws when a write
/// fails (the terminal of a closed ssh session, a pipe whose reader exited, a
/// full disk); the throw would end the host at its next log line (SIGABRT,
/// or a hang when it comes out of a detached coroutine), and a `wait` with
/// exit 134 instead of its own code. What cannot be written is dropped.
template <typename... T>
void print(std::FILE* f, fmt::format_string<T...> format, T&&... args) {
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), format, std::forward<T>(args)...);
  if (std::fwrite(buf.data(), 1, buf.size(), f) != buf.size()) std::clearerr(f);
}

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
