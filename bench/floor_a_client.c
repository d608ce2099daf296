/* Floor (a): a process that crosses loopback once. It connects to
 * tfb_floor_a_server and waits for one byte; exit 0 when it came.
 *   tfb_floor_a_client 127.0.0.1:PORT */
#include "floor_common.h"

int main(int argc, char** argv) {
  struct sockaddr_in a;
  if (argc != 2 || floor_parse_addr(argv[1], &a) != 0) {
    fprintf(stderr, "usage: tfb_floor_a_client 127.0.0.1:PORT\n");
    return 2;
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) != 0) return 69;
  char c;
  return read(fd, &c, 1) == 1 ? 0 : 69;
}
