// The subcommands: resolve settings, call the coordinator, print, return an
// exit code. No Asio here; no CLI11 either.
#include "commands.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "address.h"
#include "auth.h"
#include "client.h"
#include "exit_codes.h"
#include "host.h"
#include "munge_auth.h"
#include "settings.h"
#include "text.h"
#include "version.h"

namespace tfb {
namespace {

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

env_lookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

std::optional<settings> resolve(const common_options& c, std::optional<std::uint32_t> n,
                                std::optional<std::uint32_t> rank, bool counts = true) {
  flag_inputs f;
  f.addr = c.addr;
  f.scope = c.scope;
  f.n = n;
  f.rank = rank;
  f.counts = counts;
  std::string error;
  auto s = resolve_settings(f, process_env(), short_hostname(), error);
  if (!s) print_error(error);
  return s;
}

std::string self_exe() {
  char buf[4096];
  ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (len <= 0) return "tfbarrier";
  return std::string(buf, static_cast<std::size_t>(len));
}

std::string default_log_file() {
  const char* tmp = std::getenv("TMPDIR");
  return fmt::format("{}/tfbarrier-serve-{}.log", tmp && *tmp ? tmp : "/tmp", getuid());
}

/// Starts a detached host the way gpg starts its agent: fire and forget.
/// Several participants may do this at once: one binds, the others fail quietly.
void start_host(const settings& s, bool quiet) {
  std::string exe = self_exe();
  std::string listen = s.addr();
  std::string log = default_log_file();
  if (!quiet)
    tfb::print(stderr, "tfbarrier: no host answers at {}; starting one here (log: {})\n", listen, log);
  pid_t child = fork();
  if (child < 0) return;
  if (child == 0) {
    // The intermediate child: start the daemon in a new session, then leave.
    setsid();
    pid_t grandchild = fork();
    if (grandchild != 0) _exit(0);
    int devnull = open("/dev/null", O_RDWR);
    int logfd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(logfd >= 0 ? logfd : devnull, 2);
    // Nothing the caller had open stays open in the host: a pipe it inherited
    // (a script's `$(...)`, a test runner's output) would never see its end.
    close_range(3, ~0U, 0);
    execl(exe.c_str(), exe.c_str(), "serve", "--listen", listen.c_str(), "--idle-exit", "10m", "--self-started",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(child, &st, 0);
}

/// The participant's secret: --secret-file, else the default file if it exists.
/// Returns false (after printing why) when a secret file is there but unusable.
bool client_secret(const common_options& c, connect_options& o) {
  std::string error;
  if (c.secret_file) {
    o.secret = auth::load_secret(*c.secret_file, error);
    if (!o.secret) {
      print_error(error);
      return false;
    }
    return true;
  }
  o.secret_path = auth::default_secret_path();
  if (::access(o.secret_path.c_str(), F_OK) == 0) {
    o.secret = auth::load_secret(o.secret_path, error);
    if (!o.secret) {
      print_error(error);
      return false;
    }
  }
  return true;
}

/// Whether the host would listen on this machine's loopback only: the address
/// resolved as run_host resolves it (its first result), then address.h's test.
bool listens_on_loopback(const address& at) {
  if (at.host.empty()) return false;  // all interfaces
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(at.host.c_str(), std::to_string(at.port).c_str(), &hints, &found) != 0 || !found)
    return true;  // run_host reports the address it cannot resolve; no secret is needed for that
  bool loopback = is_loopback(found->ai_addr);
  ::freeaddrinfo(found);
  return loopback;
}

connect_options connection(const settings& s, const common_options& c) {
  connect_options o;
  o.addr = s.addr();
  o.connect_timeout = c.connect_timeout.value_or(std::chrono::seconds(60));
  o.client_host = short_hostname();
  o.pid = static_cast<std::uint32_t>(getpid());
  if (c.keepalive) o.keepalive = *c.keepalive;
  o.quiet_reconnect = c.quiet;
  if (s.may_start_host) {
    settings copy = s;
    bool quiet = c.quiet;
    o.on_first_failure = [copy, quiet] { start_host(copy, quiet); };
  }
  return o;
}

int finish(const outcome& o, bool quiet) {
  if (!o.out.empty()) tfb::print(stdout, "{}\n", o.out);
  std::fflush(stdout);
  if (!o.err.empty()) {
    if (o.exit_code == exit_code::released_continue || o.exit_code == exit_code::released_stop) {
      if (!quiet) tfb::print(stderr, "tfbarrier: {}\n", o.err);
    } else {
      print_error(o.err);
    }
  }
  return o.exit_code;
}

/// Prints progress: a live line on a terminal, one line per report elsewhere.
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

void print_error(const std::string& text) { tfb::print(stderr, "tfbarrier: error: {}\n", printable(text)); }

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
  if (!client_secret(o.common, conn)) return exit_code::auth;
  auto c = make_tcp_coordinator(std::move(conn));
  wait_options wo;
  wo.timeout = o.timeout;
  if (!o.common.quiet)
    wo.on_note = [](const std::string& text) {
      tfb::print(stderr, "tfbarrier: {}\n", text);
      std::fflush(stderr);
    };
  return finish(c->decide(d, wo), o.common.quiet);
}

int run_abort(const abort_options& o) {
  auto s = resolve(o.common, std::nullopt, std::nullopt, false);
  if (!s) return exit_code::usage;
  proto::abort_req a{*s->scope.value, o.name, o.reason};
  auto conn = connection(*s, o.common);
  if (!client_secret(o.common, conn)) return exit_code::auth;
  auto c = make_tcp_coordinator(std::move(conn));
  return finish(c->abort(a), o.common.quiet);
}

namespace {

// --daemon: the pipe on which the child reports to the caller ("NOTE text",
// then "OK addr" or "ERR text"); -1 outside a daemon's child.
int daemon_report_fd = -1;

void daemon_note(const std::string& text) {
  std::string msg = "NOTE " + text + "\n";
  if (daemon_report_fd >= 0) (void)!write(daemon_report_fd, msg.data(), msg.size());
}

nlohmann::json status_json(const proto::status_reply& st) {
  nlohmann::json bs = nlohmann::json::array();
  for (const auto& b : st.barriers) {
    nlohmann::json j;
    j["scope"] = b.scope;
    j["name"] = b.name;
    j["round"] = b.gen;
    j["state"] = b.state;
    j["n"] = b.n ? nlohmann::json(*b.n) : nlohmann::json(nullptr);
    j["arrived"] = b.arrived;
    j["chief"] = b.chief;
    j["verdict"] = b.v == proto::verdict::none ? nlohmann::json(nullptr) : nlohmann::json(proto::to_string(b.v));
    j["age_ms"] = b.age_ms;
    if (b.missing) {
      j["missing"] = *b.missing;
    } else {
      j["missing"] = nullptr;
    }
    nlohmann::json ms = nlohmann::json::array();
    for (const auto& m : b.members)
      ms.push_back({{"rank", m.rank ? nlohmann::json(*m.rank) : nlohmann::json(nullptr)},
                    // empty: a member restored from the journal that has not come back yet
                    {"host", m.host.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.host)},
                    {"pid", m.host.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.pid)},
                    {"chief", m.chief},
                    {"age_ms", m.age_ms}});
    j["members"] = ms;
    nlohmann::json gone = nlohmann::json::array();
    for (const auto& g : b.gone)
      gone.push_back({{"rank", g.rank ? nlohmann::json(*g.rank) : nlohmann::json(nullptr)},
                      {"host", g.host},
                      {"pid", g.pid},
                      {"how", g.how},
                      {"ago_ms", g.ago_ms}});
    j["gone"] = gone;
    j["reason"] = b.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(b.reason);
    bs.push_back(std::move(j));
  }
  return nlohmann::json{{"barriers", bs}};
}

}  // namespace

