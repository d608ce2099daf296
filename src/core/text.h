#pragma once
// Printing without letting what came in take over the terminal: escaping
// (printable, quote_text) and a print that cannot end the process.
#include <cstddef>
#include <cstdint>
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

/// One UTF-8 sequence at s[i], whose first byte is 0x80 or above (RFC 3629:
/// the shortest form, no surrogates, at most U+10FFFF): its length and code
/// point, or length 0 when it is not valid there. The one decoder of
/// printable(), quote_text() and proto::text_problem().
struct utf8_char {
  std::size_t len = 0;
  std::uint32_t cp = 0;
};
inline utf8_char decode_utf8(std::string_view s, std::size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  std::size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  std::uint32_t cp = len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;
  bool ok = len != 0 && i + len <= s.size();
  for (std::size_t k = 1; ok && k < len; ++k) {
    auto cc = static_cast<unsigned char>(s[i + k]);
    ok = (cc & 0xc0) == 0x80;
    cp = (cp << 6) | (cc & 0x3fu);
  }
  ok = ok && !(len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) &&
       !(len == 4 && (cp < 0x10000 || cp > 0x10ffff));
  return ok ? utf8_char{len, cp} : utf8_char{};
}

namespace detail {

/// The one escaper behind printable() and quote_text(): appends s to out
/// with every byte a terminal could take as a command, or that hides or
/// reorders text, shown visibly; stops after max_chars code points, or once
/// it has appended max_bytes or more ("...").
///  - C0 (but '\n' when keep_newlines), DEL, and bytes that are not UTF-8
///    (among them raw 0x80-0x9f, the 8-bit CSI 0x9b): \xNN
///  - C1 as UTF-8 (U+0080-U+009F), bidi controls (U+061C, U+200E/F,
///    U+202A-U+202E, U+2066-U+2069), line and paragraph separators
///    (U+2028/9), zero-width and invisible characters (U+200B-U+200D,
///    U+2060-U+206F, U+FEFF) and tags (U+E0000-U+E007F): \uNNNN, \UNNNNNNNN
/// Other UTF-8 (é, 日本) passes; quoting also escapes '"' and '\\'.
inline void append_printable(std::string& out, std::string_view s, bool keep_newlines, bool quoting,
                             std::size_t max_chars, std::size_t max_bytes = std::string_view::npos) {
  std::size_t chars = 0, start = out.size();
  for (std::size_t i = 0; i < s.size();) {
    if (chars++ == max_chars || out.size() - start >= max_bytes) {
      out += "...";
      return;
    }
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && !(c == '\n' && keep_newlines)) || c == 0x7f)
        out += fmt::format("\\x{:02x}", c);
      else if (quoting && (c == '"' || c == '\\'))
        out += {'\\', static_cast<char>(c)};
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    auto [len, cp] = decode_utf8(s, i);
    if (len == 0) {  // one byte at a time: what follows may be good again
      out += fmt::format("\\x{:02x}", c);
      ++i;
      continue;
    }
    bool hidden = cp <= 0x9f || cp == 0x61c || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
                  (cp >= 0x2060 && cp <= 0x206f) || cp == 0xfeff || (cp >= 0xe0000 && cp <= 0xe007f);
    if (!hidden)
      out.append(s.substr(i, len));
    else if (cp <= 0xffff)
      out += fmt::format("\\u{:04x}", cp);
    else
      out += fmt::format("\\U{:08x}", cp);
    i += len;
  }
}

}  // namespace detail

/// "value" with quotes and backslashes escaped, what printable() escapes
/// escaped too, and anything past max_chars (code points) cut to "...": for
/// what a user typed, inside an error message.
inline std::string quote_text(std::string_view s, std::size_t max_chars = 80) {
  std::string out = "\"";
  detail::append_printable(out, s, false, true, max_chars);
  out += '"';
  return out;
}

/// TEXT safe to print on a terminal: control bytes, C1, bidi controls, line
/// separators and invisible characters shown as \x1b, \u202e (detail::
/// append_printable says which). Everything printed that came from a host, a
/// client or a file goes through here (or quote_text) on its way out, so
/// that nothing reaches a terminal as an escape sequence, a line that is not
/// one, or text that reads other than it is; the host's log too, so that
/// `tail -f` of it is as safe. keep_newlines: for a whole message or report
/// of several lines (wire text holds no newline; a log entry is one line).
/// Cut ("...") once about max_bytes are written: the log caps what a client chose.
inline std::string printable(std::string_view text, bool keep_newlines = false,
                             std::size_t max_bytes = std::string_view::npos) {
  std::string out;
  out.reserve(text.size() < 256 ? text.size() : 256);
  detail::append_printable(out, text, keep_newlines, false, std::string_view::npos, max_bytes);
  return out;
}

}  // namespace tfb
