#pragma once
// What the host writes to its log, made safe to `cat` or `tail -f`: text a
// client chose (a malformed HELLO's fields are quoted back before any
// authentication) must not move the cursor, clear the screen, set a title
// or forge a line of its own. Used by host.cpp's log(), for every line.
//
// Covers C0 (newline and tab too: one entry is one line), DEL, C1 (U+0080 to
// U+009F, and a lone 0x80-0xFF byte that is not UTF-8, such as the 8-bit
// CSI 0x9B), bidi controls, line separators and zero-width characters. Item 3
// of issue 30 brings one such function for everything printed (text.h);
// this one should become it.
#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <string>
#include <string_view>

namespace tfb {

namespace log_detail {
/// The code point of the valid UTF-8 sequence at s[i] and its length, or 0
/// length when it is not one (overlong, surrogate, past U+10FFFF, cut short).
inline std::size_t utf8_at(std::string_view s, std::size_t i, std::uint32_t& cp) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  std::size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
  if (c >= 0xf5 || len == 0 || i + len > s.size()) return 0;
  cp = c & (len == 2 ? 0x1fu : len == 3 ? 0x0fu : 0x07u);
  for (std::size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3fu);
  }
  bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

/// Code points a terminal or an editor acts on rather than shows.
inline bool invisible(std::uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
         (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff;
}
}  // namespace log_detail

/// text with every byte and character above shown as \xNN or \uNNNN, cut to
/// about max_bytes (then "..." ends it).
inline std::string log_safe(std::string_view text, std::size_t max_bytes = std::string::npos) {
  std::string out;
  out.reserve(text.size() < 256 ? text.size() : 256);
  for (std::size_t i = 0; i < text.size();) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    std::uint32_t cp = 0;
    std::size_t len = c >= 0x80 ? log_detail::utf8_at(text, i, cp) : 0;
    if (len == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else if (log_detail::invisible(cp)) {
      out += fmt::format("\\u{:04x}", cp);
      i += len;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace tfb
