#pragma once
// The host's journal (serve --state-dir): one JSON object per line, the
// first a header. The conversion of entries to lines, and the file: read
// back at start-up, compacted, then appended to and flushed before the
// replies of each step go out. Errors are returned (a sentence); what to do
// about them is the host's (host.cpp stops as a crash would).
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "barrier.h"
#include "door.h"
#include "private_files.h"

namespace tfb {

inline constexpr int journal_format_version = 1;

/// The first line of every journal file.
std::string journal_header();
/// Checks a journal's first line; sets error when it is not a tfbarrier journal of this version.
bool check_journal_header(std::string_view line, std::string& error);

std::string to_journal_line(const journal_entry& e);  ///< with the newline
std::optional<journal_entry> from_journal_line(std::string_view line, std::string& error);

/// The journal file DIR/journal, through a file descriptor: local_door's
/// journal_sink (door.h).
class journal final : public journal_sink {
 public:
  explicit journal(std::string dir);
  ~journal() override;
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;

  /// Makes the directory (mode 0700) if needed, checks that it is ours and
  /// that nobody else can write in it (never through a symlink), and reads
  /// the journal in it, if any: each entry goes to restore; a torn last line
  /// (a crash while writing) goes to skipped with its number and why. Any
  /// other bad line, a directory that cannot be made or is not safe, or a
  /// file that is not a journal of this format sets error (FILE:LINE for a
  /// line) and returns false.
  bool read(const std::function<void(const journal_entry&)>& restore,
            const std::function<void(std::size_t line, const std::string& why)>& skipped, std::string& error);
  /// Rewrites the journal as these entries (a new file, flushed, renamed
  /// over the old one, the directory flushed) and opens it for appending.
  bool compact(const std::vector<journal_entry>& entries, std::string& error) override;
  /// Appends entries and flushes them to the disk (fdatasync). On failure
  /// error is the system's reason (strerror).
  bool append(const std::vector<journal_entry>& entries, std::string& error) override;

  /// True once the file is over 1 MiB and twice what the last compaction
  /// wrote: time to compact it while the host runs.
  bool wants_compaction() const override { return size_ > (std::size_t{1} << 20) && size_ > 2 * live_; }

  const std::string& dir() const { return dir_; }
  const std::string& path() const override { return path_; }
  bool is_open() const override { return fd_ >= 0; }

 private:
  std::string dir_, path_;
  files::fd dir_fd_;  // opened once (O_NOFOLLOW), checked: every file is opened through it
  int fd_ = -1;
  std::size_t size_ = 0, live_ = 0;  // bytes in the file now, and after the last compaction
};

}  // namespace tfb
