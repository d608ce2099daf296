// Durations on the command line (src/core/duration.h). These tests are the spec.
#include "duration.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace tfb {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t max_ms = 100LL * 24 * 3600 * 1000;  // 100 days

std::int64_t ms(std::string_view s) {
  auto d = parse_duration(s);
  EXPECT_TRUE(d.has_value()) << "'" << s << "' should parse";
  return d ? d->count() : -1;
}

void bad(std::string_view s) {
  auto d = parse_duration(s);
  EXPECT_FALSE(d.has_value()) << "'" << s << "' should not parse, got " << (d ? d->count() : 0) << "ms";
}

TEST(ParseDuration, Units) {
  EXPECT_EQ(ms("500ms"), 500);
  EXPECT_EQ(ms("90s"), 90'000);
  EXPECT_EQ(ms("10m"), 600'000);
  EXPECT_EQ(ms("1h"), 3'600'000);
  EXPECT_EQ(ms("2d"), 2 * 86'400'000LL);
  EXPECT_EQ(ms("1ms"), 1);
}

TEST(ParseDuration, BareNumberIsSeconds) {
  EXPECT_EQ(ms("5"), 5'000);
  EXPECT_EQ(ms("0"), 0);
  EXPECT_EQ(ms("120"), 120'000);
  EXPECT_EQ(ms("007"), 7'000);
}

TEST(ParseDuration, Zero) {
  EXPECT_EQ(ms("0"), 0);
  EXPECT_EQ(ms("0s"), 0);
  EXPECT_EQ(ms("0ms"), 0);
  EXPECT_EQ(ms("0h0m"), 0);
}

TEST(ParseDuration, Compound) {
  EXPECT_EQ(ms("1m30s"), 90'000);
  EXPECT_EQ(ms("1h30m"), 5'400'000);
  EXPECT_EQ(ms("1h1m1s1ms"), 3'661'001);
  EXPECT_EQ(ms("2s500ms"), 2'500);
}

TEST(ParseDuration, Malformed) {
  bad("");
  bad("5x");
  bad("-1");
  bad("-5s");
  bad("+5s");
  bad("1.5s");
  bad("0.5");
  bad("s");
  bad("ms");
  bad("5 s");
  bad(" 5s");
  bad("5s ");
  bad("5S");
  bad("5M");
  bad("1m30");   // a bare number only alone
  bad("30 ");
  bad("1sec");
  bad("1min");
  bad("5mss");
  bad("abc");
  bad("1e3");
  bad("0x10");
}

TEST(ParseDuration, Huge) {
  EXPECT_EQ(ms("100d"), max_ms);
  EXPECT_EQ(ms("2400h"), max_ms);
  EXPECT_EQ(ms(std::to_string(max_ms) + "ms"), max_ms);
  bad("101d");
  bad("2401h");
  bad(std::to_string(max_ms + 1) + "ms");
  bad("8640001s");
  bad("99999999999999999999");
  bad("99999999999999999999999999999s");
  bad("9223372036854775807ms");
  bad("18446744073709551617");
  bad("99d99d");  // the sum is checked, not only each part
  bad(std::string(33, '1'));  // over-long input
}

TEST(FormatDuration, Milliseconds) {
  EXPECT_EQ(format_duration(0ms), "0ms");
  EXPECT_EQ(format_duration(850ms), "850ms");
  EXPECT_EQ(format_duration(999ms), "999ms");
  EXPECT_EQ(format_duration(-5ms), "0ms");
}

TEST(FormatDuration, Seconds) {
  EXPECT_EQ(format_duration(1000ms), "1s");
  EXPECT_EQ(format_duration(1500ms), "1.5s");  // not "1s": a --timeout 1500ms is told as it was
  EXPECT_EQ(format_duration(1999ms), "1.9s");
  EXPECT_EQ(format_duration(59999ms), "59.9s");
  EXPECT_EQ(format_duration(59s), "59s");
}

TEST(FormatDuration, Minutes) {
  EXPECT_EQ(format_duration(60s), "1m0s");
  EXPECT_EQ(format_duration(72s), "1m12s");
  EXPECT_EQ(format_duration(3599s), "59m59s");
}

TEST(FormatDuration, Hours) {
  EXPECT_EQ(format_duration(1h), "1h0m");
  EXPECT_EQ(format_duration(2h), "2h0m");
  EXPECT_EQ(format_duration(2h + 30min + 59s), "2h30m");
  EXPECT_EQ(format_duration(std::chrono::milliseconds(max_ms)), "2400h0m");
}

TEST(FormatDuration, ParsesBack) {
  // What format_duration prints, parse_duration reads (to the printed precision).
  for (std::int64_t v : {0LL, 1LL, 850LL, 1000LL, 59'000LL, 72'000LL, 3'599'000LL, 3'600'000LL, 9'000'000LL}) {
    std::string s = format_duration(std::chrono::milliseconds(v));
    auto back = parse_duration(s);
    ASSERT_TRUE(back) << s;
    EXPECT_EQ(format_duration(*back), s);
  }
}

}  // namespace
}  // namespace tfb

TEST(ParseDuration, SaysWhenOnlyTheSizeIsWrong) {
  bool too_long = true;
  EXPECT_EQ(tfb::parse_duration("100d", &too_long), tfb::max_duration);
  EXPECT_FALSE(too_long);
  for (const char* s : {"101d", "2401h", "99999999999999999999d", "100d1ms", "8640000001ms"}) {
    EXPECT_FALSE(tfb::parse_duration(s, &too_long)) << s;
    EXPECT_TRUE(too_long) << s;
  }
  for (const char* s : {"5x", "99999999999999999999x", "1s5", "", "-1s"}) {
    EXPECT_FALSE(tfb::parse_duration(s, &too_long)) << s;
    EXPECT_FALSE(too_long) << s;  // malformed, whatever its size
  }
}
