/* Floor (p): the least a participant of tfbarrier's protocol can do. A C
 * process, linked like floor (a)'s client, that connects to a real
 * `tfbarrier serve`, sends HELLO and ARRIVE in one write, reads until the
 * RELEASE line and exits with its verdict (0 continue, 1 stop). No options,
 * no settings, no timers, no signal handling, no authentication: it shows
 * what the protocol and the host cost over floor (a), apart from what
 * `tfbarrier wait` itself costs (docs/performance.md, "The floor of the
 * protocol").
 *   tfb_floor_p_client 127.0.0.1:PORT NAME N */
#include "floor_common.h"

int main(int argc, char** argv) {
  struct sockaddr_in a;
  if (argc != 4 || floor_parse_addr(argv[1], &a) != 0) {
    fprintf(stderr, "usage: tfb_floor_p_client 127.0.0.1:PORT NAME N\n");
    return 2;
  }
  char req[512];
  int len = snprintf(req, sizeof req,
                     "HELLO v=2 host=floor pid=%d\nARRIVE name=%s scope=default id=p%dx n=%s rank=- chief=0\n",
                     (int)getpid(), argv[2], (int)getpid(), argv[3]);
  if (len <= 0 || (size_t)len >= sizeof req) return 2;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) != 0) return 69;
  if (write(fd, req, (size_t)len) != len) return 69;
  /* Replies: HELLO, WAITING, then RELEASE name=.. gen=.. verdict=V. */
  char buf[4096];
  size_t have = 0;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r <= 0) return 69;
    have += (size_t)r;
    buf[have] = '\0';
    char* rel = strstr(buf, "RELEASE ");
    if (rel && strchr(rel, '\n')) return strstr(rel, "verdict=stop") ? 1 : 0;
    if (strstr(buf, "ERR ") || strstr(buf, "ABORTED ")) return 70;
    if (have == sizeof buf - 1) return 70;
  }
}
