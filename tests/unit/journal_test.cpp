// The journal file (src/sys/journal.h) and the door that writes it (src/core/door.h):
// read back, compacted, appended to; errors returned, not ended on.
#include "journal.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "door.h"

namespace tfb {
namespace {

namespace fs = std::filesystem;

struct journal_fixture : ::testing::Test {
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tfb_journal_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root = tmpl;
    dir = (fs::path(root) / "state").string();
  }
  void TearDown() override { fs::remove_all(root); }

  std::string file() const {
    std::ifstream in(dir + "/journal");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  /// Reads the journal: the entries restored, and the lines skipped.
  bool read(journal& j, std::vector<journal_entry>& entries, std::vector<std::size_t>& skipped, std::string& error) {
    return j.read([&](const journal_entry& e) { entries.push_back(e); },
                  [&](std::size_t line, const std::string&) { skipped.push_back(line); }, error);
  }

  static journal_entry release(std::string name, std::uint64_t gen) {
    journal_entry e;
    e.what = journal_entry::kind::release;
    e.scope = "job";
    e.name = std::move(name);
    e.gen = gen;
    e.ids = {"a", "b"};
    return e;
  }

  std::string root, dir;
};

TEST_F(journal_fixture, ANewJournalIsADirectory0700AndAHeader) {
  journal j(dir);
  std::vector<journal_entry> entries;
  std::vector<std::size_t> skipped;
  std::string error;
  ASSERT_TRUE(read(j, entries, skipped, error)) << error;
  EXPECT_TRUE(entries.empty());
  struct stat st{};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_FALSE(j.is_open());
  ASSERT_TRUE(j.compact({}, error)) << error;
  EXPECT_TRUE(j.is_open());
  EXPECT_EQ(file(), journal_header());
  EXPECT_EQ(j.path(), dir + "/journal");
  EXPECT_FALSE(fs::exists(dir + "/journal.tmp"));
}

TEST_F(journal_fixture, AppendedEntriesAreReadBackAndCompacted) {
  std::string error;
  {
    journal j(dir);
    std::vector<journal_entry> entries;
    std::vector<std::size_t> skipped;
    ASSERT_TRUE(read(j, entries, skipped, error));
    ASSERT_TRUE(j.compact({release("a", 1)}, error)) << error;
    ASSERT_TRUE(j.append({release("b", 1), release("b", 2)}, error)) << error;
  }
  EXPECT_EQ(file(), journal_header() + to_journal_line(release("a", 1)) + to_journal_line(release("b", 1)) +
                        to_journal_line(release("b", 2)));
  {
    std::ofstream(dir + "/journal", std::ios::app) << "{\"t\":\"rel";  // torn by a crash
  }
  journal j(dir);
  std::vector<journal_entry> entries;
  std::vector<std::size_t> skipped;
  ASSERT_TRUE(read(j, entries, skipped, error)) << error;
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[2].name, "b");
  EXPECT_EQ(entries[2].gen, 2u);
  EXPECT_EQ(skipped, std::vector<std::size_t>{5});
  ASSERT_TRUE(j.compact({release("b", 2)}, error));
  EXPECT_EQ(file(), journal_header() + to_journal_line(release("b", 2)));
}

TEST_F(journal_fixture, AFileThatIsNotAJournalIsRefused) {
  fs::create_directories(dir);
  std::ofstream(dir + "/journal") << "{\"tfbarrier_journal\":99}\n";
  journal j(dir);
  std::vector<journal_entry> entries;
  std::vector<std::size_t> skipped;
  std::string error;
  EXPECT_FALSE(read(j, entries, skipped, error));
  EXPECT_NE(error.find("cannot use the journal " + dir + "/journal: it has journal format 99"), std::string::npos)
      << error;
  EXPECT_NE(error.find("move it away to start afresh"), std::string::npos) << error;
}

TEST_F(journal_fixture, ADirectoryThatCannotBeMadeIsAnError) {
  std::ofstream(root + "/file") << "x";
  journal j(root + "/file/state");
  std::vector<journal_entry> entries;
  std::vector<std::size_t> skipped;
  std::string error;
  EXPECT_FALSE(read(j, entries, skipped, error));
  EXPECT_EQ(error.rfind("cannot use the state directory: cannot create the directory " + root + "/file", 0), 0u) << error;
}

TEST_F(journal_fixture, AppendingToAJournalNotOpenIsAnError) {
  journal j(dir);
  std::string error;
  EXPECT_FALSE(j.append({release("a", 1)}, error));
  EXPECT_FALSE(error.empty());
}

// A failed write comes back as an error (here: past the file size limit);
// the host decides to stop.
TEST_F(journal_fixture, AFailedWriteIsReturnedThroughTheDoor) {
  journal j(dir);
  std::vector<journal_entry> entries;
  std::vector<std::size_t> skipped;
  std::string error;
  ASSERT_TRUE(read(j, entries, skipped, error));
  ASSERT_TRUE(j.compact({}, error));

  barrier_set state;
  local_door door(state, &j);
  output out;
  proto::arrive a;
  a.name = "b";
  a.scope = "job";
  a.id = "x";
  a.n = 1;
  ASSERT_TRUE(door.submit(input::arrive{1, a, peer_info{"node", 1}, 0}, out, error)) << error;
  EXPECT_FALSE(out.sends.empty());
  EXPECT_FALSE(out.journal.empty());
  auto size = fs::file_size(dir + "/journal");
  EXPECT_GT(size, journal_header().size());

  std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit old{}, small{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  small = old;
  small.rlim_cur = static_cast<rlim_t>(size);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  output out2;
  a.name = "c";
  bool ok = door.submit(input::arrive{2, a, peer_info{"node", 1}, 0}, out2, error);
  ::setrlimit(RLIMIT_FSIZE, &old);
  EXPECT_FALSE(ok);
  EXPECT_EQ(error, std::strerror(EFBIG));
  EXPECT_FALSE(out2.journal.empty());  // what it could not record; the host sends none of out2
}

TEST(local_door, AppliesEveryInputToTheBarriers) {
  barrier_set state;
  local_door door(state);
  std::string error;
  proto::arrive a;
  a.name = "b";
  a.scope = "job";
  a.id = "x";
  a.n = 2;
  output out;
  ASSERT_TRUE(door.submit(input::arrive{1, a, peer_info{"node", 1}, 0}, out, error));
  EXPECT_TRUE(state.active());
  ASSERT_TRUE(door.submit(input::leave{1, departure::left, 1}, out, error));
  EXPECT_FALSE(state.active());
  EXPECT_EQ(state.barrier_count(), 1u);
  ASSERT_TRUE(door.submit(input::prune{100000, 10}, out, error));
  EXPECT_EQ(state.barrier_count(), 0u);

  output out2;
  ASSERT_TRUE(door.submit(input::arrive{2, a, peer_info{"node", 1}, 0}, out2, error));
  ASSERT_TRUE(door.submit(input::abort{3, proto::abort_req{"job", "b", "no"}, 1}, out2, error));
  output out3;
  a.id = "y";
  ASSERT_TRUE(door.submit(input::arrive{4, a, peer_info{"node", 1}, 2}, out3, error));
  ASSERT_TRUE(door.submit(input::shutdown{"bye"}, out3, error));
  EXPECT_FALSE(state.active());
  proto::decide d;
  d.scope = "job";
  d.name = "d";
  d.id = "z";
  d.v = proto::verdict::stop;
  d.wait = false;
  output out4;
  ASSERT_TRUE(door.submit(input::decide{5, d, peer_info{"node", 1}, 3}, out4, error));
  EXPECT_FALSE(out4.sends.empty());
}

}  // namespace
}  // namespace tfb
