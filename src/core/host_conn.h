#pragma once
// The host's side of one connection, as a state machine: bytes or lines in;
// out, one step per line: bytes to send, whether to close once they are
// written, what to do with the handshake deadline, and the request (if any)
// that goes on to the barriers (host.cpp passes it through the door, door.h).
//
// It owns what docs/protocol.md and docs/security.md say of a connection:
// HELLO first and the version check; the shared-secret handshake (HMAC
// proofs over both nonces) or the MUNGE one; once authenticated, a MAC and a
// sequence number on every line in both directions (seal); one ARRIVE or
// DECIDE per connection; and the keep-alive rule (check_liveness).
//
// No sockets, no clock, no system call: nonces come through host_services,
// MUNGE results through munge_done() (the step asks for the call), time
// through parameters. host.cpp holds one per
// connection; a waiting participant's must stay small (docs/performance.md):
// the handshake's state sits behind a pointer that only authenticating
// connections fill, and the line buffer holds no memory between reads.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "barrier.h"
#include "munge_wire.h"
#include "protocol.h"

namespace tfb {

/// What the machine needs from the world: fresh nonces and the host's uid.
/// host.cpp gives the real ones; tests give their own. MUNGE is not here:
/// the machine asks for a call (host_step::munge) and is given its result
/// (host_conn::munge_done), so that host.cpp can run it off its event loop.
class host_services {
 public:
  virtual ~host_services() = default;
  /// A fresh random nonce, hex-encoded (auth::make_nonce).
  virtual std::string nonce() = 0;
  /// The uid the host runs as: with MUNGE, the only one let in.
  virtual uid_t uid() = 0;
};

/// How long a MUNGE call may take (host.cpp's timer); past it the
/// connection is told ERR BUSY and closed.
inline constexpr std::chrono::seconds munge_timeout{5};

/// A MUNGE call a connection waits for: munge_auth::encode of payload for
/// the host's uid only, or munge_auth::decode of a credential.
struct munge_call {
  enum class op { encode, decode };
  op kind = op::encode;
  std::string data;  ///< encode: the payload; decode: the credential (as munged wrote it)
};

/// How the call went. Exactly one of cred (encode) and decoded (decode) is
/// set when it succeeded; error says why not otherwise.
struct munge_result {
  enum class status {
    done,       ///< munged answered: cred or decoded, or error (munged's refusal)
    queue_full, ///< the host had too many MUNGE calls waiting: not tried
    timed_out,  ///< munged did not answer in time (its late answer is dropped)
  };
  status how = status::done;
  std::optional<std::string> cred;
  std::optional<munge_auth::decoded> decoded;
  std::string error;
};

/// How the host authenticates; one for all its connections.
struct host_conn_config {
  std::optional<std::string> secret;  ///< a shared secret: the HMAC handshake
  bool munge = false;                 ///< MUNGE (when there is no secret)
  std::string server;                 ///< the HELLO reply's server=, "tfbarrier/VERSION"
  host_services* services = nullptr;  ///< needed when secret, munge or owner_only is set
  std::string store;                  ///< the HELLO reply's store=: a host with a store, its prefix
  /// No secret, no MUNGE and no --insecure: only the host's own uid is served
  /// (docs/security.md). The kernel names each connection's owner, and the
  /// host tells a connection that is not its own (host_conn::stranger).
  bool owner_only = false;
};

/// One step: what the host does after one line (or a deadline).
struct host_step {
  enum class deadline {
    keep,            ///< leave the timer as it is
    handshake_over,  ///< cancel the handshake deadline; watch keep-alives when keepalive_ms() > 0
  };
  std::string bytes;                      ///< to send, sealed when the connection is
  bool close = false;                     ///< close the connection once bytes are written
  deadline timer = deadline::keep;
  std::optional<proto::request> deliver;  ///< for the barriers: ARRIVE, DECIDE, ABORT, STATUS, LEAVE or PING
  bool request = false;                   ///< a request after the handshake, served or refused: activity for idle-exit
  /// A MUNGE call to make: feed no more lines until munge_done() gives its result.
  std::optional<munge_call> munge;
  std::string bad_client;                 ///< an event to log: "bad client ADDRESS: <bad_client>"
  std::string warning;                    ///< a line to log even when quiet ("warning: ...")
  bool auth_failed = false;               ///< the handshake was refused (counted in the metrics)
};

/// What the keep-alive rule says at a check of a connection whose client promised PINGs.
enum class liveness {
  alive,          ///< heard from in time: check again in keepalive_ms()
  host_was_late,  ///< the check came late (the host was stopped or starved): count silence from now
  silent,         ///< silent too long: withdraw it as unresponsive and close
};

class host_conn {
 public:
  /// Bytes as read from the socket; their lines come out of line() or next().
  void take(std::string_view bytes) { splitter_.feed(bytes); }
  /// The next complete line taken (for feed()); nullopt when none is whole.
  std::optional<std::string> line() { return splitter_.next(); }
  /// After line() said nullopt: the step for an over-long line (ERR TOOLONG,
  /// close), if one came.
  std::optional<host_step> overflow();
  /// The step for one line (without its newline).
  host_step feed(const host_conn_config& cfg, std::string_view line);
  /// line() and feed(), or overflow(): the step for the next line taken;
  /// nullopt when no whole line is left. The caller stops once a step closes.
  std::optional<host_step> next(const host_conn_config& cfg) {
    if (auto l = line()) return feed(cfg, *l);
    return overflow();
  }

