// tfbarrier secret: write a fresh shared secret.
#include <unistd.h>

#include <fmt/format.h>

#include "auth.h"
#include "cmd/common.h"
#include "exit_codes.h"
#include "text.h"

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

}  // namespace tfb
