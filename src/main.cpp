#include <csignal>
#include <cstdio>
#include <cstring>

#include "cli.h"
#include "version.h"

int main(int argc, char** argv) {
  // --version is answered before anything else is built: it is the startup floor.
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("tfbarrier %s (protocol %d)\n", tfb::version, tfb::protocol_version);
    return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);  // a closed peer is an error code, not a death
  return tfb::run_cli(argc, argv);
}
