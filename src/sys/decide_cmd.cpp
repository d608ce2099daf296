#include "decide_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "text.h"

// The system calls go through syscall(2), not their libc wrappers: the
// binary is linked with BIND_NOW, and each libc function it imports is
// looked up at every start of every command (some 400 instructions each),
// while only the chief of --decide-by ever calls these. `wait`'s start-up
// must not grow (bench/startup-cost.sh). The child does nothing between its
// raw fork and execve but raw system calls.

extern char** environ;

namespace tfb::decide_cmd {
namespace {
long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0) { return ::syscall(n, a, b, c, d); }
}  // namespace

std::optional<child> spawn(const std::string& cmd, std::string& error) {
  int fds[2];
  if (sys(SYS_pipe2, reinterpret_cast<long>(fds), O_CLOEXEC) != 0) {
    error = fmt::format("cannot make a pipe: {}", ::strerror(errno));
    return std::nullopt;
  }
  long parent = sys(SYS_getpid);
  const char* argv[] = {"sh", "-c", cmd.c_str(), nullptr};
  long pid = sys(SYS_fork);
  if (pid < 0) {
    error = fmt::format("cannot fork: {}", ::strerror(errno));
    sys(SYS_close, fds[0]);
    sys(SYS_close, fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    sys(SYS_setpgid, 0, 0);
    // This process killed (SIGKILL, the OOM killer): the command goes too, not on alone.
    sys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
    if (sys(SYS_getppid) != parent) sys(SYS_exit_group, 127);
    sys(SYS_dup2, fds[1], 1);                   // dup2 clears close-on-exec on 1
    sys(SYS_close_range, 3, ~0U, 0);            // the host's connection above all
    std::uint64_t none = 0;
    sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&none), 0, sizeof none);
    // tfbarrier ignores SIGPIPE (main.cpp), and an ignored signal stays ignored
    // across execve: the command gets the default back (the kernel's struct
    // sigaction, all zero: SIG_DFL, no flags, an empty mask).
    struct {
      long handler, flags, restorer;
      std::uint64_t mask;
    } dfl{};
    sys(SYS_rt_sigaction, SIGPIPE, reinterpret_cast<long>(&dfl), 0, sizeof dfl.mask);
    sys(SYS_execve, reinterpret_cast<long>("/bin/sh"), reinterpret_cast<long>(argv), reinterpret_cast<long>(environ));
    sys(SYS_exit_group, 127);
  }
  sys(SYS_setpgid, pid, pid);  // also here: whichever runs first, the group exists before a kill
  sys(SYS_close, fds[1]);
  return child{static_cast<pid_t>(pid), fds[0]};
}

void kill_group(const child& c) {
  if (c.pid > 0) sys(SYS_kill, -c.pid, SIGKILL);
}

pid_t reap(pid_t pid, int& status, bool block) {
  for (;;) {
    long r = sys(SYS_wait4, pid, reinterpret_cast<long>(&status), block ? 0 : WNOHANG, 0);
    if (r >= 0 || errno != EINTR) return static_cast<pid_t>(r);
  }
}

void last_line::feed(std::string_view bytes) {
  for (char ch : bytes) {
    if (ch == '\n') {
      if (!current_.empty()) last_ = std::move(current_);
      current_.clear();
    } else if (current_.size() < max_line_kept) {
      current_ += ch;
    }
  }
}

std::string last_line::message() const {
  std::string line = current_.empty() ? last_ : current_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  // Escaped, and cut with room for the last escape (at most 10 bytes) and "...".
  return printable(line, false, proto::max_text - 16);
}

std::optional<proto::verdict> verdict_of(int wait_status, std::string& why) {
  if (WIFEXITED(wait_status)) {
    int code = WEXITSTATUS(wait_status);
    if (code == 0) return proto::verdict::continue_;
    if (code == 1) return proto::verdict::stop;
    why = fmt::format("exited with status {} (0 is continue, 1 stop)", code);
    return std::nullopt;
  }
  if (WIFSIGNALED(wait_status)) {
    // Linux's numbers of the common signals, one word each (no table of pointers to relocate).
    constexpr std::string_view names = "HUP INT QUIT ILL TRAP ABRT BUS FPE KILL USR1 SEGV USR2 PIPE ALRM TERM";
    int sig = WTERMSIG(wait_status);
    std::string_view name;
    std::size_t at = 0;
    for (int i = 1; i <= sig && at != std::string_view::npos; ++i) {
      std::size_t end = names.find(' ', at);
      if (i == sig) name = names.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
      at = end == std::string_view::npos ? end : end + 1;
    }
    why = name.empty() ? fmt::format("was killed by signal {}", sig)
                       : fmt::format("was killed by signal {} (SIG{})", sig, name);
    return std::nullopt;
  }
  why = fmt::format("ended with wait status {}", wait_status);
  return std::nullopt;
}

}  // namespace tfb::decide_cmd
