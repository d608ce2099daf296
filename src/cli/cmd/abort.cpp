// tfbarrier abort: abort the current round; everyone in it exits 3.
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/common.h"
#include "exit_codes.h"
#include "text.h"
#ifndef TFB_NO_CLI
#include "cmd/define.h"
#endif

namespace tfb {
using namespace cmd;

int run_abort(const abort_options& o) {
  auto s = resolve(o.common, std::nullopt, std::nullopt, false);
  if (!s) return exit_code::usage;
  proto::abort_req a{*s->scope.value, o.name, o.reason};
  auto conn = connection(*s, o.common);
  if (auto e = client_secret(o.common, conn)) return fail(*e);
  auto c = make_tcp_coordinator(std::move(conn));
  return finish(c->abort(a), o.common.quiet);
}

#ifndef TFB_NO_CLI
// ---- The command line: CLI11's definition of `tfbarrier abort` ----
namespace cmd {

command_parser define_abort(CLI::App& app) {
  auto v = std::make_shared<client_typed<abort_options>>();
  CLI::App* a = app.add_subcommand("abort", "Abort the current round: everyone in it exits 3");
  a->add_option("--name", v->o.name, "Barrier name")->required()->envname("TFBARRIER_NAME")->check(name_validator());
  a->add_option("--reason", v->o.reason, "Text every participant prints on stderr")
      ->check(text_validator("reason"));
  add_common(a, v->common);
  set_footer(a, "Example:\n  tfbarrier abort --name epoch3 --reason 'rank 4 ran out of memory'\n");
  return [v] { return command_options(v->parsed()); };
}

}  // namespace cmd
#endif

}  // namespace tfb
