// What `status --watch` draws (watch_view.h).
#include "watch_view.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace tfb;

namespace {
proto::barrier_info barrier(std::string name, std::uint32_t arrived, std::optional<std::uint32_t> n) {
  proto::barrier_info b;
  b.scope = "job";
  b.name = std::move(name);
  b.gen = 3;
  b.arrived = arrived;
  b.n = n;
  b.age_ms = 12300;
  return b;
}
std::size_t columns(const std::string& s) {
  std::size_t n = 0;
  for (char ch : s)
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++n;
  return n;
}
}  // namespace

TEST(WatchView, Locale) {
  EXPECT_TRUE(watch::utf8_locale(nullptr, nullptr, "en_US.UTF-8"));
  EXPECT_TRUE(watch::utf8_locale(nullptr, nullptr, "C.utf8"));
  EXPECT_FALSE(watch::utf8_locale(nullptr, nullptr, "C"));
  EXPECT_FALSE(watch::utf8_locale(nullptr, nullptr, nullptr));
  EXPECT_FALSE(watch::utf8_locale("C", nullptr, "en_US.UTF-8"));  // LC_ALL wins
  EXPECT_TRUE(watch::utf8_locale("", "en_US.UTF-8", "C"));       // empty is unset
}

TEST(WatchView, Bar) {
  EXPECT_EQ(watch::bar(2, 4, 8, false), "[####....]");
  EXPECT_EQ(watch::bar(0, 0, 4, false), "[....]");
  EXPECT_EQ(watch::bar(9, 4, 4, false), "[####]");
  EXPECT_EQ(watch::bar(1, 2, 2, true), "[\u2588\u2591]");
}

TEST(WatchView, Fit) {
  EXPECT_EQ(watch::fit("abcdef", 6, false), "abcdef");
  EXPECT_EQ(watch::fit("abcdef", 4, false), "abc~");
  EXPECT_EQ(watch::fit("abcdef", 4, true), "abc\u2026");
  EXPECT_EQ(watch::fit("\u2588\u2588\u2588", 2, true), "\u2588\u2026");
}

TEST(WatchView, OneBarrierTwoLines) {
  proto::status_reply st;
  auto b = barrier("epoch3", 6, 8);
  b.missing = "3,5";
  b.chief = true;
  st.barriers.push_back(b);
  auto lines = watch::render(st, "title", 80, false);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "title");
  EXPECT_NE(lines[1].find("epoch3 r3 ["), std::string::npos);
  auto open = lines[1].find('['), close = lines[1].find(']');
  std::string drawn = lines[1].substr(open + 1, close - open - 1);
  EXPECT_EQ(std::count(drawn.begin(), drawn.end(), '#'), static_cast<long>(drawn.size() * 6 / 8)) << drawn;  // 6 of 8
  EXPECT_NE(lines[1].find(" 6/8 open 12.3s  chief yes  verdict none"), std::string::npos);
  EXPECT_EQ(columns(lines[1]), 80u);
  EXPECT_EQ(lines[2], "  missing ranks: 3,5");
}

TEST(WatchView, FitsEveryWidthAndUsesAsciiUnlessUtf8) {
  proto::status_reply st;
  auto b = barrier(std::string(100, 'n'), 1, 1000);
  b.missing = "1-999";
  st.barriers.push_back(b);
  auto aborted = barrier("gone", 0, 2);
  aborted.state = proto::round_state::aborted;
  aborted.reason = std::string(300, 'r');
  st.barriers.push_back(aborted);
  for (bool utf8 : {false, true})
    for (std::size_t w : {1, 20, 37, 80, 200}) {
      auto lines = watch::render(st, std::string(500, 't'), w, utf8);
      ASSERT_EQ(lines.size(), 5u);
      for (const auto& l : lines) {
        EXPECT_LE(columns(l), std::max<std::size_t>(w, 20)) << l;
        if (!utf8) {
          for (char ch : l) EXPECT_EQ(static_cast<unsigned char>(ch) & 0x80, 0) << l;
        }
      }
    }
  auto lines = watch::render(st, "t", 80, false);
  EXPECT_EQ(lines[3].find('['), std::string::npos);  // no bar for an aborted round
  EXPECT_EQ(lines[4].rfind("  aborted: rrr", 0), 0u);
}

TEST(WatchView, GatheredAndUnranked) {
  proto::status_reply st;
  auto g = barrier("g", 4, 4);
  g.state = proto::round_state::gathered;
  g.missing = "";
  st.barriers.push_back(g);
  st.barriers.push_back(barrier("u", 1, 3));
  st.barriers.push_back(barrier("q", 1, std::nullopt));
  auto lines = watch::render(st, "t", 60, false);
  EXPECT_EQ(lines[2], "  all here; waiting for the chief's verdict");
  EXPECT_EQ(lines[4], "  missing: 2 (unranked)");
  EXPECT_NE(lines[5].find(" 1/? "), std::string::npos);
  EXPECT_TRUE(watch::render(proto::status_reply{}, "t", 60, false).back() == "no barriers");
}
