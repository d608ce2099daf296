#include "private_files.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <vector>

namespace tfb::files {

fd& fd::operator=(fd&& o) noexcept {
  if (this != &o) {
    if (f_ >= 0) ::close(f_);
    f_ = o.release();
  }
  return *this;
}

fd::~fd() {
  if (f_ >= 0) ::close(f_);
}

namespace {

std::string join(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return fmt::format("{}{}", dir, name);
  return fmt::format("{}/{}", dir, name);
}

/// mkdir -p with mode 0700 for every directory it makes.
bool make_dirs(const std::string& path, std::string& error) {
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return true;
  if (errno == ENOENT) {
    auto slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
      if (!make_dirs(path.substr(0, slash), error)) return false;
      if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return true;
    }
  }
  error = fmt::format("cannot create the directory {}: {}", path, std::strerror(errno));
  return false;
}

/// The checks every file and directory of ours must pass: ours, and nobody
/// else may change it. what names it ("the directory", "the log file");
/// instead says what else the user can do.
bool check_owner(const struct stat& st, const std::string& shown, std::string_view what, std::string_view instead,
                 std::string& error) {
  uid_t me = ::getuid();
  if (st.st_uid != me) {
    error = fmt::format("{} {} belongs to uid {}, not to you (uid {}): another user could have made it to plant "
                        "or read files there; remove it, or {}",
                        what, shown, st.st_uid, me, instead);
    return false;
  }
  if ((st.st_mode & 022) != 0) {
    error = fmt::format("{} {} can be changed by others (mode {:04o}); run `chmod go-w {}`", what, shown,
                        st.st_mode & 07777, shown);
    return false;
  }
  return true;
}

std::string random_suffix() {
  unsigned char b[8];
  std::size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = ::getrandom(b + got, sizeof b - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // no CSPRNG: nothing here can be made safely
    }
    got += static_cast<std::size_t>(n);
  }
  std::string s;
  for (unsigned char c : b) s += fmt::format("{:02x}", c);
  return s;
}

}  // namespace

