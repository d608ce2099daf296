#include "client_conn.h"

#include <fmt/format.h>

#include "auth.h"
#include "text.h"
#include "version.h"

namespace tfb::client {

error_kind kind_of(proto::error_kind k) {
  switch (k) {
    case proto::error_kind::conflict: return error_kind::conflict;
    case proto::error_kind::needn:
    case proto::error_kind::ambiguous: return error_kind::usage;
    case proto::error_kind::aborted: return error_kind::aborted;
    case proto::error_kind::busy: return error_kind::unreachable;
    case proto::error_kind::auth: return error_kind::auth;
    default: return error_kind::protocol;
  }
}

client_conn::client_conn(const conn_config& cfg, client_env& env, std::string request)
    : cfg_(cfg), env_(env), request_(std::move(request)) {}

std::string client_conn::start(std::string nonce) {
  nonce_ = std::move(nonce);
  proto::hello h{static_cast<std::uint32_t>(protocol_version), std::string(cfg_.client_host), cfg_.pid,
                 static_cast<std::uint32_t>(cfg_.keepalive.count()), nonce_};
  std::string bytes = proto::format_request(h);
  if (cfg_.pipeline) return bytes + request_;  // no handshake to prove: a host that wants one is asked again
  hello_.assign(bytes, 0, bytes.size() - 1);   // the line as the transcript takes it: without its newline
  return bytes;
}

std::string client_conn::seal(std::string bytes) {
  if (key_.empty()) return bytes;
  std::string sealed;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    std::size_t nl = bytes.find('\n', pos);
    if (nl == std::string::npos) nl = bytes.size();
    sealed += auth::seal(std::string_view(bytes).substr(pos, nl - pos), key_, auth::direction::to_host, out_seq_++);
    sealed += '\n';
    pos = nl + 1;
  }
  return sealed;
}

std::optional<std::string> client_conn::keepalive(duration silent) {
  if (silent > 3 * cfg_.keepalive + std::chrono::milliseconds(500)) return std::nullopt;
  return seal(proto::format_request(proto::ping{}));
}

conn_output client_conn::fail(error_kind k, std::string text) {
  over_ = true;
  conn_output out;
  out.event = conn_event::failed;
  out.failure = {k, std::move(text)};
  return out;
}

conn_output client_conn::feed(std::string l) {
  if (over_) return {};
  if (!key_.empty() && !auth::unseal(l, key_, auth::direction::to_client, in_seq_++))
    return fail(error_kind::auth, fmt::format("a reply from the host at {} failed its authentication check (altered on "
                                             "the way, or not from the host)",
                                             cfg_.addr));
  std::string err;
  auto rep = reader_.feed(l, err);
  if (reader_.too_long())  // a STATUS or HISTORY that streams on and on: its size is bounded, so is ours
    return fail(error_kind::protocol,
                fmt::format("the host at {} {}; a tfbarrier host's replies are far smaller (docs/protocol.md, "
                            "bounded message sizes): it is not a tfbarrier host, or a faulty one",
                            cfg_.addr, err));
  if (!err.empty())
    return fail(error_kind::protocol,
                greeted_ ? fmt::format("the host at {} sent a line this client does not understand: {}", cfg_.addr, err)
                         : fmt::format("the program at {} is not a tfbarrier host ({}); if another program has that "
                                       "port, set TFBARRIER_PORT or --addr",
                                       cfg_.addr, err));
  if (!rep) return {};
  if (auto* e = std::get_if<proto::error_reply>(&*rep)) {
    // Until the host has proved who it is, only the handshake's own errors
    // are believed: a fake host must not make a participant exit 3 or 4
    // with words of its choosing.
    using k = proto::error_kind;
    bool handshake_error = e->kind == k::version || e->kind == k::handshake || e->kind == k::toolong ||
                           e->kind == k::badrequest || e->kind == k::timeout || e->kind == k::busy || e->kind == k::auth;
    if (!greeted_ && !handshake_error)
      return fail(error_kind::protocol,
                  fmt::format("the program at {} answered ERR {} before it greeted as a tfbarrier host; if another "
                              "program has that port, set TFBARRIER_PORT or --addr",
                              cfg_.addr, proto::to_string(e->kind)));
    if (e->kind == k::busy && !greeted_) {  // full now, perhaps not in a moment
      over_ = true;
      conn_output out;
      out.event = conn_event::busy;
      out.failure = {error_kind::unreachable, e->text};
      return out;
    }
    if (e->kind == k::version)  // the host's text names its version; say ours, and what to do
      return fail(error_kind::protocol,
                  fmt::format("the host at {} refused this tfbarrier {} (protocol version {}): {}; run the same "
                              "version of tfbarrier on the host and in the job",
                              cfg_.addr, version, protocol_version, e->text));
    return fail(kind_of(e->kind), e->text);
  }
  if (!greeted_) {
    auto* hr = std::get_if<proto::hello_reply>(&*rep);
    if (!hr)
      return fail(error_kind::protocol,
                  fmt::format("the program at {} is not a tfbarrier host (it did not greet with HELLO); if another "
                              "program has that port, set TFBARRIER_PORT or --addr",
                              cfg_.addr));
    return greeting(*hr, l);
  }
  if (std::holds_alternative<proto::pong>(*rep)) return {};
  if (auto* sd = std::get_if<proto::shutdown>(&*rep))
    return fail(error_kind::host_lost,
                sd->text.empty() ? fmt::format("the host at {} shut down", cfg_.addr) : sd->text);
  conn_output out;
  out.event = conn_event::reply;
  out.reply = std::move(*rep);
  return out;
}

