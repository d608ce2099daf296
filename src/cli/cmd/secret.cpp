// tfbarrier secret: write a fresh shared secret.
#include <unistd.h>

#include <fmt/format.h>

#include "auth.h"
#include "secret_files.h"
#include "cmd/common.h"
#include "exit_codes.h"
#include "text.h"
#ifndef TFB_NO_CLI
#include "cmd/define.h"
#endif

namespace tfb {
using namespace cmd;

int run_secret(const secret_options& o) {
  std::string path = o.file.value_or(auth::default_secret_path());
  std::string error;
  if (!auth::write_secret(path, o.force, error)) {
    print_error(error);
    return exit_code::usage;
  }
  tfb::print(stdout, "{}\n", path);
  return exit_code::ok;
}

#ifndef TFB_NO_CLI
// ---- The command line: CLI11's definition of `tfbarrier secret` ----
namespace cmd {

command_parser define_secret(CLI::App& app) {
  auto o = std::make_shared<secret_options>();
  CLI::App* sec = app.add_subcommand("secret", "Write a fresh shared secret for authentication");
  sec->add_option("--file", o->file, "Where (default ~/.tfbarrier/secret, or TFBARRIER_SECRET_FILE)");
  sec->add_flag("--force", o->force, "Replace an existing secret (every node then needs the new one)");
  set_footer(sec, "Example:\n  tfbarrier secret && tfbarrier serve --listen :31000\n");
  return [o] { return command_options(*o); };
}

}  // namespace cmd
#endif

}  // namespace tfb
