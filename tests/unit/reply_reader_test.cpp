// What a client reads of one multi-line reply is bounded (proto::reply_reader,
// max_reply_bytes): a host that streams a STATUS or HISTORY reply without its
// end is refused before the client grows far; and what a real host sends
// for 100,000 participants fits the bound with room to spare.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "barrier.h"
#include "protocol.h"

using namespace tfb;

namespace {

/// Feeds every line of text (newline-separated); the replies that came out.
std::vector<proto::reply> feed_all(proto::reply_reader& r, const std::string& text, std::string& error) {
  std::vector<proto::reply> out;
  std::size_t pos = 0;
  while (pos < text.size() && error.empty()) {
    std::size_t nl = text.find('\n', pos);
    if (auto rep = r.feed(std::string_view(text).substr(pos, nl - pos), error)) out.push_back(std::move(*rep));
    pos = nl + 1;
  }
  return out;
}

}  // namespace

TEST(ReplyReader, AStatusThatDoesNotEndIsRefusedAtTheBound) {
  proto::reply_reader r(1000);
  std::string error;
  ASSERT_FALSE(r.feed("BARRIER scope=s name=a gen=1 state=open arrived=1 chief=0 verdict=none age_ms=1", error));
  EXPECT_EQ(r.partial(), "status");
  std::size_t fed = 0, lines = 0;
  const std::string member = "MEMBER rank=1 host=node pid=7 chief=0 age_ms=5";
  while (error.empty() && lines < 100) {
    EXPECT_FALSE(r.feed(member, error));
    fed += proto::reply_reader::cost(member);
    ++lines;
  }
  EXPECT_TRUE(r.too_long());
  EXPECT_LT(lines, 100u);
  EXPECT_LE(fed, 1000u);
  EXPECT_EQ(error, "sent a status reply over 1000 bytes without its end");
  // Nothing more is read from a stream that went that way, not even a good reply.
  error.clear();
  EXPECT_FALSE(r.feed("END", error));
  EXPECT_FALSE(error.empty());
}

TEST(ReplyReader, AHistoryPageThatDoesNotEndIsRefusedToo) {
  proto::reply_reader r(1 << 20);
  std::string error;
  ASSERT_FALSE(r.feed("ROUND seq=12 scope=S name=epoch3 gen=1 n=4 end=release verdict=continue at=1 ms=4 withdrawn=0 timeouts=0 count=4", error));
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(r.partial(), "history");
  std::string arr = "ARR a=0@node1+0,1@node1+3";
  while (error.empty() && !r.too_long()) r.feed(arr, error);
  EXPECT_EQ(error, "sent a history reply over 1 MiB without its end");
}

TEST(ReplyReader, TheBoundIsPerReply) {
  // status --watch reads one STATUS after another on one connection.
  std::string barrier = "BARRIER scope=s name=a gen=1 state=open arrived=1 chief=0 verdict=none age_ms=1";
  std::string member = "MEMBER rank=1 host=node pid=7 chief=0 age_ms=5";
  std::string one = barrier + "\n" + member + "\nEND\n";
  std::size_t cost = proto::reply_reader::cost(barrier) + proto::reply_reader::cost(member) +
                     proto::reply_reader::cost("END");
  proto::reply_reader r(cost + 10);
  std::string error;
  for (int i = 0; i < 50; ++i) {
    auto got = feed_all(r, one, error);
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(std::holds_alternative<proto::status_reply>(got[0]));
    EXPECT_EQ(r.partial(), "");
  }
}

// The measure behind max_reply_bytes: a real host's STATUS (with members, as
// `status` asks) of 100,000 participants, laid out the two ways that make it
// largest: all in one barrier, and spread over 65,536 barriers (the default
// --max-barriers) whose scopes and names are 128 bytes (the most the protocol
// takes), from nodes whose names are 64 bytes (HOST_NAME_MAX on Linux).
TEST(ReplyReader, AStatusOf100000ParticipantsFitsWithRoomToSpare) {
  const std::string node(64, 'n');
  auto measure = [&](std::size_t barriers, std::size_t participants) {
    barrier_set set;
    output out;
    conn_id c = 1;
    for (std::size_t i = 0; i < participants; ++i) {
      std::size_t b = i % barriers;
      std::string tag = std::to_string(b);
      proto::arrive a;
      a.scope = std::string(128 - 1, 's') + tag.substr(tag.size() - 1);
      a.name = std::string(128 - tag.size(), 'b') + tag;
      a.id = "p" + std::to_string(i);
      a.n = static_cast<std::uint32_t>(participants / barriers + 2);  // nobody releases
      a.rank = static_cast<std::uint32_t>(i / barriers);
      set.arrive(c++, a, peer_info{node, static_cast<std::uint32_t>(4000000 + i)}, 1000, out);
      out = output{};
    }
    proto::status_req q{"*", "", true};
    std::string wire = proto::format_reply(set.status(q, 999'999'999));
    proto::reply_reader r;
    std::string error;
    auto got = feed_all(r, wire, error);
    EXPECT_TRUE(error.empty()) << error;
    EXPECT_EQ(got.size(), 1u);
    std::size_t cost = 0, pos = 0;
    while (pos < wire.size()) {
      std::size_t nl = wire.find('\n', pos);
      cost += proto::reply_reader::cost(std::string_view(wire).substr(pos, nl - pos));
      pos = nl + 1;
    }
    std::printf("STATUS of %zu participants in %zu barriers: %zu bytes, costs %zu\n", participants, barriers,
                wire.size(), cost);
    return cost;
  };
  std::size_t one = measure(1, 100'000);
  std::size_t spread = measure(65'536, 100'000);
  EXPECT_LT(one * 100, proto::max_reply_bytes);
  EXPECT_LT(spread * 4, proto::max_reply_bytes);  // 36 MB on the wire, costs 62 MiB (measured: 64,084,868)
}
