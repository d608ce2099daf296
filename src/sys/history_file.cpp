#include "history_file.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace tfb::hist {

std::string default_file_name(std::string_view node, std::string_view job) {
  std::string log = files::log_file_name(node, job);  // serve-NODE[-JOB].log
  return log.substr(0, log.size() - 4) + ".history";
}

std::optional<std::string> default_file_path(std::string_view node, std::string_view job, std::string& error) {
  auto dir = files::private_dir_path(error);
  if (!dir) return std::nullopt;
  return *dir + "/" + default_file_name(node, job);
}

namespace {
constexpr files::role history_role{"the history file", "give another --history-file"};

bool slurp(int fd, std::string& text, std::string& why) {
  char chunk[1 << 16];
  for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      why = std::strerror(errno);
      return false;
    }
    text.append(chunk, static_cast<std::size_t>(n));
  }
  return true;
}
}  // namespace

bool read_file(const std::string& path, std::vector<round_view>& out, std::vector<std::string>& warnings,
               std::string& error) {
  // Another user's directory may hold it (a shared job directory), but not a
  // symlink, and the file must be the reader's own: its lines become a report.
  std::string dir, name;
  auto d = files::open_parent(path, dir, name, error, history_role);
  if (!d) return false;
  auto f = files::open_in(d->get(), name, O_RDONLY, 0600, path.find('/') == std::string::npos ? "" : dir, error,
                          history_role);
  if (!f) return false;
  std::string text, why;
  if (!slurp(f->get(), text, why)) {
    error = fmt::format("cannot read the history file {}: {}", path, why);
    return false;
  }
  std::vector<std::string> skipped;
  if (!parse_file(text, out, skipped, why)) {
    error = fmt::format("{}:{}", path, why);
    return false;
  }
  for (const auto& w : skipped) warnings.push_back(fmt::format("{}:{}", path, w));
  return true;
}

namespace {
// Moves dir/name to the first free name of name.bad, name.bad.1, ...: never
// over an earlier one, nor through a symlink planted there (a rename never
// follows one, and RENAME_NOREPLACE refuses any name that exists).
// renameat2 through syscall(): a new libc import would cost every command's
// start (bench/startup-cost.sh).
bool set_aside(int dir, const std::string& name, std::string& moved_to, std::string& why) {
  constexpr unsigned noreplace = 1;  // RENAME_NOREPLACE
  for (int i = 0; i < 1000; ++i) {
    std::string bad = i == 0 ? name + ".bad" : fmt::format("{}.bad.{}", name, i);
    if (::syscall(SYS_renameat2, dir, name.c_str(), dir, bad.c_str(), noreplace) == 0) {
      moved_to = bad;
      return true;
    }
    if (errno == EEXIST) continue;
    if (errno != EINVAL && errno != ENOSYS) break;
    // A file system without RENAME_NOREPLACE: claim the name first (O_EXCL
    // does not follow a symlink either), then rename over our own claim.
    std::string ignored;
    if (!files::open_in(dir, bad, O_WRONLY | O_CREAT | O_EXCL, 0600, "", ignored, history_role)) {
      if (errno == EEXIST) continue;
      break;
    }
    if (::renameat(dir, name.c_str(), dir, bad.c_str()) == 0) {
      moved_to = bad;
      return true;
    }
    int e = errno;
    ::unlinkat(dir, bad.c_str(), 0);
    errno = e;
    break;
  }
  why = errno == EEXIST ? std::string("1000 earlier .bad files are in the way") : std::strerror(errno);
  return false;
}
}  // namespace

bool store::open(const std::string& path, std::string& warning, std::string& error) {
  path_ = path;
  files::split_path(path, dir_, name_);
  auto d = files::open_dir(dir_, true, false, error);
  if (!d) {
    error = fmt::format("cannot use the history file's directory: {}", error);
    return false;
  }
  dir_fd_ = std::move(*d);
  int probe = ::openat(dir_fd_.get(), name_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (probe >= 0 || errno != ENOENT) {
    if (probe >= 0) ::close(probe);
    std::vector<round_view> rounds;
    std::vector<std::string> skipped;
    std::string why;
    bool read = read_file(path_, rounds, skipped, why);
    for (const auto& r : rounds) data_.add(r);
    if (!read || !skipped.empty()) {
      // Not lost: the file as it was is set aside for a person to look at
      // (the rewrite below would drop its bad lines).
      std::string bad;
      if (!read) skipped.assign(1, why);
      std::string what;
      for (const auto& w : skipped) what += (what.empty() ? "" : "; ") + w;
      if (!set_aside(dir_fd_.get(), name_, bad, why)) {
        error = fmt::format("{}; and it cannot be moved aside: {}", what, why);
        return false;
      }
      bad = path_.substr(0, path_.size() - name_.size()) + bad;
      warning = read ? fmt::format("warning: {}; skipped those rounds, kept {} rounds, and moved the file as it was to {}",
                                   what, rounds.size(), bad)
                     : fmt::format("warning: {}; moved it to {} and started a new history", what, bad);
    }
  }
  return rewrite(error);
}

bool store::rewrite(std::string& error) {
  std::string text = file_header();
  data_.each([&](const round_view& r) { text += format_round(r); });
  if (!files::replace_in(dir_fd_.get(), name_, text, dir_, error)) return false;
  auto f = files::open_in(dir_fd_.get(), name_, O_WRONLY | O_APPEND, 0600, dir_, error, history_role);
  if (!f) return false;
  file_ = std::move(*f);
  written_arrivals_ = data_.arrivals();
  pending_.clear();
  pending_arrivals_ = 0;
  return true;
}

void store::add(const round_record& r, std::int64_t wall_first_ms) {
  std::uint64_t seq = data_.add(r, wall_first_ms);
  if (!file_) return;  // memory only (no file, or it could not be opened): nothing to write later
  if (auto v = data_.get(seq)) {
    pending_ += format_round(*v);
    pending_arrivals_ += v->arrivals.size();
  }
}

bool store::flush(std::string& error) {
  if (!file_) pending_.clear();
  if (pending_.empty()) return true;
  // Bounded: past twice the capacity, the file is rewritten with what memory keeps.
  if (written_arrivals_ + pending_arrivals_ > 2 * capacity_ + 1) return rewrite(error);
  std::size_t done = 0;
  while (done < pending_.size()) {
    ssize_t n = ::write(file_.get(), pending_.data() + done, pending_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = fmt::format("cannot append to the history file {}: {}", path_, std::strerror(errno));
      pending_.clear();  // dropped, not retried forever; the memory's copy stays for HISTORY
      pending_arrivals_ = 0;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  written_arrivals_ += pending_arrivals_;
  pending_.clear();
  pending_arrivals_ = 0;
  return true;
}

proto::history_page store::page(const proto::history_req& q, std::size_t max_bytes) const {
  query sel{q.scope, q.name, q.last};
  auto seqs = data_.select(sel);
  std::erase_if(seqs, [&](std::uint64_t s) { return s < q.from; });
  std::optional<std::size_t> next;
  proto::history_page p;
  p.lines = data_.page(seqs, 0, max_bytes, next);
  if (next) p.next = seqs[*next];
  return p;
}

}  // namespace tfb::hist
