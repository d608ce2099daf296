#include "decide_cmd.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "text.h"

namespace tfb::decide_cmd {

std::optional<child> spawn(const std::string& cmd, std::string& error) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    error = fmt::format("cannot make a pipe: {}", ::strerror(errno));
    return std::nullopt;
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    error = fmt::format("cannot fork: {}", ::strerror(errno));
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    // This process killed (SIGKILL, the OOM killer): the command goes too, not on alone.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fds[1], 1);  // dup2 clears close-on-exec on 1
    ::syscall(SYS_close_range, 3U, ~0U, 0U);  // the host's connection above all
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: whichever runs first, the group exists before a kill
  ::close(fds[1]);
  return child{pid, fds[0]};
}

void kill_group(const child& c) {
  if (c.pid > 0) ::kill(-c.pid, SIGKILL);
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
    int sig = WTERMSIG(wait_status);
    const char* name = ::sigabbrev_np(sig);
    why = name ? fmt::format("was killed by signal {} (SIG{})", sig, name) : fmt::format("was killed by signal {}", sig);
    return std::nullopt;
  }
  why = fmt::format("ended with wait status {}", wait_status);
  return std::nullopt;
}

}  // namespace tfb::decide_cmd
