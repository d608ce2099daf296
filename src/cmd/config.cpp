// tfbarrier config: every resolved setting and where it came from.
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/common.h"
#include "exit_codes.h"
#include "text.h"

namespace tfb {
using namespace cmd;

int run_config(const config_options& o) {
  auto s = resolve(o.common, o.n, o.rank);
  if (!s) return exit_code::usage;
  tfb::print(stdout, "{}", o.json ? settings_to_json(*s) + "\n" : settings_to_text(*s));
  return exit_code::ok;
}

}  // namespace tfb
