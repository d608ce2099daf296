// The participant's side of a connection (src/core/client_conn.h), driven with the
// host's lines through every handshake path: no host, no sockets, no munged.
#include "client_conn.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "auth.h"
#include "exit_codes.h"
#include "version.h"

namespace tfb::client {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

/// Counting nonces, and a MUNGE that keeps its credentials in a table.
class fake_env final : public client_env {
 public:
  std::string nonce() override { return fmt::format("{:032x}", ++nonces_); }
  std::optional<munge_auth::decoded> munge_decode(std::string_view cred, std::string& error) override {
    if (refuse) {
      error = "MUNGE: Invalid credential";
      return std::nullopt;
    }
    std::size_t i = 0;
    if (cred.size() < 2 || cred[0] != 'M' || (i = std::stoul(std::string(cred.substr(1)))) >= creds.size()) {
      error = "MUNGE: Invalid credential format";
      return std::nullopt;
    }
    return creds[i];
  }
  std::optional<std::string> munge_encode(std::string_view payload, uid_t uid, std::string& error) override {
    if (cannot_encode) {
      error = "MUNGE: Socket communication error";
      return std::nullopt;
    }
    creds.push_back(munge_auth::decoded{std::string(payload), uid});
    last_restrict = uid;
    // '=' as real credentials end, to check the wire form's '_'.
    return fmt::format("M{}=", creds.size() - 1);
  }
  uid_t uid() override { return me; }

  uid_t me = 1000;
  bool refuse = false, cannot_encode = false;
  uid_t last_restrict = 0;
  std::vector<munge_auth::decoded> creds;

