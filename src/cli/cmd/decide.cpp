// tfbarrier decide: the chief's verdict for the current round.
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/common.h"
#include "outcome_text.h"
#include "exit_codes.h"
#include "text.h"
#ifndef TFB_NO_CLI
#include "cmd/define.h"
#endif

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
  if (auto e = client_secret(o.common, conn)) return fail(*e);
  auto c = make_tcp_coordinator(std::move(conn));
  wait_options wo;
  wo.timeout = o.timeout;
  if (!o.common.quiet)
    wo.on_note = [](const client::recorded& r) {
      tfb::print(stderr, "tfbarrier: {}\n", printable(note_text(r)));
      std::fflush(stderr);
    };
  return finish(c->decide(d, wo), o.common.quiet);
}

#ifndef TFB_NO_CLI
// ---- The command line: CLI11's definition of `tfbarrier decide` ----
namespace cmd {

command_parser define_decide(CLI::App& app) {
  struct typed : client_typed<decide_options> {
    std::string timeout;
  };
  auto v = std::make_shared<typed>();
  decide_options& decide = v->o;
  CLI::App* d = app.add_subcommand("decide", "Give the chief's verdict for the current round");
  d->add_option("verdict", decide.verdict, "continue or stop")->required()->check(verdict_validator());
  d->add_option("--name", decide.name, "Barrier name (default: the one round that awaits a verdict)")
      ->envname("TFBARRIER_NAME")
      ->check(name_validator());
  d->add_option("-m,--message", decide.message, "Text every participant prints on stdout")
      ->check(text_validator("message"));
  d->add_flag("--no-wait", decide.no_wait, "Return once the verdict is recorded, not when it is delivered");
  d->add_option("--timeout", v->timeout,
                "Exit 124 when the round has not released DUR after the verdict was recorded; the verdict "
                "stands (default: no timeout)")
      ->envname("TFBARRIER_TIMEOUT")
      ->check(duration_validator());
  add_counts(d, decide.n, decide.rank, "Participants in the round, if the chief arrives with this verdict",
             "The chief's rank, if it arrives with this verdict");
  add_common(d, v->common);
  set_footer(d, "Examples:\n"
      "  tfbarrier decide stop --message 'validation loss went up'\n"
      "  tfbarrier decide continue --name epoch3 --n 6 --rank 0   # one step: arrive with the verdict\n");
  return [v] {
    decide_options o = v->parsed();
    set_duration(v->timeout, o.timeout);
    return command_options(std::move(o));
  };
}

}  // namespace cmd
#endif

}  // namespace tfb
