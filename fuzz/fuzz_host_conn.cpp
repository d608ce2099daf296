// libFuzzer target: arbitrary bytes into the host's side of a connection
// (src/core/host_conn.h), before authentication and, on a host without one,
// after the handshake. scripts/fuzz builds and runs it.
//
// The first byte picks the host: no authentication, a shared secret, or
// MUNGE (through a stand-in for munged that refuses every credential but
// one made of the byte 'M'); the rest is one stream, read in pieces as a
// socket delivers it. Invariants, each a __builtin_trap() when broken:
//   - every step's bytes are whole lines within the limit; a step that
//     closes, or answers by itself, delivers nothing to the barriers;
//   - nothing reaches the barriers before the handshake is over: on a host
//     that authenticates, never without the session key;
//   - the handshake deadline has something to say exactly while the
//     handshake is not over;
//   - after a step that closes, the host reads no more (the fuzzer stops).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "host_conn.h"

namespace {

using namespace tfb;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

class fuzz_services final : public host_services {
 public:
  std::string nonce() override { return std::string(32, 'a'); }
  std::optional<std::string> munge_encode(std::string_view, std::string& error) {
    if (refuse_encode) {
      error = "down";
      return std::nullopt;
    }
    return std::string("hostcred==");
  }
  std::optional<munge_auth::decoded> munge_decode(std::string_view cred, std::string& error) {
    if (cred.empty() || cred.find_first_not_of('M') != std::string_view::npos) {
      error = "refused";
      return std::nullopt;
    }
    // A credential from this uid (or another, by its length) whose payload
    // is not for this connection: the last checks run too.
    return munge_auth::decoded{"tfbarrier-client-munge\n" + std::string(cred), cred.size() % 2 ? 1000u : 1001u};
  }
  uid_t uid() override { return 1000; }
  /// host.cpp's part: the call a step asks for, at once (or, by the input's
  /// first byte, the queue was full or munged too slow).
  munge_result run(const munge_call& c) {
    munge_result r;
    if (busy) {
      r.how = busy == 1 ? munge_result::status::queue_full : munge_result::status::timed_out;
      return r;
    }
    if (c.kind == munge_call::op::encode)
      r.cred = munge_encode(c.data, r.error);
    else
      r.decoded = munge_decode(c.data, r.error);
    return r;
  }
  bool refuse_encode = false;
  int busy = 0;
};

bool whole_lines(const std::string& bytes) {
  if (bytes.empty()) return true;
  if (bytes.back() != '\n') return false;
  std::size_t start = 0;
  while (start < bytes.size()) {
    std::size_t nl = bytes.find('\n', start);
    if (nl - start + 1 > proto::max_line + 64) return false;  // a sealed line carries " mac=" and 32 hex digits more
    start = nl + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  fuzz_services services;
  services.refuse_encode = data[0] & 4;
  services.busy = (data[0] >> 4) % 3 == 0 ? (data[0] >> 6) % 2 + 1 : 0;
  host_conn_config cfg;
  cfg.server = "tfbarrier/fuzz";
  cfg.services = &services;
  switch (data[0] % 3) {
    case 0: break;
    case 1: cfg.secret = "fuzz secret"; break;
    default: cfg.munge = true; break;
  }
  bool authenticates = cfg.secret || cfg.munge;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);

  host_conn conn;
  std::size_t step = data[0] % 17 + 1;
  for (std::size_t i = 0; i < in.size();) {
    std::size_t n = std::min(step, in.size() - i);
    conn.take(in.substr(i, n));
    i += n;
    step = step * 7 % 4111 + 1;
    while (auto s = conn.next(cfg)) {
      while (s->munge) {  // the connection reads no line until the result comes
        check(conn.munge_pending() && s->bytes.empty() && !s->close && !s->deliver);
        s = conn.munge_done(cfg, services.run(*s->munge));
      }
      check(!conn.munge_pending());
      check(whole_lines(s->bytes));
      if (s->deliver) {
        check(!s->close && s->bytes.empty() && s->request);
        check(conn.authenticated());
        check(!authenticates || conn.sealed());
        check(!std::holds_alternative<proto::hello>(*s->deliver) && !std::holds_alternative<proto::auth_req>(*s->deliver));
      }
      if (s->timer == host_step::deadline::handshake_over) check(conn.authenticated());
      check(conn.handshake_expired().has_value() == !conn.authenticated());
      if (s->close) return 0;
    }
  }
  return 0;
}
