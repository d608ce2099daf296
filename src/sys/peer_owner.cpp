#include "peer_owner.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace tfb {

namespace {

void put_addr(const sockaddr_storage& a, __be16& port, __be32 (&out)[4]) {
  if (a.ss_family == AF_INET) {
    auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    port = v4.sin_port;
    std::memcpy(out, &v4.sin_addr, sizeof v4.sin_addr);
  } else {
    auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    port = v6.sin6_port;
    std::memcpy(out, &v6.sin6_addr, sizeof v6.sin6_addr);
  }
}

struct lookup {
  bool found = false;
  bool pending = false;  // the host's kernel side is still a request socket (no owner yet)
  uid_t uid = 0;
};

// One exact SOCK_DIAG_BY_FAMILY request for the socket whose local end is the
// peer and whose remote end is us: the host's side of this very connection.
// nl: a sock_diag socket to use (the host keeps one), or -1 for one of its own.
bool ask(const sockaddr_storage& local, const sockaddr_storage& peer, lookup& result, std::string& error,
         int given_nl) {
  int nl = given_nl >= 0 ? given_nl : ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) {
    error = fmt::format("cannot ask the kernel who owns the host's socket (sock_diag): {}", std::strerror(errno));
    return false;
  }
  struct {
    nlmsghdr nh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nh.nlmsg_len = sizeof msg;
  msg.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = static_cast<__u8>(local.ss_family);
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0U;
  put_addr(peer, msg.req.id.idiag_sport, msg.req.id.idiag_src);
  put_addr(local, msg.req.id.idiag_dport, msg.req.id.idiag_dst);
  msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  bool ok = false;
  // An unconnected netlink socket sends to the kernel.
  if (::send(nl, &msg, sizeof msg, 0) < 0) {
    error = fmt::format("cannot ask the kernel who owns the host's socket (sock_diag): {}", std::strerror(errno));
  } else {
    alignas(nlmsghdr) char buf[8192];
    ssize_t n;
    do n = ::recv(nl, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    auto* h = reinterpret_cast<nlmsghdr*>(buf);
    if (n < 0) {
      error = fmt::format("no answer from the kernel's sock_diag: {}", std::strerror(errno));
    } else if (!NLMSG_OK(h, static_cast<unsigned>(n))) {
      error = "a short answer from the kernel's sock_diag";
    } else if (h->nlmsg_type == NLMSG_ERROR) {
      int e = -reinterpret_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
      if (e == ENOENT) {
        ok = true;  // no such socket here: the peer is not on this machine (or is gone)
      } else {
        error = fmt::format("the kernel's sock_diag refused the question: {}", std::strerror(e));
      }
    } else if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      auto* m = reinterpret_cast<inet_diag_msg*>(NLMSG_DATA(h));
      result.found = true;
      result.pending = m->idiag_state == TCP_SYN_RECV;
      result.uid = m->idiag_uid;
      ok = true;
    } else {
      error = "an unexpected answer from the kernel's sock_diag";
    }
  }
  if (given_nl < 0) ::close(nl);
  return ok;
}

}  // namespace

std::optional<uid_t> peer_owner(int fd, std::string& error, bool* not_yet, int nl) {
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) {
    if (errno == ENOTCONN) {  // reset already: the host went since connect()
      error = "its end of the connection is gone (it stopped or restarted)";
      if (not_yet) *not_yet = true;
      return std::nullopt;
    }
    error = fmt::format("cannot name this connection's ends: {}", std::strerror(errno));
    return std::nullopt;
  }
  return peer_owner_of(local, peer, error, not_yet, nl);
}

std::optional<uid_t> peer_owner_of(const sockaddr_storage& local, const sockaddr_storage& peer, std::string& error,
                                   bool* not_yet, int nl) {
  if ((local.ss_family != AF_INET && local.ss_family != AF_INET6) || local.ss_family != peer.ss_family) {
    error = "not a TCP/IP connection";
    return std::nullopt;
  }
  // Right after connect() the host's side can still be a request socket,
  // which carries no owner; it becomes a full socket within microseconds.
  for (int attempt = 0; attempt < 200; ++attempt) {
    lookup r;
    if (!ask(local, peer, r, error, nl)) return std::nullopt;
    if (!r.found) {
      // The host closed it, or stopped, since connect() returned (a restart):
      // nobody to trust or refuse; worth connecting again.
      error = "its end of the connection is gone (it stopped or restarted)";
      if (not_yet) *not_yet = true;
      return std::nullopt;
    }
    if (!r.pending) return r.uid;
    ::poll(nullptr, 0, 1);  // 1 ms (poll, not nanosleep: every libc import costs each start)
  }
  error = "it has not accepted the connection yet";
  if (not_yet) *not_yet = true;
  return std::nullopt;
}

int open_sock_diag() { return ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG); }

}  // namespace tfb
