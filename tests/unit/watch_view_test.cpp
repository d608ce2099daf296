// What `status --watch` draws (watch_view.h).
#include "watch_view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fmt/format.h>
#include <memory>

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

namespace {
// The text of a line without its SGR escapes.
std::string plain(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\033') {
      i = s.find('m', i);
      if (i == std::string::npos) break;
      continue;
    }
    out += s[i];
  }
  return out;
}
proto::status_reply watched() {
  proto::status_reply st;
  auto open = barrier("epoch3", 2, 6);
  open.missing = "1-3,5";
  open.missing_nodes = {{1, "node3"}, {2, ""}, {3, "node4"}, {5, "node4"}};
  open.last = std::make_shared<const proto::barrier_info::last_round>(
      proto::barrier_info::last_round{2, proto::verdict::continue_, 4200, 1300, 7u, "node2"});
  st.barriers.push_back(open);
  auto idle = barrier("ckpt", 0, std::nullopt);
  idle.last = std::make_shared<const proto::barrier_info::last_round>(
      proto::barrier_info::last_round{2, proto::verdict::stop, 61000, 250, std::nullopt, "node9"});
  st.barriers.push_back(idle);
  return st;
}
}  // namespace

// Issue #32 item 6: between rounds a barrier stays, with its last round; the
// missing ranks name their nodes.
TEST(WatchView, KeepsTheLastRoundAndNamesTheNodesOfMissingRanks) {
  auto st = watched();
  auto lines = watch::render(watch::screen_state{"t", &st, {}}, 100, 0, false, false);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[2], "  missing ranks: 1@node3 2 3@node4 5@node4");
  EXPECT_EQ(lines[3], "  last round r2: released 4.2s ago, took 1.3s, verdict continue, last in 7@node2");
  EXPECT_EQ(lines[4].rfind("ckpt r3 [", 0), 0u);  // a round nobody has reached: no missing line
  EXPECT_EQ(lines[5], "  last round r2: released 1m1s ago, took 250ms, verdict stop, last in node9 (no rank)");
}

TEST(WatchView, MissingRanksWithNodesThenTheRestAsRanges) {
  proto::barrier_info b = barrier("e", 0, 100);
  b.missing = "0-3,7,9-99+";
  EXPECT_EQ(watch::missing_ranks(b), "0-3,7,9-99+");  // no node known: as the host sent it
  b.missing_nodes = {{0, "a"}, {1, "a"}, {2, ""}};
  EXPECT_EQ(watch::missing_ranks(b), "0@a 1@a 2 3,7,9-99+");
  b.missing_nodes.push_back({3, "b"});
  b.missing_nodes.push_back({7, "c"});
  b.missing_nodes.push_back({9, "c"});
  EXPECT_EQ(watch::missing_ranks(b), "0@a 1@a 2 3@b 7@c 9@c 10-99+");
}

TEST(WatchView, ColourOnlyWhenAskedAndTheTextIsTheSame) {
  auto st = watched();
  watch::screen_state s{"title", &st, {"lost the host at 127.0.0.1:1; reconnecting...", "  why"}};
  for (bool utf8 : {false, true})
    for (std::size_t w : {20, 41, 100}) {
      auto mono = watch::render(s, w, 0, utf8, false);
      auto colour = watch::render(s, w, 0, utf8, true);
      ASSERT_EQ(mono.size(), colour.size());
      for (std::size_t i = 0; i < mono.size(); ++i) {
        EXPECT_EQ(mono[i].find('\033'), std::string::npos) << mono[i];
        EXPECT_EQ(plain(colour[i]), mono[i]);
        EXPECT_LE(columns(mono[i]), w);
      }
      EXPECT_EQ(colour[1].rfind("\033[1;97;41m", 0), 0u) << colour[1];  // the banner: white on red
    }
  auto colour = watch::render(s, 100, 0, false, true);
  EXPECT_NE(colour[3].find("\033[33mopen\033[0m"), std::string::npos) << colour[3];
  EXPECT_NE(colour[5].find("\033[32mcontinue\033[0m"), std::string::npos) << colour[5];
}

TEST(WatchView, TheBannerComesFirstAndTheLastViewStaysUnderIt) {
  auto st = watched();
  auto lines = watch::render(watch::screen_state{"t", &st, {"lost the host at h:1; reconnecting...", "  x"}}, 80, 0,
                             false, false);
  EXPECT_EQ(lines[1], "lost the host at h:1; reconnecting...");
  EXPECT_EQ(lines[2], "  x");
  EXPECT_EQ(lines[3].rfind("epoch3 r3 ", 0), 0u);
  // Before the first reply: the title and the banner alone.
  EXPECT_EQ(watch::render(watch::screen_state{"t", nullptr, {"b"}}, 80, 0, false, false).size(), 2u);
}

TEST(WatchView, WhatDoesNotFitTheHeightIsCounted) {
  proto::status_reply st;
  for (int i = 0; i < 10; ++i) {
    auto b = barrier("b" + std::to_string(i), 1, 3);
    b.missing = "1-2";
    st.barriers.push_back(b);
  }
  for (std::size_t h : {4, 7, 8, 21, 22}) {
    auto lines = watch::render(watch::screen_state{"t", &st, {}}, 80, h, false, false);
    EXPECT_LE(lines.size(), h);
    if (h < 21) {
      EXPECT_EQ(lines.back(), fmt::format("... and {} more barriers (use --name)", 10 - (h - 2) / 2)) << h;
    }
  }
  EXPECT_EQ(watch::render(watch::screen_state{"t", &st, {}}, 80, 21, false, false).size(), 21u);  // all fit
}

TEST(WatchView, ColourFollowsNoColorAndTheTerminal) {
  EXPECT_TRUE(watch::use_colour(true, "xterm-256color", nullptr));
  EXPECT_TRUE(watch::use_colour(true, "xterm", ""));  // empty: unset (no-color.org)
  EXPECT_FALSE(watch::use_colour(true, "xterm", "1"));
  EXPECT_FALSE(watch::use_colour(false, "xterm", nullptr));
  EXPECT_FALSE(watch::use_colour(true, "dumb", nullptr));
  EXPECT_FALSE(watch::use_colour(true, nullptr, nullptr));
}
