// A what-if, for bench/variants.sh only: the `wait` process without CLI11.
// It takes just `wait --name NAME --n N [--quiet]` and hands them to the real
// run_wait() (src/cli/cmd/wait.cpp), so everything after the command line is the
// product's own code. It checks nothing a user could get wrong: it is not a
// product path and is never installed. docs/performance.md ("What a static
// binary without CLI11 would buy") has what it measured and why tfbarrier
// does not ship it.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "commands.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  tfb::wait_cmd_options o;
  if (argc < 2 || std::strcmp(argv[1], "wait") != 0) {
    std::fprintf(stderr, "usage: %s wait --name NAME --n N [--quiet]\n", argv[0]);
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quiet") == 0) {
      o.common.quiet = true;
    } else if (i + 1 < argc && std::strcmp(argv[i], "--name") == 0) {
      o.name = argv[++i];
    } else if (i + 1 < argc && std::strcmp(argv[i], "--n") == 0) {
      o.n = static_cast<std::uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else {
      std::fprintf(stderr, "%s: only --name NAME, --n N and --quiet (got '%s')\n", argv[0], argv[i]);
      return 2;
    }
  }
  return tfb::run_wait(o);
}
