#include "auth.h"

#include <fcntl.h>
#include <sys/random.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

#include "private_files.h"
#include "sha256.h"

namespace tfb::auth {
namespace {

std::string to_hex(const unsigned char* p, std::size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

const char* dir_label(direction d) { return d == direction::to_host ? "to-host" : "to-client"; }

}  // namespace

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

std::string sha256_hex(std::string_view msg) {
  crypto::digest d = crypto::sha256_of(msg);
  return to_hex(d.data(), d.size());
}

std::string hmac_hex(std::string_view key, std::string_view msg) {
  crypto::digest d = crypto::hmac_sha256(key, msg);
  return to_hex(d.data(), d.size());
}

bool equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  // Constant time: every byte is looked at, whatever differs first.
  volatile unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = static_cast<unsigned char>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

std::string transcript(std::string_view client_hello, std::string_view host_reply_unsigned) {
  crypto::sha256 h;
  h.update(client_hello);
  h.update("\n");
  h.update(host_reply_unsigned);
  h.update("\n");
  crypto::digest d = h.finish();
  return to_hex(d.data(), d.size());
}

std::string without_field(std::string_view line, std::string_view key) {
  // Fields end where the trailing text (" :") begins; values hold no space.
  std::string_view fields = line.substr(0, line.find(" :"));
  std::string needle = fmt::format(" {}=", key);
  std::size_t at = fields.find(needle);
  if (at == std::string_view::npos) return std::string(line);
  std::size_t end = fields.find(' ', at + 1);
  if (end == std::string_view::npos) end = fields.size();
  return fmt::format("{}{}", line.substr(0, at), line.substr(end));
}

std::string host_proof(std::string_view secret, std::string_view cn, std::string_view hn, std::string_view t) {
  return hmac_hex(secret, fmt::format("tfbarrier-host-proof\n{}\n{}\n{}", cn, hn, t));
}
std::string client_proof(std::string_view secret, std::string_view cn, std::string_view hn, std::string_view t) {
  return hmac_hex(secret, fmt::format("tfbarrier-client-proof\n{}\n{}\n{}", cn, hn, t));
}
std::string session_key(std::string_view secret, std::string_view cn, std::string_view hn) {
  return hmac_hex(secret, fmt::format("tfbarrier-session-key\n{}\n{}", cn, hn));
}

std::string seal(std::string_view line, std::string_view key, direction d, std::uint64_t seq) {
  std::string mac = hmac_hex(key, fmt::format("{}\n{}\n{}", dir_label(d), seq, line)).substr(0, mac_hex_chars);
  auto sp = line.find(' ');
  std::string verb(line.substr(0, sp));
  std::string rest = sp == std::string_view::npos ? std::string() : std::string(line.substr(sp));
  return fmt::format("{} mac={}{}", verb, mac, rest);
}

bool unseal(std::string& line, std::string_view key, direction d, std::uint64_t seq) {
  auto sp = line.find(" mac=");
  if (sp == std::string::npos || line.find(' ') != sp) return false;
  std::size_t start = sp + 5, end = line.find(' ', start);
  if (end == std::string::npos) end = line.size();
  std::string mac = line.substr(start, end - start);
  std::string plain = line.substr(0, sp) + line.substr(end);
  std::string want = hmac_hex(key, fmt::format("{}\n{}\n{}", dir_label(d), seq, plain)).substr(0, mac_hex_chars);
  if (!equal(mac, want)) return false;
  line = std::move(plain);
  return true;
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
