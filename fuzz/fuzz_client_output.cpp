// libFuzzer target: arbitrary replies from a host into the participant's side
// of a connection (src/core/client_conn.h), and everything the client would print
// of what came out, through the paths that print it: the final error and the
// chief's message (tfb::printable, as cmd/common.cpp's finish prints them),
// the table of `status` and the view of `status --watch` (watch_view.h), and
// `report` of a HISTORY reply (report.h). scripts/fuzz builds and runs it.
//
// The first byte picks the connection: whether a greeting comes first (so
// that the replies after it are read too), the width of the view and whether
// the terminal shows UTF-8. The rest is the host's stream, one line per '\n'.
// Invariant, a __builtin_trap() when broken: nothing printed holds a raw
// control byte (C0 but the newlines that end lines, DEL, C1 raw or as
// UTF-8), a bidi control, a line separator or a zero-width character
// (fuzz/terminal_safe.h, a decoder of its own).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "client_conn.h"
#include "history.h"
#include "report.h"
#include "terminal_safe.h"
#include "text.h"
#include "watch_view.h"

namespace {

using namespace tfb;

void require(bool ok) {
  if (!ok) __builtin_trap();
}

class fuzz_env final : public client::client_env {
 public:
  std::string nonce() override { return std::string(64, 'a'); }
  std::optional<munge_auth::decoded> munge_decode(std::string_view, std::string& error) override {
    error = "refused";
    return std::nullopt;
  }
  std::optional<std::string> munge_encode(std::string_view, uid_t, std::string& error) override {
    error = "refused";
    return std::nullopt;
  }
  uid_t uid() override { return 1000; }
};

/// A line of the view in colour without the SGR escapes the view itself
/// writes (and no others): what is left must be as safe as without colour.
std::string without_our_sgr(std::string s) {
  for (std::string_view sgr : {"\033[1m", "\033[2m", "\033[31m", "\033[32m", "\033[33m", "\033[36m",
                               "\033[1;97;41m", "\033[0m"})
    for (auto at = s.find(sgr); at != std::string::npos; at = s.find(sgr, at)) s.erase(at, sgr.size());
  return s;
}

/// As `status`, `status --watch` and `wait`/`decide` print a reply.
void print_reply(const proto::reply& r, std::size_t width, bool utf8) {
  if (auto* st = std::get_if<proto::status_reply>(&r)) {
    for (const auto& l : watch::table(*st, true)) require(check::terminal_safe(l));
    for (const auto& l : watch::render(*st, "title", width, utf8)) require(check::terminal_safe(l));
    watch::screen_state s{"title", st, {"lost the host at h:1; reconnecting..."}};
    for (const auto& l : watch::render(s, width, 12, utf8, true)) require(check::terminal_safe(without_our_sgr(l)));
  } else if (auto* rel = std::get_if<proto::release>(&r)) {
    require(check::terminal_safe(printable(rel->message)));
  } else if (auto* ab = std::get_if<proto::aborted>(&r)) {
    require(check::terminal_safe(printable("barrier " + ab->name + " was aborted: " + ab->reason, true), true));
  } else if (auto* h = std::get_if<proto::history_page>(&r)) {
    hist::round_parser p;
    std::string error;
    for (const auto& l : h->lines)
      if (!p.feed(l, error)) break;
    auto rounds = p.take();
    auto a = report::analyze(rounds);
    require(check::terminal_safe(printable(report::text(a), true), true));
    require(check::terminal_safe(printable(report::heatmap(rounds, width, utf8), true), true));
    require(check::terminal_safe(report::json(a), true));  // ASCII JSON
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::uint8_t mode = data[0];
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  bool greet = mode & 1, utf8 = mode & 2;
  std::size_t width = 20 + (mode >> 2) * 3;

  fuzz_env env;
  client::conn_config cfg{"127.0.0.1:7000", "node", 1, duration(0), nullptr, true, false, ""};
  client::client_conn conn(cfg, env, "STATUS scope=* detail=1\n");
  conn.start(std::string(64, 'b'));
  std::string lines = greet ? "HELLO v=2 server=fake auth=none\n" : "";
  lines += stream;
  std::size_t pos = 0;
  while (pos < lines.size()) {
    std::size_t nl = lines.find('\n', pos);
    if (nl == std::string::npos) nl = lines.size();
    auto out = conn.feed(lines.substr(pos, nl - pos));
    pos = nl + 1;
    // The error and the busy text go to stderr as finish and the back-off print them.
    if (!out.failure.text.empty()) require(check::terminal_safe(printable(out.failure.text, true), true));
    if (!out.failure.text.empty()) require(check::terminal_safe(printable(out.failure.text)));
    if (out.reply) print_reply(*out.reply, width, utf8);
    if (out.event == client::conn_event::failed || out.event == client::conn_event::busy) break;
  }
  return 0;
}
