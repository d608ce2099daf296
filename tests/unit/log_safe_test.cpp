// log_safe.h: what reaches the host's log from a client is shown, never
// obeyed by the terminal that reads the log (issue 30 item 2).
#include "log_safe.h"

#include <gtest/gtest.h>
#include <string>

using tfb::log_safe;

TEST(LogSafe, KeepsPrintableTextAndUtf8AsItIs) {
  EXPECT_EQ(log_safe("bad client 127.0.0.1:5: BADREQUEST: n=x is not a number"),
            "bad client 127.0.0.1:5: BADREQUEST: n=x is not a number");
  EXPECT_EQ(log_safe("Knoten-\xc3\xa4 \xe2\x9c\x93 \xf0\x9f\x98\x80"), "Knoten-\xc3\xa4 \xe2\x9c\x93 \xf0\x9f\x98\x80");
}

TEST(LogSafe, ShowsC0DelAndNewlinesSoOneEntryStaysOneLine) {
  EXPECT_EQ(log_safe("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(log_safe("x\ny\r\tz\x7f"), "x\\x0ay\\x0d\\x09z\\x7f");
  EXPECT_EQ(log_safe(std::string("n\0u", 3)), "n\\x00u");
}

TEST(LogSafe, ShowsC1AsCodePointsAndLoneHighBytes) {
  EXPECT_EQ(log_safe("\xc2\x9b" "31m"), "\\u009b31m");  // U+009B, the CSI
  EXPECT_EQ(log_safe("\x9b" "31m"), "\\x9b31m");        // the 8-bit CSI, not UTF-8
  EXPECT_EQ(log_safe("\xc0\xaf"), "\\xc0\\xaf");         // overlong '/'
  EXPECT_EQ(log_safe("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(log_safe("\xe2\x9c"), "\\xe2\\x9c");          // cut short
}

TEST(LogSafe, ShowsBidiControlsLineSeparatorsAndZeroWidthCharacters) {
  EXPECT_EQ(log_safe("a\xe2\x80\xae" "b"), "a\\u202eb");
  EXPECT_EQ(log_safe("\xe2\x80\xa8\xe2\x80\xa9"), "\\u2028\\u2029");
  EXPECT_EQ(log_safe("\xe2\x80\x8b\xe2\x81\xa6\xef\xbb\xbf"), "\\u200b\\u2066\\ufeff");
}

TEST(LogSafe, CutsLongTextWithDots) {
  std::string out = log_safe(std::string(3000, 'k'), 200);
  EXPECT_EQ(out, std::string(200, 'k') + "...");
  out = log_safe(std::string(3000, '\x1b'), 200);
  EXPECT_LE(out.size(), 200u + 4 + 3);
  EXPECT_TRUE(out.ends_with("..."));
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
}
