#include "launcher_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "settings.h"

namespace tfb {

std::optional<std::string> read_launcher_file(const std::string& path, std::string& why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      why = std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (got == 0) break;
    text.append(buf, static_cast<std::size_t>(got));
    if (text.size() > max_launcher_file) {
      ::close(fd);
      why = fmt::format("it is larger than {} KiB", max_launcher_file / 1024);
      return std::nullopt;
    }
  }
  ::close(fd);
  return text;
}

}  // namespace tfb
