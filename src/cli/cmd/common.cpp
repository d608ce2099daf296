// What the commands share (cmd/common.h).
#include "cmd/common.h"
#include "outcome_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <memory>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <vector>

#include "auth.h"
#include "secret_files.h"
#include "exit_codes.h"
#include "launcher_file.h"
#include "private_files.h"
#include "protocol.h"
#include "store_name.h"
#include "text.h"

namespace tfb {

void print_error(const std::string& text) { tfb::print(stderr, "tfbarrier: error: {}\n", printable(text, true)); }

namespace cmd {
namespace {

// The environment, looked up by name. Settings ask for some twenty names
// (every launcher's variables, innermost first), and getenv(3) scans the
// whole environment at each call: every `wait` paid for it
// (bench/startup-cost.sh). One pass chains the entries by their first byte,
// and a lookup walks only its own chain. Built for each resolve, so that a
// setenv since is seen.
env_lookup process_env() {
  struct index {
    std::array<std::int32_t, 256> head;
    std::vector<std::int32_t> next;
  };
  auto ix = std::make_shared<index>();
  ix->head.fill(-1);
  std::int32_t n = 0;
  while (environ && environ[n] && n < (1 << 20)) ++n;  // clearenv(3) leaves environ null
  ix->next.assign(static_cast<std::size_t>(n), -1);
  for (std::int32_t i = n - 1; i >= 0; --i) {  // chains in environ's order: the first one wins, as in getenv
    auto first = static_cast<unsigned char>(environ[i][0]);
    ix->next[static_cast<std::size_t>(i)] = ix->head[first];
    ix->head[first] = i;
  }
  return [ix](std::string_view name) -> std::optional<std::string> {
    if (name.empty()) return std::nullopt;
    for (std::int32_t i = ix->head[static_cast<unsigned char>(name[0])]; i >= 0;
         i = ix->next[static_cast<std::size_t>(i)]) {
      const char* e = environ[i];
      if (std::strncmp(e, name.data(), name.size()) == 0 && e[name.size()] == '=')
        return std::string(e + name.size() + 1);
    }
    return std::nullopt;
  };
}

std::string self_exe() {
  char buf[4096];
  ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (len <= 0) return "tfbarrier";
  return std::string(buf, static_cast<std::size_t>(len));
}


/// The log of the host this process started, and its size before.
struct started_host {
  std::string log;
  off_t from = -1;
};
started_host& started() {
  static started_host s;
  return s;
}

/// The error the host started here logged since, when it gave up (it could
/// not start, for a reason that trying again would not fix: a store it
/// cannot use, say), "" while it has not: the participant stops waiting for
/// it and says why, rather than at its --connect-timeout.
std::string started_host_error() {
  const started_host& h = started();
  if (h.from < 0) return {};
  int fd = ::open(h.log.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text(64 * 1024, '\0');
  ssize_t n = ::pread(fd, text.data(), text.size(), h.from);
  ::close(fd);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  auto gave_up = text.rfind(fmt::format("tfbarrier: {} (exit ", self_start_gave_up));
  if (gave_up == std::string::npos) return {};
  text.resize(gave_up);
  constexpr std::string_view mark = "tfbarrier: error: ";
  auto at = text.rfind(mark);
  if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return {};
  std::string line = text.substr(at + mark.size());
  line.resize(std::min(line.find('\n'), line.size()));
  return fmt::format("the host started here could not start ({}): {}", h.log, line);
}

/// The auth flags of the host this participant starts: the participant's
/// own, or the host would greet it without the secret it holds (exit 77) and
/// stay up, unauthenticated, for its idle time. --insecure only where the
/// participant has no secret: with one, it refuses a host that has none.
std::vector<std::string> host_auth_args(const settings& s, const std::optional<std::string>& secret_file) {
  std::vector<std::string> args;
  if (secret_file) {
    std::string path = *secret_file;
    if (!path.starts_with('/')) {  // the daemon should not depend on the participant's directory
      char cwd[4096];
      if (::getcwd(cwd, sizeof cwd)) path = fmt::format("{}/{}", cwd, path);
    }
    args = {"--secret-file", path};
  } else if (s.insecure.value.value_or(false) && ::access(auth::default_secret_path().c_str(), F_OK) != 0) {
    args = {"--insecure"};
  }
  return args;
}

/// Starts a detached host the way gpg starts its agent: fire and forget.
/// Several participants may do this at once: one binds, the others fail quietly.
void start_host(const settings& s, const std::optional<std::string>& secret_file, bool quiet) {
  std::string exe = self_exe();
  std::string listen = s.addr();
  std::string log = default_log_file();
  struct stat before {};
  started() = started_host{log, ::stat(log.c_str(), &before) == 0 ? before.st_size : 0};
  if (!quiet)
    tfb::print(stderr, "tfbarrier: no host answers at {}; starting one here (log: {})\n", listen, log);
  // The command line is built before fork: the child only execs.
  std::vector<std::string> args = {exe, "serve", "--listen", listen, "--idle-exit", "10m", "--self-started"};
  for (auto& a : host_auth_args(s, secret_file)) args.push_back(std::move(a));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = fork();
  if (child < 0) return;
  if (child == 0) {
    // The intermediate child: start the daemon in a new session, then leave.
    setsid();
    if (fork() != 0) _exit(exit_code::ok);
    (void)detach(log, -1);  // without its log the host still runs
    // The store as this command had it (--store, or TFBARRIER_STORE, which the host reads too).
    if (s.store.value) ::setenv("TFBARRIER_STORE", s.store.value->c_str(), 1);
    execv(exe.c_str(), argv.data());
    _exit(127);  // not-an-exit-code of tfbarrier's: the shell's "could not run it"; nobody reads it
  }
  int st = 0;
  waitpid(child, &st, 0);
}

}  // namespace

std::string short_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  std::string h(buf);
  if (auto dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  // Keep it a valid protocol value.
  for (char& c : h)
    if (c <= ' ' || c == '=' || c >= 0x7f) c = '_';
  return h.empty() ? "localhost" : h;
}

std::string node_name() {
  // The order of settings' resolve_node, which `wait` and `config` use and
  // which refuses a bad TFBARRIER_NODE (exit 2); here a bad one is passed over.
  if (const char* n = std::getenv("TFBARRIER_NODE"); n && proto::valid_name(n)) return n;
  if (const char* n = std::getenv("SLURMD_NODENAME"); n && *n) return n;
  return short_hostname();
}

std::string random_id() {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  constexpr unsigned letters = sizeof alphabet - 1;  // 62
  std::string id;
  unsigned char bytes[32];
  while (id.size() < 16) {
    auth::fill_random(bytes, sizeof bytes);
    for (unsigned char b : bytes)  // 248 = 4 x 62: below it, every letter is as likely
      if (b < 248 && id.size() < 16) id += alphabet[b % letters];
  }
  return id;
}


std::optional<settings> resolve(const common_options& c, std::optional<std::uint32_t> n,
                                std::optional<std::uint32_t> rank, bool counts) {
  flag_inputs f;
  f.addr = c.addr;
  f.scope = c.scope;
  f.store = c.store;
  f.n = n;
  f.rank = rank;
  f.counts = counts;
  f.insecure = c.insecure;
  f.uid = ::getuid();
  std::string error;
  auto s = resolve_settings(f, process_env(), short_hostname(), error, read_launcher_file);
  if (!s) print_error(error);
  return s;
}


namespace {

// The log's name says which node and which job it is of: homes are shared
// over NFS. Slurm's node name where there is one (the test cluster's nodes
// share one host name), else the short host name.
std::string log_node() { return node_name(); }
std::string log_job() {
  const char* j = std::getenv("SLURM_JOB_ID");
  return j ? j : "";
}

}  // namespace

result<int> open_log(const std::string& log) {
  std::string why;
  if (log == default_log_file()) {
    std::string path;
    auto f = files::open_host_log(log_node(), log_job(), path, why);
    if (!f) return error{error_kind::file, why};
    return f->release();
  }
  auto f = files::open_path(log, O_WRONLY | O_CREAT | O_APPEND, 0600, why, {"the log file", "give another --log"});
  if (!f) return error{error_kind::file, why};
  return f->release();
}

int fail(const error& e) {
  print_error(e.text);
  return exit_code_of(e);
}

std::string default_log_file() {
  // In the user's private directory ($XDG_RUNTIME_DIR/tfbarrier or
  // ~/.tfbarrier, mode 0700), never a shared one such as /tmp, where another
  // user could read the log or plant a symlink first.
  std::string error;
  auto dir = files::private_dir_path(error);
  return fmt::format("{}/{}", dir.value_or("~/.tfbarrier"), files::log_file_name(log_node(), log_job()));
}

std::string default_history_file() {
  std::string error;
  auto dir = files::private_dir_path(error);
  if (!dir) return "";
  std::string log = files::log_file_name(log_node(), log_job());
  return fmt::format("{}/{}.history", *dir, log.substr(0, log.size() - 4));
}


/// Starts a detached host the way gpg starts its agent: fire and forget.
/// Several participants may do this at once: one binds, the others fail quietly.

std::optional<error> client_secret(const common_options& c, connect_options& o) {
  std::string why;
  if (c.secret_file) {
    o.secret = auth::load_secret(*c.secret_file, why);
    if (!o.secret) return error{error_kind::auth, why};
    return std::nullopt;
  }
  o.secret_path = auth::default_secret_path();
  if (::access(o.secret_path.c_str(), F_OK) == 0) {
    o.secret = auth::load_secret(o.secret_path, why);
    if (!o.secret) return error{error_kind::auth, why};
  }
  return std::nullopt;
}

/// Whether the host would listen on this machine's loopback only: the address
/// resolved as run_host resolves it (its first result), then address.h's test.
connect_options connection(const settings& s, const common_options& c) {
  connect_options o;
  o.at = s.host_address();
  o.addr = s.addr();
  o.connect_timeout = c.connect_timeout.value_or(std::chrono::seconds(60));
  // The node as resolved: TFBARRIER_NODE, the launcher's, the host name.
  o.client_host = s.node.value ? *s.node.value : short_hostname();
  o.pid = static_cast<std::uint32_t>(getpid());
  if (c.keepalive) o.keepalive = *c.keepalive;
  o.quiet_reconnect = c.quiet;
  o.insecure = s.insecure.value.value_or(false);
  if (s.store.value) o.store = store_prefix_of(*s.store.value);
  if (s.may_start_host) {
    settings copy = s;
    bool quiet = c.quiet;
    o.on_first_failure = [copy, secret_file = c.secret_file, quiet] { start_host(copy, secret_file, quiet); };
    o.why_no_host = started_host_error;
  }
  return o;
}

int finish(const outcome& got, bool quiet) {
  // wait, decide, abort: their result, in words (outcome_text.h)
  const outcome& o = got.result ? outcome_of(*got.result) : got;
  // The chief's message and the host's words are shown, never obeyed.
  if (!o.out.empty()) tfb::print(stdout, "{}\n", printable(o.out));
  std::fflush(stdout);
  if (!o.err.empty()) {
    if (o.exit_code == exit_code::released_continue || o.exit_code == exit_code::released_stop) {
      if (!quiet) tfb::print(stderr, "tfbarrier: {}\n", printable(o.err, true));
    } else {
      print_error(o.err);
    }
  }
  return o.exit_code;
}

/// Prints progress: a live line on a terminal, one line per report elsewhere.

std::string detach(const std::string& log, int keep_fd) {
  int devnull = open("/dev/null", O_RDWR);
  auto logfd = open_log(log);
  dup2(devnull, 0);
  dup2(devnull, 1);
  dup2(logfd ? *logfd : devnull, 2);
  // Nothing the caller had open stays open in a daemon that runs for hours: a
  // pipe it inherited (a script's `$(...)`, a test runner's output) would never
  // see its end.
  if (keep_fd < 0) {
    close_range(3, ~0U, 0);
  } else {
    if (keep_fd > 3) close_range(3, static_cast<unsigned>(keep_fd) - 1, 0);
    close_range(static_cast<unsigned>(keep_fd) + 1, ~0U, 0);
  }
  return logfd ? std::string() : logfd.err().text;
}

}  // namespace cmd
}  // namespace tfb
