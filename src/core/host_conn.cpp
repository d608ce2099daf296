#include "host_conn.h"

#include <algorithm>
#include <fmt/format.h>
#include <type_traits>
#include <utility>
#include <variant>

#include "auth.h"

namespace tfb {

// A stranger's first line, whatever it is, is answered so and not parsed: no
// bad_client, since the host logged the stranger (rate-limited) when it looked
// the owner up.
host_step host_conn::refuse_stranger() {
  host_step s = reply(proto::error_reply{proto::error_kind::auth,
                                         "this host serves its own user only; start a host of your own, or give "
                                         "the host and its participants the same --secret-file"},
                      true);
  s.auth_failed = true;
  return s;
}

std::optional<host_step> host_conn::overflow() {
  if (!splitter_.overflow()) return std::nullopt;
  if (stranger_) return refuse_stranger();
  host_step s = reply(proto::error_reply{proto::error_kind::toolong,
                                         fmt::format("line longer than {} bytes", proto::max_line)},
                      true);
  s.bad_client = fmt::format("line longer than {} bytes", proto::max_line);
  return s;
}

host_step host_conn::feed(const host_conn_config& cfg, std::string_view raw) {
  if (stranger_) return refuse_stranger();
  std::string unsealed;  // a copy only when there is a MAC to take off
  if (sealed()) {
    unsealed = raw;
    if (!auth::unseal(unsealed, auth_->session_key, auth::direction::to_host, auth_->in_seq++))
      return refuse_auth("a line without a valid MAC");
    raw = unsealed;
  }
  // Any first line but a HELLO, well-formed or not, is not a tfbarrier client
  // (docs/protocol.md): refused before it is parsed.
  if (!hello_ && raw.substr(0, raw.find(' ')) != "HELLO") {
    host_step s = reply(proto::error_reply{proto::error_kind::handshake,
                                           fmt::format("the first line must be HELLO v={} (see docs/protocol.md)",
                                                       protocol_version)},
                        true);
    s.bad_client = "first line was not HELLO";
    return s;
  }
  auto parsed = proto::parse_request(raw);
  if (auto* err = std::get_if<proto::request_error>(&parsed)) {
    host_step s = reply(proto::error_reply{err->kind, err->text}, proto::closes_connection(err->kind));
    s.bad_client = fmt::format("{}: {}", proto::to_string(err->kind), err->text);
    return s;
  }
  auto& req = std::get<proto::request>(parsed);
  if (!hello_) return hello(cfg, std::get<proto::hello>(req), raw);  // a HELLO: other first lines were refused above
  if (awaiting_auth_) return authenticate(cfg, req);
  return request(std::move(req));
}

host_step host_conn::hello(const host_conn_config& cfg, const proto::hello& h, std::string_view raw) {
  if (h.version != static_cast<std::uint32_t>(protocol_version)) {
    // Versions 1 and 2 differ in what the handshake proves: neither side can
    // serve the other, so the text names both versions and what to do. A
    // client of another version prints it as it is.
    std::string text = fmt::format(
        "this host ({}) speaks protocol version {}, and the client asked for version {}: run the same version of "
        "tfbarrier on the host and in the job",
        cfg.server, protocol_version, h.version);
    host_step s = reply(proto::error_reply{proto::error_kind::version, text}, true);
    s.bad_client = std::move(text);
    return s;
  }
  const auto& secret = cfg.secret;
  bool munge = cfg.munge && !secret;
  if ((secret || munge) && h.nonce.size() != 2 * auth::nonce_bytes)
    return refuse_auth("this host requires authentication; give the participant the same secret file as the host "
                       "(--secret-file or TFBARRIER_SECRET_FILE)");
  hello_ = true;
  peer_ = {h.host, h.pid};
  if (h.keepalive_ms > 0) keepalive_ms_ = std::max<std::uint32_t>(h.keepalive_ms, 100);
  proto::hello_reply hr{protocol_version, cfg.server, "none"};
  hr.store = cfg.store;
  if (!secret && !munge) {
    host_step s = reply(hr, false);
    s.timer = host_step::deadline::handshake_over;  // no authentication: done
    return s;
  }
  auth_ = std::make_unique<auth_state>();
  auth_->client_nonce = h.nonce;
  auth_->host_nonce = cfg.services->nonce();
  hr.auth = secret ? "hmac" : "munge";
  hr.nonce = auth_->host_nonce;
  // The proof (or credential) covers both HELLO lines as they are on the
  // wire: the reply's own line up to where the proof= (cred=) field goes,
  // which format_reply puts last.
  std::string unsigned_reply = proto::format_reply(hr);
  unsigned_reply.pop_back();  // its newline
  auth_->transcript = auth::transcript(raw, unsigned_reply);
  awaiting_auth_ = true;  // the handshake deadline still runs until AUTH
  if (secret) {
    hr.proof = auth::host_proof(*secret, auth_->client_nonce, auth_->host_nonce, auth_->transcript);
    return reply(hr, false);
  }
  auth_->greeting = std::move(unsigned_reply);
  munge_pending_ = true;
  host_step s;
  s.munge = munge_call{munge_call::op::encode, fmt::format("tfbarrier-host-munge\n{}\n{}\n{}", auth_->client_nonce,
                                                           auth_->host_nonce, auth_->transcript)};
  return s;
}

host_step host_conn::authenticate(const host_conn_config& cfg, const proto::request& req) {
  auto* a = std::get_if<proto::auth_req>(&req);
  if (!cfg.secret) {  // MUNGE: munged decodes the credential (munge_decoded)
    if (!a || a->cred.empty())
      return refuse_auth(a ? "expected AUTH cred=... (this host authenticates with MUNGE)"
                           : "a request came before AUTH; this host authenticates with MUNGE (clients reconnect and "
                             "authenticate first)");
    munge_pending_ = true;
    host_step s;
    s.munge = munge_call{munge_call::op::decode, munge_auth::from_wire(a->cred)};
    return s;
  }
  const auto& secret = *cfg.secret;
  if (!a ||
      !auth::equal(a->proof, auth::client_proof(secret, auth_->client_nonce, auth_->host_nonce, auth_->transcript)))
    return refuse_auth(a ? "wrong proof: the participant's secret differs from the host's, the handshake was altered "
                           "on the way, or it replayed an old one"
                         : "expected AUTH after HELLO");
  auth_->session_key = auth::session_key(secret, auth_->client_nonce, auth_->host_nonce);
  awaiting_auth_ = false;
  host_step s;
  s.timer = host_step::deadline::handshake_over;
  return s;
}

host_step host_conn::munge_done(const host_conn_config& cfg, munge_result r) {
  if (!munge_pending_ || !auth_) return {};  // nothing was asked
  munge_pending_ = false;
  bool encoding = !auth_->greeting.empty();
  if (r.how != munge_result::status::done) {
    bool full = r.how == munge_result::status::queue_full;
    std::string text = full ? "the host has too many MUNGE calls waiting; try again shortly"
                            : fmt::format("munged did not answer the host within {} s; try again later",
                                          munge_timeout.count());
    host_step s = reply(proto::error_reply{proto::error_kind::busy, text}, true);
    if (full)
      s.bad_client = fmt::format("MUNGE queue full: refused with ERR BUSY while {}", encoding ? "greeting" : "in AUTH");
    else
      s.warning = fmt::format("warning: munged did not answer within {} s ({} a credential); closing the connection",
                              munge_timeout.count(), encoding ? "making" : "decoding");
    return s;
  }
  return encoding ? munge_encoded(std::move(r)) : munge_decoded(cfg, std::move(r));
}

host_step host_conn::munge_encoded(munge_result r) {
  if (!r.cred) {
    host_step s = reply(
        proto::error_reply{proto::error_kind::busy, "the host cannot reach munged right now: " + r.error}, true);
    s.warning = fmt::format("warning: cannot make a MUNGE credential: {}", r.error);
    return s;
  }
  host_step s;
  s.bytes = fmt::format("{} cred={}\n", auth_->greeting, munge_auth::to_wire(std::move(*r.cred)));
  std::string().swap(auth_->greeting);
  return s;
}

host_step host_conn::munge_decoded(const host_conn_config& cfg, munge_result r) {
  if (!r.decoded) return refuse_auth(fmt::format("the MUNGE credential was refused: {}", r.error));
  const munge_auth::decoded& d = *r.decoded;
  if (uid_t uid = cfg.services->uid(); d.uid != uid)
    return refuse_auth(fmt::format("uid {} may not use this host: only the job owner (uid {}) may", d.uid, uid));
  std::string prefix = fmt::format("tfbarrier-client-munge\n{}\n{}\n{}\n", auth_->client_nonce, auth_->host_nonce,
                                   auth_->transcript);
  if (!d.payload.starts_with(prefix) || d.payload.size() != prefix.size() + 64)
    return refuse_auth("the MUNGE credential is not for this connection (a replay, or a handshake altered on the way?)");
  auth_->session_key = d.payload.substr(prefix.size());
  awaiting_auth_ = false;
  host_step s;
  s.timer = host_step::deadline::handshake_over;
  return s;
}

host_step host_conn::request(proto::request req) {
  host_step s;
  if (std::holds_alternative<proto::hello>(req)) {
    s = reply(proto::error_reply{proto::error_kind::badrequest, "HELLO was already sent"}, true);
  } else if (std::holds_alternative<proto::auth_req>(req)) {
    s = reply(proto::error_reply{proto::error_kind::badrequest,
                                 !sealed() ? "this host does not authenticate: send no AUTH" : "AUTH was already done"},
              true);
  } else if (std::holds_alternative<proto::arrive>(req) || std::holds_alternative<proto::decide>(req)) {
    const auto* d = std::get_if<proto::decide>(&req);
    if (arrived_ && d && may_decide_) {
      // The chief of `wait --decide-by` (ARRIVE decide=1) gives its verdict on its own connection, once.
      may_decide_ = false;
      s.deliver = std::move(req);
    } else if (arrived_) {
      s = reply(proto::error_reply{proto::error_kind::badrequest, "one ARRIVE or DECIDE per connection"}, true);
    } else {
      arrived_ = true;  // until the barriers refuse it (refused())
      const auto* a = std::get_if<proto::arrive>(&req);
      may_decide_ = a && a->decide;
      s.deliver = std::move(req);
    }
  } else {
    s.deliver = std::move(req);
  }
  s.request = true;
  return s;
}

host_step host_conn::reply(const proto::reply& r, bool close) {
  host_step s;
  s.bytes = seal(proto::format_reply(r));
  s.close = close;
  return s;
}

host_step host_conn::refuse_auth(std::string text) {
  host_step s = reply(proto::error_reply{proto::error_kind::auth, text}, true);
  s.bad_client = "authentication failed: " + text;
  s.auth_failed = true;
  return s;
}

std::optional<host_step> host_conn::handshake_expired() const {
  if (authenticated()) return std::nullopt;
  host_step s;
  // Never sealed: the session key comes with the end of the handshake.
  s.bytes = proto::format_reply(
      proto::error_reply{proto::error_kind::timeout, hello_ ? "no AUTH in time" : "no HELLO in time"});
  s.close = true;
  if (!stranger_) s.bad_client = fmt::format("no {} within the handshake timeout", hello_ ? "AUTH" : "HELLO");
  return s;
}

std::string host_conn::seal(std::string bytes) {
  if (!sealed() || bytes.empty()) return bytes;
  // Authenticated connection: every line carries a MAC and a sequence number.
  std::string lines;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    std::size_t nl = bytes.find('\n', pos);
    if (nl == std::string::npos) nl = bytes.size();
    lines += auth::seal(std::string_view(bytes).substr(pos, nl - pos), auth_->session_key, auth::direction::to_client,
                        auth_->out_seq++);
    lines += '\n';
    pos = nl + 1;
  }
  return lines;
}

liveness host_conn::check_liveness(std::chrono::nanoseconds since_check, std::chrono::nanoseconds silence) const {
  using std::chrono::milliseconds;
  // A check that came late means the host itself was not running (stopped,
  // or starved), and the client's PINGs wait unread in the socket: not the
  // client's silence.
  if (since_check > milliseconds(2 * keepalive_ms_ + 500)) return liveness::host_was_late;
  if (silence > milliseconds(3 * keepalive_ms_ + 500)) return liveness::silent;
  return liveness::alive;
}

}  // namespace tfb
