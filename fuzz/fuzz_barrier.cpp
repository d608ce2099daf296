// libFuzzer target: the bytes are a script of operations on a barrier_set
// (src/core/barrier.h): ARRIVE, DECIDE, LEAVE / close / unresponsive, a participant
// coming back on a new connection, ABORT, prune, snapshot+restore, with small
// connection ids, three names in two scopes, n and ranks below 5.
//   scripts/fuzz builds and runs it.
//
// After every step the checker verifies the rules against a model, as the
// property test in tests/unit/barrier_test.cpp does (both use
// tests/support/barrier_checker.h): no RELEASE before n distinct participants
// were present at once; one verdict and message per round; at most one final
// reply (RELEASE / ALLHERE / ABORTED / ERR) per request; nothing to a closed
// connection; delivered= and notified= counts; active(); STATUS agrees; the
// journal lists exactly what was released; restore(snapshot()) is faithful.
// A violation prints the history and calls __builtin_trap().
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "barrier.h"
#include "../tests/support/barrier_checker.h"

namespace tfb {
namespace {

using check::checker;
using check::none;
using check::opt_u32;
using check::peer;
using proto::verdict;

/// Reads the fuzzer's bytes as choices; past the end every choice is 0.
class script {
 public:
  script(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool more() const { return pos_ < size_; }
  std::size_t pick(std::size_t n) { return pos_ < size_ ? data_[pos_++] % n : 0; }

 private:
  const std::uint8_t* data_;
  std::size_t size_, pos_ = 0;
};

void run(const std::uint8_t* data, std::size_t size) {
  const char* names[] = {"a", "b", "c"};
  const char* scopes[] = {"s", "t"};
  const char* messages[] = {"", "m1", "loss diverged"};
  barrier_set bs;
  checker ck(bs, [](const std::string& m) {
    std::fprintf(stderr, "%s\n", m.c_str());
    __builtin_trap();
  });
  script in(data, size);
  millis now = 0;
  auto some_n = [&]() -> opt_u32 {
    std::size_t p = in.pick(5);
    return p == 0 ? none : opt_u32(static_cast<std::uint32_t>(p));
  };
  auto some_rank = [&](opt_u32 n) -> opt_u32 {
    std::size_t p = in.pick(5);
    if (p == 4) return none;
    auto r = static_cast<std::uint32_t>(p);
    if (n && r >= *n) return none;  // parse_request refuses rank >= n
    return r;
  };
  auto any_of = [&](const std::vector<conn_id>& v) { return v[in.pick(v.size())]; };
  for (int step = 0; step < 4000 && in.more(); ++step) {
    std::size_t op = in.pick(16);
    now += static_cast<millis>(in.pick(8) * 10);
    if (op < 6) {
      auto retry = ck.retry_conns();
      conn_id c = !retry.empty() && op == 5 ? any_of(retry) : ck.fresh();
      proto::arrive a;
      a.scope = scopes[in.pick(2)];
      a.name = names[in.pick(3)];
      a.id = "p" + std::to_string(c);
      a.n = some_n();
      a.rank = some_rank(a.n);
      a.chief = in.pick(4) == 0;
      ck.arrive(c, a, now);
    } else if (op < 8) {
      conn_id c = ck.fresh();
      proto::decide d;
      d.scope = scopes[in.pick(2)];
      std::size_t nm = in.pick(4);
      d.name = nm == 3 ? "" : names[nm];
      d.id = "p" + std::to_string(c);
      d.v = in.pick(2) ? verdict::stop : verdict::continue_;
      d.message = messages[in.pick(3)];
      d.n = some_n();
      d.rank = some_rank(d.n);
      d.wait = in.pick(2) == 0;
      ck.decide(c, d, now);
    } else if (op < 12) {
      auto open = ck.open_conns();
      if (open.empty()) continue;
      conn_id c = any_of(open);
      std::size_t h = in.pick(3);
      ck.leave(c, h == 0 ? departure::left : h == 1 ? departure::disconnected : departure::unresponsive, now);
    } else if (op < 13) {
      auto back = ck.comeback_conns();
      if (back.empty()) continue;
      ck.comeback(any_of(back), ck.fresh(), now);
    } else if (op < 14) {
      ck.abort(ck.fresh(), proto::abort_req{scopes[in.pick(2)], names[in.pick(3)], messages[in.pick(3)]}, now);
    } else if (op < 15) {
      now += static_cast<millis>(in.pick(4) * 100);
      ck.prune(now, 100);
    } else {
      ck.check_snapshot(now);
    }
  }
  ck.shutdown();
}

}  // namespace
}  // namespace tfb

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tfb::run(data, size);
  return 0;
}
