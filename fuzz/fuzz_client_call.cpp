// libFuzzer target: random sequences of events into one call of wait,
// decide or abort (src/core/client_call.h): replies of every kind, timers
// that fire, SIGINT and SIGTERM, lost connections, the connection's own
// failures and --decide-by verdicts, each with a link that is up, lost, or
// not yet sent. scripts/fuzz builds and runs it (`scripts/fuzz client_call`).
//
// The first byte picks the call (wait, decide, abort; --timeout, progress,
// --decide-by, --no-wait, the note). Each byte after it is one event: its
// low 4 bits which one, the next 2 the link, the top 2 the round's number.
// Invariants, a __builtin_trap() when broken:
//  - the call finishes at most once, and asks nothing (no line, no timer,
//    no command, no report) after it has finished;
//  - a wait ends `timed_out` only after a LEFT, never after a signal, and
//    only once its timeout fired; without a LEFT a timed-out wait ends
//    `unconfirmed` (may still be counted);
//  - an interrupt says `withdrew` only after a LEFT that came after it;
//  - once a signal came, the call ends `interrupted`, whatever ends it;
//  - LEAVE goes out only for wait, once its timeout fired or after WAITING
//    (an interrupt), never for decide or abort;
//  - the --decide-by command is asked for at most once.
#include <cstddef>
#include <cstdint>
#include <string>

#include "client_call.h"

namespace {

using namespace tfb;
using namespace tfb::client;
using kind = call_result::kind;

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

call_config config_of(std::uint8_t b) {
  call_config c;
  c.k = static_cast<call_kind>(b % 3);
  c.addr = "127.0.0.1:7777";
  c.scope = "s";
  c.name = c.k == call_kind::decide && (b & 0x80) ? "" : "b";
  if (b & 0x04) c.timeout = duration((b & 0x08) ? 0 : 1000);
  if (b & 0x10) c.progress_every = duration(500);
  c.decide_by = (b & 0x20) != 0;
  c.v = proto::verdict::stop;
  c.wait = (b & 0x40) == 0;
  c.note = (b & 0x08) != 0;
  return c;
}

proto::reply reply_of(unsigned which, std::uint64_t gen) {
  switch (which) {
    case 0: return proto::waiting{"b", gen, 1, 2};
    case 1: return proto::release{"b", gen, proto::verdict::continue_, 2, "m"};
    case 2: return proto::all_here{"b", gen, 2, 2};
    case 3: return proto::aborted{"b", gen, 1, "r"};
    case 4: return proto::decided{"b", gen, proto::verdict::stop, 1, 2};
    case 5: return proto::left{"b", gen};
    default: {
      proto::barrier_info i;
      i.scope = "s";
      i.name = "b";
      i.gen = gen;
      i.arrived = 1;
      return proto::status_reply{{i}};
    }
  }
}

struct watcher {
  call_kind k;
  bool finished = false, waited = false, left = false, timeout_fired = false, signalled = false;
  bool left_after_signal = false, ran_decide_by = false;

  void check(const call_step& s) {
    if (finished) {
      CHECK(!s.result && s.send.empty() && s.arm.empty() && !s.report && !s.note && !s.run_decide_by);
      return;
    }
    if (s.send.find("LEAVE") != std::string::npos) CHECK(k == call_kind::wait && (waited || timeout_fired));
    if (s.run_decide_by) {
      CHECK(!ran_decide_by);
      ran_decide_by = true;
    }
    if (!s.result) return;
    finished = true;
    const call_result& r = *s.result;
    if (r.k == kind::timed_out) CHECK(k == call_kind::wait && left && timeout_fired && !signalled);
    if (r.k == kind::interrupted && r.how == call_result::interrupt_how::withdrew) CHECK(left_after_signal);
    if (signalled) CHECK(r.k == kind::interrupted);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  client_call call(config_of(data[0]));
  watcher w{config_of(data[0]).k};
  w.check(call.start());
  duration now{0};
  for (std::size_t i = 1; i < size; ++i) {
    std::uint8_t b = data[i];
    unsigned ev = b & 0x0f;
    link_state l{(b & 0x10) != 0, (b & 0x30) != 0};
    std::uint64_t gen = 1 + (b >> 6);
    now += duration(100);
    call_step s;
    if (ev <= 6) {
      if (ev == 0) w.waited = true;
      if (ev == 5) {
        w.left = true;
        if (w.signalled) w.left_after_signal = true;
      }
      s = call.reply(reply_of(ev, gen), l, now);
    } else if (ev <= 10) {
      s = call.timer(static_cast<call_timer>(ev - 7), l, now);
      if (ev == 7 && call.timing_out()) w.timeout_fired = true;
    } else if (ev <= 12) {
      if (!call.done()) w.signalled = true;
      s = call.signal(ev == 11 ? interrupt_signal::sigint : interrupt_signal::sigterm, l);
    } else if (ev == 13) {
      s = call.lost();
    } else if (ev == 14) {
      s = call.fail({error_kind::unreachable, "unreachable"});
    } else {
      s = call.verdict_ready("DECIDE\n");
    }
    w.check(s);
    CHECK(w.finished == call.done());
  }
  return 0;
}
