// The private-file rules of src/private_files.cpp, on a real file system: what
// another local user could plant (a symlink, a directory of theirs, a world-
// writable directory, a left-over temporary file) is refused or ignored.
#include "private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>

using namespace tfb::files;

namespace {

class PrivateFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tfb-private-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + root_ + "'").c_str()); }
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }
  static std::string read(const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static mode_t mode_of(const std::string& p) {
    struct stat st{};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode;
  }
  std::string root_;
};

class Env {  // sets or unsets one variable for the scope
 public:
  Env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~Env() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST_F(PrivateFiles, MakesMissingDirectoriesMode0700EvenUnderAWideUmask) {
  mode_t old = ::umask(0);
  std::string e;
  auto d = open_dir(path("a/b/c"), true, true, e);
  ::umask(old);
  ASSERT_TRUE(d) << e;
  EXPECT_EQ(mode_of(path("a/b/c")) & 07777, 0700u);
  EXPECT_EQ(mode_of(path("a")) & 07777, 0700u);
}

TEST_F(PrivateFiles, RefusesADirectoryOthersCanWrite) {
  ASSERT_EQ(::mkdir(path("shared").c_str(), 0700), 0);
  ASSERT_EQ(::chmod(path("shared").c_str(), 0777), 0);
  std::string e;
  EXPECT_FALSE(open_dir(path("shared"), true, false, e));
  EXPECT_NE(e.find("can be changed by others (mode 0777)"), std::string::npos) << e;
}

TEST_F(PrivateFiles, PrivateOnlyRefusesADirectoryOthersCanEnter) {
  ASSERT_EQ(::mkdir(path("open").c_str(), 0755), 0);
  std::string e;
  EXPECT_TRUE(open_dir(path("open"), false, false, e)) << e;
  EXPECT_FALSE(open_dir(path("open"), false, true, e));
  EXPECT_NE(e.find("chmod 700"), std::string::npos) << e;
}

TEST_F(PrivateFiles, RefusesADirectoryThatIsASymlink) {
  ASSERT_EQ(::mkdir(path("real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(path("real").c_str(), path("link").c_str()), 0);
  std::string e;
  EXPECT_FALSE(open_dir(path("link"), true, false, e));
  EXPECT_NE(e.find("symbolic link"), std::string::npos) << e;
}

TEST_F(PrivateFiles, RefusesADirectoryOfAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  ASSERT_EQ(::mkdir(path("theirs").c_str(), 0700), 0);
  ASSERT_EQ(::chown(path("theirs").c_str(), 65534, 65534), 0);
  std::string e;
  EXPECT_FALSE(open_dir(path("theirs"), true, false, e));
  EXPECT_NE(e.find("belongs to uid 65534"), std::string::npos) << e;
}

TEST_F(PrivateFiles, OpenInRefusesASymlinkAndLeavesItsTargetAlone) {
  std::string e;
  auto d = open_dir(path("d"), true, true, e);
  ASSERT_TRUE(d) << e;
  { std::ofstream(path("victim")) << "precious\n"; }
  ASSERT_EQ(::symlink(path("victim").c_str(), path("d/log").c_str()), 0);
  EXPECT_FALSE(open_in(d->get(), "log", O_WRONLY | O_CREAT | O_APPEND, 0600, path("d"), e));
  EXPECT_NE(e.find("symbolic link"), std::string::npos) << e;
  EXPECT_EQ(read(path("victim")), "precious\n");
}

TEST_F(PrivateFiles, OpenInNarrowsAPlantedWideFileOfOurs) {
  std::string e;
  auto d = open_dir(path("d"), true, true, e);
  ASSERT_TRUE(d) << e;
  int f = ::open(path("d/log").c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(f, 0);
  ::fchmod(f, 0666);
  ::close(f);
  auto g = open_in(d->get(), "log", O_WRONLY | O_CREAT | O_APPEND, 0600, path("d"), e);
  ASSERT_TRUE(g) << e;
  EXPECT_EQ(mode_of(path("d/log")) & 07777, 0600u);
}

TEST_F(PrivateFiles, OpenInRefusesAFileOfAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another uid";
  std::string e;
  auto d = open_dir(path("d"), true, true, e);
  ASSERT_TRUE(d) << e;
  { std::ofstream(path("d/journal")) << "x\n"; }
  ASSERT_EQ(::chown(path("d/journal").c_str(), 65534, 65534), 0);
  EXPECT_FALSE(open_in(d->get(), "journal", O_RDONLY, 0600, path("d"), e));
  EXPECT_NE(e.find("belongs to uid 65534"), std::string::npos) << e;
}

TEST_F(PrivateFiles, ReplaceInIgnoresLeftoversAndReplacesASymlinkWithoutFollowingIt) {
  std::string e;
  auto d = open_dir(path("d"), true, true, e);
  ASSERT_TRUE(d) << e;
  { std::ofstream(path("d/.journal.tmp")) << "left over by a crash\n"; }
  { std::ofstream(path("victim")) << "precious\n"; }
  ASSERT_EQ(::symlink(path("victim").c_str(), path("d/journal").c_str()), 0);
  ASSERT_TRUE(replace_in(d->get(), "journal", "new\n", path("d"), e)) << e;
  EXPECT_EQ(read(path("victim")), "precious\n");
  EXPECT_TRUE(S_ISREG(mode_of(path("d/journal"))));
  EXPECT_EQ(mode_of(path("d/journal")) & 07777, 0600u);
  EXPECT_EQ(read(path("d/journal")), "new\n");
  ASSERT_TRUE(replace_in(d->get(), "journal", "newer\n", path("d"), e)) << e;
  EXPECT_EQ(read(path("d/journal")), "newer\n");
}

TEST_F(PrivateFiles, HomeFallsBackToThePasswordDatabaseNotTmp) {
  Env unset("HOME", nullptr);
  std::string e;
  auto h = home_dir(e);
  ASSERT_TRUE(h) << e;
  EXPECT_NE(*h, "/tmp");
  EXPECT_EQ(h->front(), '/');
}

TEST_F(PrivateFiles, PrivateDirUsesXdgRuntimeDirOnlyWhenItIsOurs0700) {
  Env home("HOME", root_.c_str());
  ASSERT_EQ(::mkdir(path("xdg").c_str(), 0700), 0);
  std::string e;
  {
    Env x("XDG_RUNTIME_DIR", path("xdg").c_str());
    EXPECT_EQ(private_dir_path(e).value_or(""), path("xdg/tfbarrier"));
    ASSERT_EQ(::chmod(path("xdg").c_str(), 0755), 0);
    EXPECT_EQ(private_dir_path(e).value_or(""), path(".tfbarrier"));
  }
  {
    Env x("XDG_RUNTIME_DIR", path("missing").c_str());
    EXPECT_EQ(private_dir_path(e).value_or(""), path(".tfbarrier"));
  }
  {
    Env x("XDG_RUNTIME_DIR", nullptr);
    EXPECT_EQ(private_dir_path(e).value_or(""), path(".tfbarrier"));
  }
}

TEST(LogFileName, NamesNodeAndJobAndKeepsToSafeCharacters) {
  EXPECT_EQ(log_file_name("node07", "4711"), "serve-node07-4711.log");
  EXPECT_EQ(log_file_name("node07", ""), "serve-node07.log");
  EXPECT_EQ(log_file_name("../x", "a/b"), "serve-.._x-a_b.log");
  EXPECT_EQ(log_file_name("", ""), "serve-localhost.log");
}

TEST_F(PrivateFiles, TheHostLogGoesToAPrivateDirectoryAndRefusesAPlantedSymlink) {
  Env home("HOME", root_.c_str());
  Env x("XDG_RUNTIME_DIR", nullptr);
  std::string p, e;
  auto f = open_host_log("node1", "77", p, e);
  ASSERT_TRUE(f) << e;
  EXPECT_EQ(p, path(".tfbarrier/serve-node1-77.log"));
  EXPECT_EQ(mode_of(path(".tfbarrier")) & 07777, 0700u);
  EXPECT_EQ(mode_of(p) & 07777, 0600u);
  ASSERT_EQ(::symlink(path("victim").c_str(), path(".tfbarrier/serve-node2.log").c_str()), 0);
  EXPECT_FALSE(open_host_log("node2", "", p, e));
  EXPECT_NE(e.find("symbolic link"), std::string::npos) << e;
  ASSERT_EQ(::chmod(path(".tfbarrier").c_str(), 0755), 0);
  EXPECT_FALSE(open_host_log("node1", "77", p, e));
  EXPECT_NE(e.find("chmod 700"), std::string::npos) << e;
}
