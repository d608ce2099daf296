/* Shared by the floor programs: parse 127.x.y.z:PORT, listen, raise the
 * descriptor limit. Plain C, no allocation beyond what the kernel does. */
#ifndef TFB_FLOOR_COMMON_H
#define TFB_FLOOR_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Fills *a from "127.0.0.1:PORT"; only loopback is accepted. */
static inline int floor_parse_addr(const char* s, struct sockaddr_in* a) {
  char host[64];
  const char* colon = strrchr(s, ':');
  if (!colon || (size_t)(colon - s) >= sizeof host) return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  memset(a, 0, sizeof *a);
  a->sin_family = AF_INET;
  if (inet_pton(AF_INET, host, &a->sin_addr) != 1) return -1;
  if ((ntohl(a->sin_addr.s_addr) >> 24) != 127) return -1;
  long port = strtol(colon + 1, NULL, 10);
  if (port < 0 || port > 65535) return -1;
  a->sin_port = htons((unsigned short)port);
  return 0;
}

static inline void floor_raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* Listens on addr (port 0: any), prints "FLOOR_ADDR=127.0.0.1:PORT". */
static inline int floor_listen(const char* addr, int flags) {
  struct sockaddr_in a;
  if (floor_parse_addr(addr, &a) != 0) {
    fprintf(stderr, "bad --listen %s: expected 127.x.y.z:PORT\n", addr);
    exit(2);
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, 65535) != 0) {
    perror("listen");
    exit(69);
  }
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr*)&a, &len);
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  printf("FLOOR_ADDR=%s:%u\n", ip, (unsigned)ntohs(a.sin_port));
  fflush(stdout);
  return fd;
}
#endif
