#pragma once
// The one way into the barriers: every input that changes a barrier_set
// (an arrival, a decision, an abort, a departure, forgetting idle barriers,
// the host shutting down) is submitted here, as a value.
//
// On a single host, local_door applies each input at once, in the order the
// host's one thread submits them, and journals what it must before the
// replies go out. It is also the seam for a state shared by many hosts (a
// store such as etcd): such a door would first have the store put the input
// in one order for all hosts, then apply it; the host's network code would
// not change (store_link.h's link_door is that door: its replies come back
// through on_applied). That is why inputs are plain values (they can be written to a
// log and replayed), carry their own time, and name connections by conn_id
// only. Reads (STATUS, whether anything waits) do not change state and do
// not pass through the door; nor does replaying the journal at start-up
// (barrier_set::restore), which happens before the door opens.
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "barrier.h"

namespace tfb {

/// Where local_door records the steps it applies: sys/journal.h's journal
/// (a file, flushed). An interface, so that the door stays pure.
class journal_sink {
 public:
  virtual ~journal_sink() = default;
  virtual bool is_open() const = 0;
  /// Appends entries, recorded for good before it returns; false with error (the system's reason).
  virtual bool append(const std::vector<journal_entry>& entries, std::string& error) = 0;
  /// True when it is time to rewrite the record as a snapshot (compact).
  virtual bool wants_compaction() const = 0;
  /// Rewrites the record as these entries; false with error, the old record whole.
  virtual bool compact(const std::vector<journal_entry>& entries, std::string& error) = 0;
  virtual const std::string& path() const = 0;
};

namespace input {
struct arrive {
  conn_id c;
  proto::arrive req;
  peer_info peer;
  millis now;
};
struct decide {
  conn_id c;
  proto::decide req;
  peer_info peer;
  millis now;
};
struct abort {
  conn_id c;
  proto::abort_req req;
  millis now;
};
struct leave {
  conn_id c;
  departure how;
  millis now;
  bool timed_out = false;  ///< LEAVE why=timeout: the participant gave up at its --timeout
};
/// Forget barriers with nobody waiting, idle longer than max_idle.
struct prune {
  millis now;
  millis max_idle;
};
/// With a store: forget one idle barrier, if nothing happened to it since
/// the store's time keeper saw it idle (barrier_set::forget). Carries no
/// time: when a barrier is old enough is the keeper's to judge, on its own
/// monotonic clock, so that no host's wall clock changes the state.
struct forget {
  barrier_set::idle_barrier which;
};
/// Abort the rounds whose chief gave no verdict within its within= of all
/// arriving, by now (barrier_set::expire). The host writes it when a decide
/// deadline passes; with a store it goes through the log like any input, so
/// every host aborts the same rounds.
struct expire {
  decide_deadline which;  ///< the round whose deadline passed, as its host measured it
  millis now;
};
/// Tell everyone waiting that the host stops (SHUTDOWN :text), and forget them.
struct shutdown {
  std::string text;
};
}  // namespace input

using door_input = std::variant<input::arrive, input::decide, input::abort, input::leave, input::prune, input::forget,
                                input::shutdown, input::expire>;

class door {
 public:
  virtual ~door() = default;
  /// Applies one input: out gets the replies, log lines and journal entries
  /// of the step. Returns false, with error (the system's reason), when the
  /// step could not be recorded: then nothing of it may be sent.
  virtual bool submit(const door_input& in, output& out, std::string& error) = 0;

  /// Where the replies of inputs applied after submit returned go: a store's
  /// door applies an input when the log brings it back, on every host, and
  /// hands the step's output (replies, log lines, records) back here. The
  /// host sets it once; a door that applies at once never calls it.
  using applied_fn = std::function<void(output&)>;
  void on_applied(applied_fn f) { applied_ = std::move(f); }

 protected:
  void hand_back(output& out) {
    if (applied_) applied_(out);
  }

 private:
  applied_fn applied_;
};

/// One host's door: applies inputs at once to a barrier_set, and appends
/// their journal entries to the journal (when there is one), flushed,
/// before submit returns.
class local_door final : public door {
 public:
  explicit local_door(barrier_set& state, journal_sink* j = nullptr) : state_(state), journal_(j) {}
  void set_journal(journal_sink* j) { journal_ = j; }
  bool submit(const door_input& in, output& out, std::string& error) override;

 private:
  barrier_set& state_;
  journal_sink* journal_;
};

}  // namespace tfb
