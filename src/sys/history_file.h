#pragma once
// The history file (serve --history-file): the arrival records of
// history.h, as lines, in a file only its owner may read (private_files.h).
// The host loads it at start (a restarted host keeps the job's history),
// rewrites it compacted, then appends each round's lines after the round's
// replies went out; report reads it after the host is gone.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "history.h"
#include "private_files.h"

namespace tfb::hist {

/// The default file's name: serve-NODE[-JOB].history, beside the host's log.
std::string default_file_name(std::string_view node, std::string_view job);
/// PRIVATE_DIR/serve-NODE[-JOB].history (nullopt + error without a private dir).
std::optional<std::string> default_file_path(std::string_view node, std::string_view job, std::string& error);

/// Reads a history file, with checks (owner, not a symlink, its format).
/// Errors name the file and the line: "PATH:LINE: why". A bad line costs
/// only its round: it is skipped, with "PATH:LINE: why" in warnings.
bool read_file(const std::string& path, std::vector<round_view>& out, std::vector<std::string>& warnings,
               std::string& error);

class store {
 public:
  explicit store(std::size_t capacity) : data_(capacity), capacity_(capacity) {}
  /// Opens (creating) the file at path: loads what it holds, then rewrites it
  /// with what was kept. A file that cannot be read, or that had bad lines
  /// (their rounds are skipped, the rest kept), is first set aside as it was
  /// under a new name, PATH.bad or else PATH.bad.1, .2, ... (never over an
  /// earlier one), with a warning. False + error when it cannot be written.
  bool open(const std::string& path, std::string& warning, std::string& error);
  /// Adds a finished round; its lines wait in memory for flush().
  void add(const round_record& r, std::int64_t wall_first_ms);
  /// Appends the waiting lines to the file (rewriting it once it holds twice
  /// the capacity). Cheap when nothing waits.
  bool flush(std::string& error);
  bool pending() const { return !pending_.empty(); }
  const history& data() const { return data_; }
  history& data() { return data_; }
  const std::string& path() const { return path_; }
  /// One page of the reply to HISTORY.
  proto::history_page page(const proto::history_req& q, std::size_t max_bytes) const;

 private:
  bool rewrite(std::string& error);

  history data_;
  std::size_t capacity_;
  std::string path_, dir_, name_;
  files::fd dir_fd_, file_;
  std::string pending_;
  std::size_t written_arrivals_ = 0;  ///< in the file since its last rewrite
  std::size_t pending_arrivals_ = 0;
};

}  // namespace tfb::hist
