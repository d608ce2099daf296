// Both sides of a connection, in memory: the client's state machine
// (client_conn.h) against the host's (host_conn.h), through every handshake
// path. Bytes go from one to the other line by line; no socket, no clock.
// A stand-in for munged encodes and decodes credentials (replays refused, a
// credential restricted to one uid), so MUNGE's paths run without munged.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "auth.h"
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
  std::optional<std::string> munge_encode(std::string_view payload, std::string&) override {
    return m.encode(payload, me, me);
  }
  std::optional<munge_auth::decoded> munge_decode(std::string_view cred, std::string& error) override {
    return m.decode(cred, me, error);
  }
  uid_t uid() override { return me; }
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
  void host_reads(const std::string& line) {
    to_host.push_back(line);
    host_step s = host.feed(hcfg, line);
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
  void client_reads(const std::string& line) {
    if (client_done()) return;  // the call is over: the client reads no more
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
  EXPECT_TRUE(released_stop(w.last)) << w.last.error;
  EXPECT_EQ(w.delivered.size(), 1u);
}

TEST(Handshake, TheRightSecretOnBothSides) {
  wire w;
  w.hcfg.secret = secret;
  w.ccfg.secret = &secret;
  w.run();
  EXPECT_TRUE(released_stop(w.last)) << w.last.error;
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
  EXPECT_EQ(w.last.exit_code, 77) << w.last.error;
  EXPECT_TRUE(w.delivered.empty());
  for (auto& l : w.to_host) EXPECT_EQ(l.find("ARRIVE"), std::string::npos) << l;
}

TEST(Handshake, AHostThatDoesNotAuthenticateIsRefusedByAClientWithASecret) {
  wire w;
  w.ccfg.secret = &secret;
  w.run();
  EXPECT_EQ(w.last.event, client::conn_event::failed);
  EXPECT_EQ(w.last.exit_code, 77) << w.last.error;
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
  EXPECT_TRUE(released_stop(w.last)) << w.last.error;
  EXPECT_TRUE(w.host.sealed());
}

TEST(Handshake, MungeRefusesAnotherUser) {
  wire w(1000, 1001);
  w.hcfg.munge = true;
  w.run();
  EXPECT_EQ(w.last.event, client::conn_event::failed);
  EXPECT_EQ(w.last.exit_code, 77) << w.last.error;
  EXPECT_TRUE(w.delivered.empty());
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
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.error.find("version"), std::string::npos) << out.error;
}

}  // namespace tfb
