#pragma once
// Arrival records (issue #21): for every round that ended, who arrived when,
// from which node, and how the round ended. Pure: no clock, no files. The
// barriers (barrier.cpp) hand a finished round over as a round_record (in
// output::rounds); the host (host.cpp) adds it here with the wall-clock time
// of its first arrival, and appends the new lines to the history file after
// the round's replies went out. `tfbarrier report` reads the same lines from
// the host (HISTORY, docs/protocol.md) or from the file.
//
// Memory: one arrival_rec (16 bytes) per arrival, a round_header per round,
// and the interned node, scope and name strings. At most `capacity`
// arrivals are kept; the oldest rounds go first.
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "protocol.h"

namespace tfb {

/// One round that ended, as the barriers saw it (times are the caller's
/// monotonic milliseconds, as barrier_set takes them).
struct round_record {
  enum class ending : std::uint8_t { release, abort };
  std::string scope, name;
  std::uint64_t gen = 0;
  std::optional<std::uint32_t> n;
  ending end = ending::release;
  proto::verdict v = proto::verdict::none;
  std::int64_t first = 0;  ///< the round's first arrival (monotonic ms)
  std::int64_t ended = 0;  ///< when it released or was aborted (monotonic ms)
  struct arrival {
    std::optional<std::uint32_t> rank;
    std::string node;   ///< the participant's HELLO host=
    std::int64_t at = 0;  ///< monotonic ms
  };
  std::vector<arrival> arrivals;
  std::uint32_t withdrawn = 0;  ///< participants that withdrew before the release (LEAVE, closed, silent)
  std::uint32_t timeouts = 0;   ///< of those, the ones that said LEAVE why=timeout
};

namespace hist {

inline constexpr int format_version = 1;
inline constexpr std::uint32_t no_rank = UINT32_MAX;
inline constexpr std::size_t default_capacity = 1'000'000;  ///< serve --history default
/// A node name as the history keeps it: at most this many bytes (node_label).
/// DNS names stop at 253; a HELLO host= may carry proto::max_value.
inline constexpr std::size_t max_node = 255;

/// 16 bytes: the whole cost of one arrival.
struct arrival_rec {
  std::uint32_t rank;    ///< no_rank when the participant gave none
  std::uint32_t node;    ///< index into the node table
  std::uint32_t offset;  ///< ms after the round's first arrival
  std::uint32_t round;   ///< the round's seq (low 32 bits)
};
static_assert(sizeof(arrival_rec) == 16);

/// A round, decoded: what the report works on.
struct round_view {
  std::uint64_t seq = 0;
  std::string scope, name;
  std::uint64_t gen = 0;
  std::optional<std::uint32_t> n;
  round_record::ending end = round_record::ending::release;
  proto::verdict v = proto::verdict::none;
  std::int64_t at_ms = 0;  ///< unix ms of the first arrival
  std::uint32_t duration_ms = 0;  ///< first arrival to release/abort
  std::uint32_t withdrawn = 0, timeouts = 0;
  struct arrival {
    std::optional<std::uint32_t> rank;
    std::string node;
    std::uint32_t offset_ms = 0;
  };
  std::vector<arrival> arrivals;  ///< in arrival order
  /// The run of the host that recorded it (issue #32 item 2): every host
  /// start is a run of its own, so that a history file shared by a user's
  /// hosts on a node keeps each run apart. "" in a file of before runs.
  std::string run;
};

/// A run id: 1 to 64 bytes of [A-Za-z0-9._:-].
bool valid_run(std::string_view s);
/// A new host's run: "slurm-JOBID" under Slurm (SLURM_JOB_ID, the values
/// given), else the start time and pid, "20261206-184501-4242".
std::string new_run(const char* slurm_job_id, std::int64_t unix_seconds, long pid);

std::string_view to_string(round_record::ending e);

/// The node name as the history keeps and writes it: a byte that a line's
/// value cannot hold (space, control, non-ASCII, '=') or that separates
/// arrivals (',') becomes '_'; "" becomes "?"; a name longer than max_node
/// keeps its first bytes, then '~' and 8 hex digits of a hash of the whole
/// name (two long names stay two nodes). Idempotent.
std::string node_label(std::string_view node);

/// Shell-style glob: '*' any run, '?' one byte. No classes.
bool glob_match(std::string_view pattern, std::string_view s);

/// Which rounds a reader asks for.
struct query {
  std::string scope = "*";  ///< "*": every scope
  std::string name;         ///< glob; "": every name
  std::uint64_t last = 0;   ///< the last K matching rounds; 0: all
};

class history {
 public:
  explicit history(std::size_t capacity = default_capacity) : capacity_(capacity) {}
  /// Adds a finished round; wall_first_ms is the unix time of its first
  /// arrival. Returns the round's seq. Drops the oldest rounds past capacity.
  std::uint64_t add(const round_record& r, std::int64_t wall_first_ms);
  /// Adds a round read back (from a file): seq and run are kept.
  void add(const round_view& r);
  /// The run that add(round_record) records rounds under (new_run).
  void set_run(const std::string& run) { run_ = intern(names_, name_index_, run); }

