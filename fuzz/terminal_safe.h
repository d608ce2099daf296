#pragma once
// The property that tfb::printable promises, checked by a decoder of its own
// (so that a mistake in the escaper is not repeated here): the text is
// valid UTF-8 (no stray byte such as the 8-bit CSI 0x9b) and holds no C0
// control (but '\n' where lines end), no DEL, and no code point a terminal
// obeys or that hides or reorders text: C1 (U+0080-U+009F), bidi controls,
// line and paragraph separators, zero-width and invisible characters.
// Shared by tests/unit/text_test.cpp and fuzz/fuzz_client_output.cpp.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tfb::check {

/// Why s is not safe to print ("" when it is): the offending byte's offset and kind.
inline const char* terminal_unsafe(std::string_view s, bool newlines) {
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '\n' && newlines) {
        ++i;
        continue;
      }
      if (c < 0x20) return "a C0 control byte";
      if (c == 0x7f) return "DEL";
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07, min = 0x10000;
    else return "a byte that starts no UTF-8 character (raw C1, 8-bit CSI)";
    if (i + len > s.size()) return "a cut UTF-8 character";
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return "a bad UTF-8 continuation";
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return "overlong UTF-8 or a surrogate";
    if (cp <= 0x9f) return "a C1 control (U+0080-U+009F)";
    if (cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069))
      return "a bidi control";
    if (cp == 0x2028 || cp == 0x2029) return "a line or paragraph separator";
    if ((cp >= 0x200b && cp <= 0x200d) || cp == 0x2060 || cp == 0xfeff) return "a zero-width character";
    i += len;
  }
  return "";
}

inline bool terminal_safe(std::string_view s, bool newlines = false) { return *terminal_unsafe(s, newlines) == 0; }

}  // namespace tfb::check
