#include "secret_files.h"

#include <fcntl.h>
#include <sys/random.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

#include "private_files.h"

namespace tfb::auth {

void fill_random(void* out, std::size_t size) {
  // The kernel's CSPRNG directly. Not std::random_device: it probes the CPU
  // for RDRAND with CPUID, which on a virtual machine traps to the hypervisor.
  auto buf = static_cast<unsigned char*>(out);
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::getrandom(buf + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::abort();  // no randomness: nothing is safe
    got += static_cast<std::size_t>(n);
  }
}

std::string make_nonce() {
  unsigned char buf[nonce_bytes];
  fill_random(buf, sizeof buf);
  return to_hex(buf, sizeof buf);
}

std::string default_secret_path() {
  if (const char* f = std::getenv("TFBARRIER_SECRET_FILE"); f && *f) return f;
  // $HOME, else the password database's home: never a shared directory such
  // as /tmp, where another user could plant the file first.
  std::string ignored;
  auto home = files::home_dir(ignored);
  return fmt::format("{}/.tfbarrier/secret", home.value_or("~"));
}

std::optional<std::string> load_secret(const std::string& path, std::string& error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP)
      error = fmt::format("the secret file {} is a symbolic link; tfbarrier does not follow one there: point "
                          "--secret-file (or TFBARRIER_SECRET_FILE) at the file itself",
                          path);
    else
      error = fmt::format("cannot read the secret file {}: {}; create one with `tfbarrier secret --file {}`", path,
                          std::strerror(errno), path);
    return std::nullopt;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    error = fmt::format("the secret file {} is not a regular file", path);
    return std::nullopt;
  }
  // Ours alone: root would otherwise take any user's 0600 file as its secret.
  if (st.st_uid != ::getuid()) {
    ::close(fd);
    error = fmt::format("the secret file {} belongs to uid {}, not to you (uid {}); use a secret file of your own "
                        "(`tfbarrier secret --file PATH`)",
                        path, st.st_uid, ::getuid());
    return std::nullopt;
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    error = fmt::format("the secret file {} can be read by others (mode {:04o}); run `chmod 600 {}`", path,
                        st.st_mode & 07777, path);
    return std::nullopt;
  }
  std::string s(4096, '\0');
  ssize_t n = ::read(fd, s.data(), s.size());
  ::close(fd);
  if (n < 0) {
    error = fmt::format("cannot read the secret file {}: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  s.resize(static_cast<std::size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.size() < 16) {
    error = fmt::format("the secret file {} holds fewer than 16 characters; make a fresh one with "
                        "`tfbarrier secret --force --file {}`",
                        path, path);
    return std::nullopt;
  }
  return s;
}

std::string fresh_secret() {
  unsigned char buf[32];
  fill_random(buf, sizeof buf);
  return to_hex(buf, sizeof buf);
}

bool write_secret(const std::string& path, const std::string& text, bool force, std::string& error) {
  std::string dir, name;
  files::split_path(path, dir, name);
  // The directory is made 0700 and must be ours, writable by nobody else;
  // the file is made through it by files::open_in, never through a symlink.
  auto d = files::open_dir(dir, true, false, error);
  if (!d) return false;
  std::string bytes = text + "\n";
  if (force) return files::replace_in(d->get(), name, bytes, dir, error);
  auto f = files::open_in(d->get(), name, O_WRONLY | O_CREAT | O_EXCL, 0600, dir, error,
                          {"the secret file", "give another --file"});
  if (!f) {
    if (errno == EEXIST)
      error = fmt::format("{} exists already; pass --force to replace it (every node must then get the new one)", path);
    return false;
  }
  if (!files::write_all(f->get(), bytes) || ::fsync(f->get()) != 0) {
    error = fmt::format("cannot write {}: {}", path, std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace tfb::auth
