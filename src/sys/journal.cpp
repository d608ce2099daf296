#include "journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <functional>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "private_files.h"

namespace tfb {

using nlohmann::json;

std::string journal_header() {
  return json{{"tfbarrier_journal", journal_format_version}}.dump() + "\n";
}

bool check_journal_header(std::string_view line, std::string& error) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tfbarrier_journal")) {
    error = "it is not a tfbarrier journal (bad first line)";
    return false;
  }
  if (!j["tfbarrier_journal"].is_number_integer() || j["tfbarrier_journal"].get<int>() != journal_format_version) {
    error = fmt::format("it has journal format {}, this tfbarrier reads format {}", j["tfbarrier_journal"].dump(),
                        journal_format_version);
    return false;
  }
  return true;
}

std::string to_journal_line(const journal_entry& e) {
  static constexpr const char* kinds[] = {"verdict", "release", "abort", "gathered"};
  json j;
  j["t"] = kinds[static_cast<int>(e.what)];
  j["scope"] = e.scope;
  j["name"] = e.name;
  j["gen"] = e.gen;
  if (e.v != proto::verdict::none) j["verdict"] = proto::to_string(e.v);
  if (!e.message.empty()) j["message"] = e.message;
  bool gathered = e.what == journal_entry::kind::gathered;
  if (e.what == journal_entry::kind::verdict || gathered) {
    j["chief_arrival"] = e.chief_arrival;
    j["id"] = e.id;
    if (e.chief_arrival) {
      j["host"] = e.host;
      j["pid"] = e.pid;
    }
    if (e.n) j["n"] = *e.n;
    if (e.rank) j["rank"] = *e.rank;
  }
  if (e.what == journal_entry::kind::release || gathered) j["ids"] = e.ids;
  if (gathered) {
    json ranks = json::array();
    for (const auto& r : e.ranks) ranks.push_back(r ? json(*r) : json(nullptr));
    j["ranks"] = std::move(ranks);
    if (e.within) j["within_ms"] = *e.within;
  }
  // Never throws: text is checked UTF-8 on the wire (proto::valid_text); replace is the last guard.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

// Round numbers stay far below 2^64, so that the next round's number cannot
// wrap to 0; 2^53 also keeps them exact for every JSON reader.
constexpr std::uint64_t max_gen = std::uint64_t{1} << 53;

constexpr files::role journal_role{"the journal", "give another --state-dir"};

std::string check_fields(const journal_entry& e) {
  if (e.gen >= max_gen) return fmt::format("round {} is past the largest a host reaches ({})", e.gen, max_gen - 1);
  if (std::string why = proto::text_problem(e.message); !why.empty()) return "the message or reason " + why;
  if (!e.id.empty() && !proto::valid_id(e.id)) return "a bad participant id";
  if (e.host.size() > proto::max_value || !proto::valid_text(e.host)) return "a bad host name";
  if (e.n && (*e.n < 1 || *e.n > proto::max_n)) return fmt::format("n={} is out of range (1 to {})", *e.n, proto::max_n);
  if (e.rank && *e.rank >= (e.n ? *e.n : proto::max_n))
    return fmt::format("rank {} is out of range for n={}", *e.rank, e.n ? *e.n : proto::max_n);
  if (e.ids.size() > proto::max_n) return "more participants than a round can hold";
  for (const auto& id : e.ids)
    if (!proto::valid_id(id)) return "a bad participant id";
  return {};
}

/// A gathered round's decide deadline (ms, as the wire bounds it).
bool read_within(const json& w, journal_entry& e, std::string& error) {
  if (e.what != journal_entry::kind::gathered || !w.is_number_unsigned() || w.get<std::uint64_t>() < 1 ||
      w.get<std::uint64_t>() > proto::max_within_ms) {
    error = "a decide deadline (within_ms) out of range, or not on a gathered round";
    return false;
  }
  e.within = static_cast<millis>(w.get<std::uint64_t>());
  return true;
}

}  // namespace

