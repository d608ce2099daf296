// tfbarrier decide: the chief's verdict for the current round.
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/common.h"
#include "exit_codes.h"
#include "text.h"

namespace tfb {
using namespace cmd;

int run_decide(const decide_options& o) {
  auto s = resolve(o.common, o.n, o.rank);
  if (!s) return exit_code::usage;
  proto::decide d;
  d.name = o.name;
  d.scope = *s->scope.value;
  d.id = random_id();
  d.v = *proto::parse_verdict(o.verdict);
  d.n = s->n.value;
  d.rank = s->rank.value;
  d.wait = !o.no_wait;
  d.message = o.message;
  auto conn = connection(*s, o.common);
  if (!client_secret(o.common, conn)) return exit_code::auth;
  auto c = make_tcp_coordinator(std::move(conn));
  wait_options wo;
  wo.timeout = o.timeout;
  if (!o.common.quiet)
    wo.on_note = [](const std::string& text) {
      tfb::print(stderr, "tfbarrier: {}\n", text);
      std::fflush(stderr);
    };
  return finish(c->decide(d, wo), o.common.quiet);
}

}  // namespace tfb