  /// The result of the MUNGE call the last step asked for: the step that
  /// follows (the greeting, the end of the handshake, or a refusal).
  host_step munge_done(const host_conn_config& cfg, munge_result r);
  /// A MUNGE call is asked for and not done: the caller feeds no lines.
  bool munge_pending() const { return munge_pending_; }

  /// The handshake deadline passed: the step that closes the connection
  /// (ERR TIMEOUT), or nullopt when the handshake is over.
  std::optional<host_step> handshake_expired() const;
  /// The connection's other end is not the host's own uid (or the kernel
  /// could not say whose it is), on a host that serves its own uid only
  /// (host_conn_config::owner_only): its first line, HELLO or not, gets ERR
  /// AUTH and a close, and nothing it sends is parsed. The host logs it,
  /// rate-limited (the step names no bad client: a flood of strangers is not
  /// a flood of log lines).
  void stranger() { stranger_ = true; }
  /// The barriers refused the ARRIVE or DECIDE this connection delivered:
  /// it may try again (docs/protocol.md).
  void refused() { arrived_ = may_decide_ = false; }
  /// A reply for the wire: each line sealed (a MAC and the next sequence
  /// number) once the connection is authenticated, else as given.
  std::string seal(std::string bytes);

  bool hello_done() const { return hello_; }
  bool authenticated() const { return hello_ && !awaiting_auth_; }
  bool sealed() const { return auth_ && !auth_->session_key.empty(); }
  const peer_info& peer() const { return peer_; }
  /// The client's PING interval, at least 100 ms; 0 when it sends none.
  std::uint32_t keepalive_ms() const { return keepalive_ms_; }
  /// The keep-alive rule, at a check keepalive_ms() after the last one:
  /// since_check is the time since that one, silence the time since the
  /// client's last bytes.
  liveness check_liveness(std::chrono::nanoseconds since_check, std::chrono::nanoseconds silence) const;

 private:
  host_step hello(const host_conn_config& cfg, const proto::hello& h, std::string_view raw);
  host_step authenticate(const host_conn_config& cfg, const proto::request& req);
  host_step munge_encoded(munge_result r);
  host_step munge_decoded(const host_conn_config& cfg, munge_result r);
  host_step request(proto::request req);
  host_step reply(const proto::reply& r, bool close);
  host_step refuse_auth(std::string text);
  host_step refuse_stranger();

  proto::line_splitter splitter_;
  // Only on a host that authenticates (most connections of a job on loopback
  // do not): the handshake's nonces and transcript (auth::transcript), then
  // the session key and the sequence numbers of the MACs. A pointer, so that
  // the others do not carry them. With MUNGE, the greeting waits here for its
  // credential.
  struct auth_state {
    std::string client_nonce, host_nonce, transcript, session_key;
    std::string greeting;  ///< MUNGE: the HELLO reply without cred=, until munged made the credential
    std::uint64_t in_seq = 0, out_seq = 0;
  };
  std::unique_ptr<auth_state> auth_;
  peer_info peer_;
  std::uint32_t keepalive_ms_ = 0;
  // Bits, so that a waiting participant's connection stays within its size
  // (host_conn_test: host_conn_size).
  bool hello_ : 1 = false;
  bool awaiting_auth_ : 1 = false;
  bool arrived_ : 1 = false;
  bool may_decide_ : 1 = false;  ///< an ARRIVE decide=1 came: one DECIDE may follow on this connection
  bool munge_pending_ : 1 = false;
  bool stranger_ : 1 = false;
};

}  // namespace tfb
