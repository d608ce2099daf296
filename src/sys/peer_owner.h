#pragma once
// Who owns the other end of a TCP connection on this machine. A participant
// that has neither a secret nor MUNGE takes a verdict over loopback only from
// a host run by its own user (or root): it asks the kernel (sock_diag, an exact
// lookup of this connection's 4-tuple) which uid owns the host's socket, before
// it writes a byte. A stranger who bound the port first is refused.
#include <optional>
#include <string>
#include <sys/socket.h>
#include <sys/types.h>

namespace tfb {

/// The uid owning the peer's socket of the connected TCP socket fd, when the
/// peer is on this machine (loopback). nullopt + error (a sentence) when the
/// kernel does not know it, or has no sock_diag. not_yet (when given) is set
/// when the host has not accepted the connection within about 200 ms (a
/// host that is busy, or not serving yet), or its end is gone (the host
/// stopped or restarted since connect): worth connecting again later.
///
/// The host asks the same of every connection it accepts (the client's end is
/// then the peer): a host without a secret or MUNGE serves its own uid only
/// (docs/security.md). nl is a socket from open_sock_diag() to ask through,
/// kept open by the host so that a lookup costs one send and one recv; -1
/// opens one for this lookup alone.
std::optional<uid_t> peer_owner(int fd, std::string& error, bool* not_yet = nullptr, int nl = -1);

/// As peer_owner, for a connection whose ends the caller knows already (the
/// host: the address it listens on, and the peer's from accept): no system
/// call but the question to sock_diag (getsockname and getpeername were
/// 3 us of the 8 us a lookup took here, bench/fanout.sh's connect+arrive).
std::optional<uid_t> peer_owner_of(const sockaddr_storage& local, const sockaddr_storage& peer, std::string& error,
                                   bool* not_yet = nullptr, int nl = -1);

/// A sock_diag (netlink) socket for peer_owner, or -1 with errno set.
int open_sock_diag();

}  // namespace tfb
