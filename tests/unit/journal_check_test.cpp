// A journal record is restored only if it passes the wire's checks (issue
// #19 item 10): each of these was once restored and did harm.
#include <gtest/gtest.h>

#include <string>

#include "journal.h"

namespace tfb {
namespace {

std::string refused(const std::string& line) {
  std::string error;
  auto e = from_journal_line(line, error);
  EXPECT_FALSE(e) << line;
  return error;
}

}  // namespace

TEST(JournalCheck, AGoodRecordIsRestored) {
  std::string error;
  auto e = from_journal_line(
      R"({"t":"verdict","scope":"s","name":"a","gen":1,"verdict":"stop","message":"loss diverged"})", error);
  ASSERT_TRUE(e) << error;
  EXPECT_EQ(e->message, "loss diverged");
}

TEST(JournalCheck, AnOversizeMessageIsRefused) {
  std::string big(200000, 'x');
  auto why = refused(R"({"t":"abort","scope":"s","name":"a","gen":1,"message":")" + big + "\"}");
  EXPECT_NE(why.find("message or reason"), std::string::npos) << why;
}

TEST(JournalCheck, AControlCharacterInAReasonIsRefused) {
  auto why = refused(R"({"t":"abort","scope":"s","name":"a","gen":1,"message":"a\u0007b"})");
  EXPECT_NE(why.find("control"), std::string::npos) << why;
}

TEST(JournalCheck, NZeroIsRefused) {
  auto why = refused(
      R"({"t":"verdict","scope":"s","name":"a","gen":1,"verdict":"stop","chief_arrival":true,"id":"c1","host":"h","pid":1,"n":0,"rank":0})");
  EXPECT_NE(why.find("n=0 is out of range"), std::string::npos) << why;
}

TEST(JournalCheck, ARankPastNIsRefused) {
  auto why = refused(
      R"({"t":"verdict","scope":"s","name":"a","gen":1,"verdict":"stop","chief_arrival":true,"id":"c1","host":"h","pid":1,"n":2,"rank":2})");
  EXPECT_NE(why.find("rank 2 is out of range"), std::string::npos) << why;
}

TEST(JournalCheck, ARoundThatWouldWrapIsRefused) {
  auto why = refused(R"({"t":"release","scope":"s","name":"a","gen":18446744073709551615,"verdict":"continue","ids":["a1"]})");
  EXPECT_NE(why.find("past the largest"), std::string::npos) << why;
}

TEST(JournalCheck, BadIdsAreRefused) {
  refused(R"({"t":"release","scope":"s","name":"a","gen":1,"verdict":"continue","ids":["not valid"]})");
  refused(R"({"t":"verdict","scope":"s","name":"a","gen":1,"verdict":"stop","chief_arrival":true,"id":"x y","n":2})");
}

}  // namespace tfb
