/* What one CPUID instruction costs on this machine. On a virtual machine it
 * traps to the hypervisor (a VM exit), so code that probes the CPU at start-up
 * pays for it in every process: OpenSSL's libcrypto (8 CPUIDs in its
 * constructor) and std::random_device (7) did, in every `tfbarrier` start.
 *   tfb_cpuid_cost [COUNT]     # default 10000; prints microseconds per CPUID */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

int main(int argc, char** argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
  if (n <= 0) n = 10000;
  unsigned a, b, c, d, sink = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; ++i) {
    __cpuid_count(7, 0, a, b, c, d);
    sink ^= a ^ b ^ c ^ d;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
  printf("CPUID: %.2f us each (%ld of them; %u)\n", ns / (double)n / 1000.0, n, sink & 1u);
  return 0;
}
#else
int main(void) {
  printf("CPUID: n/a (not an x86 processor)\n");
  return 0;
}
#endif