 private:
  unsigned nonces_ = 0;
};

/// Lines of some bytes, without their newlines.
std::vector<std::string> lines(const std::string& bytes) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    auto nl = bytes.find('\n', pos);
    EXPECT_NE(nl, std::string::npos) << "unterminated: " << bytes;
    if (nl == std::string::npos) break;
    out.push_back(bytes.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

/// A reply as the host writes it, without the newline.
std::string reply_line(const proto::reply& r) {
  std::string s = proto::format_reply(r);
  s.pop_back();
  return s;
}

proto::hello_reply greeting(std::string auth = "none") {
  proto::hello_reply h;
  h.version = static_cast<std::uint32_t>(protocol_version);
  h.server = "tfbarrier/test";
  h.auth = std::move(auth);
  return h;
}

const std::string request = "ARRIVE name=b scope=s id=abc n=2\n";
const std::string host_nonce = "f00df00df00df00df00df00df00df00d";

/// One client connection and what it sent.
struct client_under_test {
  fake_env env;
  std::string secret;
  conn_config cfg;
  std::optional<client_conn> conn;
  std::string client_nonce = "c11e47c11e47c11e47c11e47c11e47c1";
  std::string hello;

  explicit client_under_test(std::optional<std::string> s = std::nullopt, bool pipeline = false,
                             bool require_auth = false) {
    cfg.addr = "127.0.0.1:7727";
    cfg.require_auth = require_auth;
    cfg.client_host = "node1";
    cfg.pid = 42;
    cfg.keepalive = std::chrono::seconds(5);
    cfg.pipeline = pipeline;
    if (s) {
      secret = *s;
      cfg.secret = &secret;
    }
    conn.emplace(cfg, env, request);
    hello = conn->start(client_nonce);
  }
  conn_output feed(const proto::reply& r) { return conn->feed(reply_line(r)); }
};

void expect_failed(const conn_output& out, error_kind kind, std::string_view text) {
  EXPECT_EQ(out.event, conn_event::failed);
  EXPECT_EQ(out.failure.kind, kind);
  EXPECT_CONTAINS(out.failure.text, text);
  EXPECT_TRUE(out.bytes.empty()) << out.bytes;
}

// ---------------------------------------------------------------------------
// HELLO, the version check, no authentication

TEST(ClientConn, HelloCarriesTheNonceAndKeepalive) {
  client_under_test c;
  auto l = lines(c.hello);
  ASSERT_EQ(l.size(), 1u);
  auto r = proto::parse_request(l[0]);
  ASSERT_TRUE(std::holds_alternative<proto::request>(r));
  auto& h = std::get<proto::hello>(std::get<proto::request>(r));
  EXPECT_EQ(h.version, static_cast<std::uint32_t>(protocol_version));
  EXPECT_EQ(h.host, "node1");
  EXPECT_EQ(h.pid, 42u);
  EXPECT_EQ(h.keepalive_ms, 5000u);
  EXPECT_EQ(h.nonce, c.client_nonce);
}

TEST(ClientConn, PipelinedRequestRidesWithHello) {
  client_under_test c(std::nullopt, true);
  EXPECT_EQ(lines(c.hello).size(), 2u);
  EXPECT_TRUE(c.hello.ends_with(request));
  auto out = c.feed(greeting());
  EXPECT_EQ(out.event, conn_event::greeted);
  EXPECT_TRUE(out.bytes.empty());  // sent already
  EXPECT_TRUE(c.conn->greeted());
}

TEST(ClientConn, RequestFollowsTheGreeting) {
  client_under_test c;
  EXPECT_FALSE(c.conn->greeted());
  auto out = c.feed(greeting());
  EXPECT_EQ(out.event, conn_event::greeted);
  EXPECT_EQ(out.bytes, request);
  out = c.feed(proto::waiting{"b", 7, 1, 2});
  ASSERT_EQ(out.event, conn_event::reply);
  ASSERT_TRUE(out.reply && std::holds_alternative<proto::waiting>(*out.reply));
  EXPECT_EQ(std::get<proto::waiting>(*out.reply).gen, 7u);
  // Unsealed, as the connection is.
  EXPECT_EQ(c.conn->seal("LEAVE\n"), "LEAVE\n");
}

TEST(ClientConn, VersionMismatch) {
  client_under_test c;
  auto h = greeting();
  h.version = static_cast<std::uint32_t>(protocol_version) + 1;
  expect_failed(c.feed(h), error_kind::protocol,
                fmt::format("(tfbarrier/test) speaks protocol {}, and this tfbarrier", protocol_version + 1));
  EXPECT_FALSE(c.conn->greeted());
  // Over: later lines do nothing.
  EXPECT_EQ(c.feed(greeting()).event, conn_event::none);
}

TEST(ClientConn, AHostOfAnotherVersionRefusesUsAndBothVersionsAreNamed) {
  // What a host of protocol 1 answers a HELLO v=2.
  client_under_test c;
  auto out = c.feed(proto::error_reply{proto::error_kind::version,
                                       "this host speaks protocol version 1, the client asked for 2; use matching "
                                       "tfbarrier versions"});
  expect_failed(out, error_kind::protocol,
                fmt::format("the host at 127.0.0.1:7727 refused this tfbarrier {} (protocol version {}): this host "
                            "speaks protocol version 1, the client asked for 2; use matching tfbarrier versions; run "
                            "the same version of tfbarrier on the host and in the job",
                            version, protocol_version));
}

TEST(ClientConn, AHostOfAnotherStoreOrOfNoneIsRefusedBeforeTheRequestGoes) {
  auto expecting = [](std::string_view store) {
    auto c = std::make_unique<client_under_test>();
    c->cfg.store = store;
    c->conn.emplace(c->cfg, c->env, request);
    c->hello = c->conn->start(c->client_nonce);
    EXPECT_EQ(lines(c->hello).size(), 1u);  // HELLO alone
    return c;
  };
  auto h = greeting();
  h.store = "/job2";
  // The line as a host sends it, and back.
  EXPECT_CONTAINS(reply_line(h), " store=/job2");
  auto other = expecting("/job1");
  expect_failed(other->feed(h), error_kind::unreachable, "keeps its barriers in the store");
  auto none = expecting("/job1");
  auto out = none->feed(greeting());
  expect_failed(out, error_kind::unreachable, "keeps its barriers itself (it has no store), not in the store");
  EXPECT_CONTAINS(out.failure.text, "/job1");
  EXPECT_CONTAINS(out.failure.text, "TFBARRIER_PORT");
  auto same = expecting("/job2");
  out = same->feed(h);
  EXPECT_EQ(out.event, conn_event::greeted);
  EXPECT_EQ(out.bytes, request);
  // A client given no store takes any host.
  client_under_test any;
  EXPECT_EQ(any.feed(h).event, conn_event::greeted);
}

TEST(ClientConn, UnknownAuthentication) {
  client_under_test c;
  expect_failed(c.feed(greeting("kerberos")), error_kind::protocol, "asks for authentication \"kerberos\"");
}

TEST(ClientConn, NotATfbarrierHost) {
  client_under_test c;
  expect_failed(c.conn->feed("SSH-2.0-OpenSSH_9.2"), error_kind::protocol, "is not a tfbarrier host (");
  client_under_test d;
  expect_failed(d.feed(proto::waiting{"b", 1, 1, 2}), error_kind::protocol, "did not greet with HELLO");
}

TEST(ClientConn, BadLineAfterTheGreeting) {
  client_under_test c;
  c.feed(greeting());
  expect_failed(c.conn->feed("WHAT is=this"), error_kind::protocol, "sent a line this client does not understand");
}

TEST(ClientConn, ErrReplies) {
  struct {
    proto::error_kind kind;
    error_kind cause;
    int code;
  } cases[] = {{proto::error_kind::version, error_kind::protocol, exit_code::protocol},
               {proto::error_kind::conflict, error_kind::conflict, exit_code::conflict},
               {proto::error_kind::needn, error_kind::usage, exit_code::usage},
               {proto::error_kind::ambiguous, error_kind::usage, exit_code::usage},
               {proto::error_kind::aborted, error_kind::aborted, exit_code::aborted},
               {proto::error_kind::busy, error_kind::unreachable, exit_code::unreachable},
               {proto::error_kind::auth, error_kind::auth, exit_code::auth},
               {proto::error_kind::badrequest, error_kind::protocol, exit_code::protocol}};
  for (auto& k : cases) {
    EXPECT_EQ(kind_of(k.kind), k.cause);
    EXPECT_EQ(exit_code_of(kind_of(k.kind)), k.code);
    client_under_test before;  // before the greeting (a full host, a version the host refuses)
    // ... where only the handshake's own errors are believed (#19 item 2).
    bool handshake = k.kind == proto::error_kind::version || k.kind == proto::error_kind::busy ||
                     k.kind == proto::error_kind::auth || k.kind == proto::error_kind::badrequest;
    if (k.kind == proto::error_kind::busy) {  // a full host: back off and connect again (#19 item 6)
      auto out = before.feed(proto::error_reply{k.kind, "told so"});
      EXPECT_EQ(out.event, conn_event::busy);
      EXPECT_EQ(out.failure.text, "told so");
      EXPECT_TRUE(out.bytes.empty());
      EXPECT_EQ(before.feed(greeting()).event, conn_event::none);  // over: nothing more is acted on
    } else if (handshake)
      expect_failed(before.feed(proto::error_reply{k.kind, "told so"}), k.cause, "told so");
    else
      expect_failed(before.feed(proto::error_reply{k.kind, "told so"}), error_kind::protocol, "before it greeted");
    client_under_test after;
    after.feed(greeting());
    expect_failed(after.feed(proto::error_reply{k.kind, "told so"}), k.cause, "told so");
  }
}

TEST(ClientConn, ShutdownEndsTheCall) {
  client_under_test c;
  c.feed(greeting());
  expect_failed(c.feed(proto::shutdown{}), error_kind::host_lost, "the host at 127.0.0.1:7727 shut down");
  client_under_test d;
  d.feed(greeting());
  expect_failed(d.feed(proto::shutdown{"host going away"}), error_kind::host_lost, "host going away");
}

TEST(ClientConn, StatusBlockIsOneReply) {
  client_under_test c;
  c.feed(greeting());
  proto::status_reply st;
  proto::barrier_info b;
  b.scope = "s";
  b.name = "b";
  b.gen = 3;
  b.state = proto::round_state::open;
  st.barriers.push_back(b);
  auto l = lines(proto::format_reply(st));
  ASSERT_GE(l.size(), 2u);
  for (std::size_t i = 0; i + 1 < l.size(); ++i) EXPECT_EQ(c.conn->feed(l[i]).event, conn_event::none);
  auto out = c.conn->feed(l.back());
  ASSERT_EQ(out.event, conn_event::reply);
  EXPECT_EQ(std::get<proto::status_reply>(*out.reply).barriers.at(0).gen, 3u);
}

TEST(ClientConn, Keepalive) {
  client_under_test c;
  c.feed(greeting());
  EXPECT_EQ(c.conn->keepalive(std::chrono::milliseconds(0)), "PING\n");
  EXPECT_EQ(c.conn->keepalive(std::chrono::milliseconds(15500)), "PING\n");  // 3 intervals and half a second
  EXPECT_FALSE(c.conn->keepalive(std::chrono::milliseconds(15501)));
  EXPECT_EQ(c.feed(proto::pong{}).event, conn_event::none);  // not a reply to the request
}

// ---------------------------------------------------------------------------
// the shared secret (auth=hmac)

/// What both sides' proofs cover (protocol 2): c's HELLO line and the
/// greeting h without its proof or credential.
std::string transcript_of(const client_under_test& c, proto::hello_reply h) {
  h.proof.clear();
  h.cred.clear();
  return auth::transcript(c.hello.substr(0, c.hello.find('\n')), reply_line(h));
}

/// The host's greeting for client c with the secret `secret`.
proto::hello_reply hmac_greeting(const client_under_test& c, const std::string& secret,
                                 const std::string& hn = host_nonce) {
  auto h = greeting("hmac");
  h.nonce = hn;
  h.proof = auth::host_proof(secret, c.client_nonce, hn, transcript_of(c, h));
  return h;
}

TEST(ClientConn, HmacRightSecret) {
  client_under_test c(std::string("s3cret"));
  EXPECT_EQ(lines(c.hello).size(), 1u);  // never pipelined with a secret
  auto out = c.feed(hmac_greeting(c, "s3cret"));
  ASSERT_EQ(out.event, conn_event::greeted) << out.failure.text;
  auto l = lines(out.bytes);
  ASSERT_EQ(l.size(), 2u);
  // AUTH with the client's proof, unsealed; then the request, sealed (seq 0).
  auto r = proto::parse_request(l[0]);
  ASSERT_TRUE(std::holds_alternative<proto::request>(r));
  EXPECT_EQ(std::get<proto::auth_req>(std::get<proto::request>(r)).proof,
            auth::client_proof("s3cret", c.client_nonce, host_nonce, transcript_of(c, hmac_greeting(c, "s3cret"))));
  std::string key = auth::session_key("s3cret", c.client_nonce, host_nonce);
  EXPECT_TRUE(auth::unseal(l[1], key, auth::direction::to_host, 0));
  EXPECT_EQ(l[1] + "\n", request);
  // Later lines go on with seq 1, 2.
  std::string leave = c.conn->seal("STATUS scope=s name=b detail=1\nLEAVE\n");
  auto ll = lines(leave);
  ASSERT_EQ(ll.size(), 2u);
  EXPECT_TRUE(auth::unseal(ll[0], key, auth::direction::to_host, 1));
  EXPECT_TRUE(auth::unseal(ll[1], key, auth::direction::to_host, 2));
  EXPECT_EQ(ll[1], "LEAVE");
  auto ping = c.conn->keepalive(std::chrono::seconds(1));
  ASSERT_TRUE(ping);
  std::string p = lines(*ping).at(0);
  EXPECT_TRUE(auth::unseal(p, key, auth::direction::to_host, 3));
  EXPECT_EQ(p, "PING");
  // The host's sealed replies are accepted in order.
  out = c.conn->feed(auth::seal(reply_line(proto::waiting{"b", 1, 1, 2}), key, auth::direction::to_client, 0));
  EXPECT_EQ(out.event, conn_event::reply);
  out = c.conn->feed(auth::seal(reply_line(proto::pong{}), key, auth::direction::to_client, 1));
  EXPECT_EQ(out.event, conn_event::none);
  out = c.conn->feed(auth::seal(reply_line(proto::release{"b", 1}), key, auth::direction::to_client, 2));
  EXPECT_EQ(out.event, conn_event::reply);
}

TEST(ClientConn, HmacWrongSecret) {
  client_under_test c(std::string("s3cret"));
  expect_failed(c.feed(hmac_greeting(c, "other")), error_kind::auth, "could not prove it knows the secret");
}

TEST(ClientConn, HmacWithoutSecret) {
  client_under_test c;  // not pipelined (asked again, or beyond loopback) and no secret
  expect_failed(c.feed(hmac_greeting(c, "s3cret")), error_kind::auth,
                "requires authentication: give this participant the host's secret file");
}

TEST(ClientConn, PipelinedRequestToAnAuthenticatingHostRetries) {
  client_under_test c(std::nullopt, true);
  auto out = c.feed(hmac_greeting(c, "s3cret"));
  EXPECT_EQ(out.event, conn_event::retry_with_secret);
  EXPECT_TRUE(out.wants_secret);
  EXPECT_TRUE(out.bytes.empty());
  EXPECT_FALSE(c.conn->greeted());
  client_under_test m(std::nullopt, true);
  auto mg = greeting("munge");
  out = m.feed(mg);
  EXPECT_EQ(out.event, conn_event::retry_with_secret);
  EXPECT_FALSE(out.wants_secret);  // MUNGE needs no secret file
}

TEST(ClientConn, SecretButHostDoesNotAuthenticate) {
  client_under_test c(std::string("s3cret"));
  expect_failed(c.feed(greeting()), error_kind::auth, "does not authenticate, but this participant has a secret");
}

TEST(ClientConn, HmacProofForTheOtherDirection) {
  // The host answers with the client's proof (what the client would send), not its own.
  client_under_test c(std::string("s3cret"));
  auto h = hmac_greeting(c, "s3cret");
  h.proof = auth::client_proof("s3cret", c.client_nonce, host_nonce, transcript_of(c, h));
  expect_failed(c.feed(h), error_kind::auth, "could not prove it knows the secret");
}

TEST(ClientConn, HmacReflection) {
  // A fake host echoes the client's own nonce, as nonce and as proof.
  client_under_test c(std::string("s3cret"));
  auto h = greeting("hmac");
  h.nonce = c.client_nonce;
  h.proof = c.client_nonce;
  expect_failed(c.feed(h), error_kind::auth, "could not prove it knows the secret");
  // Or the client's own sealed request, sent back as if it were a reply.
  client_under_test d(std::string("s3cret"));
  auto out = d.feed(hmac_greeting(d, "s3cret"));
  ASSERT_EQ(out.event, conn_event::greeted);
  expect_failed(d.conn->feed(lines(out.bytes).at(1)), error_kind::auth, "failed its authentication check");
}

TEST(ClientConn, HmacReplayedGreeting) {
  // A greeting recorded on an earlier connection (another client nonce) does not prove anything now.
  client_under_test earlier(std::string("s3cret"));
  auto recorded = hmac_greeting(earlier, "s3cret");
  client_under_test c(std::string("s3cret"));
  c.client_nonce = "0123456789abcdef0123456789abcdef";
  c.hello = c.conn->start(c.client_nonce);
  expect_failed(c.feed(recorded), error_kind::auth, "could not prove it knows the secret");
}

TEST(ClientConn, HmacReplayedReply) {
  client_under_test c(std::string("s3cret"));
  ASSERT_EQ(c.feed(hmac_greeting(c, "s3cret")).event, conn_event::greeted);
  std::string key = auth::session_key("s3cret", c.client_nonce, host_nonce);
  std::string sealed = auth::seal(reply_line(proto::waiting{"b", 1, 1, 2}), key, auth::direction::to_client, 0);
  EXPECT_EQ(c.conn->feed(sealed).event, conn_event::reply);
  expect_failed(c.conn->feed(sealed), error_kind::auth, "failed its authentication check");
}

TEST(ClientConn, HmacUnsealedOrAlteredReply) {
  client_under_test c(std::string("s3cret"));
  ASSERT_EQ(c.feed(hmac_greeting(c, "s3cret")).event, conn_event::greeted);
  expect_failed(c.conn->feed(reply_line(proto::release{"b", 1})), error_kind::auth, "failed its authentication check");
  client_under_test d(std::string("s3cret"));
  ASSERT_EQ(d.feed(hmac_greeting(d, "s3cret")).event, conn_event::greeted);
  std::string key = auth::session_key("s3cret", d.client_nonce, host_nonce);
  std::string sealed = auth::seal(reply_line(proto::release{"b", 1}), key, auth::direction::to_client, 0);
  sealed.replace(sealed.find("gen=1"), 5, "gen=2");
  expect_failed(d.conn->feed(sealed), error_kind::auth, "failed its authentication check");
}

// ---------------------------------------------------------------------------
// MUNGE

proto::hello_reply munge_greeting(client_under_test& c, uid_t host_uid,
                                  std::string payload_nonce = {}) {
  auto h = greeting("munge");
  h.nonce = host_nonce;
  std::string err;
  auto cred = c.env.munge_encode(fmt::format("tfbarrier-host-munge\n{}\n{}\n{}",
                                             payload_nonce.empty() ? c.client_nonce : payload_nonce, host_nonce,
                                             transcript_of(c, h)),
                                 host_uid, err);
  h.cred = munge_auth::to_wire(*cred);
  return h;
}

TEST(ClientConn, MungeAccepted) {
  client_under_test c;
  auto out = c.feed(munge_greeting(c, 1000));
  ASSERT_EQ(out.event, conn_event::greeted) << out.failure.text;
  auto l = lines(out.bytes);
  ASSERT_EQ(l.size(), 2u);
  auto r = proto::parse_request(l[0]);
  ASSERT_TRUE(std::holds_alternative<proto::request>(r));
  auto& a = std::get<proto::auth_req>(std::get<proto::request>(r));
  std::string err;
  auto d = c.env.munge_decode(munge_auth::from_wire(a.cred), err);
  ASSERT_TRUE(d) << err;
  EXPECT_EQ(c.env.last_restrict, 1000u);  // only the host's uid may decode it
  std::string key = fmt::format("{:032x}{:032x}", 1, 2);  // two fresh nonces of fake_env
  EXPECT_EQ(d->payload, fmt::format("tfbarrier-client-munge\n{}\n{}\n{}\n{}", c.client_nonce, host_nonce,
                                    transcript_of(c, munge_greeting(c, 1000)), key));
  EXPECT_TRUE(auth::unseal(l[1], key, auth::direction::to_host, 0));
  EXPECT_EQ(l[1] + "\n", request);
  out = c.conn->feed(auth::seal(reply_line(proto::waiting{"b", 1, 1, 2}), key, auth::direction::to_client, 0));
  EXPECT_EQ(out.event, conn_event::reply);
}

TEST(ClientConn, MungeRefused) {
  client_under_test c;
  auto h = munge_greeting(c, 1000);
  c.env.refuse = true;
  expect_failed(c.feed(h), error_kind::auth, "authenticates with MUNGE, and its credential was refused here: MUNGE: ");
}

TEST(ClientConn, MungeHostOfAnotherUid) {
  client_under_test c;
  expect_failed(c.feed(munge_greeting(c, 0)), error_kind::auth, "runs as uid 0, not as you (uid 1000)");
}

TEST(ClientConn, MungeCredentialForAnotherConnection) {
  client_under_test c;
  expect_failed(c.feed(munge_greeting(c, 1000, "0123456789abcdef0123456789abcdef")), error_kind::auth,
                "is not for this connection");
}

TEST(ClientConn, MungeCannotEncode) {
  client_under_test c;
  auto h = munge_greeting(c, 1000);
  c.env.cannot_encode = true;
  expect_failed(c.feed(h), error_kind::auth, "cannot make a MUNGE credential: MUNGE: Socket");
}

}  // namespace
}  // namespace tfb::client

