// Both sides of a connection, in memory: the client's state machine
// (client_conn.h) against the host's (host_conn.h), through every handshake
// path. Bytes go from one to the other line by line; no socket, no clock.
// A stand-in for munged encodes and decodes credentials (replays refused, a
// credential restricted to one uid), so MUNGE's paths run without munged.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "auth.h"
#include "secret_files.h"
#include "client_conn.h"
#include "host_conn.h"
#include "protocol.h"

namespace tfb {
namespace {

// munged, as far as the two sides can tell: a credential names who encoded
// it and who may decode it, and decodes once.
struct fake_munged {
  struct cred {
    std::string payload;
    uid_t by = 0;
    std::optional<uid_t> for_uid;
    bool used = false;
  };
  std::map<std::string, cred> creds;
  std::string encode(std::string_view payload, uid_t by, std::optional<uid_t> for_uid) {
    std::string id = "MUNGE" + std::to_string(creds.size());
    creds[id] = cred{std::string(payload), by, for_uid, false};
    return id;
  }
  std::optional<munge_auth::decoded> decode(std::string_view c, uid_t me, std::string& error) {
    auto it = creds.find(std::string(c));
    if (it == creds.end()) return error = "invalid credential", std::nullopt;
    if (it->second.used) return error = "replayed credential", std::nullopt;
    if (it->second.for_uid && *it->second.for_uid != me) return error = "unauthorized credential", std::nullopt;
    it->second.used = true;
    return munge_auth::decoded{it->second.payload, it->second.by};
  }
};

struct host_side : host_services {
  fake_munged& m;
  uid_t me;
  int n = 0;
  host_side(fake_munged& mm, uid_t u) : m(mm), me(u) {}
  std::string nonce() override { return auth::make_nonce(); }
  uid_t uid() override { return me; }
  // host.cpp's part: the MUNGE call a step asks for (at once, here).
  munge_result run(const munge_call& c) {
    munge_result r;
    if (c.kind == munge_call::op::encode)
      r.cred = m.encode(c.data, me, me);
    else
      r.decoded = m.decode(c.data, me, r.error);
    return r;
  }
};

struct client_side : client::client_env {
  fake_munged& m;
  uid_t me;
  client_side(fake_munged& mm, uid_t u) : m(mm), me(u) {}
  std::string nonce() override { return auth::make_nonce(); }
  std::optional<munge_auth::decoded> munge_decode(std::string_view cred, std::string& error) override {
    return m.decode(cred, me, error);
  }
  std::optional<std::string> munge_encode(std::string_view payload, uid_t uid, std::string&) override {
    return m.encode(payload, me, uid);
  }
  uid_t uid() override { return me; }
};

std::vector<std::string> lines_of(const std::string& bytes) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = bytes.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(bytes.substr(start, nl - start));
  return out;
}

const std::string secret = "0123456789abcdef0123456789abcdef";
const std::string other_secret = "fedcba9876543210fedcba9876543210";

// One connection: a client asking to ARRIVE, a host, and the barriers (the
// test) answering the request that reaches them with RELEASE verdict=stop.
struct wire {
  fake_munged munged;
  host_side hs;
  client_side cs;
  host_conn_config hcfg;
  client::conn_config ccfg;
  host_conn host;
  std::vector<std::string> to_host;  // every line the client sent, for replays
  std::vector<std::string> to_client;
  std::vector<proto::request> delivered;
  client::conn_output last;
  std::string host_log;
  // A proxy on the path: may rewrite each line on its way (the default passes it on).
  std::function<std::string(std::string)> proxy_to_host = [](std::string l) { return l; };
  std::function<std::string(std::string)> proxy_to_client = [](std::string l) { return l; };

  wire(uid_t host_uid = 1000, uid_t client_uid = 1000) : hs(munged, host_uid), cs(munged, client_uid) {
    hcfg.server = "tfbarrier/test";
    hcfg.services = &hs;
    ccfg.addr = "127.0.0.1:7727";
    ccfg.client_host = "node1";
    ccfg.pid = 42;
  }

