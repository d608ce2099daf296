// process_* metrics from /proc/self/stat, /proc/stat and /proc/self/fd, as
// the Prometheus client libraries export them (names, units and meaning:
// https://prometheus.io/docs/instrumenting/writing_clientlibs/#process-metrics).
#include "process_stats.h"

#include "no_new_imports.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace tfb {
namespace {

// The whole of a small /proc file (at most 64 KiB), or empty.
std::string slurp(const char* path) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0 || out.size() > (64u << 10)) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// The seconds since the epoch at which the system booted (/proc/stat btime).
std::optional<double> boot_time() {
  std::string s = slurp("/proc/stat");
  auto at = s.find("\nbtime ");
  if (at == std::string::npos) return std::nullopt;
  return std::strtod(s.c_str() + at + 7, nullptr);
}

}  // namespace

std::optional<metrics::process_stats> read_process_stats() {
  std::string stat = slurp("/proc/self/stat");
  // pid (comm) state ppid ...: the command may hold spaces and parentheses,
  // so the fields are counted from the last ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::string_view rest = std::string_view(stat).substr(close + 1);
  // Fields from 3 (state) on: utime is 14, stime 15, starttime 22, vsize 23, rss 24 (proc(5)).
  std::string_view f[25];
  int i = 3;
  while (!rest.empty() && i < 25) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    auto sp = rest.find(' ');
    f[i++] = rest.substr(0, sp);
    rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp);
  }
  if (i < 25) return std::nullopt;
  auto num = [](std::string_view v) { return std::strtoull(std::string(v).c_str(), nullptr, 10); };
  static const no_import::aux sys = no_import::read_aux();  // sysconf's clock ticks and page size
  double ticks = static_cast<double>(sys.clock_ticks);
  long page = sys.page_size;
  if (ticks <= 0 || page <= 0) return std::nullopt;
  metrics::process_stats p;
  p.cpu_seconds = static_cast<double>(num(f[14]) + num(f[15])) / ticks;
  p.virtual_bytes = num(f[23]);
  p.resident_bytes = num(f[24]) * static_cast<std::uint64_t>(page);
  if (auto boot = boot_time()) p.start_time_seconds = *boot + static_cast<double>(num(f[22])) / ticks;
  if (auto n = no_import::count_entries("/proc/self/fd"))
    p.open_fds = *n > 0 ? *n - 1 : 0;  // not the directory's own descriptor
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) p.max_fds = rl.rlim_cur;
  return p;
}

}  // namespace tfb
