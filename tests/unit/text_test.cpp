// The one escaper of what is printed (text.h): printable and quote_text.
#include "text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "../../fuzz/terminal_safe.h"

using namespace tfb;

TEST(Printable, OrdinaryTextAndUtf8Pass) {
  EXPECT_EQ(printable("validation loss went up"), "validation loss went up");
  EXPECT_EQ(printable("caf\u00e9 \u65e5\u672c \U0001f680"), "caf\u00e9 \u65e5\u672c \U0001f680");
  EXPECT_EQ(printable("a\\x1b"), "a\\x1b");  // a backslash is not escaped outside quotes
}

TEST(Printable, C0AndDelAreShownAsHex) {
  EXPECT_EQ(printable("\x1b[2J\x1b]0;title\x07"), "\\x1b[2J\\x1b]0;title\\x07");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("a\tb\rc\x7f"), "a\\x09b\\x0dc\\x7f");
  EXPECT_EQ(printable("one\ntwo"), "one\\x0atwo");
  EXPECT_EQ(printable("one\ntwo", true), "one\ntwo");  // a message of several lines
  EXPECT_EQ(printable("one\r\ntwo", true), "one\\x0d\ntwo");
}

TEST(Printable, C1AsRawBytesAndAsUtf8) {
  EXPECT_EQ(printable("\x9b" "31m"), "\\x9b31m");          // the 8-bit CSI, not UTF-8
  EXPECT_EQ(printable("\x80\x9f"), "\\x80\\x9f");
  EXPECT_EQ(printable("\xc2\x9b" "31m"), "\\u009b31m");   // U+009B, UTF-8
  EXPECT_EQ(printable("\xc2\x85"), "\\u0085");             // NEL
  EXPECT_EQ(printable("\xc2\xa0"), "\xc2\xa0");            // U+00A0 is printable
}

TEST(Printable, BidiSeparatorsAndInvisibleCharacters) {
  EXPECT_EQ(printable("a\u202eb"), "a\\u202eb");
  for (char32_t cp : {0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c,
                      0x2028, 0x2029, 0x200b, 0x200c, 0x200d, 0x2060, 0xfeff}) {
    std::string utf8;
    if (cp < 0x800) {
      utf8 = {static_cast<char>(0xc0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3f))};
    } else {
      utf8 = {static_cast<char>(0xe0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3f)),
              static_cast<char>(0x80 | (cp & 0x3f))};
    }
    EXPECT_EQ(printable(utf8), fmt::format("\\u{:04x}", static_cast<std::uint32_t>(cp))) << std::hex << static_cast<std::uint32_t>(cp);
  }
  EXPECT_EQ(printable("\U000e0041"), "\\U000e0041");  // a tag character: invisible
  EXPECT_EQ(printable("\u2027\u2030\u200a"), "\u2027\u2030\u200a");  // neighbours that are visible
}

TEST(Printable, InvalidUtf8IsShownByteByByte) {
  EXPECT_EQ(printable("\xc0\x80"), "\\xc0\\x80");              // overlong NUL
  EXPECT_EQ(printable("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");     // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");     // a surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(printable("\xe6\x97"), "\\xe6\\x97");              // cut short at the end
  EXPECT_EQ(printable("\xe6\x97" "a\xe6\x97\xa5"), "\\xe6\\x97a\xe6\x97\xa5");  // then good again
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
}

TEST(QuoteText, QuotesEscapesAndCuts) {
  EXPECT_EQ(quote_text("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote_text("\x1b\xc2\x9b\u202e"), "\"\\x1b\\u009b\\u202e\"");
  EXPECT_EQ(quote_text("abcdef", 3), "\"abc...\"");
  EXPECT_EQ(quote_text("\u65e5\u672c\u8a9e", 2), "\"\u65e5\u672c...\"");  // cut by characters, not inside one
}

// Whatever the bytes, what comes out is safe on a terminal (checked by a
// decoder of its own), and ordinary text comes out as it went in.
TEST(Printable, RandomBytesNeverReachTheTerminalRaw) {
  std::mt19937 rng(30);
  const std::string alphabet[] = {"\x1b", "\x9b", "\xc2\x9b", "\u202e", "\u2028", "\u200b", "\ufeff", "\n", "\t",
                                  "\x7f", "\xe2\x80", "\xf0\x9f\x9a", "\u00e9", "\u65e5", "a", " ", "\\", "\""};
  for (int round = 0; round < 20000; ++round) {
    std::string s;
    std::size_t len = rng() % 24;
    for (std::size_t i = 0; i < len; ++i) {
      if (rng() % 3 == 0)
        s += static_cast<char>(rng() % 256);
      else
        s += alphabet[rng() % std::size(alphabet)];
    }
    bool lines = round % 2 == 0;
    std::string out = printable(s, lines);
    ASSERT_TRUE(check::terminal_safe(out, lines)) << check::terminal_unsafe(out, lines) << " in " << out;
    ASSERT_TRUE(check::terminal_safe(quote_text(s, 12)));
    if (check::terminal_safe(s, lines) && s.find('\t') == std::string::npos) {
      // nothing to escape, unless a character the checker allows and the escaper hides (tags, U+2061...)
      ASSERT_EQ(out, s);
    }
  }
}

// The host's log (host.cpp's log()): one entry is one line, and what a client
// chose is capped (issue 30 item 2; this was log_safe.h).
TEST(Printable, ALogEntryStaysOneLineAndIsCut) {
  EXPECT_EQ(printable("bad client 127.0.0.1:5: BADREQUEST: n=x is not a number"),
            "bad client 127.0.0.1:5: BADREQUEST: n=x is not a number");
  EXPECT_EQ(printable("Knoten-\xc3\xa4 \xe2\x9c\x93 \xf0\x9f\x98\x80"), "Knoten-\xc3\xa4 \xe2\x9c\x93 \xf0\x9f\x98\x80");
  EXPECT_EQ(printable("x\ny\r\tz\x7f"), "x\\x0ay\\x0d\\x09z\\x7f");
  std::string out = printable(std::string(3000, 'k'), false, 200);
  EXPECT_EQ(out, std::string(200, 'k') + "...");
  out = printable(std::string(3000, '\x1b'), false, 200);
  EXPECT_LE(out.size(), 200u + 4 + 3);
  EXPECT_TRUE(out.ends_with("..."));
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
}