  static std::string arrive_line() {
    proto::arrive a;
    a.name = "epoch1";
    a.scope = "default";
    a.id = "abc123";
    a.n = 1;
    a.rank = 0;
    return proto::format_request(a);
  }

  // Host side: one line in; what it sends goes to the client (and through the barriers first).
  void host_reads(const std::string& sent) {
    std::string line = proxy_to_host(sent);
    to_host.push_back(line);
    host_step s = host.feed(hcfg, line);
    while (s.munge) s = host.munge_done(hcfg, hs.run(*s.munge));
    host_log += s.bad_client + s.warning;
    std::string bytes = s.bytes;
    if (s.deliver) {
      delivered.push_back(*s.deliver);
      if (std::holds_alternative<proto::arrive>(*s.deliver))
        bytes += host.seal(proto::format_reply(proto::release{"epoch1", 1, proto::verdict::stop, std::nullopt, "loss"}));
    }
    for (auto& l : lines_of(bytes)) client_reads(l);
  }
  bool client_done() const {
    return last.event == client::conn_event::reply || last.event == client::conn_event::failed ||
           last.event == client::conn_event::retry_with_secret;
  }
  void client_reads(const std::string& sent) {
    if (client_done()) return;  // the call is over: the client reads no more
    std::string line = proxy_to_client(sent);
    to_client.push_back(line);
    auto out = cli->feed(line);
    if (out.event != client::conn_event::none && out.event != client::conn_event::greeted) last = out;
    for (auto& l : lines_of(out.bytes)) host_reads(l);
  }
  std::unique_ptr<client::client_conn> cli;
  void run() {
    cli = std::make_unique<client::client_conn>(ccfg, cs, arrive_line());
    for (auto& l : lines_of(cli->start(cs.nonce()))) host_reads(l);
  }
};

bool released_stop(const client::conn_output& o) {
  if (o.event != client::conn_event::reply || !o.reply) return false;
  auto* r = std::get_if<proto::release>(&*o.reply);
  return r && r->v == proto::verdict::stop && r->message == "loss";
}

}  // namespace

TEST(Handshake, NoAuthenticationPipelined) {
  wire w;
  w.ccfg.pipeline = true;
  w.run();
  EXPECT_TRUE(released_stop(w.last)) << w.last.failure.text;
  EXPECT_EQ(w.delivered.size(), 1u);
}

TEST(Handshake, TheRightSecretOnBothSides) {
  wire w;
  w.hcfg.secret = secret;
  w.ccfg.secret = &secret;
  w.run();
  EXPECT_TRUE(released_stop(w.last)) << w.last.failure.text;
  EXPECT_TRUE(w.host.sealed());
  // Every line after the handshake carried a MAC.
  for (auto& l : w.to_client)
    if (l.rfind("RELEASE", 0) == 0) {
      EXPECT_NE(l.find(" mac="), std::string::npos) << l;
    }
}

TEST(Handshake, AWrongSecretIsRefusedByTheClientBeforeItSendsItsRequest) {
  wire w;
  w.hcfg.secret = secret;
  w.ccfg.secret = &other_secret;
  w.run();
  EXPECT_EQ(w.last.event, client::conn_event::failed);
  EXPECT_EQ(w.last.failure.kind, error_kind::auth) << w.last.failure.text;
  EXPECT_TRUE(w.delivered.empty());
  for (auto& l : w.to_host) EXPECT_EQ(l.find("ARRIVE"), std::string::npos) << l;
}

TEST(Handshake, AHostThatDoesNotAuthenticateIsRefusedByAClientWithASecret) {
  wire w;
  w.ccfg.secret = &secret;
  w.run();
  EXPECT_EQ(w.last.event, client::conn_event::failed);
  EXPECT_EQ(w.last.failure.kind, error_kind::auth) << w.last.failure.text;
  EXPECT_TRUE(w.delivered.empty());
}

TEST(Handshake, AClientWithoutTheSecretIsToldToRetryWithIt) {
  wire w;
  w.hcfg.secret = secret;
  w.ccfg.pipeline = true;
  w.run();
  EXPECT_TRUE(w.delivered.empty());
  EXPECT_EQ(w.last.event, client::conn_event::retry_with_secret);
}

