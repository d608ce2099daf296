// peer_owner() on real loopback connections: the kernel names the uid of the
// process that listens, our own for our listener, another uid's for theirs.
#include "peer_owner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <gtest/gtest.h>

namespace {

int listen_on(int family) {
  int s = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_storage a{};
  socklen_t len;
  if (family == AF_INET) {
    auto& v4 = reinterpret_cast<sockaddr_in&>(a);
    v4.sin_family = AF_INET;
    v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof v4;
  } else {
    auto& v6 = reinterpret_cast<sockaddr_in6&>(a);
    v6.sin6_family = AF_INET6;
    v6.sin6_addr = in6addr_loopback;
    len = sizeof v6;
  }
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(s, 8) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

int connect_to(int listener) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  int c = ::socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(c, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    ::close(c);
    return -1;
  }
  return c;
}

}  // namespace

TEST(PeerOwner, NamesOurOwnUidForOurListenerBeforeAccept) {
  int l = listen_on(AF_INET);
  ASSERT_GE(l, 0);
  int c = connect_to(l);
  ASSERT_GE(c, 0);
  std::string e;
  auto uid = tfb::peer_owner(c, e);  // not accepted yet: the kernel still knows the owner
  ASSERT_TRUE(uid) << e;
  EXPECT_EQ(*uid, ::geteuid());
  ::close(c);
  ::close(l);
}

TEST(PeerOwner, WorksOverIPv6Loopback) {
  int l = listen_on(AF_INET6);
  if (l < 0) GTEST_SKIP() << "no ::1 here";
  int c = connect_to(l);
  ASSERT_GE(c, 0);
  std::string e;
  auto uid = tfb::peer_owner(c, e);
  ASSERT_TRUE(uid) << e;
  EXPECT_EQ(*uid, ::geteuid());
  ::close(c);
  ::close(l);
}

TEST(PeerOwner, NamesAnotherUsersListener) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to listen as another uid";
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // another user's host: listens, tells its port, waits
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(1);
    int l = listen_on(AF_INET);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    if (::write(ready[1], &a.sin_port, sizeof a.sin_port) != sizeof a.sin_port) ::_exit(1);
    char b;
    (void)::read(done[0], &b, 1);
    ::_exit(0);
  }
  in_port_t port = 0;
  ASSERT_EQ(::read(ready[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = port;
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::string e;
  auto uid = tfb::peer_owner(c, e);
  ::close(c);
  (void)::write(done[1], "x", 1);
  int st = 0;
  ::waitpid(child, &st, 0);
  ASSERT_TRUE(uid) << e;
  EXPECT_EQ(*uid, 65534u);
}

// The host stopped (or restarted) between our connect() and the question:
// its end is gone. Not a stranger, and nothing to refuse: worth connecting
// again (the fault harness once saw a participant exit 77 here).
TEST(PeerOwner, AHostThatWentSinceConnectIsWorthAnotherTry) {
  int l = listen_on(AF_INET);
  ASSERT_GE(l, 0);
  int c = connect_to(l);
  ASSERT_GE(c, 0);
  ::close(l);  // the listener goes, and with it the connection it had not accepted
  std::string e;
  bool not_yet = false;
  auto uid = tfb::peer_owner(c, e, &not_yet);
  EXPECT_FALSE(uid);
  EXPECT_TRUE(not_yet) << e;
  EXPECT_NE(e.find("gone"), std::string::npos) << e;
  ::close(c);
}
