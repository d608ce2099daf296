#pragma once
// One call of `wait`, `decide` or `abort`, as a pure state machine above the
// connection (client_conn.h): what each reply means, the --timeout that
// withdraws (STATUS and LEAVE, then LEFT within leave_grace), the interrupt
// whose LEAVE must be confirmed by LEFT within interrupt_grace, a timeout or
// an interrupt while the connection is lost and being resumed, progress and
// the --decide-by chief's command. Events go in (a reply, a timer that
// fired, a signal, the connection lost), with the time and the state of the
// link as values; actions come out (request lines to send, timers to arm,
// the command to run, a progress report) and, once, a typed result. No
// sentences: src/cli/ says each result in words and picks its exit code.
// client.cpp keeps the sockets, the timers, the signals and the command.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "duration.h"
#include "error.h"
#include "protocol.h"

namespace tfb {

/// Progress while waiting (wait --progress).
struct progress {
  std::string name;
  std::uint64_t gen = 0;
  std::uint32_t arrived = 0;
  std::optional<std::uint32_t> n;
  std::optional<std::string> missing;  ///< rank ranges
  duration waited{};
  bool gathered = false;  ///< all present: the round waits for the chief's verdict
};

namespace client {

/// How long an interrupted call waits for the host to answer its LEAVE.
inline constexpr duration interrupt_grace = std::chrono::seconds(1);
/// How long a timed-out participant waits for the host to confirm its LEAVE.
inline constexpr duration leave_grace = std::chrono::seconds(2);
/// decide: how long after DECIDED, without the release, the caller is told.
inline constexpr duration note_after = std::chrono::seconds(1);

enum class interrupt_signal : std::uint8_t { sigint, sigterm };

/// The wait between tries to connect (or after BUSY): doubling from `first`
/// up to `cap`, each scaled by a jitter the caller draws (0.5 to 1.5, so
/// that a crowd does not come back at once), and never past what is left of
/// the --connect-timeout budget: one last try at the deadline.
class backoff {
 public:
  backoff(duration first, duration cap) : next_(first), cap_(cap) {}
  /// The wait before the next try, or nullopt when the budget is spent (left <= 0).
  std::optional<duration> next(double jitter, duration left) {
    if (left <= duration(0)) return std::nullopt;
    auto wait = std::chrono::duration_cast<duration>(next_ * jitter);
    next_ = std::min<duration>(next_ * 2, cap_);
    return std::min(wait, left);
  }

 private:
  duration next_, cap_;
};

/// decide: the verdict is recorded (DECIDED), for --no-wait's result and the note.
struct recorded {
  proto::verdict v = proto::verdict::none;
  std::string name;
  std::uint64_t gen = 0;
  std::uint32_t arrived = 0;
  std::optional<std::uint32_t> n;
};

/// What a call ended with, as data.
struct call_result {
  enum class kind : std::uint8_t {
    released,         ///< wait: RELEASE: v, message
    all_here,         ///< wait --chief: everyone is here (ALLHERE)
    aborted,          ///< ABORTED: name, gen, message (the reason)
    timed_out,        ///< wait: --timeout, and LEFT confirmed the withdrawal: name, gen, timeout, last
    unconfirmed,      ///< wait: --timeout, no LEFT (`why`): may still be counted: name, gen, timeout, last, addr
    decide_recorded,  ///< decide --no-wait: `rec`
    decide_delivered, ///< decide: RELEASE: v, delivered, name, gen
    decide_timed_out, ///< decide: --timeout: v (ours), name, gen, timeout, and last or `why` reconnecting
    abort_done,       ///< abort: ABORTED: name, gen, delivered (those told)
    interrupted,      ///< a signal: sig, how
    failed,           ///< the connection's end (unreachable, protocol, auth...): failure
  };
  /// What an interrupted call can say of its round.
  enum class interrupt_how : std::uint8_t {
    plain,            ///< nothing to add
    withdrew,         ///< wait: LEFT confirmed the withdrawal from name, gen
    unconfirmed,      ///< wait: no LEFT within interrupt_grace: may still be counted in name, gen
    released_first,   ///< wait: the round (name, gen, v) released before the host read the LEAVE
    verdict_stands,   ///< decide: the verdict v stands for name, gen
  };
  /// Why no LEFT came (unconfirmed).
  enum class no_left : std::uint8_t { reconnecting, unanswered };