TEST(Handshake, AReplayedAuthIsRefused) {
  wire first;
  first.hcfg.secret = secret;
  first.ccfg.secret = &secret;
  first.run();
  ASSERT_TRUE(released_stop(first.last));
  // The recorded client lines, played to a new connection: its host nonce is new.
  wire replay;
  replay.hcfg.secret = secret;
  std::vector<host_step> steps;
  for (auto& l : first.to_host) {
    steps.push_back(replay.host.feed(replay.hcfg, l));
    if (steps.back().close) break;
  }
  ASSERT_GE(steps.size(), 2u);
  EXPECT_TRUE(steps.back().close);
  EXPECT_NE(steps.back().bytes.find("ERR AUTH"), std::string::npos) << steps.back().bytes;
  for (auto& s : steps) EXPECT_FALSE(s.deliver);
}

TEST(Handshake, TheHostsProofReflectedAsTheClientsIsRefused) {
  wire w;
  w.hcfg.secret = secret;
  std::string nonce = auth::make_nonce();
  auto s1 = w.host.feed(w.hcfg, "HELLO v=" + std::to_string(proto::protocol_version) + " host=n1 pid=1 nonce=" + nonce);
  proto::reply_reader rr;
  std::string err;
  auto greeting = rr.feed(lines_of(s1.bytes).at(0), err);
  ASSERT_TRUE(greeting) << err;
  auto* hr = std::get_if<proto::hello_reply>(&*greeting);
  ASSERT_NE(hr, nullptr) << s1.bytes;
  auto s2 = w.host.feed(w.hcfg, "AUTH proof=" + hr->proof);
  EXPECT_TRUE(s2.close);
  EXPECT_NE(s2.bytes.find("ERR AUTH"), std::string::npos) << s2.bytes;
  EXPECT_FALSE(s2.deliver);
}

TEST(Handshake, ALineSealedForTheOtherDirectionIsRefused) {
  wire w;
  w.hcfg.secret = secret;
  w.ccfg.secret = &secret;
  w.run();
  ASSERT_TRUE(released_stop(w.last));
  // The host's own RELEASE (MAC for to-client), fed back to it as if the client sent it.
  std::string back;
  for (auto& l : w.to_client)
    if (l.rfind("RELEASE", 0) == 0) back = l;
  ASSERT_FALSE(back.empty());
  auto s = w.host.feed(w.hcfg, back);
  EXPECT_TRUE(s.close);
  EXPECT_NE(s.bytes.find("AUTH :a line without a valid MAC"), std::string::npos) << s.bytes;
}

TEST(Handshake, MungeAcceptsTheHostsOwnUser) {
  wire w(1000, 1000);
  w.hcfg.munge = true;
  w.run();
  EXPECT_TRUE(released_stop(w.last)) << w.last.failure.text;
  EXPECT_TRUE(w.host.sealed());
}

TEST(Handshake, MungeRefusesAnotherUser) {
  wire w(1000, 1001);
  w.hcfg.munge = true;
  w.run();
  EXPECT_EQ(w.last.event, client::conn_event::failed);
  EXPECT_EQ(w.last.failure.kind, error_kind::auth) << w.last.failure.text;
  EXPECT_TRUE(w.delivered.empty());
}

// ---------------------------------------------------------------------------
// Protocol 2: both HELLO lines are bound into the proofs and MUNGE payloads,
// so a proxy that rewrites either one (keepalive=100 made the host withdraw a
// participant over and over) ends the handshake before any request.

std::string replace(std::string line, const std::string& from, const std::string& to) {
  auto at = line.find(from);
  if (at != std::string::npos) line.replace(at, from.size(), to);
  return line;
}

struct tampering {
  const char* what;
  bool hello;  ///< rewrites the client's HELLO (else the host's reply)
  std::string from, to;
};

