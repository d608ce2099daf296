#pragma once
// `wait --decide-by CMD`: the chief's command, run through /bin/sh -c once
// all have arrived. Its exit status is the verdict (0 continue, 1 stop), the
// last line of its stdout the verdict's message. The process handling is
// here; client.cpp waits for it on its io_context.
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "protocol.h"

namespace tfb::decide_cmd {

/// A running CMD: its pid (also its process group's) and the read end of its stdout.
struct child {
  pid_t pid = -1;
  int out_fd = -1;
};

/// Starts `/bin/sh -c cmd` in a process group of its own, stdout to a pipe,
/// stdin and stderr ours, and no other descriptor of ours (the host's
/// connection must close when this process dies, whatever CMD does).
/// nullopt with error (the system's words) when it cannot.
std::optional<child> spawn(const std::string& cmd, std::string& error);

/// Kills CMD's process group (SIGKILL): it ran past --decide-timeout, the
/// round ended without it, or this process is ending.
void kill_group(const child& c);

/// waitpid(pid, status, block ? 0 : WNOHANG), on EINTR again: pid when it ended, 0 when not yet, -1 on error.
pid_t reap(pid_t pid, int& status, bool block);

/// Keeps the last non-empty line of a stream, bounded: what a CMD printed last.
class last_line {
 public:
  void feed(std::string_view bytes);
  /// The line, escaped (text.h: printable) and cut to fit a wire message.
  std::string message() const;

 private:
  std::string current_, last_;
};
inline constexpr std::size_t max_line_kept = 4096;  ///< bytes of one line kept before escaping

/// The verdict of CMD's wait status: 0 continue, 1 stop; anything else
/// nullopt, with why naming it ("exited with status 2", "was killed by
/// signal 9 (SIGKILL)").
std::optional<proto::verdict> verdict_of(int wait_status, std::string& why);

}  // namespace tfb::decide_cmd
