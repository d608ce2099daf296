// tfbarrier abort: abort the current round; everyone in it exits 3.
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/common.h"
#include "exit_codes.h"
#include "text.h"

namespace tfb {
using namespace cmd;

int run_abort(const abort_options& o) {
  auto s = resolve(o.common, std::nullopt, std::nullopt, false);
  if (!s) return exit_code::usage;
  proto::abort_req a{*s->scope.value, o.name, o.reason};
  auto conn = connection(*s, o.common);
  if (!client_secret(o.common, conn)) return exit_code::auth;
  auto c = make_tcp_coordinator(std::move(conn));
  return finish(c->abort(a), o.common.quiet);
}

}  // namespace tfb