const tampering tamperings[] = {
    {"keepalive in HELLO", true, " nonce=", " keepalive=100 nonce="},
    {"host in HELLO", true, "host=node1", "host=node2"},
    {"pid in HELLO", true, "pid=42", "pid=43"},
    {"server in the reply", false, "server=tfbarrier/test", "server=tfbarrier/0.0.1"},
    {"a field added to the reply", false, " nonce=", " x=1 nonce="},
};

void expect_refused(wire& w, const tampering& t, std::string_view client_says) {
  w.ccfg.keepalive = std::chrono::milliseconds(0);
  auto rewrite = [&t](std::string l) { return l.rfind("HELLO", 0) == 0 ? replace(l, t.from, t.to) : l; };
  if (t.hello)
    w.proxy_to_host = rewrite;
  else
    w.proxy_to_client = rewrite;
  w.run();
  const auto& seen = t.hello ? w.to_host : w.to_client;
  ASSERT_FALSE(seen.empty());
  EXPECT_NE(seen.front().find(t.to), std::string::npos) << t.what << ": the proxy did not rewrite " << seen.front();
  EXPECT_EQ(w.last.event, client::conn_event::failed) << t.what;
  EXPECT_EQ(w.last.failure.kind, error_kind::auth) << t.what << ": " << w.last.failure.text;
  EXPECT_NE(w.last.failure.text.find(client_says), std::string::npos) << t.what << ": " << w.last.failure.text;
  EXPECT_TRUE(w.delivered.empty()) << t.what;
  EXPECT_FALSE(w.host.authenticated()) << t.what;
}

TEST(Handshake, ARewrittenHelloOrReplyFailsTheHmacProof) {
  for (const auto& t : tamperings) {
    wire w;
    w.hcfg.secret = secret;
    w.ccfg.secret = &secret;
    expect_refused(w, t, "the handshake was altered on the way");
  }
}

TEST(Handshake, ARewrittenHelloOrReplyFailsTheMungePayload) {
  for (const auto& t : tamperings) {
    wire w;
    w.hcfg.munge = true;
    expect_refused(w, t, "the handshake was altered on the way");
  }
}

// The host's own check: the client's proof covers the HELLO the client
// sent; over the HELLO the host read (rewritten on the way) it is refused.
// (For MUNGE: host_conn_test's ACredentialOverAnotherHelloIsRefused.)
TEST(Handshake, TheHostRefusesAProofOverAnotherHello) {
  wire w;
  w.hcfg.secret = secret;
  std::string nonce = auth::make_nonce();
  std::string sent = "HELLO v=" + std::to_string(proto::protocol_version) + " host=n1 pid=1 nonce=" + nonce;
  std::string read = replace(sent, " nonce=", " keepalive=100 nonce=");
  auto s1 = w.host.feed(w.hcfg, read);
  std::string reply = lines_of(s1.bytes).at(0);
  proto::reply_reader rr;
  std::string err;
  auto greeting = rr.feed(reply, err);
  ASSERT_TRUE(greeting) << err;
  auto* hr = std::get_if<proto::hello_reply>(&*greeting);
  ASSERT_NE(hr, nullptr) << s1.bytes;
  std::string t_client = auth::transcript(sent, auth::without_field(reply, "proof"));
  std::string t_host = auth::transcript(read, auth::without_field(reply, "proof"));
  // The host's proof is over what it read: an honest client (over `sent`) refuses it.
  EXPECT_FALSE(auth::equal(hr->proof, auth::host_proof(secret, nonce, hr->nonce, t_client)));
  EXPECT_TRUE(auth::equal(hr->proof, auth::host_proof(secret, nonce, hr->nonce, t_host)));
  auto s2 = w.host.feed(w.hcfg, "AUTH proof=" + auth::client_proof(secret, nonce, hr->nonce, t_client));
  EXPECT_TRUE(s2.close);
  EXPECT_NE(s2.bytes.find("ERR AUTH :wrong proof"), std::string::npos) << s2.bytes;
  EXPECT_FALSE(w.host.authenticated());
}