  std::size_t rounds() const { return rounds_.size(); }
  std::size_t arrivals() const { return arrivals_.size(); }
  /// Bytes held: records, headers and interned strings (for the docs' figure).
  std::size_t memory_bytes() const;

  /// The seqs of the rounds that match q, oldest first.
  std::vector<std::uint64_t> select(const query& q) const;
  std::optional<round_view> get(std::uint64_t seq) const;
  /// STATUS last=1 (status --watch): when the newest round held of b's
  /// barrier is round b.gen - 1 and was released, sets b.last from it (its
  /// age at now_ms, unix ms; its last arrival), and names the node of each
  /// rank of b.missing_nodes that has none yet from that round.
  void fill_last(proto::barrier_info& b, std::int64_t now_ms) const;

  /// Visits every round held, oldest first.
  void each(const std::function<void(const round_view&)>& f) const;

  /// The lines of one page of a HISTORY reply: rounds of `seqs` from index
  /// `from`, until at least max_bytes were written (always one round);
  /// `next` is the index to ask for next, or nullopt at the end.
  std::vector<std::string> page(const std::vector<std::uint64_t>& seqs, std::size_t from, std::size_t max_bytes,
                                std::optional<std::size_t>& next) const;

 private:
  struct round_header {
    std::uint64_t seq;
    std::uint64_t gen;
    std::uint64_t first;  ///< absolute index of its first arrival_rec
    std::int64_t at_ms;
    std::uint32_t scope, name, run;  ///< interned
    std::uint32_t n;            ///< 0: unknown
    std::uint32_t count, duration_ms, withdrawn, timeouts;
    round_record::ending end;
    proto::verdict v;
  };
  std::uint32_t intern(std::vector<std::string>& table, std::unordered_map<std::string, std::uint32_t>& index,
                       const std::string& s);
  round_view view(const round_header& h) const;
  void trim();

  std::size_t capacity_;
  std::deque<round_header> rounds_;
  std::deque<arrival_rec> arrivals_;
  std::uint64_t dropped_ = 0;  ///< arrival records dropped from the front (absolute index base)
  std::uint64_t next_seq_ = 1;
  std::vector<std::string> nodes_, names_;
  std::unordered_map<std::string, std::uint32_t> node_index_, name_index_;
  std::uint32_t run_ = intern_empty();  ///< names_ index of the current run
  /// The newest round's seq of each barrier (scope << 32 | name, interned),
  /// for fill_last: as many entries as names, which are never dropped either.
  std::unordered_map<std::uint64_t, std::uint64_t> newest_;
  void note_newest(const round_header& h);
  std::uint32_t intern_empty() { return intern(names_, name_index_, std::string()); }
};

// ---- the line format (the history file and the HISTORY reply share it) ----
//   TFBHISTORY v=1                                   (file only: its first line)
//   ROUND seq=7 scope=S name=N gen=3 n=8 end=release verdict=continue at=UNIXMS ms=DUR withdrawn=0 timeouts=0 count=8 run=R
//                                                    (run= since issue #32; a reader takes a ROUND without it)
//   ARR a=RANK@NODE+OFFSET,...                       (count arrivals in all; rank '-' when none)
// An ARR value holds as many arrivals as fit in proto::max_value bytes (the
// reader's limit): a new ARR line starts before one would pass it.
/// The lines of one round (each ends with '\n'); nodes as node_label writes them.
std::string format_round(const round_view& r);

/// Reads rounds back from lines, with checks. A bad line costs the round it
/// belongs to, not the rest: the parser drops that round and goes on at the
/// next ROUND line.
class round_parser {
 public:
  /// Feeds one line (without newline). False, with error, when a round was
  /// dropped because of this line (the line is bad, or it is a ROUND that
  /// came before the previous round's arrivals were all listed).
  bool feed(std::string_view line, std::string& error);
  /// True when no round is half read.
  bool complete() const { return !pending_; }
  /// Rounds completed so far (taken).
  std::vector<round_view> take() { return std::exchange(done_, {}); }

 private:
  bool feed_round(const proto::line& l, std::string& error);     // ROUND: a round's fields
  bool feed_arrivals(const proto::line& l, std::string& error);  // ARR: some of its arrivals
  bool feed_line(std::string_view raw, std::string& error);
  std::optional<round_view> pending_;
  bool skipping_ = false;  ///< after a bad line: the ARR lines of its round are ignored
  std::uint32_t expected_ = 0;
  std::vector<round_view> done_;
};

/// Parses a whole history file's text. A bad line costs its round: it is
/// skipped with a warning ("LINE: why"; at most max_warnings of them, then
/// a count). False, with "LINE: why" in error, only when the file is not a
/// history at all (no header, another format version, empty).
bool parse_file(std::string_view text, std::vector<round_view>& out, std::vector<std::string>& warnings,
                std::string& error);
inline constexpr std::size_t max_warnings = 10;
/// The header line of a history file.
std::string file_header();

}  // namespace hist
}  // namespace tfb