bool write_all(int f, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(f, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::optional<fd> open_dir(const std::string& path, bool create, bool private_only, std::string& error) {
  bool made = false;
  if (create) {
    if (::mkdir(path.c_str(), 0700) == 0) {
      made = true;
    } else if (errno == ENOENT) {
      if (!make_dirs(path, error)) return std::nullopt;
      made = true;
    } else if (errno != EEXIST) {
      error = fmt::format("cannot create the directory {}: {}", path, std::strerror(errno));
      return std::nullopt;
    }
  }
  fd d(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d) {
    if (errno == ELOOP || errno == ENOTDIR) {
      char target[1];
      if (::readlink(path.c_str(), target, sizeof target) >= 0)
        error = fmt::format("the directory {} is a symbolic link; tfbarrier does not follow links there: remove "
                            "it, or name the real directory",
                            path);
      else
        error = fmt::format("{} is not a directory", path);
    } else {
      error = fmt::format("cannot open the directory {}: {}", path, std::strerror(errno));
    }
    return std::nullopt;
  }
  // A default ACL can widen the mode mkdir was given.
  if (made) ::fchmod(d.get(), 0700);
  struct stat st{};
  if (::fstat(d.get(), &st) != 0) {
    error = fmt::format("cannot examine the directory {}: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  if (!check_owner(st, path, "the directory", "use a directory of your own", error)) return std::nullopt;
  if (private_only && (st.st_mode & 077) != 0) {
    error = fmt::format("the directory {} can be entered by others (mode {:04o}); run `chmod 700 {}`", path,
                        st.st_mode & 07777, path);
    return std::nullopt;
  }
  return d;
}

namespace {

/// openat without following a symlink; with O_CREAT, first as O_EXCL, so
/// that created says whether this call made the file. O_TRUNC is left to the
/// caller (after the checks). O_NONBLOCK: a planted FIFO must not hang us.
int open_nofollow(int dir, const char* name, int flags, mode_t mode, bool& created) {
  int base = (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  created = false;
  if ((flags & O_CREAT) == 0) return ::openat(dir, name, base);
  for (int tries = 0; tries < 3; ++tries) {  // made and removed by another between our two calls: again
    int f = ::openat(dir, name, base | O_CREAT | O_EXCL, mode);
    if (f >= 0 || errno != EEXIST || (flags & O_EXCL) != 0) {
      created = f >= 0;
      return f;
    }
    f = ::openat(dir, name, base);
    if (f >= 0 || errno != ENOENT) return f;
  }
  return -1;
}

std::string open_failed(const std::string& shown, const role& who) {
  if (errno == ELOOP)
    return fmt::format("{} {} is a symbolic link: refusing to follow it; remove it, or {}", who.what, shown,
                       who.instead);
  if (errno == EEXIST) return fmt::format("{} {} exists already", who.what, shown);
  if (errno == ENXIO)  // O_NONBLOCK's answer for a FIFO without a reader, or a socket
    return fmt::format("{} {} is not a regular file; remove it, or {}", who.what, shown, who.instead);
  return fmt::format("cannot open {} {}: {}", who.what, shown, std::strerror(errno));
}

/// What open_in checks of the file it opened (see private_files.h).
bool check_opened(int f, int flags, mode_t mode, bool created, const std::string& shown, const role& who,
                  std::string& error) {
  struct stat st{};
  if (::fstat(f, &st) != 0) {
    error = fmt::format("cannot examine {} {}: {}", who.what, shown, std::strerror(errno));
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error = fmt::format("{} {} is not a regular file; remove it, or {}", who.what, shown, who.instead);
    return false;
  }
  // What we make gets its mode, whatever a default ACL says; what was there
  // is checked as it is, and only narrowed (never widened) once it passed.
  bool exact = created && !who.umask_decides;
  if (exact && ::fchmod(f, mode) == 0) st.st_mode = (st.st_mode & ~static_cast<mode_t>(07777)) | mode;
  if (!check_owner(st, shown, who.what, who.instead, error)) return false;
  bool writes = (flags & O_ACCMODE) != O_RDONLY;
  if (writes && st.st_nlink > 1) {
    error = fmt::format("{} {} has {} hard links: another name of it could be a file of yours elsewhere; remove "
                        "it, or {}",
                        who.what, shown, st.st_nlink, who.instead);
    return false;
  }
  mode_t narrowed = st.st_mode & mode & 07777;
  if (writes && !exact && (st.st_mode & 07777) != narrowed) ::fchmod(f, narrowed);
  return true;
}

}  // namespace

std::optional<fd> open_in(int dir, std::string_view name, int flags, mode_t mode, const std::string& shown_dir,
                          std::string& error, const role& who) {
  std::string n(name);
  std::string shown = join(shown_dir, name);
  bool created = false;
  fd f(open_nofollow(dir, n.c_str(), flags, mode, created));
  if (!f) {
    int saved = errno;  // for a caller that tells EEXIST apart
    error = open_failed(shown, who);
    errno = saved;
    return std::nullopt;
  }
  if (!check_opened(f.get(), flags, mode, created, shown, who, error)) return std::nullopt;
  // Truncated through syscall(): ftruncate would be a new libc import, which
  // costs every command's start (bench/startup-cost.sh).
  int fl = ::fcntl(f.get(), F_GETFL);
  if (fl < 0 || ::fcntl(f.get(), F_SETFL, fl & ~O_NONBLOCK) != 0 ||
      ((flags & O_TRUNC) != 0 && !created && ::syscall(SYS_ftruncate, f.get(), 0) != 0)) {
    error = fmt::format("cannot open {} {}: {}", who.what, shown, std::strerror(errno));
    return std::nullopt;
  }
  return f;
}

void split_path(const std::string& path, std::string& dir, std::string& name) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) {
    dir = ".";
    name = path;
  } else {
    dir = slash == 0 ? "/" : path.substr(0, slash);
    name = path.substr(slash + 1);
  }
}

std::optional<fd> open_parent(const std::string& path, std::string& dir, std::string& name, std::string& error,
                              const role& who) {
  split_path(path, dir, name);
  if (name.empty() || name == "." || name == "..") {
    error = fmt::format("{} {} names a directory, not a file; {}", who.what, path, who.instead);
    return std::nullopt;
  }
  fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d) {
    error = fmt::format("cannot open the directory of {} {}: {}", who.what, path, std::strerror(errno));
    return std::nullopt;
  }
  return d;
}

std::optional<fd> open_path(const std::string& path, int flags, mode_t mode, std::string& error, const role& who) {
  std::string dir, name;
  auto d = open_parent(path, dir, name, error, who);
  if (!d) return std::nullopt;
  // Messages show the path as given: "x.log", not "./x.log".
  return open_in(d->get(), name, flags, mode, path.find('/') == std::string::npos ? "" : dir, error, who);
}

bool replace_in(int dir, std::string_view name, std::string_view bytes, const std::string& shown_dir,
                std::string& error, mode_t mode) {
  std::string tmp = fmt::format(".{}.{}.tmp", name, random_suffix());
  auto f = open_in(dir, tmp, O_WRONLY | O_CREAT | O_EXCL, mode, shown_dir, error, {"the temporary file"});
  if (!f) return false;
  std::string target(name);
  if (!write_all(f->get(), bytes) || ::fsync(f->get()) != 0 || ::renameat(dir, tmp.c_str(), dir, target.c_str()) != 0) {
    error = fmt::format("cannot write {}: {}", join(shown_dir, name), std::strerror(errno));
    ::unlinkat(dir, tmp.c_str(), 0);
    return false;
  }
  ::fsync(dir);
  return true;
}

std::optional<std::string> home_dir(std::string& error) {
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h);
  std::vector<char> buf(16384);
  struct passwd pw{};
  struct passwd* found = nullptr;
  int rc;
  while ((rc = ::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &found)) == ERANGE && buf.size() < (1u << 20))
    buf.resize(buf.size() * 2);
  if (rc == 0 && found && found->pw_dir && *found->pw_dir) return std::string(found->pw_dir);
  error = fmt::format("HOME is not set and uid {} has no home directory in the password database; set HOME",
                      ::getuid());
  return std::nullopt;
}

