// The host's side of a connection (src/core/host_conn.h), driven with lines as a
// client would send them: HELLO and the version check, the shared-secret and
// MUNGE handshakes (MUNGE through a test implementation of host_services; the
// real munged is the Bats suites'), sealing, one ARRIVE per connection, the
// handshake deadline and keep-alives.
#include "host_conn.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "auth.h"

namespace tfb {
namespace {

using namespace std::chrono_literals;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

// Nonces and MUNGE as the test wants them (MUNGE is host.cpp's to call:
// settle() below plays that part). A credential is "cred" and a number;
// decoding one a second time is refused, as munged refuses replays.
class test_services final : public host_services {
 public:
  std::string nonce() override {
    std::string n = auth::hmac_hex("nonce", std::to_string(nonces_++));
    return n.substr(0, 2 * auth::nonce_bytes);
  }
  std::optional<std::string> munge_encode(std::string_view payload, std::string& error) {
    if (!munged_up) {
      error = "munged is down";
      return std::nullopt;
    }
    return issue(std::string(payload), host_uid);
  }
  std::optional<munge_auth::decoded> munge_decode(std::string_view cred, std::string& error) {
    auto it = creds_.find(std::string(cred));
    if (it == creds_.end()) {
      error = "Invalid credential format";
      return std::nullopt;
    }
    if (it->second.second) {
      error = "Replayed credential";
      return std::nullopt;
    }
    it->second.second = true;
    return it->second.first;
  }
  uid_t uid() override { return host_uid; }

  /// A credential from uid carrying payload, as munge_encode makes (the
  /// client's side of the test uses it too).
  std::string issue(std::string payload, uid_t from) {
    std::string c = "cred" + std::to_string(creds_.size()) + "==";  // base64 padding: to_wire turns it into '_'
    creds_[c] = {munge_auth::decoded{std::move(payload), from}, false};
    return c;
  }
  /// What a credential carries, without using it up.
  munge_auth::decoded peek(const std::string& cred) const { return creds_.at(cred).first; }

  uid_t host_uid = 1000;
  bool munged_up = true;

 private:
  int nonces_ = 0;
  std::map<std::string, std::pair<munge_auth::decoded, bool>> creds_;
};

// host.cpp's part: makes the MUNGE call a step asks for (at once, here),
// and gives the connection its result; the step that follows.
host_step settle(host_conn& c, const host_conn_config& cfg, host_step s, test_services& svc) {
  while (s.munge) {
    EXPECT_TRUE(c.munge_pending());
    munge_result r;
    if (s.munge->kind == munge_call::op::encode)
      r.cred = svc.munge_encode(s.munge->data, r.error);
    else
      r.decoded = svc.munge_decode(s.munge->data, r.error);
    s = c.munge_done(cfg, std::move(r));
  }
  EXPECT_FALSE(c.munge_pending());
  return s;
}

std::string line_of(const proto::request& r) {
  std::string l = proto::format_request(r);
  return l.substr(0, l.size() - 1);
}

proto::reply reply_of(const std::string& bytes) {
  proto::line_splitter s;
  proto::reply_reader rd;
  s.feed(bytes);
  auto l = s.next();
  EXPECT_TRUE(l.has_value()) << bytes;
  std::string error;
  auto r = rd.feed(l.value_or(""), error);
  EXPECT_TRUE(r.has_value()) << bytes << ": " << error;
  return r.value_or(proto::reply{proto::pong{}});
}

proto::error_reply error_of(const host_step& s) {
  auto r = reply_of(s.bytes);
  EXPECT_TRUE(std::holds_alternative<proto::error_reply>(r)) << s.bytes;
  return std::holds_alternative<proto::error_reply>(r) ? std::get<proto::error_reply>(r)
                                                       : proto::error_reply{proto::error_kind::version, ""};
}

proto::hello_reply hello_reply_of(const host_step& s) {
  auto r = reply_of(s.bytes);
  EXPECT_TRUE(std::holds_alternative<proto::hello_reply>(r)) << s.bytes;
  return std::holds_alternative<proto::hello_reply>(r) ? std::get<proto::hello_reply>(r) : proto::hello_reply{};
}

void expect_closed_with(const host_step& s, proto::error_kind kind, std::string_view text) {
  EXPECT_TRUE(s.close) << s.bytes;
  auto e = error_of(s);
  EXPECT_EQ(e.kind, kind) << s.bytes;
  EXPECT_CONTAINS(e.text, text);
  EXPECT_FALSE(s.deliver.has_value());
}

const std::string client_nonce = std::string(2 * auth::nonce_bytes, 'c');

std::string hello_line(std::string nonce = client_nonce, std::uint32_t version = protocol_version,
                       std::uint32_t keepalive_ms = 0) {
  return line_of(proto::hello{version, "node1", 42, keepalive_ms, std::move(nonce)});
}

std::string arrive_line(std::string name = "b") {
  proto::arrive a;
  a.name = std::move(name);
  a.scope = "job";
  a.id = "abc";
  a.n = 2;
  return line_of(a);
}

struct host_conn_test : ::testing::Test {
  test_services services;
  host_conn_config open_host{std::nullopt, false, "tfbarrier/test", &services};
  host_conn_config secret_host{std::string("s3cret"), false, "tfbarrier/test", &services};
  host_conn_config munge_host{std::nullopt, true, "tfbarrier/test", &services};
  host_conn conn;