// #19 item 2: before the host has greeted (and proved itself, with a secret),
// only the handshake's own errors count; any other ERR is a protocol error.
namespace tfb::client {
// Beyond loopback (require_auth): a host must prove itself, unless --insecure.
TEST(ClientConn, BeyondLoopbackAHostThatDoesNotAuthenticateIsRefused) {
  client_under_test c(std::nullopt, false, true);
  // expect_failed checks that nothing is sent: the request stays here.
  expect_failed(c.feed(greeting()), error_kind::auth, "does not authenticate (auth=none)");
  // Whatever the host says next is not acted on.
  EXPECT_EQ(c.conn->feed(reply_line(proto::release{"b", 1, proto::verdict::stop, std::nullopt, "forged"})).event,
            conn_event::none);
  EXPECT_FALSE(c.conn->greeted());
}

TEST(ClientConn, BeyondLoopbackAuthenticatingHostsAreTaken) {
  client_under_test h(std::string("s3cret"), false, true);
  EXPECT_EQ(h.feed(hmac_greeting(h, "s3cret")).event, conn_event::greeted);
  client_under_test m(std::nullopt, false, true);
  EXPECT_EQ(m.feed(munge_greeting(m, 1000)).event, conn_event::greeted);
  client_under_test insecure;  // --insecure: require_auth is false
  EXPECT_EQ(insecure.feed(greeting()).event, conn_event::greeted);
}

TEST(ClientConnBeforeGreeting, OnlyHandshakeErrorsAreBelieved) {
  struct env_t : client_env {
    std::string nonce() override { return "00112233445566778899aabbccddeeff"; }
    std::optional<munge_auth::decoded> munge_decode(std::string_view, std::string& e) override {
      e = "no munge";
      return std::nullopt;
    }
    std::optional<std::string> munge_encode(std::string_view, uid_t, std::string& e) override {
      e = "no munge";
      return std::nullopt;
    }
    uid_t uid() override { return 1000; }
  } env;
  const std::string secret = "0123456789abcdef0123456789abcdef";
  conn_config cfg;
  cfg.addr = "127.0.0.1:1";
  cfg.client_host = "n1";
  cfg.pid = 1;
  cfg.secret = &secret;
  for (const char* line : {"ERR ABORTED :you were aborted", "ERR CONFLICT :rank 0 is taken", "ERR NEEDN :x"}) {
    client_conn c(cfg, env, "ARRIVE name=a scope=default id=x n=2 rank=0\n");
    (void)c.start("00112233445566778899aabbccddeeff");
    auto out = c.feed(line);
    EXPECT_EQ(out.event, conn_event::failed) << line;
    EXPECT_EQ(out.failure.kind, error_kind::protocol) << line;
    EXPECT_EQ(exit_code_of(out.failure), 70) << line;
    EXPECT_NE(out.failure.text.find("before it greeted"), std::string::npos) << out.failure.text;
  }
  client_conn c(cfg, env, "ARRIVE name=a scope=default id=x n=2 rank=0\n");
  (void)c.start("00112233445566778899aabbccddeeff");
  auto out = c.feed("ERR BUSY :too many connections");
  EXPECT_EQ(out.event, conn_event::busy);  // believed: connect again later
  EXPECT_EQ(out.failure.text, "too many connections");
}
}  // namespace tfb::client
