#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "cli.h"
#include "protocol.h"
#include "exit_codes.h"
#include "version.h"

int main(int argc, char** argv) {
  // --version is answered before anything else is built: it is the startup floor.
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("tfbarrier %s (protocol %d)\n", tfb::version, tfb::protocol_version);
    return tfb::exit_code::ok;
  }
  // Started with stdin, stdout or stderr closed (`tfbarrier wait >&-`), the
  // first socket or pipe would take that number, and a message meant for
  // stdout would go into it: fill the gaps with /dev/null first.
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) {
      int n = ::open("/dev/null", O_RDWR);
      if (n > 2) ::close(n);
    }
  std::signal(SIGPIPE, SIG_IGN);  // a closed peer is an error code, not a death
  return tfb::run_cli(argc, argv);
}
