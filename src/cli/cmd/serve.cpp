// tfbarrier serve: run the rendezvous host, here or detached (--daemon).
#include <fcntl.h>
#include <netdb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

#include "address.h"
#include "auth.h"
#include "secret_files.h"
#include "cmd/common.h"
#include "exit_codes.h"
#include "host.h"
#include "munge_auth.h"
#include "store_link.h"
#include "text.h"
#ifndef TFB_NO_CLI
#include "cmd/define.h"
#endif

namespace tfb {
using namespace cmd;
namespace {

// --daemon: the pipe on which the child reports to the caller ("NOTE text",
// then "OK addr" or "ERR text"); -1 outside a daemon's child.
int daemon_report_fd = -1;

void daemon_note(const std::string& text) {
  std::string msg = "NOTE " + text + "\n";
  if (daemon_report_fd >= 0) (void)!write(daemon_report_fd, msg.data(), msg.size());
}

/// Whether the host would listen on this machine's loopback only: the address
/// resolved as run_host resolves it (its first result), then address.h's test.
/// A name that does not resolve is not loopback (fail closed: by the time the
/// host binds it may resolve to anything); `unresolved` then says why.
bool listens_on_loopback(const address& at, std::string& unresolved) {
  if (at.host.empty()) return false;  // all interfaces
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(at.host.c_str(), std::to_string(at.port).c_str(), &hints, &found); rc != 0 || !found) {
    unresolved = rc != 0 ? ::gai_strerror(rc) : "no address";
    return false;
  }
  bool loopback = is_loopback(found->ai_addr);
  ::freeaddrinfo(found);
  return loopback;
}

/// Why OPTION ADDR cannot be used: its name does not resolve here.
std::string cannot_resolve(std::string_view option, const std::string& addr, const address& at,
                           const std::string& why) {
  return fmt::format("{} {}: the name {} does not resolve here ({}); give a name or address of this machine, "
                     "127.0.0.1:PORT for this machine only or :PORT for all its interfaces",
                     option, addr, quote_text(at.host), why);
}

/// --listen (or TFBARRIER_LISTEN), else the address a participant would use.
int listen_address(const serve_options& o, host_options& h) {
  if (o.listen.empty()) {
    common_options none;
    auto s = resolve(none, std::nullopt, std::nullopt, false);
    if (!s) return exit_code::usage;
    h.listen = {s->host_address(), s->addr()};  // resolved, so parsed there (settings.cpp)
    return exit_code::ok;
  }
  // A malformed address is a usage error (2), as a client's --addr is, not
  // "host unreachable" (69) from the listener.
  std::string why;
  auto at = parse_address(o.listen, address_use::listen, why);
  if (!at) {
    const char* env = std::getenv("TFBARRIER_LISTEN");
    bool typed = !(env && o.listen == env);
    print_error(fmt::format("{}{} is not an address to listen on: use HOST:PORT, :PORT (all interfaces) or "
                            "[IPv6]:PORT, with a port from 0 to 65535 (0 picks a free one)",
                            typed ? "" : "TFBARRIER_LISTEN=", quote_text(o.listen)));
    return exit_code::usage;
  }
  h.listen = {std::move(*at), o.listen};
  return exit_code::ok;
}

/// First use beyond loopback: the secret that the nodes share through the home
/// directory. It is written only once the port is bound: a serve that cannot
/// listen must leave no secret behind, or every client of the hosts that
/// already run without one would refuse them from then on (exit 77).
void make_secret_when_bound(const serve_options& o, host_options& h, const std::string& path) {
  std::string fresh = auth::fresh_secret();
  h.secret = fresh;
  h.on_bound = [path, fresh, listen = h.listen.given, daemon = o.daemon]() -> std::optional<error> {
    std::string err;
    if (!auth::write_secret(path, fresh, false, err)) {
      return error{error_kind::auth,
                   ::access(path.c_str(), F_OK) == 0
                ? fmt::format("{} appeared while this host started (another tfbarrier made it); start serve "
                              "again to use it",
                              path)
                : fmt::format("{} listens beyond loopback, so it needs a secret, and {}; give --secret-file "
                              "FILE (or --insecure to allow anyone who can connect)",
                              listen, err)};
    }
    std::string note = fmt::format("created the shared secret {} (mode 0600)", path);
    if (daemon) daemon_note(note);
    else tfb::print(stderr, "tfbarrier: {}\n", note);
    return std::nullopt;
  };
}

/// Secure by default: beyond loopback, every client must know the secret (or be
/// the job owner, by MUNGE).
int authentication(const serve_options& o, host_options& h) {
  std::string error;
  if (o.secret_file) {
    h.secret = auth::load_secret(*o.secret_file, error);
    if (!h.secret) {
      print_error(error);
      return exit_code::auth;
    }
    return exit_code::ok;
  }
  if (o.insecure) {
    h.insecure = true;
    return exit_code::ok;
  }
  std::string unresolved;
  bool loopback = listens_on_loopback(h.listen.at, unresolved);
  if (!unresolved.empty()) {  // not loopback; and no host starts that could not listen
    print_error(cannot_resolve("cannot listen on", h.listen.given, h.listen.at, unresolved));
    return exit_code::unreachable;
  }
  std::string path = auth::default_secret_path();
  bool exists = ::access(path.c_str(), F_OK) == 0;
  std::string why_no_munge;
  if (!loopback && !o.no_munge && munge_auth::available(why_no_munge)) {
    // Where munged runs (every Slurm cluster), nothing needs setting up: the job owner's uid is the key.
    h.munge = true;
  } else if (!exists && !loopback) {
    make_secret_when_bound(o, h, path);
  } else if (exists) {
    h.secret = auth::load_secret(path, error);
    if (!h.secret) {
      print_error(error);
      return exit_code::auth;
    }
  }
  return exit_code::ok;
}

/// Runs the host in this process, logging to stderr or --log.
int serve_here(const serve_options& o, host_options& h) {
  std::FILE* logf = nullptr;
  if (o.log_file) {
    auto fd = open_log(*o.log_file);
    if (!fd) return fail(fd.err());
    if (!(logf = ::fdopen(*fd, "a"))) {
      ::close(*fd);
      return fail({error_kind::file, fmt::format("cannot open the log file {}: {}", *o.log_file, std::strerror(errno))});
    }
    h.log = logf;
  }
  h.on_listening = [](const std::string& addr) {
    tfb::print(stdout, "TFBARRIER_ADDR={}\n", addr);
    std::fflush(stdout);
  };
  auto failed = run_host(h);
  if (logf) std::fclose(logf);
  if (!failed) return exit_code::ok;
  if (!failed->text.empty()) print_error(failed->text);
  return exit_code_of(*failed);
}

/// The --daemon child: detached, it runs the host and reports on wfd.
[[noreturn]] void serve_as_daemon(host_options& h, const std::string& log, int wfd) {
  setsid();
  // Keep only the report pipe open.
  if (std::string err = detach(log, wfd); !err.empty()) {
    std::string msg = "ERR " + err + "\n";
    (void)!write(wfd, msg.data(), msg.size());
    _exit(exit_code_of(error_kind::file));
  }
  h.log = stderr;
  daemon_report_fd = wfd;
  h.on_listening = [wfd](const std::string& addr) {
    std::string msg = "OK " + addr + "\n";
    (void)!write(wfd, msg.data(), msg.size());
    close(wfd);
    daemon_report_fd = -1;
  };
  auto failed = run_host(h);
  if (failed && !failed->text.empty()) {
    std::string msg = "ERR " + failed->text + "\n";
    (void)!write(wfd, msg.data(), msg.size());
    print_error(failed->text);
  }
  _exit(failed ? exit_code_of(*failed) : exit_code::ok);
}

/// The caller of --daemon: what the child reported, as shell assignments or an error.
int report_daemon(int rfd, pid_t pid, const std::string& log) {
  std::string got;
  char buf[512];
  ssize_t n;
  while ((n = read(rfd, buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  close(rfd);
  while (got.starts_with("NOTE ")) {  // what the child would have said on stderr, which is its log
    std::size_t eol = got.find('\n');
    tfb::print(stderr, "tfbarrier: {}\n", printable(got.substr(5, eol == std::string::npos ? eol : eol - 5)));
    got.erase(0, eol == std::string::npos ? got.size() : eol + 1);
  }
  if (got.starts_with("OK ")) {
    std::string addr = got.substr(3);
    while (!addr.empty() && (addr.back() == '\n' || addr.back() == '\r')) addr.pop_back();
    tfb::print(stdout, "TFBARRIER_ADDR={0}; export TFBARRIER_ADDR;\nTFBARRIER_PID={1}; export TFBARRIER_PID;\n", addr, pid);
    tfb::print(stderr, "tfbarrier: host pid {} listening on {} (log: {})\n", pid, addr, log);
    return exit_code::ok;
  }
  std::string text = got.starts_with("ERR ") ? got.substr(4) : "the host exited before it was listening";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  print_error(text);
  int st = 0;
  waitpid(pid, &st, 0);
  // The child's code was chosen from its error's kind; one that died without one could not listen.
  return WIFEXITED(st) && WEXITSTATUS(st) != exit_code::ok ? WEXITSTATUS(st) : exit_code_of(error_kind::cannot_listen);
}

/// --daemon: the child reports "OK addr" or "ERR text" through a pipe, then detaches.
int serve_detached(const serve_options& o, host_options& h) {
  std::string log = o.log_file.value_or(default_log_file());
  int fds[2];
  if (pipe(fds) != 0) {
    return fail({error_kind::internal, "cannot create a pipe for --daemon"});
  }
  pid_t pid = fork();
  if (pid < 0) {
    return fail({error_kind::internal, "cannot fork for --daemon"});
  }
  if (pid == 0) {
    close(fds[0]);
    serve_as_daemon(h, log, fds[1]);
  }
  close(fds[1]);
  return report_daemon(fds[0], pid, log);
}

/// --metrics, --metrics-token-file, --metrics-textfile (issue 21;
/// docs/monitoring.md). Beyond loopback the endpoint needs a token: Prometheus
/// can do neither MUNGE nor the HMAC handshake.
int metrics_settings(const serve_options& o, host_options& h) {
  h.metrics_textfile = o.metrics_textfile;
  if (o.metrics_token_file && !o.metrics) {
    print_error("--metrics-token-file guards the endpoint of --metrics HOST:PORT; give --metrics as well");
    return exit_code::usage;
  }
  if (!o.metrics) return exit_code::ok;
  std::string why;
  auto at = parse_address(*o.metrics, address_use::listen, why);
  if (!at) {
    print_error(fmt::format("--metrics {} is not an address to listen on: use HOST:PORT or [IPv6]:PORT, e.g. "
                            "127.0.0.1:9727 (port 0 picks a free one)",
                            quote_text(*o.metrics)));
    return exit_code::usage;
  }
  h.metrics_listen = given_address{*at, *o.metrics};
  if (o.metrics_token_file) {
    std::string error;
    h.metrics_token = auth::load_secret(*o.metrics_token_file, error);
    if (!h.metrics_token || h.metrics_token->empty()) {
      print_error(fmt::format("--metrics-token-file: {}", h.metrics_token ? fmt::format("the file {} is empty; "
                              "write a token with `tfbarrier secret --file {}`", *o.metrics_token_file,
                              *o.metrics_token_file) : error));
      return exit_code::usage;
    }
    return exit_code::ok;
  }
  std::string unresolved;
  if (!listens_on_loopback(*at, unresolved)) {
    if (!unresolved.empty()) {
      print_error(cannot_resolve("--metrics", *o.metrics, *at, unresolved));
      return exit_code::unreachable;
    }
    print_error(fmt::format("--metrics {} listens beyond loopback, where anyone could read the metrics: give "
                            "--metrics-token-file FILE (make one with `tfbarrier secret --file FILE`; Prometheus "
                            "sends it with authorization: credentials_file), or listen on 127.0.0.1",
                            *o.metrics));
    return exit_code::usage;
  }
  return exit_code::ok;
}

/// --store and its TLS files (issue #20; docs/store.md).
int store_settings(const serve_options& o, host_options& h) {
  if (!o.store) return exit_code::ok;
  if (o.state_dir) {
    print_error("--state-dir journals a host's own barriers; with --store the barriers are kept in the store: "
                "leave out one of the two");
    return exit_code::usage;
  }
  // https when a CA or a client certificate is given.
  bool tls = !o.store_ca.value_or("").empty() || !o.store_cert.value_or("").empty();
  if (o.store_cert.has_value() != o.store_key.has_value()) {
    print_error("--store-cert and --store-key go together (the client certificate and its key)");
    return exit_code::usage;
  }
  store::store_location at;
  std::string error;
  if (!store::parse_store(*o.store, tls, at, error)) {
    print_error(error);
    return exit_code::usage;
  }
  // Read once, here: a missing file or an unsafe key is told before the host starts (or daemonizes).
  store::client_config files;
  files.ca = o.store_ca.value_or("");
  files.cert = o.store_cert.value_or("");
  files.key = o.store_key.value_or("");
  if (auto e = store::read_tls_files(files)) return fail(*e);
  h.store = std::move(at);
  h.store_ca = files.ca;
  h.store_cert = files.cert;
  h.store_key = files.key;
  h.store_cert_pem = std::move(files.cert_pem);
  h.store_key_pem = std::move(files.key_pem);
  // etcd's own authentication (issue #31 item 9): the password is read once,
  // here, from a file only this user can read; it never goes on a command line.
  if (o.store_user.has_value() != o.store_password_file.has_value()) {
    print_error("--store-user and --store-password-file go together (the etcd user, and the file that holds its "
                "password; TFBARRIER_STORE_USER and TFBARRIER_STORE_PASSWORD_FILE)");
    return exit_code::usage;
  }
  if (o.store_user) {
    if (o.store_user->empty()) {
      print_error("--store-user is empty: give the etcd user whose role may read and write the job's prefix");
      return exit_code::usage;
    }
    if (auto e = store::read_password_file(*o.store_password_file, h.store_password)) return fail(*e);
    h.store_user = *o.store_user;
  }
  h.store_lease = o.store_lease;
  h.store_snapshot_every = o.store_snapshot_every;
  // What this host writes to etcd carries a MAC, or anyone who can write
  // there steers the job (docs/store.md, "Authorization"): a secret, else a
  // key that the first host seals with MUNGE for this user.
  if (!h.secret && !o.insecure) {
    std::string why_no_munge = "--no-munge was given";
    if (!o.no_munge && munge_auth::available(why_no_munge)) {
      h.store_munge = true;
    } else {
      if (why_no_munge.starts_with("MUNGE:")) why_no_munge = "munged does not answer here: " + why_no_munge;
      print_error(fmt::format(
          "with --store, what this host writes to etcd must carry a MAC, or anyone who can write to that etcd "
          "could stop or steer the job; there is no secret file ({}) and no MUNGE ({}). Make a secret that the "
          "job's nodes share with `tfbarrier secret` (it writes {}) or give --secret-file FILE; or run munged; "
          "or give --insecure to accept inputs without a MAC",
          auth::default_secret_path(), why_no_munge, auth::default_secret_path()));
      return exit_code::auth;
    }
  }
  h.node = node_name();
  return exit_code::ok;
}

}  // namespace

namespace {
int serve_with(const serve_options& o);
}

/// A host that a participant started and that cannot start for a reason
/// that trying again would not fix (a usage or authentication error) says
/// so in its log, after its error: the participant stops waiting for it and
/// shows that error (cmd/common.cpp). A host that cannot reach etcd yet, or
/// lost the race for the port, does not: another participant's may start.
int run_serve(const serve_options& o) {
  int rc = serve_with(o);
  if (o.self_started && (rc == exit_code::usage || rc == exit_code::auth))
    tfb::print(stderr, "tfbarrier: {} (exit {})\n", self_start_gave_up, rc);
  return rc;
}

namespace {
int serve_with(const serve_options& o) {
  host_options h;
  if (int rc = listen_address(o, h); rc != exit_code::ok) return rc;
  h.idle_exit = o.idle_exit;
  h.forget_after = o.forget_after;
  h.quiet = o.quiet;
  h.state_dir = o.state_dir;
  h.self_started = o.self_started;
  h.max_connections = o.max_connections;
  h.max_per_address = o.max_per_address;
  h.max_barriers = o.max_barriers;
  h.max_barriers_given = o.max_barriers_given;
  h.forget_after_given = o.forget_after_given;
  h.history = o.history;  // #21: arrival records, and their file (default beside the log)
  if (o.history > 0) {
    std::string file = o.history_file.value_or(default_history_file());
    if (!file.empty() && file != "-") h.history_file = file;
    h.history_file_default = !o.history_file;
  }
  if (int rc = authentication(o, h); rc != exit_code::ok) return rc;
  if (int rc = metrics_settings(o, h); rc != exit_code::ok) return rc;
  if (int rc = store_settings(o, h); rc != exit_code::ok) return rc;
  return o.daemon ? serve_detached(o, h) : serve_here(o, h);
}
}  // namespace

#ifndef TFB_NO_CLI
// ---- The command line: CLI11's definition of `tfbarrier serve` ----
namespace cmd {

namespace {

/// --metrics, --metrics-token-file, --metrics-textfile.
void define_serve_metrics(CLI::App* s, serve_options& serve) {
  s->add_option("--metrics", serve.metrics,
                "Serve Prometheus metrics at http://HOST:PORT/metrics (loopback unless --metrics-token-file)")
      ->envname("TFBARRIER_METRICS")
      ->type_name("HOST:PORT");
  s->add_option("--metrics-token-file", serve.metrics_token_file,
                "Require 'Authorization: Bearer TOKEN' for /metrics, TOKEN from FILE (mode 0600; needed beyond "
                "loopback)")
      ->type_name("FILE");
  s->add_option("--metrics-textfile", serve.metrics_textfile,
                "Write the metrics to FILE every 5s, for node_exporter; removed when the host ends")
      ->type_name("FILE");
}

/// --store and its settings (issue #20; docs/store.md). Each has an
/// environment name: a self-started host gets only what the environment says.
void define_serve_store(CLI::App* s, serve_options& serve, std::string& lease) {
  s->add_option("--store", serve.store,
                "Keep the barriers in etcd, shared by every host of the same store (docs/store.md)")
      ->envname("TFBARRIER_STORE")
      ->type_name("etcd://HOST:PORT[,HOST:PORT...][/PREFIX]");
  s->add_option("--store-ca", serve.store_ca, "Trust the store's TLS certificates signed by the CA in FILE (PEM)")
      ->envname("TFBARRIER_STORE_CA")
      ->type_name("FILE");
  s->add_option("--store-cert", serve.store_cert, "Authenticate to the store with the client certificate in FILE")
      ->envname("TFBARRIER_STORE_CERT")
      ->type_name("FILE");
  s->add_option("--store-key", serve.store_key, "The key of --store-cert, in FILE")
      ->envname("TFBARRIER_STORE_KEY")
      ->type_name("FILE");
  s->add_option("--store-user", serve.store_user,
                "Log in to etcd as this user, whose role may read and write the store's prefix (etcd auth; "
                "docs/store.md)")
      ->envname("TFBARRIER_STORE_USER")
      ->type_name("NAME");
  s->add_option("--store-password-file", serve.store_password_file,
                "The password of --store-user, in FILE (mode 600, read once at start)")
      ->envname("TFBARRIER_STORE_PASSWORD_FILE")
      ->type_name("FILE");
  s->add_option("--store-lease", lease,
                "Hold this host's presence in the store with a lease of DUR (default 10s, at least 2s): a host "
                "gone for that long is lost, and its participants withdrawn; one that cannot renew it for two "
                "thirds of DUR closes its participants (exit 69) and registers again")
      ->envname("TFBARRIER_STORE_LEASE")
      ->check(duration_validator(std::chrono::seconds(2)));
  s->add_option("--store-snapshot-every", serve.store_snapshot_every,
                "Snapshot the store's state after N batches of inputs (default 1000); a late host starts from the "
                "newest snapshot, and the keys it covers are deleted")
      ->envname("TFBARRIER_STORE_SNAPSHOT_EVERY")
      ->type_name("N")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.find_first_not_of("0123456789") == std::string::npos && !v.empty() && v.size() < 8 && std::stoul(v) > 0
                       ? std::string()
                       : "a whole number of batches from 1 to 9999999, not '" + v + "'";
          },
          "N"));
}

}  // namespace

command_parser define_serve(CLI::App& app) {
  struct typed {
    serve_options o;
    std::string idle_exit, forget_after, store_lease;
  };
  auto v = std::make_shared<typed>();
  serve_options& serve = v->o;
  CLI::App* s = app.add_subcommand("serve", "Run the rendezvous host");
  s->add_option("--listen", serve.listen,
                "Listen on HOST:PORT, :PORT (all interfaces) or [IPv6]:PORT; port 0 picks a free port "
                "(default: the resolved host address, else 127.0.0.1 and your own port, 30000 + uid % 2768)")
      ->envname("TFBARRIER_LISTEN");
  s->add_flag("--daemon", serve.daemon, "Detach and print shell assignments of TFBARRIER_ADDR and TFBARRIER_PID");
  s->add_option("--log", serve.log_file,
                "Append the log to FILE, made mode 0600; a symlink or another user's file is refused (default: "
                "stderr; with --daemon ~/.tfbarrier/serve-NODE[-JOB].log, see FILES in the man page)");
  s->add_option("--idle-exit", v->idle_exit, "Exit after no barrier has been active for DUR")->check(duration_validator());
  auto* forget_after = s->add_option("--forget-after", v->forget_after,
                                     "Forget idle barriers and aborts after DUR (default 1h, at least 1s; with --store, "
                                     "the store's: set by its first host)")
                           ->check(duration_validator(std::chrono::seconds(1)));
  s->add_flag("-q,--quiet", serve.quiet, "Log only warnings, not every arrival and release");
  s->add_option("--state-dir", serve.state_dir,
                "Journal verdicts and releases in DIR (flushed before they are acknowledged) and restore them at start")
      ->envname("TFBARRIER_STATE_DIR");
  s->add_option("--max-connections", serve.max_connections, "Hold at most N connections; when full, close the oldest that has not authenticated (default: the descriptor limit)")
      ->transform(connection_limit_validator());
  s->add_option("--max-per-address", serve.max_per_address, "Refuse connections past N from one address (default 16384)")
      ->transform(connection_limit_validator());
  auto* max_barriers = s->add_option("--max-barriers", serve.max_barriers,
                                     "Hold at most N barriers; past it, forget the longest idle (default 65536; with "
                                     "--store, the store's: set by its first host, and past it a new one is refused)")
                           ->transform(connection_limit_validator());
  s->add_flag("--self-started", serve.self_started, "(internal) started by a participant")->group("");
  s->add_option("--history", serve.history,
                "Keep N arrival records for tfbarrier report, oldest rounds dropped first (default 1000000; 0: none)")
      ->type_name("N");
  s->add_option("--history-file", serve.history_file,
                "Write the arrival records to FILE (default: beside the log, serve-NODE[-JOB].history; -: none)")
      ->type_name("FILE");
  s->add_option("--secret-file", serve.secret_file,
                "Require clients to know the secret in FILE (default ~/.tfbarrier/secret; made on first use "
                "when listening beyond loopback)")
      ->envname("TFBARRIER_SECRET_FILE");
  s->add_flag("--no-munge", serve.no_munge, "Beyond loopback (and for --store's key), use the secret file even where munged runs");
  s->add_flag("--insecure", serve.insecure, "No authentication, beyond loopback too: anyone who can connect, any "
                                            "local user included, can arrive, decide and abort (without it, a host with "
                                            "no secret serves its own uid only); with --store, write inputs without a MAC");
  define_serve_metrics(s, serve);
  define_serve_store(s, serve, v->store_lease);
  set_footer(s, "Examples:\n"
      "  tfbarrier serve --listen 127.0.0.1:0          # prints TFBARRIER_ADDR=127.0.0.1:PORT\n"
      "  eval \"$(tfbarrier serve --daemon --idle-exit 1h)\"; ...; kill $TFBARRIER_PID\n"
      "  tfbarrier serve --metrics 127.0.0.1:9727      # Prometheus: GET http://127.0.0.1:9727/metrics\n"
      "  tfbarrier serve --metrics-textfile /var/lib/node_exporter/textfile/tfbarrier.prom\n");
  return [v, forget_after, max_barriers] {
    v->o.forget_after_given = forget_after->count() > 0;
    v->o.max_barriers_given = max_barriers->count() > 0;
    set_duration(v->idle_exit, v->o.idle_exit);
    set_duration(v->forget_after, v->o.forget_after);
    set_duration(v->store_lease, v->o.store_lease);
    return command_options(v->o);
  };
}

}  // namespace cmd
#endif

}  // namespace tfb
