// The private-file rules of src/sys/private_files.cpp, on a real file system: what
// another local user could plant (a symlink, a directory of theirs, a world-
// writable directory, a left-over temporary file) is refused or ignored.
#include "private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

TEST_F(PrivateFiles, OpenInRefusesAFileOfOursThatOthersCanWriteAndNarrowsOneTheyCanRead) {
  std::string e;
  auto d = open_dir(path("d"), true, true, e);
  ASSERT_TRUE(d) << e;
  int f = ::open(path("d/log").c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(f, 0);
  ::fchmod(f, 0666);
  ::close(f);
  // Another user may hold it open for writing already: refused, not narrowed.
  EXPECT_FALSE(open_in(d->get(), "log", O_WRONLY | O_CREAT | O_APPEND, 0600, path("d"), e));
  EXPECT_NE(e.find("can be changed by others (mode 0666)"), std::string::npos) << e;
  ASSERT_EQ(::chmod(path("d/log").c_str(), 0644), 0);
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

// ---- open_path: the log, report --svg (issue 30 item 2) ----

namespace {
constexpr role log_role{"the log file", "give another --log"};
}

TEST_F(PrivateFiles, OpenPathRefusesASymlinkByNameAndLeavesItsTargetAlone) {
  { std::ofstream(path("victim")) << "precious\n"; }
  ASSERT_EQ(::symlink(path("victim").c_str(), path("log").c_str()), 0);
  std::string e;
  for (int flags : {O_WRONLY | O_CREAT | O_APPEND, O_WRONLY | O_CREAT | O_TRUNC, O_WRONLY | O_APPEND}) {
    EXPECT_FALSE(open_path(path("log"), flags, 0600, e, log_role));
    EXPECT_EQ(e, "the log file " + path("log") +
                     " is a symbolic link: refusing to follow it; remove it, or give another --log");
  }
  // A dangling one too: O_CREAT would otherwise make its target.
  ASSERT_EQ(::symlink(path("made").c_str(), path("dangling").c_str()), 0);
  EXPECT_FALSE(open_path(path("dangling"), O_WRONLY | O_CREAT | O_APPEND, 0600, e, log_role));
  EXPECT_EQ(::access(path("made").c_str(), F_OK), -1);
  EXPECT_EQ(read(path("victim")), "precious\n");
}

TEST_F(PrivateFiles, OpenPathMakesA0600FileUnderAWideUmaskAndShowsThePathAsGiven) {
  mode_t old = ::umask(0);
  std::string e;
  auto f = open_path(path("new.log"), O_WRONLY | O_CREAT | O_APPEND, 0600, e, log_role);
  ::umask(old);
  ASSERT_TRUE(f) << e;
  EXPECT_EQ(mode_of(path("new.log")) & 07777, 0600u);
  EXPECT_EQ(::fcntl(f->get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(f->get(), F_GETFD) & FD_CLOEXEC, 0);
  ASSERT_EQ(::symlink("new.log", path("rel").c_str()), 0);
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(root_.c_str()), 0);
  bool opened = open_path("rel", O_WRONLY | O_APPEND, 0600, e, log_role).has_value();
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_FALSE(opened);
  EXPECT_TRUE(e.starts_with("the log file rel is a symbolic link")) << e;
}

TEST_F(PrivateFiles, OpenPathRefusesAnotherUsersFileOthersCanWriteAndChangesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another uid";
  // Root's host pointed at a file another user made 0666: appending would
  // write root's text (and what clients send) into a file that user owns.
  { std::ofstream(path("theirs.log")) << "theirs\n"; }
  ASSERT_EQ(::chown(path("theirs.log").c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(path("theirs.log").c_str(), 0666), 0);
  std::string e;
  for (int flags : {O_WRONLY | O_CREAT | O_APPEND, O_WRONLY | O_CREAT | O_TRUNC}) {
    EXPECT_FALSE(open_path(path("theirs.log"), flags, 0600, e, log_role));
    EXPECT_NE(e.find("the log file " + path("theirs.log") + " belongs to uid 65534, not to you"), std::string::npos)
        << e;
    EXPECT_NE(e.find("give another --log"), std::string::npos) << e;
  }
  EXPECT_EQ(read(path("theirs.log")), "theirs\n");
  EXPECT_EQ(mode_of(path("theirs.log")) & 07777, 0666u);
}

TEST_F(PrivateFiles, OpenPathRefusesAHardLinkToWriteButReadsIt) {
  { std::ofstream(path("mine")) << "mine\n"; }
  ASSERT_EQ(::chmod(path("mine").c_str(), 0600), 0);
  ASSERT_EQ(::link(path("mine").c_str(), path("alias").c_str()), 0);
  std::string e;
  EXPECT_FALSE(open_path(path("alias"), O_WRONLY | O_APPEND, 0600, e, log_role));
  EXPECT_NE(e.find("has 2 hard links"), std::string::npos) << e;
  EXPECT_TRUE(open_path(path("alias"), O_RDONLY, 0600, e, log_role)) << e;
}

TEST_F(PrivateFiles, OpenPathRefusesAFifoWithoutHanging) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  std::string e;
  EXPECT_FALSE(open_path(path("fifo"), O_WRONLY | O_CREAT | O_APPEND, 0600, e, log_role));
  EXPECT_NE(e.find("is not a regular file"), std::string::npos) << e;
}

TEST_F(PrivateFiles, OpenPathTruncatesAFileOfOursAndNeverWidensIt) {
  { std::ofstream(path("out.svg")) << "old picture\n"; }
  ASSERT_EQ(::chmod(path("out.svg").c_str(), 0600), 0);
  std::string e;
  auto f = open_path(path("out.svg"), O_WRONLY | O_CREAT | O_TRUNC, 0644, e, log_role);
  ASSERT_TRUE(f) << e;
  EXPECT_EQ(read(path("out.svg")), "");
  EXPECT_EQ(mode_of(path("out.svg")) & 07777, 0600u);
}

TEST_F(PrivateFiles, OpenInKeepsEexistForACallerThatMustNotReplace) {
  std::string e;
  auto d = open_dir(path("d"), true, true, e);
  ASSERT_TRUE(d) << e;
  { std::ofstream(path("d/secret")) << "x\n"; }
  EXPECT_FALSE(open_in(d->get(), "secret", O_WRONLY | O_CREAT | O_EXCL, 0600, path("d"), e));
  EXPECT_EQ(errno, EEXIST);
}

TEST_F(PrivateFiles, AnotherUsersDirectoryIsNamedInPlainWords) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  ASSERT_EQ(::mkdir(path("theirs").c_str(), 0700), 0);
  ASSERT_EQ(::chown(path("theirs").c_str(), 65534, 65534), 0);
  std::string e;
  EXPECT_FALSE(open_dir(path("theirs"), true, false, e));
  EXPECT_EQ(e.find("use a the"), std::string::npos) << e;
  EXPECT_NE(e.find("remove it, or use a directory of your own"), std::string::npos) << e;
}

TEST_F(PrivateFiles, AFileToShareTakesTheUmaskAndOthersTakeExactlyTheirMode) {
  std::string e;
  mode_t old = ::umask(077);
  auto a = open_path(path("a.svg"), O_WRONLY | O_CREAT | O_TRUNC, 0644, e, {"the --svg file", "", true});
  auto b = open_path(path("b.prom"), O_WRONLY | O_CREAT | O_TRUNC, 0644, e, log_role);
  ::umask(022);
  auto c = open_path(path("c.svg"), O_WRONLY | O_CREAT | O_TRUNC, 0644, e, {"the --svg file", "", true});
  ::umask(old);
  ASSERT_TRUE(a && b && c) << e;
  EXPECT_EQ(mode_of(path("a.svg")) & 07777, 0600u);
  EXPECT_EQ(mode_of(path("b.prom")) & 07777, 0644u);
  EXPECT_EQ(mode_of(path("c.svg")) & 07777, 0644u);
}
