// The one table from a failure's cause to its exit code (src/core/error.h,
// src/core/exit_codes.h), and the kinds the participant's connection and
// call give their ends.
#include "error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "client_call.h"
#include "client_conn.h"
#include "exit_codes.h"

namespace tfb {
namespace {

bool documented(int code) {
  return std::any_of(std::begin(exit_code_table), std::end(exit_code_table),
                     [&](const exit_code_row& r) { return r.code == code; });
}

TEST(ErrorTable, EveryKindHasADocumentedCodeThatIsNoVerdict) {
  for (error_kind k : all_error_kinds) {
    int code = exit_code_of(k);
    EXPECT_TRUE(documented(code)) << static_cast<int>(k) << " -> " << code;
    // 0 and 1 are a released round's (continue, stop): no failure exits with them.
    EXPECT_NE(code, exit_code::released_continue) << static_cast<int>(k);
    EXPECT_NE(code, exit_code::released_stop) << static_cast<int>(k);
  }
}

TEST(ErrorTable, EveryDocumentedErrorCodeIsSomeKindsCode) {
  for (const auto& row : exit_code_table) {
    if (row.code == exit_code::released_continue || row.code == exit_code::released_stop) continue;
    bool reached = std::any_of(std::begin(all_error_kinds), std::end(all_error_kinds),
                               [&](error_kind k) { return exit_code_of(k) == row.code; });
    EXPECT_TRUE(reached) << row.code << " (" << row.meaning << ") is no kind's code";
  }
}

TEST(ErrorTable, TheCausesCodes) {
  // The codes the suite's bats files check, by cause.
  static_assert(exit_code_of(error_kind::usage) == 2);
  static_assert(exit_code_of(error_kind::settings_differ) == 2);
  static_assert(exit_code_of(error_kind::file) == 2);
  static_assert(exit_code_of(error_kind::aborted) == 3);
  static_assert(exit_code_of(error_kind::conflict) == 4);
  static_assert(exit_code_of(error_kind::unreachable) == 69);
  static_assert(exit_code_of(error_kind::host_lost) == 69);
  static_assert(exit_code_of(error_kind::cannot_listen) == 69);
  static_assert(exit_code_of(error_kind::store_unreachable) == 69);
  static_assert(exit_code_of(error_kind::protocol) == 70);
  static_assert(exit_code_of(error_kind::internal) == 70);
  static_assert(exit_code_of(error_kind::unconfirmed) == 75);
  static_assert(exit_code_of(error_kind::store_access) == 77);
  static_assert(exit_code_of(error_kind::auth) == 77);
  static_assert(exit_code_of(error_kind::timed_out) == 124);
  static_assert(exit_code_of(error_kind::interrupted_int) == 130);
  static_assert(exit_code_of(error_kind::interrupted_term) == 143);
  EXPECT_EQ(exit_code_of(error{error_kind::auth, "x"}), 77);
}

TEST(Result, HoldsAValueOrAnError) {
  result<int> v = 7;
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, 7);
  result<int> e = error{error_kind::file, "cannot open it"};
  ASSERT_FALSE(e);
  EXPECT_EQ(e.err().kind, error_kind::file);
  EXPECT_EQ(e.err().text, "cannot open it");
}

}  // namespace

namespace client {
namespace {

class no_env final : public client_env {
 public:
  std::string nonce() override { return "00112233445566778899aabbccddeeff"; }
  std::optional<munge_auth::decoded> munge_decode(std::string_view, std::string& why) override {
    why = "no MUNGE here";
    return std::nullopt;
  }
  std::optional<std::string> munge_encode(std::string_view, uid_t, std::string& why) override {
    why = "no MUNGE here";
    return std::nullopt;
  }
  uid_t uid() override { return 1000; }
};

std::string line_of(const proto::reply& r) {
  std::string s = proto::format_reply(r);
  return s.substr(0, s.size() - 1);
}

TEST(ErrorKinds, TheConnectionEndsWithTheCauseOfItsEnd) {
  no_env env;
  conn_config cfg;
  cfg.addr = "127.0.0.1:7727";
  cfg.client_host = "n1";
  cfg.pid = 1;
  auto greeted = [&] {
    auto c = std::make_unique<client_conn>(cfg, env, "ARRIVE name=b scope=s id=x n=2\n");
    (void)c->start(env.nonce());
    c->feed(line_of(proto::hello_reply{static_cast<std::uint32_t>(proto::protocol_version), "tfbarrier/x", "none",
                                       "", "", "", ""}));
    return c;
  };
  struct {
    proto::error_kind err;
    error_kind cause;
  } replies[] = {{proto::error_kind::conflict, error_kind::conflict}, {proto::error_kind::aborted, error_kind::aborted},
                 {proto::error_kind::needn, error_kind::usage},       {proto::error_kind::auth, error_kind::auth},
                 {proto::error_kind::busy, error_kind::unreachable},  {proto::error_kind::badrequest, error_kind::protocol}};
  for (const auto& r : replies) {
    auto out = greeted()->feed(line_of(proto::error_reply{r.err, "told so"}));
    ASSERT_EQ(out.event, conn_event::failed) << proto::to_string(r.err);
    EXPECT_EQ(out.failure.kind, r.cause) << proto::to_string(r.err);
    EXPECT_EQ(out.failure.text, "told so");
  }
  // The host went away while we waited: lost, exit 69.
  auto out = greeted()->feed(line_of(proto::shutdown{}));
  EXPECT_EQ(out.failure.kind, error_kind::host_lost);
  EXPECT_EQ(exit_code_of(out.failure), exit_code::unreachable);
  // What is not the protocol: a protocol error, exit 70.
  out = greeted()->feed("NONSENSE x=1");
  EXPECT_EQ(out.failure.kind, error_kind::protocol);
}

TEST(ErrorKinds, TheCallCarriesTheConnectionsCause) {
  call_config c;
  c.k = call_kind::wait;
  c.addr = "127.0.0.1:7777";
  c.scope = "job1";
  c.name = "epoch";
  c.timeout = std::chrono::seconds(1);
  client_call call(c);
  call.start();
  auto s = call.fail({error_kind::host_lost, "lost the connection to the host"});
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->k, call_result::kind::failed);
  EXPECT_EQ(s.result->failure.kind, error_kind::host_lost);
  EXPECT_EQ(s.result->failure.text, "lost the connection to the host");
}

}  // namespace
}  // namespace client
}  // namespace tfb