conn_output client_conn::greeting(const proto::hello_reply& hr, std::string_view raw) {
  if (hr.version != static_cast<std::uint32_t>(protocol_version))
    return fail(error_kind::protocol,
                fmt::format("the host at {} ({}) speaks protocol {}, and this tfbarrier {} speaks {}: run the same "
                            "version of tfbarrier on the host and in the job",
                            cfg_.addr, hr.server.empty() ? "unnamed" : hr.server, hr.version, version,
                            protocol_version));
  if (!cfg_.store.empty() && hr.store != cfg_.store)
    return fail(error_kind::unreachable,
                fmt::format("the host at {} {}, not in the store {} given here (--store or TFBARRIER_STORE): it is "
                            "not this job's; stop it, or give this job another port (--port or TFBARRIER_PORT)",
                            cfg_.addr,
                            hr.store.empty() ? std::string("keeps its barriers itself (it has no store)")
                                             : fmt::format("keeps its barriers in the store {}", quote_text(hr.store)),
                            quote_text(std::string(cfg_.store))));
  if (hr.auth != "none" && hr.auth != "hmac" && hr.auth != "munge")
    return fail(error_kind::protocol,
                fmt::format("the host at {} asks for authentication {}, which this tfbarrier {} does not know (it "
                            "knows none, hmac and munge): run the same version of tfbarrier on the host and in the job",
                            cfg_.addr, quote_text(hr.auth), version));
  if (hr.auth != "none" && cfg_.pipeline) {
    // The host authenticates: the request must wait for the handshake. Connect again.
    over_ = true;
    conn_output out;
    out.event = conn_event::retry_with_secret;
    out.wants_secret = hr.auth == "hmac";
    return out;
  }
  conn_output out;
  if (hr.auth == "munge") {
    out = munge_handshake(hr, auth::transcript(hello_, auth::without_field(raw, "cred")));
  } else if (hr.auth == "hmac") {
    out = hmac_handshake(hr, auth::transcript(hello_, auth::without_field(raw, "proof")));
  } else if (cfg_.secret) {
    return fail(error_kind::auth,
                fmt::format("the host at {} does not authenticate, but this participant has a secret: refusing a "
                            "host that could be a fake; start the host with the same --secret-file",
                            cfg_.addr));
  } else if (cfg_.require_auth) {
    // Nothing has been sent but HELLO: the request (barrier name, message) stays here.
    return fail(error_kind::auth,
                fmt::format("the host at {} does not authenticate (auth=none), so anyone who can reach it, or "
                            "anyone on the path, could have given this verdict: refusing it. Give both sides a "
                            "shared secret (tfbarrier secret, then --secret-file), run under MUNGE, or pass "
                            "--insecure (TFBARRIER_INSECURE=1) on a network you trust",
                            cfg_.addr));
} else if (!cfg_.pipeline) {
    out.bytes = request_;
  }
  if (out.event == conn_event::failed) return out;
  greeted_ = true;
  out.event = conn_event::greeted;
  return out;
}

conn_output client_conn::munge_handshake(const proto::hello_reply& hr, const std::string& transcript) {
  std::string merr;
  auto d = env_.munge_decode(munge_auth::from_wire(hr.cred), merr);
  if (!d)
    return fail(error_kind::auth,
                fmt::format("the host at {} authenticates with MUNGE, and its credential was refused here: {}",
                            cfg_.addr, merr));
  uid_t me = env_.uid();
  if (d->uid != me)
    return fail(error_kind::auth, fmt::format("the host at {} runs as uid {}, not as you (uid {}): refusing it",
                                             cfg_.addr, d->uid, me));
  if (d->payload != fmt::format("tfbarrier-host-munge\n{}\n{}\n{}", nonce_, hr.nonce, transcript))
    return fail(error_kind::auth,
                fmt::format("the host at {}'s MUNGE credential is not for this connection: the handshake was altered "
                            "on the way (HELLO or its reply rewritten), or the credential was replayed; refusing it",
                            cfg_.addr));
  std::string key = env_.nonce();  // 64 hex digits; two statements, so that the order is defined
  key += env_.nonce();
  auto cred =
      env_.munge_encode(fmt::format("tfbarrier-client-munge\n{}\n{}\n{}\n{}", nonce_, hr.nonce, transcript, key),
                        d->uid, merr);
  if (!cred) return fail(error_kind::auth, fmt::format("cannot make a MUNGE credential: {}", merr));
  conn_output out;
  out.bytes = proto::format_request(proto::auth_req{"", munge_auth::to_wire(*cred)});
  key_ = std::move(key);
  out.bytes += seal(request_);
  return out;
}

conn_output client_conn::hmac_handshake(const proto::hello_reply& hr, const std::string& transcript) {
  if (!cfg_.secret)
    return fail(error_kind::auth,
                fmt::format("the host at {} requires authentication: give this participant the host's secret file "
                            "(--secret-file FILE or TFBARRIER_SECRET_FILE)",
                            cfg_.addr));
  const std::string& secret = *cfg_.secret;
  if (!auth::equal(hr.proof, auth::host_proof(secret, nonce_, hr.nonce, transcript)))
    return fail(error_kind::auth,
                fmt::format("the host at {} could not prove it knows the secret: it is not the host you meant, its "
                            "secret file differs from this one, or the handshake was altered on the way",
                            cfg_.addr));
  conn_output out;
  out.bytes = proto::format_request(proto::auth_req{auth::client_proof(secret, nonce_, hr.nonce, transcript), ""});
  key_ = auth::session_key(secret, nonce_, hr.nonce);
  out.bytes += seal(request_);
  return out;
}

}  // namespace tfb::client
