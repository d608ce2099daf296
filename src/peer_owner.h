#pragma once
// Who owns the other end of a TCP connection on this machine. A participant
// that has neither a secret nor MUNGE takes a verdict over loopback only from
// a host run by its own user (or root): it asks the kernel (sock_diag, an exact
// lookup of this connection's 4-tuple) which uid owns the host's socket, before
// it writes a byte. A stranger who bound the port first is refused.
#include <optional>
#include <string>
#include <sys/types.h>

namespace tfb {

/// The uid owning the peer's socket of the connected TCP socket fd, when the
/// peer is on this machine (loopback). nullopt + error (a sentence) when the
/// kernel does not know it, or has no sock_diag.
std::optional<uid_t> peer_owner(int fd, std::string& error);

}  // namespace tfb
