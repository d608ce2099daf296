#pragma once
// What the host shows of the core's events (issue #34 item 4; core/events.h):
// each consumer of one step's observations, pure. The log writer turns an
// event into its line (the words the host's log has always had, which the
// tests and the users' greps read) and keeps warnings under --quiet; the
// metrics' side counts events, tallies and ended rounds into
// metrics::counters; the history feed holds the ended rounds' records until
// the host adds them to its history, after the step's replies went out.
// host.cpp only hands each step to an `observer`, and writes what it gives.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "barrier.h"
#include "events.h"
#include "history.h"
#include "metrics.h"

namespace tfb::observe {

enum class severity { info, warning };

/// The log's line for an event, without time or prefix; "" for a kind that
/// is only counted (auth_failed, timeout_leave, store_host_lost, store_diverged).
std::string line(const ev::event& e);
/// Warnings are logged under --quiet too.
severity severity_of(const ev::event& e);

/// Writes each event's line through `write` (the host's timestamped log),
/// all of them, or with quiet only the warnings.
class log_writer {
 public:
  log_writer(bool quiet, std::function<void(std::string_view)> write) : quiet_(quiet), write_(std::move(write)) {}
  void operator()(const ev::event& e) const;

 private:
  bool quiet_;
  std::function<void(std::string_view)> write_;
};

/// The counters an event moves (most move none: they are told, not counted).
void count(metrics::counters& c, const ev::event& e);
/// A step's tally and ended rounds, into c; both are emptied. Returns how
/// many rounds were released (the host times their replies: latency).
std::size_t count(metrics::counters& c, tally& t, std::vector<round_end>& ended);

/// The ended rounds' records, each with the wall time (ms since the epoch)
/// of its first arrival, until the host adds them to its history.
class history_feed {
 public:
  using entry = std::pair<round_record, std::int64_t>;
  /// Takes rounds (emptied): wall and mono are the same moment on the wall
  /// clock and on the clock of the records' times (round_record::first).
  void take(std::vector<round_record>& rounds, std::int64_t wall, millis mono);
  /// Hands each record waiting to add(record, wall_first), and forgets them.
  void drain(const std::function<void(const round_record&, std::int64_t)>& add);
  bool empty() const { return pending_.empty(); }

 private:
  std::vector<entry> pending_;
};

/// The three consumers, for a host: its log, its counters, its history.
class observer {
 public:
  observer(metrics::counters& c, bool quiet, std::function<void(std::string_view)> write)
      : counters_(c), log_(quiet, std::move(write)) {}
  /// One event: logged and counted.
  void operator()(const ev::event& e) {
    log_(e);
    observe::count(counters_, e);
  }
  /// A step's events, in order (emptied).
  void events(std::vector<ev::event>& evs) {
    for (const auto& e : evs) (*this)(e);
    evs.clear();
  }
  /// A step's measurements (tally and ended rounds, emptied); returns the released rounds.
  std::size_t measures(output& out) { return observe::count(counters_, out.counted, out.ended); }
  history_feed history;

 private:
  metrics::counters& counters_;
  log_writer log_;
};

}  // namespace tfb::observe
