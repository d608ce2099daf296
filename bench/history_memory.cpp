// The arrival history's memory (issue #21): 100 rounds of 19,000 arrivals,
// 16 nodes, added to the same hist::history the host keeps, with the default
// capacity (1,000,000 records) and with room for all 1,900,000. Prints the
// heap the history holds (mallinfo2) and the bytes per arrival record.
//   build/bench/bench/tfb_history_memory [ROUNDS] [N]
// It drives the pure store directly rather than a host over TCP: a host at
// 19,000 participants for 100 rounds takes minutes on 2 cores, and the store
// is the only thing that grows (the per-participant cost of a host is
// bench/fanout.sh's figure).
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "history.h"

namespace {
std::size_t heap() { return mallinfo2().uordblks; }

void run(std::size_t capacity, unsigned rounds, unsigned n) {
  std::size_t before = heap();
  std::size_t kept_arrivals = 0;
  {
    auto* h = new tfb::hist::history(capacity);
    for (unsigned g = 1; g <= rounds; ++g) {
      tfb::round_record r;
      r.scope = "job-123.0";
      r.name = "epoch" + std::to_string(g);
      r.gen = 1;
      r.n = n;
      r.v = tfb::proto::verdict::continue_;
      r.first = 1000;
      r.ended = 1000 + 900;
      r.arrivals.reserve(n);
      for (unsigned i = 0; i < n; ++i)
        r.arrivals.push_back({i, "gpu-a" + std::to_string(i / (n / 16 + 1)), 1000 + (i * 7919) % 900});
      h->add(r, 1'700'000'000'000);
    }
    std::size_t held = heap() - before;
    kept_arrivals = h->arrivals();
    std::printf("| %zu | %u x %u | %zu rounds, %zu records | %.1f MiB | %.1f B |\n", capacity, rounds, n, h->rounds(),
                kept_arrivals, static_cast<double>(held) / (1 << 20),
                static_cast<double>(held) / static_cast<double>(kept_arrivals));
    delete h;
  }
}
}  // namespace

int main(int argc, char** argv) {
  unsigned rounds = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 100;
  unsigned n = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 19000;
  std::printf("| capacity (serve --history) | rounds x arrivals added | kept | heap held | per record |\n");
  std::printf("|---|---|---|---|---|\n");
  run(1'000'000, rounds, n);
  run(static_cast<std::size_t>(rounds) * n, rounds, n);
  return 0;
}
