/* The server of floor (a): accepts N connections, then writes one byte to
 * each and closes them; again for the next N. Blocking and single-threaded:
 * it does as little as a server can.
 *   tfb_floor_a_server --n N [--listen 127.0.0.1:0]
 * Prints FLOOR_ADDR=127.0.0.1:PORT once listening; runs until killed. */
#define _GNU_SOURCE
#include <signal.h>

#include "floor_common.h"

int main(int argc, char** argv) {
  const char* listen_on = "127.0.0.1:0";
  long n = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--n") == 0) n = strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--listen") == 0) listen_on = argv[i + 1];
  }
  if (n <= 0 || n > 100000) {
    fprintf(stderr, "usage: tfb_floor_a_server --n N [--listen 127.0.0.1:0]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  floor_raise_fd_limit();
  int* fds = malloc((size_t)n * sizeof *fds);
  int lfd = floor_listen(listen_on, 0);
  for (;;) {
    long have = 0;
    while (have < n) {
      int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
      if (c >= 0) fds[have++] = c;
    }
    for (long i = 0; i < n; ++i) {
      (void)!write(fds[i], "G", 1);
      close(fds[i]);
    }
  }
}
