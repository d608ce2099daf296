// What the host's owner check costs a connection (issue #30; docs/performance.md):
// M loopback connections, each accepted, then each one's owner asked of the
// kernel as the host asks it (peer_owner_of: both ends known, one kept
// netlink socket) and as a participant asks it (peer_owner: the socket's ends
// read first). Prints microseconds per lookup, three passes.
//   <build>/bench/tfb_peer_owner_cost [M=400]   (M below the descriptor limit / 2)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "peer_owner.h"

int main(int argc, char** argv) {
  int m = argc > 1 ? std::atoi(argv[1]) : 400;
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (l < 0 || ::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 4096) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &al) != 0) {
    std::perror("listen");
    return 1;
  }
  std::vector<int> accepted;
  std::vector<sockaddr_storage> peers;
  for (int i = 0; i < m; ++i) {
    int c = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_storage p{};
    socklen_t pl = sizeof p;
    if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      std::perror("connect");
      return 1;
    }
    accepted.push_back(::accept(l, reinterpret_cast<sockaddr*>(&p), &pl));
    peers.push_back(p);
  }
  sockaddr_storage local{};
  std::memcpy(&local, &a, sizeof a);
  int nl = tfb::open_sock_diag();
  std::string error;
  for (int pass = 0; pass < 3; ++pass) {
    int found = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (auto& p : peers) found += tfb::peer_owner_of(local, p, error, nullptr, nl).has_value();
    auto t1 = std::chrono::steady_clock::now();
    for (int f : accepted) found += tfb::peer_owner(f, error, nullptr, nl).has_value();
    auto t2 = std::chrono::steady_clock::now();
    if (found != 2 * m) {
      std::fprintf(stderr, "only %d of %d lookups found the owner: %s\n", found, 2 * m, error.c_str());
      return 1;
    }
    std::printf("M=%d pass %d: host's lookup (peer_owner_of) %.2f us; participant's (peer_owner) %.2f us\n", m,
                pass + 1, std::chrono::duration<double, std::micro>(t1 - t0).count() / m,
                std::chrono::duration<double, std::micro>(t2 - t1).count() / m);
  }
  return 0;
}