  kind k = kind::failed;
  proto::verdict v = proto::verdict::none;
  std::string name;
  std::uint64_t gen = 0;
  std::string message;  ///< the chief's message (released), the reason (aborted)
  std::optional<std::uint32_t> delivered;
  duration timeout{};
  std::optional<proto::barrier_info> last;  ///< the host's last STATUS of the round, if it gave one
  no_left why = no_left::unanswered;
  bool reconnecting = false;  ///< decide_timed_out: while reconnecting
  std::string addr;           ///< the host's address, for the words
  interrupt_signal sig = interrupt_signal::sigint;
  interrupt_how how = interrupt_how::plain;
  recorded rec;               ///< decide_recorded
  tfb::error failure;         ///< failed only: the connection's own cause and words
};

enum class call_kind : std::uint8_t { wait, decide, abort };

struct call_config {
  call_kind k = call_kind::wait;
  std::string addr;          ///< HOST:PORT, for the result
  std::string scope, name;   ///< wait: the barrier; decide: the name given ("" until DECIDED names it)
  std::optional<duration> timeout;
  std::optional<duration> progress_every;  ///< wait: ask STATUS this often, and report it
  bool decide_by = false;    ///< wait: the chief of --decide-by (ARRIVE decide=1)
  proto::verdict v = proto::verdict::none;  ///< decide: the verdict sent
  bool wait = true;          ///< decide: wait for the delivery (not --no-wait)
  bool note = false;         ///< decide: tell once (note_after) when the verdict is recorded but not delivered
};

/// The link as the driver sees it when an event comes.
struct link_state {
  bool can_send = false;      ///< a line written now follows the request on a live connection
  bool request_sent = false;  ///< the request went out on some connection: the host may have counted it
};

/// timeout: --timeout, then leave_grace; interrupt: interrupt_grace.
enum class call_timer : std::uint8_t { timeout, progress, note, interrupt };
inline constexpr std::size_t call_timers = 4;

/// What to do after one event. In order: send, arm, then the rest.
struct call_step {
  std::string send;  ///< request lines, unsealed (the connection seals them)
  std::vector<std::pair<call_timer, duration>> arm;  ///< (re)arm each timer to fire after its duration
  std::optional<progress> report;       ///< wait: a progress report
  std::optional<recorded> note;         ///< decide: recorded, not delivered yet
  std::optional<proto::all_here> run_decide_by;  ///< wait --decide-by: run the command now (once)
  std::optional<call_result> result;    ///< the call is over: cancel every timer, close
};

class client_call {
 public:
  explicit client_call(call_config c) : c_(std::move(c)) {}

  /// The call starts (its request is on its way): wait arms --timeout now.
  call_step start();
  /// A reply of the host, at `now` (any monotonic time; only differences count).
  call_step reply(const proto::reply& r, link_state l, duration now);
  call_step timer(call_timer t, link_state l, duration now);
  call_step signal(interrupt_signal s, link_state l);
  /// The connection was lost (or ended to be made again). The driver
  /// reconnects unless this finishes the call.
  call_step lost();
  /// The driver's own end of the call (unreachable, a protocol error, ...).
  call_step fail(tfb::error e);
  /// wait --decide-by: the command ended; `request` is the DECIDE or ABORT it makes.
  call_step verdict_ready(std::string request);

  bool done() const { return done_; }
  bool timing_out() const { return firing_; }
  /// What a signal ends the call with while its LEAVE awaits LEFT (for tests and the fuzzer).
  const std::optional<call_result>& interrupting() const { return interrupting_; }

 private:
  void wait_reply(const proto::reply& r, call_step& s, duration now);
  void decide_reply(const proto::reply& r, call_step& s);
  void arrived(std::uint64_t gen, call_step& s);
  void timeout_fired(link_state l, call_step& s);
  void finish(call_result r, call_step& s);
  call_result base(call_result::kind k) const;
  call_result interrupted(interrupt_signal sig, bool confirmed) const;
  std::string withdrawal() const;

  call_config c_;
  bool done_ = false;
  // --timeout: armed (its timer runs), firing (it passed: the withdrawal is on its way)
  bool armed_ = false, firing_ = false;
  std::uint64_t gen_ = 0;       ///< the round: from WAITING (wait) or DECIDED (decide)
  bool progressing_ = false;    ///< wait: progress scheduled (from the first WAITING)
  bool leave_on_interrupt_ = false;  ///< wait: WAITING came: a signal sends LEAVE first
  bool left_asked_ = false;     ///< wait: a LEAVE of ours went out: LEFT may answer it
  bool stands_ = false;         ///< decide: DECIDED came (wait): an interrupt says the verdict stands
  proto::verdict stands_v_ = proto::verdict::none;
  bool noting_ = false;         ///< decide: the note is scheduled
  recorded note_;
  std::optional<proto::barrier_info> last_;
  std::optional<call_result> interrupting_;  ///< what a signal ends the call with, once LEFT (or not) comes
  bool decide_started_ = false;
  std::string verdict_request_;
};

}  // namespace client
}  // namespace tfb
