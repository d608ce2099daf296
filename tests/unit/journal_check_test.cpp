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

// The journal file in its state directory (#19 items 3 and 10).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace tfb {
namespace {

class JournalFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tfb-journal-check.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/state";
  }
  void TearDown() override { std::system(("rm -rf '" + root_ + "'").c_str()); }
  void write(const std::string& text) {
    ::mkdir(dir_.c_str(), 0700);
    std::ofstream(dir_ + "/journal") << text;
  }
  bool read(std::string& error, std::size_t* restored = nullptr, std::size_t* skipped = nullptr) {
    j_ = std::make_unique<journal>(dir_);
    std::size_t r = 0, k = 0;
    bool ok = j_->read([&](const journal_entry&) { ++r; }, [&](std::size_t, const std::string&) { ++k; }, error);
    if (restored) *restored = r;
    if (skipped) *skipped = k;
    return ok;
  }
  std::string header() const { return journal_header(); }
  std::string root_, dir_;
  std::unique_ptr<journal> j_;
};

const char* good = R"({"t":"abort","scope":"s","name":"a","gen":1,"message":"r"})";

}  // namespace

TEST_F(JournalFile, OnlyATornLastLineIsSkipped) {
  write(header() + good + "\n" + R"({"t":"abort","scope":"s","na)");
  std::string error;
  std::size_t restored = 0, skipped = 0;
  ASSERT_TRUE(read(error, &restored, &skipped)) << error;
  EXPECT_EQ(restored, 1u);
  EXPECT_EQ(skipped, 1u);
}

TEST_F(JournalFile, ABadWholeLineRefusesTheStartNamingFileAndLine) {
  write(header() + "{\"t\":\"abort\",\"scope\":\"s\",\"name\":\"a\",\"gen\":1,\"message\":\"a\\u0007\"}\n" + good + "\n");
  std::string error;
  EXPECT_FALSE(read(error));
  EXPECT_NE(error.find(dir_ + "/journal:2: "), std::string::npos) << error;
}

TEST_F(JournalFile, ADirectoryOthersCanWriteIsRefused) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  std::string error;
  EXPECT_FALSE(read(error));
  EXPECT_NE(error.find("can be changed by others"), std::string::npos) << error;
}

TEST_F(JournalFile, ASymlinkedJournalIsRefusedAndItsTargetLeftAlone) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  std::ofstream(root_ + "/victim") << "precious\n";
  ASSERT_EQ(::symlink((root_ + "/victim").c_str(), (dir_ + "/journal").c_str()), 0);
  std::string error;
  EXPECT_FALSE(read(error));
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
  std::ifstream in(root_ + "/victim");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "precious");
}

TEST_F(JournalFile, ALeftOverTemporaryFileOrSymlinkDoesNotBlockCompaction) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  std::ofstream(root_ + "/victim") << "precious\n";
  ASSERT_EQ(::symlink((root_ + "/victim").c_str(), (dir_ + "/journal.tmp").c_str()), 0);
  std::string error;
  ASSERT_TRUE(read(error)) << error;
  ASSERT_TRUE(j_->compact({}, error)) << error;
  std::ifstream in(root_ + "/victim");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "precious");
}

TEST_F(JournalFile, ItAsksForCompactionOnceOver1MiBAndTwiceItsLiveSize) {
  std::string error;
  ASSERT_TRUE(read(error)) << error;
  ASSERT_TRUE(j_->compact({}, error)) << error;
  journal_entry e;
  e.what = journal_entry::kind::abort;
  e.scope = "s";
  e.name = "a";
  e.gen = 1;
  e.message = std::string(1000, 'x');
  std::size_t appended = 0;
  while (!j_->wants_compaction() && appended < 5000) {
    ASSERT_TRUE(j_->append({e}, error)) << error;
    ++appended;
  }
  EXPECT_TRUE(j_->wants_compaction());
  EXPECT_GT(appended, 900u);  // past 1 MiB of lines of about 1 kB
  ASSERT_TRUE(j_->compact({e}, error)) << error;
  EXPECT_FALSE(j_->wants_compaction());
}

}  // namespace tfb
