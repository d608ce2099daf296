#pragma once
// A few libc calls, made without importing a new symbol from libc.
//
// tfbarrier is linked with BIND_NOW (full RELRO): at every start the dynamic
// loader looks up each symbol the binary imports, whichever command runs. A
// new import costs every `tfbarrier wait` about a thousand instructions,
// although only `serve` or `status --watch` call it (bench/startup-cost.sh,
// docs/performance.md). These do the same through syscall(2), ioctl(2),
// open(2), read(2) and readlink(2), which tfbarrier imports already, as the
// decide command does (decide_cmd.cpp).
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

namespace tfb::no_import {

// sigset_t as the kernel reads it (glibc's layout): signal s is bit s-1.
constexpr std::size_t word_bits = 8 * sizeof(unsigned long);
inline void sig_empty(sigset_t& set) { std::memset(&set, 0, sizeof set); }
inline void sig_add(sigset_t& set, int s) {
  set.__val[static_cast<unsigned>(s - 1) / word_bits] |= 1UL << (static_cast<unsigned>(s - 1) % word_bits);
}
inline bool sig_has(const sigset_t& set, int s) {
  return (set.__val[static_cast<unsigned>(s - 1) / word_bits] >> (static_cast<unsigned>(s - 1) % word_bits)) & 1UL;
}
/// sigpending(2)
inline void sig_pending(sigset_t& set) {
  sig_empty(set);
  ::syscall(SYS_rt_sigpending, &set, _NSIG / 8);
}
/// sigwait(3) for signals that are pending: takes one of set.
inline void sig_take(const sigset_t& set) { ::syscall(SYS_rt_sigtimedwait, &set, nullptr, nullptr, _NSIG / 8); }

/// tcgetattr(3) and tcsetattr(fd, TCSANOW, t): the ioctls glibc makes (the
/// kernel's termios is a prefix of glibc's; the speeds are not used here).
inline bool term_get(int fd, termios& t) {
  std::memset(&t, 0, sizeof t);
  return ::ioctl(fd, TCGETS, &t) == 0;
}
inline bool term_set(int fd, const termios& t) { return ::ioctl(fd, TCSETS, &t) == 0; }

/// ttyname(3) of a descriptor, from /proc; nullopt if it has none.
inline std::optional<std::string> tty_path(int fd) {
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 0) return std::nullopt;
  return std::string(path, static_cast<std::size_t>(n));
}

/// Entries of a directory other than . and .. (getdents64(2)); nullopt if it cannot be read.
inline std::optional<std::uint64_t> count_entries(const char* dir) {
  int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::uint64_t n = 0;
  alignas(8) char buf[8192];
  for (;;) {
    long got = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (got <= 0) break;
    for (long at = 0; at < got;) {
      // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name
      unsigned short reclen;
      std::memcpy(&reclen, buf + at + 16, sizeof reclen);
      const char* name = buf + at + 19;
      if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)))) ++n;
      at += reclen;
    }
  }
  ::close(fd);
  return n;
}

/// sysconf(_SC_CLK_TCK) and sysconf(_SC_PAGESIZE): the kernel's auxiliary
/// vector as /proc/self/auxv holds it (AT_CLKTCK, AT_PAGESZ).
struct aux {
  long clock_ticks = 0, page_size = 0;
};
inline aux read_aux() {
  aux out;
  int fd = ::open("/proc/self/auxv", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  unsigned long pair[2];
  while (::read(fd, pair, sizeof pair) == static_cast<ssize_t>(sizeof pair) && pair[0] != 0) {
    if (pair[0] == 17) out.clock_ticks = static_cast<long>(pair[1]);  // AT_CLKTCK
    if (pair[0] == 6) out.page_size = static_cast<long>(pair[1]);     // AT_PAGESZ
  }
  ::close(fd);
  return out;
}

}  // namespace tfb::no_import