TEST(Handshake, AVersionMismatchEndsWithERRVersion) {
  wire w;
  auto s = w.host.feed(w.hcfg, "HELLO v=" + std::to_string(proto::protocol_version + 1) + " host=n1 pid=1");
  EXPECT_TRUE(s.close);
  ASSERT_NE(s.bytes.find("ERR VERSION"), std::string::npos) << s.bytes;
  // ... which the client turns into its exit code and message.
  client::conn_config c;
  c.addr = "127.0.0.1:7727";
  c.client_host = "n1";
  c.pid = 1;
  client::client_conn cli(c, w.cs, wire::arrive_line());
  (void)cli.start(w.cs.nonce());
  auto out = cli.feed(lines_of(s.bytes).at(0));
  EXPECT_EQ(out.event, client::conn_event::failed);
  EXPECT_EQ(out.failure.kind, error_kind::protocol);
  EXPECT_NE(out.failure.text.find("version"), std::string::npos) << out.failure.text;
}

}  // namespace tfb

namespace tfb {
namespace {

// docs/protocol.md's worked example, so that a client written from the page
// alone (tests/tools/replay.py is one) computes what this code does.
TEST(Handshake, TheWorkedExampleOfTheProtocolPage) {
  const std::string k = "0123456789abcdef0123456789abcdef";
  const std::string cn = "00112233445566778899aabbccddeeff", hn = "ffeeddccbbaa99887766554433221100";
  const std::string hello = "HELLO v=2 host=n1 pid=7 keepalive=5000 nonce=" + cn;
  const std::string reply = "HELLO v=2 server=tfbarrier/0.1.0 auth=hmac nonce=" + hn + " proof=HP";
  std::string t = auth::transcript(hello, auth::without_field(reply, "proof"));
  EXPECT_EQ(t, "131973a8c35f424514535e72c713d51d1b589ffd42fb1d32fd24c843b5449b69");
  EXPECT_EQ(auth::host_proof(k, cn, hn, t), "b9fef5547810c5ad904a3d790bde7c199c11bd4462ebb7b5ca5e67ef3550e39c");
  EXPECT_EQ(auth::client_proof(k, cn, hn, t), "eb21c78c8d2be1a7ff2c268603736746520b890d27a029f2a60b29fb9aa426ce");
  // The host, given that HELLO and these nonces, sends that very reply.
  struct fixed : host_services {
    std::string nonce() override { return "ffeeddccbbaa99887766554433221100"; }
    uid_t uid() override { return 1000; }
  } svc;
  host_conn_config cfg;
  cfg.secret = k;
  cfg.server = "tfbarrier/0.1.0";
  cfg.services = &svc;
  host_conn h;
  EXPECT_EQ(h.feed(cfg, hello).bytes, "HELLO v=2 server=tfbarrier/0.1.0 auth=hmac nonce=" + hn +
                                          " proof=b9fef5547810c5ad904a3d790bde7c199c11bd4462ebb7b5ca5e67ef3550e39c\n");
  host_step a = h.feed(cfg, "AUTH proof=eb21c78c8d2be1a7ff2c268603736746520b890d27a029f2a60b29fb9aa426ce");
  EXPECT_FALSE(a.close) << a.bytes;
  EXPECT_TRUE(h.authenticated());
}

TEST(Handshake, WithoutFieldTakesOutOneFieldAndItsSpace) {
  EXPECT_EQ(auth::without_field("HELLO v=2 auth=hmac nonce=N proof=P", "proof"), "HELLO v=2 auth=hmac nonce=N");
  EXPECT_EQ(auth::without_field("HELLO v=2 proof=P auth=hmac", "proof"), "HELLO v=2 auth=hmac");
  EXPECT_EQ(auth::without_field("HELLO v=2 auth=munge cred=C :text proof=P", "cred"), "HELLO v=2 auth=munge :text proof=P");
  EXPECT_EQ(auth::without_field("HELLO v=2 auth=none :x proof=P", "proof"), "HELLO v=2 auth=none :x proof=P");
  EXPECT_EQ(auth::without_field("HELLO v=2 xproof=P", "proof"), "HELLO v=2 xproof=P");
}

}  // namespace
}  // namespace tfb
