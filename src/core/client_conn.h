#pragma once
// The participant's side of one connection, as a pure state machine
// (docs/protocol.md, docs/security.md): HELLO and the version check, the
// shared-secret (HMAC) and MUNGE handshakes, sealing lines with sequence
// numbers, and the keep-alive rule. Lines from the host go in; bytes to send
// and one event per line come out. No sockets, no clock, no system call:
// nonces, the uid and MUNGE come in through parameters and client_env.
// client.cpp keeps connecting, back-off, timers and signals.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "duration.h"
#include "error.h"
#include "munge_wire.h"
#include "protocol.h"

namespace tfb::client {

/// What the connection asks of the world: randomness and MUNGE. The binary
/// passes the real ones (getrandom, libmunge); tests pass fakes.
class client_env {
 public:
  virtual ~client_env() = default;
  /// A fresh random nonce, hex-encoded (auth::make_nonce).
  virtual std::string nonce() = 0;
  /// munge_auth::decode.
  virtual std::optional<munge_auth::decoded> munge_decode(std::string_view cred, std::string& error) = 0;
  /// munge_auth::encode, for uid only.
  virtual std::optional<std::string> munge_encode(std::string_view payload, uid_t uid, std::string& error) = 0;
  /// Ours (getuid): a MUNGE host must run as it. Asked only of a MUNGE host.
  virtual uid_t uid() = 0;
};

struct conn_config {
  // The strings are the caller's, and must outlive the connection.
  std::string_view addr;         ///< HOST:PORT, for messages
  std::string_view client_host;  ///< this machine, for the host's logs
  std::uint32_t pid = 0;
  duration keepalive{0};    ///< PING this often (0: the call does not PING)
  const std::string* secret = nullptr;  ///< the shared secret, if any
  /// Send the request with HELLO, before the host has greeted (no secret, loopback).
  bool pipeline = false;
  /// Refuse a host that does not authenticate (auth=none), an auth error: set
  /// beyond loopback, unless the participant was told --insecure.
  bool require_auth = false;
  /// The store (its prefix, store_name.h) the caller was given: a host that
  /// names another in its HELLO, or none, is refused before the request goes
  /// (so pipeline must be false). Empty: any host.
  std::string_view store;
};

enum class conn_event {
  none,      ///< nothing for the caller (a line inside a STATUS block, PONG)
  greeted,   ///< the host greeted and the handshake is done: keep-alives may start
  reply,     ///< a reply to the request (conn_output::reply)
  failed,    ///< the call is over: failure
  /// The host authenticates, and the request went with HELLO: connect again,
  /// without pipelining, with the secret (loaded from its file if none was given).
  retry_with_secret,
  /// The host is full (ERR BUSY before its greeting: out of connections, or
  /// of MUNGE capacity): connect again after a back-off, within the connect
  /// budget. conn_output::failure's text holds the host's words.
  busy,
};

struct conn_output {
  std::string bytes;  ///< to send, sealed when the connection is
  conn_event event = conn_event::none;
  std::optional<proto::reply> reply;  ///< event reply
  tfb::error failure;                 ///< event failed (and busy): the cause, and a sentence for stderr
  /// event retry_with_secret: the host wants the shared secret (not MUNGE).
  bool wants_secret = false;
};

/// The cause of an ERR reply (its exit code: exit_code_of).
error_kind kind_of(proto::error_kind k);

class client_conn {
 public:
  /// request: the call's request lines (with newlines), sent once the host allows.
  client_conn(const conn_config& cfg, client_env& env, std::string request);

  /// HELLO with the client's nonce, and the request when pipelined.
  std::string start(std::string nonce);
  /// One line from the host, without its newline.
  conn_output feed(std::string line);
  /// Later request lines (LEAVE, STATUS, PING), sealed once the handshake set a key.
  std::string seal(std::string lines);
  /// The keep-alive rule: a PING to send, or nullopt when the host, silent
  /// for `silent`, is to be treated as lost (3 intervals and a half second).
  std::optional<std::string> keepalive(duration silent);

  bool greeted() const { return greeted_; }
  bool pipelined() const { return cfg_.pipeline; }
  /// "status" or "history" while a multi-line reply has begun and not ended
  /// (its end must come within a deadline), else "".
  std::string_view partial_reply() const { return reader_.partial(); }

 private:
  conn_output greeting(const proto::hello_reply& hr, std::string_view raw);
  conn_output munge_handshake(const proto::hello_reply& hr, const std::string& transcript);
  conn_output hmac_handshake(const proto::hello_reply& hr, const std::string& transcript);
  conn_output fail(error_kind k, std::string text);

  conn_config cfg_;
  client_env& env_;
  std::string request_;
  std::string nonce_, key_;
  std::string hello_;  ///< our HELLO line as sent (without its newline), for the transcript
  std::uint64_t in_seq_ = 0, out_seq_ = 0;
  bool greeted_ = false;
  bool over_ = false;
  proto::reply_reader reader_;
};

}  // namespace tfb::client
