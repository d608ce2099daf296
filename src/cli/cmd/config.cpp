// tfbarrier config: every resolved setting and where it came from.
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

int run_config(const config_options& o) {
  auto s = resolve(o.common, o.n, o.rank);
  if (!s) return exit_code::usage;
  tfb::print(stdout, "{}", o.json ? settings_to_json(*s) + "\n" : printable(settings_to_text(*s), true));
  return exit_code::ok;
}

#ifndef TFB_NO_CLI
// ---- The command line: CLI11's definition of `tfbarrier config` ----
namespace cmd {

command_parser define_config(CLI::App& app) {
  auto v = std::make_shared<client_typed<config_options>>();
  CLI::App* cf = app.add_subcommand("config", "Print every resolved setting and where it came from");
  add_counts(cf, v->o.n, v->o.rank, "As for wait", "As for wait");
  cf->add_flag("--json", v->o.json, "JSON for scripts");
  add_common(cf, v->common);
  set_footer(cf,
             "Launchers read, innermost first (man tfbarrier, ENVIRONMENT): torchrun, Open MPI, MPICH and Intel MPI\n"
             "(Hydra), Flux, HTCondor's parallel universe, Kubernetes Indexed Jobs, Slurm, PMI, PBS Pro/OpenPBS/Torque,\n"
             "LSF, Grid Engine.\n\n"
             "Examples:\n  srun -n 2 tfbarrier config\n  mpiexec -n 4 tfbarrier config --json\n");
  return [v] { return command_options(v->parsed()); };
}

}  // namespace cmd
#endif

}  // namespace tfb
