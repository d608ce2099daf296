/* Floor (b): the least any host can do for M participants. A single-threaded
 * epoll server that counts one-line arrivals and, when M are in, writes one
 * line to each; a connection that closes before that is withdrawn. Nothing
 * else: no protocol, no names, no timers.
 *   tfb_floor_b_server --n M [--listen 127.0.0.1:0] [--reply LINE]
 * Prints FLOOR_ADDR=127.0.0.1:PORT once listening; runs until killed. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>

#include "floor_common.h"

int main(int argc, char** argv) {
  const char* listen_on = "127.0.0.1:0";
  const char* reply = "RELEASE";
  long n = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--n") == 0) n = strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--listen") == 0) listen_on = argv[i + 1];
    else if (strcmp(argv[i], "--reply") == 0) reply = argv[i + 1];
  }
  if (n <= 0) {
    fprintf(stderr, "usage: tfb_floor_b_server --n M [--listen 127.0.0.1:0] [--reply LINE]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  floor_raise_fd_limit();
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  size_t max_fd = rl.rlim_cur == RLIM_INFINITY ? (1u << 20) : (size_t)rl.rlim_cur;
  /* slot[fd]: -1 not arrived, else its index in `arrived`. */
  int* slot = malloc(max_fd * sizeof *slot);
  int* arrived = malloc(max_fd * sizeof *arrived);
  for (size_t i = 0; i < max_fd; ++i) slot[i] = -1;
  long count = 0;
  char line[512];
  size_t line_len = (size_t)snprintf(line, sizeof line, "%s\n", reply);

  int lfd = floor_listen(listen_on, SOCK_NONBLOCK);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  struct epoll_event evs[1024];
  char buf[4096];
  for (;;) {
    int k = epoll_wait(ep, evs, 1024, -1);
    for (int e = 0; e < k; ++e) {
      int fd = evs[e].data.fd;
      if (fd == lfd) {
        for (;;) {
          int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
        }
        continue;
      }
      ssize_t r = read(fd, buf, sizeof buf);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r <= 0) { /* gone: withdraw it if it was waiting */
        int s = slot[fd];
        if (s >= 0) {
          int last = arrived[--count];
          arrived[s] = last;
          slot[last] = s;
        }
        slot[fd] = -1;
        close(fd);
        continue;
      }
      if (slot[fd] >= 0 || memchr(buf, '\n', (size_t)r) == NULL) continue;
      slot[fd] = (int)count;
      arrived[count++] = fd;
      if (count == n) {
        for (long i = 0; i < count; ++i) {
          (void)!write(arrived[i], line, line_len);
          slot[arrived[i]] = -2; /* released: not counted again */
        }
        count = 0;
      }
    }
  }
}