  /// One line to munge_host, its MUNGE calls made.
  host_step mfeed(const std::string& line) { return settle(conn, munge_host, conn.feed(munge_host, line), services); }

  /// HELLO and AUTH with this secret against secret_host; the session key.
  std::string hmac_handshake(const std::string& secret) {
    host_step s = conn.feed(secret_host, hello_line());
    auto hr = hello_reply_of(s);
    EXPECT_EQ(hr.auth, "hmac");
    EXPECT_EQ(s.timer, host_step::deadline::keep);
    std::string t = auth::transcript(hello_line(), auth::without_field(s.bytes.substr(0, s.bytes.size() - 1), "proof"));
    EXPECT_TRUE(auth::equal(hr.proof, auth::host_proof("s3cret", client_nonce, hr.nonce, t)));
    host_step a =
        conn.feed(secret_host, line_of(proto::auth_req{auth::client_proof(secret, client_nonce, hr.nonce, t)}));
    last = a;
    return auth::session_key(secret, client_nonce, hr.nonce);
  }
  host_step last;
};

// ---------------------------------------------------------------------------
// HELLO

TEST_F(host_conn_test, HelloWithoutAuthenticationIsAnsweredAndEndsTheHandshake) {
  host_step s = conn.feed(open_host, hello_line());
  auto hr = hello_reply_of(s);
  EXPECT_EQ(hr.version, static_cast<std::uint32_t>(protocol_version));
  EXPECT_EQ(hr.server, "tfbarrier/test");
  EXPECT_EQ(hr.auth, "none");
  EXPECT_FALSE(s.close);
  EXPECT_EQ(s.timer, host_step::deadline::handshake_over);
  EXPECT_FALSE(s.request);
  EXPECT_TRUE(conn.authenticated());
  EXPECT_FALSE(conn.sealed());
  EXPECT_EQ(conn.peer().host, "node1");
  EXPECT_EQ(conn.peer().pid, 42u);
  EXPECT_EQ(conn.keepalive_ms(), 0u);
  EXPECT_FALSE(conn.handshake_expired().has_value());
}

TEST_F(host_conn_test, LinesBeforeHelloAreRefusedUnparsed) {
  for (std::string first : std::vector<std::string>{"PING", arrive_line(), "GET / HTTP/1.1", "", "HELLOx v=1"}) {
    host_conn c;
    host_step s = c.feed(open_host, first);
    expect_closed_with(s, proto::error_kind::handshake, "the first line must be HELLO v=2");
    EXPECT_EQ(s.bad_client, "first line was not HELLO");
    EXPECT_FALSE(c.hello_done());
  }
}

TEST_F(host_conn_test, AMalformedHelloGetsItsParseError) {
  host_step s = conn.feed(open_host, "HELLO v=x");
  EXPECT_TRUE(s.close);
  EXPECT_FALSE(s.bad_client.empty());
  EXPECT_FALSE(conn.hello_done());
}

TEST_F(host_conn_test, AnotherProtocolVersionIsRefused) {
  // Version 1 too: its handshake proves less (docs/protocol.md), and its
  // clients print the text as it is.
  for (std::uint32_t v : {0u, 1u, static_cast<std::uint32_t>(protocol_version) + 1}) {
    host_conn c;
    host_step s = c.feed(open_host, hello_line(client_nonce, v));
    expect_closed_with(s, proto::error_kind::version,
                       fmt::format("this host (tfbarrier/test) speaks protocol version {}, and the client asked for "
                                   "version {}: run the same version of tfbarrier on the host and in the job",
                                   protocol_version, v));
    EXPECT_CONTAINS(s.bad_client, "run the same version of tfbarrier");
    EXPECT_FALSE(c.hello_done());
  }
}

TEST_F(host_conn_test, ASecondHelloIsRefused) {
  conn.feed(open_host, hello_line());
  host_step s = conn.feed(open_host, hello_line());
  expect_closed_with(s, proto::error_kind::badrequest, "HELLO was already sent");
  EXPECT_TRUE(s.request);
}

TEST_F(host_conn_test, AuthOnAHostThatDoesNotAuthenticateIsRefused) {
  conn.feed(open_host, hello_line());
  host_step s = conn.feed(open_host, line_of(proto::auth_req{std::string(64, 'a')}));
  expect_closed_with(s, proto::error_kind::badrequest, "this host does not authenticate: send no AUTH");
}

// ---------------------------------------------------------------------------
// requests after the handshake

TEST_F(host_conn_test, RequestsAreDeliveredAndOneArrivePerConnection) {
  conn.feed(open_host, hello_line());
  host_step s = conn.feed(open_host, arrive_line());
  ASSERT_TRUE(s.deliver.has_value());
  EXPECT_TRUE(std::holds_alternative<proto::arrive>(*s.deliver));
  EXPECT_TRUE(s.bytes.empty());
  EXPECT_TRUE(s.request);

  host_step again = conn.feed(open_host, arrive_line("other"));
  expect_closed_with(again, proto::error_kind::badrequest, "one ARRIVE or DECIDE per connection");
}

TEST_F(host_conn_test, ADecideAfterAnArriveIsRefused) {
  conn.feed(open_host, hello_line());
  conn.feed(open_host, arrive_line());
  proto::decide d;
  d.name = "b";
  d.scope = "job";
  d.id = "abc";
  d.v = proto::verdict::stop;
  expect_closed_with(conn.feed(open_host, line_of(d)), proto::error_kind::badrequest,
                     "one ARRIVE or DECIDE per connection");
}

TEST_F(host_conn_test, TheChiefOfDecideByMaySendOneDecideOnItsConnection) {
  conn.feed(open_host, hello_line());
  proto::arrive a;
  a.name = "b";
  a.scope = "job";
  a.id = "abc";
  a.n = 2;
  a.chief = true;
  a.decide = true;
  conn.feed(open_host, line_of(a));
  proto::decide d;
  d.name = "b";
  d.scope = "job";
  d.id = "abc";
  d.v = proto::verdict::stop;
  host_step s = conn.feed(open_host, line_of(d));
  ASSERT_TRUE(s.deliver.has_value());
  EXPECT_TRUE(std::holds_alternative<proto::decide>(*s.deliver));
  // One only.
  expect_closed_with(conn.feed(open_host, line_of(d)), proto::error_kind::badrequest,
                     "one ARRIVE or DECIDE per connection");
}

TEST_F(host_conn_test, ARefusedArriveLeavesTheConnectionFreeForAnotherTry) {
  conn.feed(open_host, hello_line());
  conn.feed(open_host, arrive_line());
  conn.refused();
  host_step s = conn.feed(open_host, arrive_line());
  EXPECT_TRUE(s.deliver.has_value());
  EXPECT_FALSE(s.close);
}

TEST_F(host_conn_test, OtherRequestsAreDeliveredAnyNumberOfTimes) {
  conn.feed(open_host, hello_line());
  for (int i = 0; i < 3; ++i) {
    for (const proto::request& r :
         {proto::request{proto::ping{}}, proto::request{proto::status_req{"*", "", false}},
          proto::request{proto::abort_req{"job", "b", "why"}}, proto::request{proto::leave{}}}) {
      host_step s = conn.feed(open_host, line_of(r));
      ASSERT_TRUE(s.deliver.has_value()) << line_of(r);
      EXPECT_EQ(s.deliver->index(), r.index());
      EXPECT_FALSE(s.close);
    }
  }
}

TEST_F(host_conn_test, BytesAreSplitIntoLinesAndAnOverLongLineCloses) {
  conn.take(hello_line() + "\n" + arrive_line() + "\nPI");
  auto s1 = conn.next(open_host);
  ASSERT_TRUE(s1);
  EXPECT_EQ(hello_reply_of(*s1).auth, "none");
  auto s2 = conn.next(open_host);
  ASSERT_TRUE(s2);
  EXPECT_TRUE(s2->deliver && std::holds_alternative<proto::arrive>(*s2->deliver));
  EXPECT_FALSE(conn.next(open_host).has_value());
  conn.take("NG\n");
  auto s3 = conn.next(open_host);
  ASSERT_TRUE(s3);
  EXPECT_TRUE(s3->deliver && std::holds_alternative<proto::ping>(*s3->deliver));

  conn.take(std::string(proto::max_line + 10, 'x'));
  auto s4 = conn.next(open_host);
  ASSERT_TRUE(s4);
  expect_closed_with(*s4, proto::error_kind::toolong, "line longer than 4096 bytes");
  EXPECT_EQ(s4->bad_client, "line longer than 4096 bytes");
}

// ---------------------------------------------------------------------------
// the shared-secret handshake

TEST_F(host_conn_test, TheRightSecretAuthenticatesAndSealsBothDirections) {
  std::string key = hmac_handshake("s3cret");
  EXPECT_TRUE(last.bytes.empty());
  EXPECT_FALSE(last.close);
  EXPECT_EQ(last.timer, host_step::deadline::handshake_over);
  EXPECT_TRUE(conn.authenticated());
  EXPECT_TRUE(conn.sealed());

  for (std::uint64_t seq = 0; seq < 3; ++seq) {
    host_step s = conn.feed(secret_host, auth::seal("PING", key, auth::direction::to_host, seq));
    ASSERT_TRUE(s.deliver.has_value()) << s.bytes;
    EXPECT_TRUE(std::holds_alternative<proto::ping>(*s.deliver));
    // The reply, and each line of a reply of several lines, sealed in order.
    std::string wire = conn.seal("PONG\nPONG\n");
    auto nl = wire.find('\n');
    std::string first = wire.substr(0, nl), second = wire.substr(nl + 1, wire.size() - nl - 2);
    EXPECT_TRUE(auth::unseal(first, key, auth::direction::to_client, 2 * seq)) << wire;
    EXPECT_TRUE(auth::unseal(second, key, auth::direction::to_client, 2 * seq + 1)) << wire;
    EXPECT_EQ(first, "PONG");
  }
}

TEST_F(host_conn_test, RefusalsAfterTheHandshakeAreSealedToo) {
  std::string key = hmac_handshake("s3cret");
  host_step s = conn.feed(secret_host, auth::seal(hello_line(), key, auth::direction::to_host, 0));
  EXPECT_TRUE(s.close);
  std::string l = s.bytes.substr(0, s.bytes.size() - 1);
  ASSERT_TRUE(auth::unseal(l, key, auth::direction::to_client, 0)) << s.bytes;
  EXPECT_CONTAINS(l, "HELLO was already sent");
}

TEST_F(host_conn_test, AnOverLongLineOnASealedConnectionGetsASealedRefusal) {
  std::string key = hmac_handshake("s3cret");
  conn.take(std::string(proto::max_line + 1, 'x'));
  EXPECT_FALSE(conn.line().has_value());
  auto s = conn.overflow();
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->close);
  std::string l = s->bytes.substr(0, s->bytes.size() - 1);
  ASSERT_TRUE(auth::unseal(l, key, auth::direction::to_client, 0)) << s->bytes;
  EXPECT_CONTAINS(l, "ERR TOOLONG");
}

TEST_F(host_conn_test, AWrongSecretIsRefused) {
  hmac_handshake("not the secret");
  expect_closed_with(last, proto::error_kind::auth, "wrong proof: the participant's secret differs from the host's");
  EXPECT_CONTAINS(last.bad_client, "authentication failed: wrong proof");
  EXPECT_FALSE(conn.authenticated());
}

TEST_F(host_conn_test, AReplayedProofIsRefused) {
  // A proof seen on an earlier connection is bound to that connection's host nonce.
  host_conn earlier;
  host_step g = earlier.feed(secret_host, hello_line());
  auto hr = hello_reply_of(g);
  std::string t = auth::transcript(hello_line(), auth::without_field(g.bytes.substr(0, g.bytes.size() - 1), "proof"));
  std::string old_proof = auth::client_proof("s3cret", client_nonce, hr.nonce, t);
  ASSERT_EQ(earlier.feed(secret_host, line_of(proto::auth_req{old_proof})).timer, host_step::deadline::handshake_over);

  auto hr2 = hello_reply_of(conn.feed(secret_host, hello_line()));
  EXPECT_NE(hr2.nonce, hr.nonce);
  expect_closed_with(conn.feed(secret_host, line_of(proto::auth_req{old_proof})), proto::error_kind::auth,
                     "or it replayed an old one");
}

TEST_F(host_conn_test, TheHostsOwnProofReflectedBackIsRefused) {
  auto hr = hello_reply_of(conn.feed(secret_host, hello_line()));
  expect_closed_with(conn.feed(secret_host, line_of(proto::auth_req{hr.proof})), proto::error_kind::auth,
                     "wrong proof");
}

TEST_F(host_conn_test, ALineSealedForTheOtherDirectionIsRefused) {
  std::string key = hmac_handshake("s3cret");
  host_step s = conn.feed(secret_host, auth::seal("PING", key, auth::direction::to_client, 0));
  EXPECT_TRUE(s.close);
  EXPECT_EQ(s.bad_client, "authentication failed: a line without a valid MAC");
}

TEST_F(host_conn_test, AReplayedOrUnsealedLineIsRefused) {
  std::string key = hmac_handshake("s3cret");
  std::string ping0 = auth::seal("PING", key, auth::direction::to_host, 0);
  EXPECT_TRUE(conn.feed(secret_host, ping0).deliver.has_value());
  EXPECT_EQ(conn.feed(secret_host, ping0).bad_client, "authentication failed: a line without a valid MAC");

  host_conn c2;
  conn = std::move(c2);
  key = hmac_handshake("s3cret");
  EXPECT_EQ(conn.feed(secret_host, "PING").bad_client, "authentication failed: a line without a valid MAC");
}

TEST_F(host_conn_test, AHelloWithoutANonceIsRefusedByAnAuthenticatingHost) {
  for (auto* cfg : {&secret_host, &munge_host}) {
    host_conn c;
    host_step s = c.feed(*cfg, hello_line(""));
    expect_closed_with(s, proto::error_kind::auth, "this host requires authentication");
    EXPECT_FALSE(c.hello_done());
  }
}

TEST_F(host_conn_test, ARequestInsteadOfAuthIsRefused) {
  conn.feed(secret_host, hello_line());
  expect_closed_with(conn.feed(secret_host, arrive_line()), proto::error_kind::auth, "expected AUTH after HELLO");
}

TEST_F(host_conn_test, AuthAfterTheHandshakeIsRefused) {
  std::string key = hmac_handshake("s3cret");
  host_step s = conn.feed(secret_host, auth::seal(line_of(proto::auth_req{std::string(64, 'a')}), key,
                                                  auth::direction::to_host, 0));
  EXPECT_TRUE(s.close);
  EXPECT_CONTAINS(s.bytes, "AUTH was already done");
}

// ---------------------------------------------------------------------------
// the MUNGE handshake

struct host_conn_munge : host_conn_test {
  /// HELLO to munge_host; checks the host's credential; the host nonce.
  std::string hello() {
    host_step asked = conn.feed(munge_host, hello_line());
    EXPECT_TRUE(asked.munge.has_value());
    EXPECT_TRUE(asked.bytes.empty());
    host_step s = settle(conn, munge_host, std::move(asked), services);
    auto hr = hello_reply_of(s);
    EXPECT_EQ(hr.auth, "munge");
    EXPECT_EQ(s.timer, host_step::deadline::keep);
    auto d = services.peek(munge_auth::from_wire(hr.cred));
    EXPECT_EQ(d.uid, services.host_uid);
    t = auth::transcript(hello_line(), auth::without_field(s.bytes.substr(0, s.bytes.size() - 1), "cred"));
    EXPECT_EQ(d.payload, fmt::format("tfbarrier-host-munge\n{}\n{}\n{}", client_nonce, hr.nonce, t));
    return hr.nonce;
  }
  std::string auth_line(const std::string& payload, uid_t from) {
    return line_of(proto::auth_req{"", munge_auth::to_wire(services.issue(payload, from))});
  }
  /// The client's AUTH payload for host nonce hn, this connection's transcript.
  std::string payload(const std::string& hn) {
    return fmt::format("tfbarrier-client-munge\n{}\n{}\n{}\n{}", client_nonce, hn, t, key);
  }
  const std::string key = std::string(64, 'k');
  std::string t;  ///< the transcript of the last hello()
};

TEST_F(host_conn_munge, TheHostsUidIsLetInAndTheLinesAreSealed) {
  std::string hn = hello();
  host_step s = mfeed(auth_line(payload(hn),
                                                services.host_uid));
  EXPECT_TRUE(s.bytes.empty()) << s.bytes;
  EXPECT_EQ(s.timer, host_step::deadline::handshake_over);
  EXPECT_TRUE(conn.sealed());
  EXPECT_TRUE(mfeed(auth::seal("PING", key, auth::direction::to_host, 0)).deliver.has_value());
  std::string pong = conn.seal("PONG\n");
  pong.pop_back();
  EXPECT_TRUE(auth::unseal(pong, key, auth::direction::to_client, 0));
}

TEST_F(host_conn_munge, AnotherUidIsRefused) {
  std::string hn = hello();
  host_step s = mfeed(auth_line(payload(hn),
                                                services.host_uid + 1));
  expect_closed_with(s, proto::error_kind::auth, "uid 1001 may not use this host: only the job owner (uid 1000) may");
}

TEST_F(host_conn_munge, ACredentialMungedRefusesIsRefused) {
  hello();
  host_step s = mfeed(line_of(proto::auth_req{"", "forged"}));
  expect_closed_with(s, proto::error_kind::auth, "the MUNGE credential was refused: Invalid credential format");
}

TEST_F(host_conn_munge, ACredentialForAnotherConnectionIsRefused) {
  hello();
  // Made for another host nonce (a replay of another connection's handshake).
  host_step s = mfeed(auth_line(payload(std::string(32, '0')), services.host_uid));
  expect_closed_with(s, proto::error_kind::auth, "the MUNGE credential is not for this connection");
}

TEST_F(host_conn_munge, TheHostsOwnCredentialReflectedBackIsRefused) {
  host_step s = mfeed(hello_line());
  auto hr = hello_reply_of(s);
  expect_closed_with(mfeed(line_of(proto::auth_req{"", hr.cred})), proto::error_kind::auth,
                     "the MUNGE credential is not for this connection");
}

TEST_F(host_conn_munge, AProofOrARequestInsteadOfACredentialIsRefused) {
  hello();
  expect_closed_with(mfeed(line_of(proto::auth_req{std::string(64, 'a')})), proto::error_kind::auth,
                     "expected AUTH cred=... (this host authenticates with MUNGE)");
  host_conn c;
  conn = std::move(c);
  hello();
  expect_closed_with(mfeed(arrive_line()), proto::error_kind::auth, "a request came before AUTH");
}

TEST_F(host_conn_munge, AHostThatCannotReachMungedSaysItIsBusy) {
  services.munged_up = false;
  host_step s = mfeed(hello_line());
  expect_closed_with(s, proto::error_kind::busy, "the host cannot reach munged right now: munged is down");
  EXPECT_EQ(s.warning, "warning: cannot make a MUNGE credential: munged is down");
}

TEST_F(host_conn_munge, ACredentialOverAnotherHelloIsRefused) {
  // The client signed a HELLO that differs from the one the host read (a
  // proxy rewrote keepalive=): its transcript differs, so does the payload.
  std::string hn = hello();
  t = auth::transcript(line_of(proto::hello{protocol_version, "node1", 42, 100, client_nonce}), "HELLO");
  expect_closed_with(mfeed(auth_line(payload(hn), services.host_uid)), proto::error_kind::auth,
                     "the MUNGE credential is not for this connection");
}

TEST_F(host_conn_munge, TheConnectionWaitsForEachCallAndReadsNoLineMeanwhile) {
  host_step s = conn.feed(munge_host, hello_line());
  ASSERT_TRUE(s.munge);
  EXPECT_EQ(s.munge->kind, munge_call::op::encode);
  EXPECT_TRUE(conn.munge_pending());
  EXPECT_FALSE(conn.authenticated());
  // A result nobody asked for changes nothing.
  host_conn idle;
  host_step none = idle.munge_done(munge_host, munge_result{});
  EXPECT_TRUE(none.bytes.empty());
  EXPECT_FALSE(none.close);
}

TEST_F(host_conn_munge, AFullQueueOrASlowMungedIsBusyAtEitherStep) {
  for (auto how : {munge_result::status::queue_full, munge_result::status::timed_out}) {
    // At the greeting ...
    host_conn c1;
    ASSERT_TRUE(c1.feed(munge_host, hello_line()).munge);
    munge_result r;
    r.how = how;
    host_step s = c1.munge_done(munge_host, r);
    bool full = how == munge_result::status::queue_full;
    expect_closed_with(s, proto::error_kind::busy,
                       full ? "the host has too many MUNGE calls waiting; try again shortly"
                            : "munged did not answer the host within 5 s; try again later");
    if (full)
      EXPECT_CONTAINS(s.bad_client, "MUNGE queue full");
    else
      EXPECT_EQ(s.warning, "warning: munged did not answer within 5 s (making a credential); closing the connection");
    EXPECT_FALSE(c1.munge_pending());
    // ... and at AUTH.
    host_conn c2;
    conn = std::move(c2);
    std::string hn = hello();
    host_step a = conn.feed(munge_host, auth_line(payload(hn), services.host_uid));
    ASSERT_TRUE(a.munge);
    EXPECT_EQ(a.munge->kind, munge_call::op::decode);
    host_step s2 = conn.munge_done(munge_host, r);
    expect_closed_with(s2, proto::error_kind::busy, full ? "too many MUNGE calls" : "within 5 s");
    EXPECT_FALSE(conn.authenticated());
  }
}

TEST_F(host_conn_test, ASecretTakesPrecedenceOverMunge) {
  host_conn_config both = secret_host;
  both.munge = true;
  EXPECT_EQ(hello_reply_of(conn.feed(both, hello_line())).auth, "hmac");
}

// ---------------------------------------------------------------------------
// the handshake deadline and keep-alives

TEST_F(host_conn_test, TheHandshakeDeadlineNamesWhatIsMissing) {
  auto s = conn.handshake_expired();
  ASSERT_TRUE(s);
  expect_closed_with(*s, proto::error_kind::timeout, "no HELLO in time");
  EXPECT_EQ(s->bad_client, "no HELLO within the handshake timeout");

  conn.feed(secret_host, hello_line());
  s = conn.handshake_expired();
  ASSERT_TRUE(s);
  expect_closed_with(*s, proto::error_kind::timeout, "no AUTH in time");
  EXPECT_EQ(s->bad_client, "no AUTH within the handshake timeout");

  host_conn c;
  conn = std::move(c);
  hmac_handshake("s3cret");
  EXPECT_FALSE(conn.handshake_expired().has_value());
}

TEST_F(host_conn_test, KeepAlivesAreAtLeast100Ms) {
  conn.feed(open_host, hello_line(client_nonce, protocol_version, 20));
  EXPECT_EQ(conn.keepalive_ms(), 100u);
  host_conn c;
  c.feed(open_host, hello_line(client_nonce, protocol_version, 1500));
  EXPECT_EQ(c.keepalive_ms(), 1500u);
}

TEST_F(host_conn_test, ASilentClientIsWithdrawnUnlessTheHostWasLate) {
  conn.feed(open_host, hello_line(client_nonce, protocol_version, 1000));
  // Silent up to three intervals and a half second: still alive.
  EXPECT_EQ(conn.check_liveness(1000ms, 3500ms), liveness::alive);
  EXPECT_EQ(conn.check_liveness(1000ms, 3501ms), liveness::silent);
  // A check more than two intervals and a half second late: the host was not running.
  EXPECT_EQ(conn.check_liveness(2501ms, 10s), liveness::host_was_late);
  EXPECT_EQ(conn.check_liveness(2500ms, 10s), liveness::silent);
}

// ---------------------------------------------------------------------------
// a host without a secret serves its own uid only (issue #30)

TEST_F(host_conn_test, AStrangersFirstLineWhateverItIsGetsErrAuthAndNothingIsParsed) {
  host_conn_config own = open_host;
  own.owner_only = true;
  std::string decide = "DECIDE scope=default id=e verdict=stop name=epoch7 n=2 rank=0 wait=0 :forged";
  for (std::string first : std::vector<std::string>{hello_line(), decide, arrive_line(), "STATUS detail=1", "junk"}) {
    host_conn c;
    c.stranger();
    host_step s = c.feed(own, first);
    // As docs/protocol.md shows it (protocol_test: DocExamples).
    EXPECT_EQ(s.bytes,
              "ERR AUTH :this host serves its own user only; start a host of your own, or give the host and its "
              "participants the same --secret-file\n");
    EXPECT_TRUE(s.auth_failed);
    EXPECT_TRUE(s.bad_client.empty()) << "the host logs strangers itself, rate-limited";
    EXPECT_FALSE(c.hello_done());
    EXPECT_FALSE(c.authenticated());
    // Were the caller to go on, a forged request after it is still not delivered.
    host_step after = c.feed(own, decide);
    EXPECT_FALSE(after.deliver.has_value());
    EXPECT_TRUE(after.close);
  }
}

TEST_F(host_conn_test, AStrangersOverLongLineAndSilenceAreRefusedWithoutALogLine) {
  host_conn c;
  c.stranger();
  c.take(std::string(proto::max_line + 10, 'x'));
  EXPECT_FALSE(c.line().has_value());
  auto s = c.overflow();
  ASSERT_TRUE(s.has_value());
  expect_closed_with(*s, proto::error_kind::auth, "this host serves its own user only");
  EXPECT_TRUE(s->bad_client.empty());
  host_conn quiet;
  quiet.stranger();
  auto t = quiet.handshake_expired();
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->close);
  EXPECT_TRUE(t->bad_client.empty());
}

TEST_F(host_conn_test, TheOwnersConnectionOnAnOwnerOnlyHostIsServedAsBefore) {
  host_conn_config own = open_host;
  own.owner_only = true;
  host_step s = conn.feed(own, hello_line());
  EXPECT_EQ(hello_reply_of(s).auth, "none");
  host_step a = conn.feed(own, arrive_line());
  EXPECT_TRUE(a.deliver.has_value());
}

TEST(host_conn_size, AWaitingParticipantsConnectionStaysSmall) {
  // The handshake's state is behind a pointer; the rest is what a
  // connection needs for as long as it waits (docs/performance.md).
  EXPECT_LE(sizeof(host_conn), 104u);
}

}  // namespace
}  // namespace tfb