std::optional<std::string> private_dir_path(std::string& error) {
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x == '/') {
    struct stat st{};
    if (::stat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid() && (st.st_mode & 0777) == 0700)
      return join(x, "tfbarrier");
  }
  auto home = home_dir(error);
  if (!home) return std::nullopt;
  return join(*home, ".tfbarrier");
}

std::string log_file_name(std::string_view node, std::string_view job) {
  auto clean = [](std::string_view s) {
    std::string out;
    for (char c : s) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                c == '_' || c == '-';
      out += ok ? c : '_';
    }
    return out;
  };
  std::string n = clean(node.empty() ? std::string_view("localhost") : node);
  if (job.empty()) return fmt::format("serve-{}.log", n);
  return fmt::format("serve-{}-{}.log", n, clean(job));
}

std::optional<fd> open_host_log(std::string_view node, std::string_view job, std::string& path, std::string& error) {
  auto dir = private_dir_path(error);
  if (!dir) return std::nullopt;
  std::string name = log_file_name(node, job);
  path = join(*dir, name);
  auto d = open_dir(*dir, true, true, error);
  if (!d) return std::nullopt;
  return open_in(d->get(), name, O_WRONLY | O_CREAT | O_APPEND, 0600, *dir, error,
                 {"the log file", "give another --log"});
}

}  // namespace tfb::files