int run_status(const status_options& o) {
  auto s = resolve(o.common, std::nullopt, std::nullopt, false);
  if (!s) return exit_code::usage;
  s->may_start_host = false;  // a question: it never starts the host it asks about
  proto::status_req req{o.all_scopes ? "*" : *s->scope.value, o.name, true};
  // A question, not a wait: with no host there, say so within 10 s, not 60.
  common_options common = o.common;
  if (!common.connect_timeout) common.connect_timeout = std::chrono::seconds(10);
  auto conn = connection(*s, common);
  if (!client_secret(o.common, conn)) return exit_code::auth;
  auto c = make_tcp_coordinator(std::move(conn));
  outcome out = c->status(req);
  if (out.exit_code != 0 || !out.status) return finish(out, o.common.quiet);
  const auto& st = *out.status;
  if (o.json) {
    tfb::print(stdout, "{}\n", status_json(st).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  if (st.barriers.empty()) {
    tfb::print(stdout, "no barriers{} on {}\n", o.all_scopes ? "" : fmt::format(" in scope {}", *s->scope.value), s->addr());
    return 0;
  }
  tfb::print(stdout, "{:<12} {:<16} {:>5} {:<9} {:>9} {:<5} {:<8} {:>8}  {}\n", "SCOPE", "NAME", "ROUND", "STATE", "ARRIVED",
             "CHIEF", "VERDICT", "OPEN FOR", "MISSING RANKS");
  for (const auto& b : st.barriers) {
    // An aborted round is over: the host keeps its reason, not its arrivals.
    std::string arrived =
        b.state == "aborted" ? "-" : fmt::format("{}/{}", b.arrived, b.n ? std::to_string(*b.n) : "?");
    tfb::print(stdout, "{:<12} {:<16} {:>5} {:<9} {:>9} {:<5} {:<8} {:>8}  {}\n", b.scope, b.name, b.gen, b.state, arrived,
               b.chief ? "yes" : "no", proto::to_string(b.v), format_duration(duration(b.age_ms)),
               b.missing ? (b.missing->empty() ? "none" : *b.missing) : "-");
    if (b.state == "aborted") tfb::print(stdout, "    aborted{}{}\n", b.reason.empty() ? "" : ": ", b.reason);
    if (!o.name.empty())
      for (const auto& m : b.members) {
        std::string rank = m.rank ? fmt::format("rank {}", *m.rank) : "no rank";
        if (m.host.empty())  // restored from the host's journal; its host and pid come back with it
          tfb::print(stdout, "    {:<10} present before the host restarted, not back yet{}\n", rank, m.chief ? " (chief)" : "");
        else
          tfb::print(stdout, "    {:<10} {} pid {}{}, arrived {} ago\n", rank, m.host, m.pid, m.chief ? " (chief)" : "",
                     format_duration(duration(m.age_ms)));
      }
    if (!o.name.empty())
      for (const auto& g : b.gone)
        tfb::print(stdout, "    {:<10} {} pid {}: {} {} ago\n", g.rank ? fmt::format("rank {}", *g.rank) : "no rank", g.host,
                   g.pid, g.how, format_duration(duration(g.ago_ms)));
  }
  return 0;
}

int run_secret(const secret_options& o) {
  std::string path = o.file.value_or(auth::default_secret_path());
  std::string error;
  if (!auth::write_secret(path, o.force, error)) {
    print_error(error);
    return exit_code::usage;
  }
  tfb::print(stdout, "{}\n", path);
  return 0;
}

int run_config(const config_options& o) {
  auto s = resolve(o.common, o.n, o.rank);
  if (!s) return exit_code::usage;
  tfb::print(stdout, "{}", o.json ? settings_to_json(*s) + "\n" : settings_to_text(*s));
  return 0;
}

int run_serve(const serve_options& o) {
  host_options h;
  if (o.listen.empty()) {
    common_options none;
    auto s = resolve(none, std::nullopt, std::nullopt, false);
    if (!s) return exit_code::usage;
    h.listen = s->addr();
  } else {
    h.listen = o.listen;
    // A malformed address is a usage error (2), as a client's --addr is, not
    // "host unreachable" (69) from the listener.
    std::string why;
    if (!parse_address(h.listen, address_use::listen, why)) {
      const char* env = std::getenv("TFBARRIER_LISTEN");
      bool typed = !(env && o.listen == env);
      print_error(fmt::format("{}{} is not an address to listen on: use HOST:PORT, :PORT (all interfaces) or "
                              "[IPv6]:PORT, with a port from 0 to 65535 (0 picks a free one)",
                              typed ? "" : "TFBARRIER_LISTEN=", quote_text(h.listen)));
      return exit_code::usage;
    }
  }
  h.idle_exit = o.idle_exit;
  h.forget_after = o.forget_after;
  h.quiet = o.quiet;
  h.state_dir = o.state_dir;
  h.self_started = o.self_started;
  h.max_connections = o.max_connections;
  h.max_per_address = o.max_per_address;
  std::string error, why;
  auto listen_at = parse_address(h.listen, address_use::listen, why);
  bool loopback = !listen_at || listens_on_loopback(*listen_at);  // a bad address: run_host reports it
  // Secure by default: beyond loopback, every client must know the secret.
  if (o.secret_file) {
    h.secret = auth::load_secret(*o.secret_file, error);
    if (!h.secret) {
      print_error(error);
      return exit_code::auth;
    }
  } else if (!o.insecure) {
    std::string path = auth::default_secret_path();
    bool exists = ::access(path.c_str(), F_OK) == 0;
    std::string why_no_munge;
    if (!loopback && !o.no_munge && munge_auth::available(why_no_munge)) {
      // Where munged runs (every Slurm cluster), nothing needs setting up: the job owner's uid is the key.
      h.munge = true;
      exists = false;
    } else if (!exists && !loopback) {
      // First use: make the secret that the nodes share through the home directory.
      // It is written only once the port is bound: a serve that cannot listen
      // must leave no secret behind, or every client of the hosts that already
      // run without one would refuse them from then on (exit 77).
      std::string fresh = auth::fresh_secret();
      h.secret = fresh;
      h.on_bound = [path, fresh, listen = h.listen, daemon = o.daemon](std::string& err) {
        if (!auth::write_secret(path, fresh, false, err)) {
          err = ::access(path.c_str(), F_OK) == 0
                    ? fmt::format("{} appeared while this host started (another tfbarrier made it); start serve "
                                  "again to use it",
                                  path)
                    : fmt::format("{} listens beyond loopback, so it needs a secret, and {}; give --secret-file "
                                  "FILE (or --insecure to allow anyone who can connect)",
                                  listen, err);
          return exit_code::auth;
        }
        std::string note = fmt::format("created the shared secret {} (mode 0600)", path);
        if (daemon) daemon_note(note);
        else tfb::print(stderr, "tfbarrier: {}\n", note);
        return 0;
      };
    } else if (exists && !h.munge) {
      h.secret = auth::load_secret(path, error);
      if (!h.secret) {
        print_error(error);
        return exit_code::auth;
      }
    }
  }
  if (!o.daemon) {
    std::FILE* logf = nullptr;
    if (o.log_file) {
      logf = std::fopen(o.log_file->c_str(), "a");
      if (!logf) {
        print_error(fmt::format("cannot open the log file {}: {}", *o.log_file, std::strerror(errno)));
        return exit_code::usage;
      }
      h.log = logf;
    }
    h.on_listening = [](const std::string& addr) {
      tfb::print(stdout, "TFBARRIER_ADDR={}\n", addr);
      std::fflush(stdout);
    };
    int rc = run_host(h, error);
    if (!error.empty()) print_error(error);
    if (logf) std::fclose(logf);
    return rc;
  }
  // --daemon: the child reports "OK addr" or "ERR text" through a pipe, then detaches.
  std::string log = o.log_file.value_or(default_log_file());
  int fds[2];
  if (pipe(fds) != 0) {
    print_error("cannot create a pipe for --daemon");
    return exit_code::protocol;
  }
  pid_t pid = fork();
  if (pid < 0) {
    print_error("cannot fork for --daemon");
    return exit_code::protocol;
  }
  if (pid == 0) {
    close(fds[0]);
    setsid();
    int devnull = open("/dev/null", O_RDWR);
    int logfd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0) {
      std::string msg = fmt::format("ERR cannot open the log file {}: {}\n", log, std::strerror(errno));
      (void)!write(fds[1], msg.data(), msg.size());
      _exit(exit_code::usage);
    }
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(logfd, 2);
    // Keep only the report pipe: a descriptor the caller had open (a pipe it
    // reads to its end, say) must not stay open in a daemon that runs for hours.
    int wfd = fds[1];
    if (wfd > 3) close_range(3, static_cast<unsigned>(wfd) - 1, 0);
    close_range(static_cast<unsigned>(wfd) + 1, ~0U, 0);
    std::FILE* logf = stderr;
    h.log = logf;
    daemon_report_fd = wfd;
    h.on_listening = [wfd](const std::string& addr) {
      std::string msg = "OK " + addr + "\n";
      (void)!write(wfd, msg.data(), msg.size());
      close(wfd);
      daemon_report_fd = -1;
    };
    int rc = run_host(h, error);
    if (!error.empty()) {
      std::string msg = "ERR " + error + "\n";
      (void)!write(wfd, msg.data(), msg.size());
      print_error(error);
    }
    _exit(rc);
  }
  close(fds[1]);
  std::string got;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  while (got.starts_with("NOTE ")) {  // what the child would have said on stderr, which is its log
    std::size_t eol = got.find('\n');
    tfb::print(stderr, "tfbarrier: {}\n", got.substr(5, eol == std::string::npos ? eol : eol - 5));
    got.erase(0, eol == std::string::npos ? got.size() : eol + 1);
  }
  if (got.starts_with("OK ")) {
    std::string addr = got.substr(3);
    while (!addr.empty() && (addr.back() == '\n' || addr.back() == '\r')) addr.pop_back();
    tfb::print(stdout, "TFBARRIER_ADDR={0}; export TFBARRIER_ADDR;\nTFBARRIER_PID={1}; export TFBARRIER_PID;\n", addr, pid);
    tfb::print(stderr, "tfbarrier: host pid {} listening on {} (log: {})\n", pid, addr, log);
    return 0;
  }
  std::string text = got.starts_with("ERR ") ? got.substr(4) : "the host exited before it was listening";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  print_error(text);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) != 0 ? WEXITSTATUS(st) : exit_code::unreachable;
}

}  // namespace tfb