std::optional<journal_entry> from_journal_line(std::string_view line, std::string& error) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  try {
    journal_entry e;
    std::string t = j.at("t").get<std::string>();
    if (t == "verdict") e.what = journal_entry::kind::verdict;
    else if (t == "release") e.what = journal_entry::kind::release;
    else if (t == "abort") e.what = journal_entry::kind::abort;
    else if (t == "gathered") e.what = journal_entry::kind::gathered;
    else {
      error = fmt::format("unknown entry type '{}'", t);
      return std::nullopt;
    }
    e.scope = j.at("scope").get<std::string>();
    e.name = j.at("name").get<std::string>();
    e.gen = j.at("gen").get<std::uint64_t>();
    if (!proto::valid_name(e.scope) || !proto::valid_name(e.name) || e.gen == 0) {
      error = "bad scope, name or round";
      return std::nullopt;
    }
    if (j.contains("verdict")) {
      auto v = proto::parse_verdict(j["verdict"].get<std::string>());
      if (!v) {
        error = "bad verdict";
        return std::nullopt;
      }
      e.v = *v;
    }
    e.message = j.value("message", "");
    e.chief_arrival = j.value("chief_arrival", false);
    e.id = j.value("id", "");
    e.host = j.value("host", "");
    e.pid = j.value("pid", 0u);
    if (j.contains("n")) e.n = j["n"].get<std::uint32_t>();
    if (j.contains("rank")) e.rank = j["rank"].get<std::uint32_t>();
    if (j.contains("ids")) e.ids = j["ids"].get<std::vector<std::string>>();
    if (j.contains("ranks"))
      for (const auto& r : j["ranks"])
        e.ranks.push_back(r.is_null() ? std::nullopt : std::optional<std::uint32_t>(r.get<std::uint32_t>()));
    if (j.contains("within_ms") && !read_within(j["within_ms"], e, error)) return std::nullopt;
    if (e.what == journal_entry::kind::gathered) {
      // All n present, the chief among them: anything else is not a round this host wrote.
      bool ok = e.n && *e.n >= 1 && *e.n <= proto::max_n && e.ids.size() == *e.n && e.ranks.size() == e.ids.size() &&
                e.v == proto::verdict::none &&
                std::find(e.ids.begin(), e.ids.end(), e.id) != e.ids.end();
      for (const auto& id : e.ids) ok = ok && proto::valid_id(id);
      for (const auto& r : e.ranks) ok = ok && (!r || *r < *e.n);
      ok = ok && std::adjacent_find(e.ids.begin(), e.ids.end(), std::greater_equal<>{}) == e.ids.end();  // sorted, unique
      if (!ok) {
        error = "a gathered round without its n members and chief";
        return std::nullopt;
      }
    }
    if (e.what == journal_entry::kind::verdict && e.v == proto::verdict::none) {
      error = "a verdict entry without a verdict";
      return std::nullopt;
    }
    // The wire's checks, for what a host restores: a record that no host
    // could have written is refused, not restored.
    if (std::string why = check_fields(e); !why.empty()) {
      error = why;
      return std::nullopt;
    }
    return e;
  } catch (const json::exception& ex) {
    error = ex.what();
    return std::nullopt;
  }
}

journal::journal(std::string dir) : dir_(std::move(dir)), path_(dir_ + "/journal") {}

journal::~journal() {
  if (fd_ >= 0) ::close(fd_);
}

bool journal::read(const std::function<void(const journal_entry&)>& restore,
                   const std::function<void(std::size_t line, const std::string& why)>& skipped, std::string& error) {
  // The directory is opened once, and must be ours alone to change: a
  // journal line planted by another user would become a verdict.
  auto d = files::open_dir(dir_, true, false, error);
  if (!d) {
    error = fmt::format("cannot use the state directory: {}", error);
    return false;
  }
  dir_fd_ = std::move(*d);
  int fd = ::openat(dir_fd_.get(), "journal", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return true;  // a new journal
  if (fd >= 0) ::close(fd);
  auto checked = files::open_in(dir_fd_.get(), "journal", O_RDONLY, 0600, dir_, error, journal_role);
  if (!checked) return false;
  std::string text;
  char chunk[1 << 16];
  for (ssize_t n; (n = ::read(checked->get(), chunk, sizeof chunk)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      error = fmt::format("cannot read the journal {}: {}", path_, std::strerror(errno));
      return false;
    }
    text.append(chunk, static_cast<std::size_t>(n));
  }
  std::size_t lineno = 0;
  bool ok = true;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t nl = text.find('\n', at);
    // Only the last line can lack its newline: the one a crash tore.
    bool torn = nl == std::string::npos;
    std::string_view line(text.data() + at, (torn ? text.size() : nl) - at);
    at = torn ? text.size() : nl + 1;
    ++lineno;
    std::string err;
    if (lineno == 1) {
      if (!check_journal_header(line, err)) {
        error = fmt::format("cannot use the journal {}: {}; move it away to start afresh", path_, err);
        ok = false;
        break;
      }
      continue;
    }
    if (auto e = from_journal_line(line, err)) {
      restore(*e);
    } else if (torn) {
      skipped(lineno, err);
    } else {
      // Skipping a whole record could change a verdict: refuse to start.
      error = fmt::format("{}:{}: {}; this is no record a host writes: fix or remove the line (or move the journal "
                          "away to start afresh)",
                          path_, lineno, err);
      ok = false;
      break;
    }
  }
  return ok;
}

bool journal::compact(const std::vector<journal_entry>& entries, std::string& error) {
  if (!dir_fd_) {
    error = fmt::format("the state directory {} is not open", dir_);
    return false;
  }
  std::string bytes = journal_header();
  for (const auto& e : entries) bytes += to_journal_line(e);
  // A new file of a random name, flushed, renamed over the journal, the
  // directory flushed: a crash leaves the old journal or the new one.
  if (!files::replace_in(dir_fd_.get(), "journal", bytes, dir_, error)) return false;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  auto f = files::open_in(dir_fd_.get(), "journal", O_WRONLY | O_APPEND, 0600, dir_, error, journal_role);
  if (!f) return false;
  fd_ = f->release();
  size_ = live_ = bytes.size();
  return true;
}

bool journal::append(const std::vector<journal_entry>& entries, std::string& error) {
  std::string bytes;
  for (const auto& e : entries) bytes += to_journal_line(e);
  if (fd_ < 0) {
    error = std::strerror(EBADF);
    return false;
  }
  if (!files::write_all(fd_, bytes) || ::fdatasync(fd_) != 0) {
    error = std::strerror(errno);
    return false;
  }
  size_ += bytes.size();
  return true;
}

}  // namespace tfb
