#pragma once
// How many seeds a random property test runs: all of them, or a share of
// them where scripts/test says so. Its sanitizer stage (ASan and UBSan,
// several times slower) sets TFB_TEST_SEED_DIVISOR=4, after the plain stage
// has run every seed: there the point is memory and undefined behaviour on
// the same paths, not the count of random walks.
#include <algorithm>
#include <cstdlib>

namespace tfb::test {

inline unsigned seeds(unsigned all) {
  const char* e = std::getenv("TFB_TEST_SEED_DIVISOR");
  unsigned d = e ? static_cast<unsigned>(std::strtoul(e, nullptr, 10)) : 1;
  return d > 1 ? std::max(1u, all / d) : all;
}

}  // namespace tfb::test
