// tfbarrier wait: arrive at a barrier and block until it releases.
#include <unistd.h>

#include <fmt/format.h>

#include "cmd/common.h"
#include "exit_codes.h"
#include "text.h"

namespace tfb {
using namespace cmd;
namespace {

class progress_printer {
 public:
  explicit progress_printer(bool tty) : tty_(tty) {}
  ~progress_printer() { clear(); }
  void operator()(const progress& p) {
    std::string line = p.gathered ? fmt::format("{}: all {} arrived; waiting for the chief's verdict "
                                                "(tfbarrier decide), {}",
                                                p.name, p.arrived, format_duration(p.waited))
                                  : fmt::format("{}: {}/{} arrived, {}", p.name, p.arrived,
                                                p.n ? std::to_string(*p.n) : "?", format_duration(p.waited));
    if (p.missing && !p.missing->empty()) line += fmt::format(", missing ranks {}", *p.missing);
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
  bool tty = isatty(2) != 0;
  progress_printer printer(tty);
  if (!o.common.quiet && !(o.progress && o.progress->count() == 0)) {  // --progress 0: none
    wo.progress_every = o.progress ? o.progress : std::optional<duration>(tty ? std::chrono::seconds(1)
                                                                               : std::chrono::seconds(30));
    wo.on_progress = [&printer](const progress& p) { printer(p); };
  }
  auto conn = connection(*s, o.common);
  if (!client_secret(o.common, conn)) return exit_code::auth;
  auto c = make_tcp_coordinator(std::move(conn));
  outcome out = c->wait(a, wo);
  printer.clear();
  return finish(out, o.common.quiet);
}

}  // namespace tfb
