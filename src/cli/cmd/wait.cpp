// tfbarrier wait: arrive at a barrier and block until it releases.
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "cmd/common.h"
#include "exit_codes.h"
#include "text.h"
#ifndef TFB_NO_CLI
#include "cmd/define.h"
#endif

namespace tfb {
using namespace cmd;
namespace {

class progress_printer {
 public:
  explicit progress_printer(bool tty) : tty_(tty) {}
  /// This process is the chief of --decide-by: once all are here, the verdict is its own command's.
  void deciding() { deciding_ = true; }
  ~progress_printer() { clear(); }
  void operator()(const progress& p) {
    std::string line = p.gathered && deciding_
                           ? fmt::format("{}: all {} arrived; running the --decide-by command for the verdict, {}",
                                         p.name, p.arrived, format_duration(p.waited))
                       : p.gathered ? fmt::format("{}: all {} arrived; waiting for the chief's verdict "
                                                "(tfbarrier decide), {}",
                                                p.name, p.arrived, format_duration(p.waited))
                                  : fmt::format("{}: {}/{} arrived, {}", p.name, p.arrived,
                                                p.n ? std::to_string(*p.n) : "?", format_duration(p.waited));
    if (p.missing && !p.missing->empty()) line += fmt::format(", missing ranks {}", *p.missing);
    line = printable(line);
    if (tty_) {
      tfb::print(stderr, "\r\033[K{}", line);
      shown_ = true;
    } else {
      tfb::print(stderr, "tfbarrier: waiting at {}\n", line);
    }
    std::fflush(stderr);
  }
  void clear() {
    if (tty_ && shown_) tfb::print(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool tty_;
  bool shown_ = false;
  bool deciding_ = false;
};


}  // namespace

int run_wait(const wait_cmd_options& o) {
  auto s = resolve(o.common, o.n, o.rank);
  if (!s) return exit_code::usage;
  proto::arrive a;
  a.name = o.name;
  a.scope = *s->scope.value;
  a.id = random_id();
  a.n = s->n.value;
  a.rank = s->rank.value;
  a.chief = o.chief;
  wait_options wo;
  wo.timeout = o.timeout;
  if (!o.decide_by.empty()) {
    // One line for every rank: the chief (rank 0, or --chief) runs CMD, the others ignore it.
    if (!o.chief && !a.rank) {
      print_error("--decide-by needs to know which participant is the chief: give --rank (or run under a launcher "
                  "that sets it), or --chief on the chief's line");
      return exit_code::usage;
    }
    a.chief = o.chief || *a.rank == 0;
    a.decide = a.chief;
    if (a.decide) wo.decide_by = o.decide_by;
  } else if (o.decide_timeout) {
    print_error("--decide-timeout bounds the command of --decide-by: give --decide-by CMD (or --decide-within DUR "
                "with --chief)");
    return exit_code::usage;
  }
  if (o.decide_within && o.decide_by.empty() && !o.chief) {
    print_error("--decide-within is the chief's: give --chief (or --decide-by CMD)");
    return exit_code::usage;
  }
  if (a.chief) {
    std::optional<duration> within = o.decide_within;
    if (a.decide && o.decide_timeout && (!within || *o.decide_timeout < *within)) within = o.decide_timeout;
    if (within) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*within).count();
      a.within_ms = static_cast<std::uint32_t>(std::clamp<std::int64_t>(ms, 1, proto::max_within_ms));
    }
  }
  bool tty = isatty(2) != 0;
  progress_printer printer(tty);
  if (a.decide) printer.deciding();
  if (!o.common.quiet && !(o.progress && o.progress->count() == 0)) {  // --progress 0: none
    wo.progress_every = o.progress ? o.progress : std::optional<duration>(tty ? std::chrono::seconds(1)
                                                                               : std::chrono::seconds(30));
    wo.on_progress = [&printer](const progress& p) { printer(p); };
  }
  auto conn = connection(*s, o.common);
  if (auto e = client_secret(o.common, conn)) return fail(*e);
  auto c = make_tcp_coordinator(std::move(conn));
  outcome out = c->wait(a, wo);
  printer.clear();
  return finish(out, o.common.quiet);
}

#ifndef TFB_NO_CLI
// ---- The command line: CLI11's definition of `tfbarrier wait` ----
namespace cmd {

command_parser define_wait(CLI::App& app) {
  struct typed : client_typed<wait_cmd_options> {
    std::string timeout, progress, decide_timeout, decide_within;
  };
  auto v = std::make_shared<typed>();
  wait_cmd_options& wait = v->o;
  CLI::App* w = app.add_subcommand("wait", "Arrive at a barrier and block until it releases");
  w->add_option("--name", wait.name, "Barrier name (1-128 of A-Z a-z 0-9 . _ : -)")
      ->required()
      ->envname("TFBARRIER_NAME")
      ->check(name_validator());
  add_counts(w, wait.n, wait.rank, "Participants in the round (default: from the launcher)",
             "This participant's rank, 0 to n-1 (default: from the launcher)");
  w->add_flag("--chief", wait.chief, "Arrive as the chief: return when all are present; the others wait for `decide`");
  // Built only for a command line that names one of them, or asks for help (cmd::mentions).
  if (mentions("--decide")) {
  w->add_option("--decide-by", wait.decide_by,
                 "The chief (rank 0, or --chief) runs CMD through /bin/sh -c once all have arrived: exit 0 continue, "
                 "1 stop, anything else aborts the round; the last line of its stdout is the verdict's message. "
                 "The other ranks ignore it, so one line serves all; the chief dying meanwhile aborts the round")
      ->type_name("CMD");
  w->add_option("--decide-timeout", v->decide_timeout,
                "With --decide-by: abort the round when CMD runs past DUR after all have arrived, and kill CMD's "
                "process group (default: no limit)")
      ->check(duration_validator(std::chrono::milliseconds(1)));
  w->add_option("--decide-within", v->decide_within,
                "With --chief: abort the round when no verdict (tfbarrier decide) comes within DUR after all have "
                "arrived (default: no limit)")
      ->check(duration_validator(std::chrono::milliseconds(1)));
  }
  w->add_option("--timeout", v->timeout, "Withdraw and exit 124 when not released DUR after arriving; 75 when the host did not confirm the "
                "withdrawal (this participant may still be counted) (default: no timeout; connecting is bounded by "
                "--connect-timeout)")
      ->envname("TFBARRIER_TIMEOUT")
      ->check(duration_validator());
  w->add_option("--progress", v->progress,
                "Report progress every DUR, at least 100ms; 0 for none (default 1s on a terminal, else 30s)")
      ->check(duration_validator(std::chrono::milliseconds(100), true));
  add_common(w, v->common);
  set_footer(w, "Examples:\n"
      "  tfbarrier wait --name epoch3 --n 6 --rank 2\n"
      "  msg=$(tfbarrier wait --name epoch3 --timeout 10m); rc=$?   # rc 0 go on, 1 stop\n"
      "  srun tfbarrier wait --name epoch$e --decide-by \"./converged --epoch $e\"   # every rank, one line\n"
      "  tfbarrier wait --name epoch3 --decide-by ./evaluate --decide-timeout 10m\n"
      "  tfbarrier wait --name epoch3 --chief --decide-within 10m && ./evaluate && tfbarrier decide continue\n");
  return [v] {
    wait_cmd_options o = v->parsed();
    set_duration(v->timeout, o.timeout);
    set_duration(v->progress, o.progress);
    set_duration(v->decide_timeout, o.decide_timeout);
    set_duration(v->decide_within, o.decide_within);
    return command_options(std::move(o));
  };
}

}  // namespace cmd
#endif

}  // namespace tfb
