// The command line: CLI11 lives in this file only (it is heavy to compile).
// Parse into the options structs of commands.h, then dispatch.
#include "cli.h"

#include <CLI/CLI.hpp>
#include <array>
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "exit_codes.h"
#include "protocol.h"
#include "settings.h"
#include "text.h"
#include "version.h"

namespace tfb {
namespace {

std::string exit_code_help() {
  std::string s = "\nExit codes:\n";
  for (const auto& row : exit_code_table) s += fmt::format("  {:>3}  {}\n", row.code, row.meaning);
  return s;
}

// A footer of examples and the exit codes, built only when help is printed:
// formatting the table cost a `wait` 29,000 instructions (4.5% of its run)
// each time. CLI11 prints the callback's text and a newline after it.
void set_footer(CLI::App* app, const char* examples) {
  app->footer([examples] {
    std::string s = examples + exit_code_help();
    s.pop_back();
    return s;
  });
}

// CLI11 ends each option group with a blank line and starts the footer with
// one more, a hidden option's empty group adds a third, and the footer ends
// with one: one blank line between sections, none at the end.
class help_formatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    std::string s = CLI::Formatter::make_help(app, std::move(name), mode);
    for (auto at = s.find("\n\n\n"); at != std::string::npos; at = s.find("\n\n\n", at)) s.erase(at, 1);
    while (s.size() >= 2 && s.ends_with("\n\n")) s.pop_back();  // and no blank line at the end
    return s;
  }
};

// Durations are parsed after CLI11 so that the error names the option.
struct duration_arg {
  std::string text;
  const char* option;
  std::optional<duration>* target;
};

CLI::Validator name_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (proto::valid_name(s)) return {};
        return fmt::format("{} is not a barrier name: use 1-128 of A-Z a-z 0-9 . _ : -", quote_text(s));
      },
      "NAME");
}

CLI::Validator verdict_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s == "continue" || s == "stop") return {};
        return fmt::format("{} is not a verdict: use continue (exit 0 for all) or stop (exit 1 for all)",
                           quote_text(s));
      },
      "continue|stop");
}

CLI::Validator scope_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (proto::valid_name(s)) return {};
        return fmt::format("{} is not a scope: use 1-128 of A-Z a-z 0-9 . _ : -", quote_text(s));
      },
      "SCOPE");
}

// --message, --reason: what the wire's trailing text allows (proto::text_problem).
CLI::Validator text_validator(const char* what) {
  return CLI::Validator(
      [what](std::string& m) -> std::string {
        std::string why = proto::text_problem(m);
        return why.empty() ? why : fmt::format("the {} {}", what, why);
      },
      "TEXT");
}

// A duration of at least `min`; with zero_is_off, 0 is accepted too (it means none).
CLI::Validator duration_validator(duration min = duration::zero(), bool zero_is_off = false) {
  return CLI::Validator(
      [min, zero_is_off](std::string& s) -> std::string {
        bool too_long = false;
        auto d = parse_duration(s, &too_long);
        if (!d) {
          if (too_long)
            return fmt::format("{} is longer than 100 days, the longest duration", quote_text(s));
          return fmt::format("{} is not a duration: use a number with a unit, like 500ms, 90s, 10m, 1h, 1d "
                             "(a bare number is seconds)",
                             quote_text(s));
        }
        if (zero_is_off && d->count() == 0) return {};
        if (*d < min)
          return fmt::format("{} is too short: use at least {}{}", quote_text(s), format_duration(min),
                             zero_is_off ? ", or 0 for none" : "");
        return {};
      },
      "DUR");
}

// The edit distance (insertions, deletions, substitutions, and swaps of two
// neighbours) between a and b, for "did you mean" hints.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    before.swap(prev);
    prev.swap(cur);
  }
  return prev[b.size()];
}

// The known name nearest to word, if it is near enough to be a typo of it.
std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& names) {
  std::optional<std::string> best;
  for (const auto& name : names)  // cut short (`--time` for `--timeout`): the one name it begins
    if (word.size() >= 4 && name.starts_with(word) && name != word) {
      if (best) return std::nullopt;  // ambiguous
      best = name;
    }
  if (best) return best;
  // Letters, not dashes: a typo of one letter in three, of two in six or more.
  auto letters = word.size() - std::min(word.find_first_not_of('-'), word.size());
  std::size_t best_d = (letters <= 2 ? 0 : letters <= 5 ? 1 : 2) + 1;
  for (const auto& name : names)
    if (auto d = edit_distance(word, name); d < best_d) best = name, best_d = d;
  return best;
}

// " (did you mean --name?)" for the first unknown option in args that is
// near one of sub's options, or "".
std::string option_hint(const CLI::App* sub, const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (const CLI::Option* o : sub->get_options())
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
  for (std::string_view a : args) {
    if (!a.starts_with("--") || a.size() < 3) continue;
    a = a.substr(0, a.find('='));
    if (auto near = nearest(a, names)) return fmt::format(" (did you mean {}?)", *near);
  }
  return {};
}

// args (CLI11's leftovers) in the order they stand in argv: CLI11 reverses
// some of them (those after `--`).
std::vector<std::string> in_given_order(std::vector<std::string> args, int argc, char** argv) {
  std::vector<bool> used(static_cast<std::size_t>(argc));
  std::vector<std::pair<int, std::string>> placed;
  for (auto& a : args) {
    int at = argc;  // not found as it stands (CLI11 split `--x=v`): last
    for (int i = argc - 1; i >= 1; --i)
      if (!used[static_cast<std::size_t>(i)] && a == argv[i]) at = i;
    if (at < argc) used[static_cast<std::size_t>(at)] = true;
    placed.emplace_back(at, std::move(a));
  }
  std::stable_sort(placed.begin(), placed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& p : placed) out.push_back(std::move(p.second));
  return out;
}

// One argument as a shell would need it typed again: bare when it is plain, else in '...'.
std::string quote_arg(std::string_view a) {
  bool plain = !a.empty();
  for (char c : a)
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("-_.:/=@%+,[]").find(c) != std::string_view::npos);
  if (plain) return std::string(a);
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// --max-connections, --max-per-address, --max-barriers: decimal, 1 to a billion. (CLI11 took -1
// as the largest size_t, and said of 0 "not in range 0.000000 to 1797...".)
CLI::Validator connection_limit_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        constexpr std::uint64_t max = 1'000'000'000;
        std::uint64_t v = 0;
        bool ok = !s.empty() && s.size() <= 10;
        for (char c : s) ok = ok && c >= '0' && c <= '9';
        if (ok)
          for (char c : s) v = v * 10 + static_cast<std::uint64_t>(c - '0');
        if (ok && v >= 1 && v <= max) {
          s = std::to_string(v);  // no leading zeros left for CLI11 to read as octal
          return {};
        }
        return fmt::format("{} is not a number from 1 to {}", quote_text(s), max);
      },
      "N");
}

// --n and --rank, checked by settings.cpp's rules, in the words that
// TFBARRIER_N and TFBARRIER_RANK get. (CLI::Range said "Value abc not in range
// 0 to 999999" of a word that is not a number at all.)
CLI::Validator count_validator(count_kind kind) {
  return CLI::Validator([kind](std::string& s) { return check_count_flag(kind, s); }, count_range_text(kind));
}
// A transform, not a check: it rewrites "010" as "10" before CLI11 converts it.
void add_counts(CLI::App* sub, std::optional<std::uint32_t>& n, std::optional<std::uint32_t>& rank,
                const std::string& n_help, const std::string& rank_help) {
  sub->add_option("--n", n, n_help)->transform(count_validator(count_kind::n));
  sub->add_option("--rank", rank, rank_help)->transform(count_validator(count_kind::rank));
}

// Durations as typed, converted once parsing succeeded.
struct common_text {
  std::string connect_timeout, keepalive;
};

void add_common(CLI::App* sub, common_options& c, common_text& t) {
  sub->add_option("--addr", c.addr, "Host address HOST:PORT (env TFBARRIER_ADDR; default: from the launcher, else 127.0.0.1:7727)");
  sub->add_option("--scope", c.scope, "Barrier namespace (env TFBARRIER_SCOPE; default: the Slurm job and attempt, else 'default')")
      ->check(scope_validator());
  sub->add_option("--connect-timeout", t.connect_timeout,
                  std::string("Give up connecting after DUR (default ") +
                      (sub->get_name() == "status" ? "10s" : sub->get_name() == "report" ? "2s" : "60s") + ", at least 1ms)")
      ->envname("TFBARRIER_CONNECT_TIMEOUT")
      ->check(duration_validator(std::chrono::milliseconds(1)));
  sub->add_flag("-q,--quiet", c.quiet, "No progress or notes on stderr; errors still go there");
  sub->add_option("--secret-file", c.secret_file,
                  "Authenticate with the shared secret in FILE (default ~/.tfbarrier/secret if it exists)")
      ->envname("TFBARRIER_SECRET_FILE");
  sub->add_option("--keepalive", t.keepalive,
                  "Ping the host every DUR while waiting; 3 missed = host lost (default 5s, at least 100ms)")
      ->envname("TFBARRIER_KEEPALIVE")
      ->check(duration_validator(std::chrono::milliseconds(100)));
}

void set_duration(const std::string& text, duration& target) {
  if (!text.empty()) target = *parse_duration(text);
}
void set_duration(const std::string& text, std::optional<duration>& target) {
  if (!text.empty()) target = *parse_duration(text);
}
void set_common(const common_text& t, common_options& c) {
  set_duration(t.connect_timeout, c.connect_timeout);
  set_duration(t.keepalive, c.keepalive);
}

// What the command line gave, before it is handed to a command: the options
// structs, the durations as typed (converted once parsing succeeded), and the
// CLI11 command that was built for each (null when not built).
struct parsed_values {
  serve_options serve;
  std::string idle_exit, forget_after;
  CLI::App* s = nullptr;
  wait_cmd_options wait;
  std::string wait_timeout, wait_progress;
  common_text wait_text;
  CLI::App* w = nullptr;
  decide_options decide;
  std::string decide_timeout;
  common_text decide_text;
  CLI::App* d = nullptr;
  abort_options abort;
  common_text abort_text;
  CLI::App* a = nullptr;
  status_options status;
  common_text status_text;
  std::string status_watch;             // --watch [INTERVAL] as typed
  CLI::Option* status_watch_opt = nullptr;
  CLI::App* st = nullptr;
  config_options config;
  common_text config_text;
  CLI::App* cf = nullptr;
  secret_options secret;
  CLI::App* sec = nullptr;
  report_options report;  // #21
  common_text report_text;
  CLI::App* rp = nullptr;
};

constexpr std::array<std::string_view, 8> command_names{"serve",  "wait",   "decide", "abort",
                                                         "status", "report", "config", "secret"};

/// The command word (and options before it) checked before CLI11 parses, for
/// errors that name what is wrong. Sets selected to the command to build ("":
/// all of them, for the top-level help). Returns an exit code, or -1 to go on.
int check_command_word(int argc, char** argv, std::string_view& selected) {
  const char* first_word = nullptr;
  const char* first_option = nullptr;
  for (int i = 1; i < argc && !first_word; ++i) {
    if (argv[i][0] != '-') first_word = argv[i];
    else if (!first_option) first_option = argv[i];
  }
  std::string_view opt = first_option ? first_option : "";
  bool help = opt == "-h" || opt == "--help" || opt == "--help-all" || opt == "--version";
  std::string commands;
  bool known = false;
  for (auto name : command_names) {
    commands += fmt::format("{}{}", commands.empty() ? "" : ", ", name);
    if (first_word && name == first_word) known = true;
  }
  // `tfbarrier --addr H:P status`: options go after the command. Say so, with
  // the command line in that order, rather than "unknown command 'H:P'".
  if (first_option && !help) {
    int cmd = 0;
    for (int i = 1; i < argc && !cmd; ++i)
      for (auto name : command_names)
        if (name == argv[i]) cmd = i;
    if (cmd > 1 && argv[1][0] == '-') {
      std::string fixed = fmt::format("tfbarrier {}", argv[cmd]);
      for (int i = 1; i < argc; ++i)
        if (i != cmd) fixed += fmt::format(" {}", quote_arg(argv[i]));
      print_error(fmt::format("options go after the command: {} comes before {}; run: {}", quote_text(argv[1]),
                              argv[cmd], fixed));
      tfb::print(stderr, "Run 'tfbarrier {} --help' for usage.\n", argv[cmd]);
      return exit_code::usage;
    }
  }
  // Name what is unknown, rather than CLI11's "A subcommand is required".
  if (first_word && !known && !help) {
    std::vector<std::string> names(command_names.begin(), command_names.end());
    auto near = nearest(first_word, names);
    print_error(fmt::format("unknown command '{}'{}; the commands are {}", first_word,
                            near ? fmt::format(" (did you mean {}?)", *near) : "", commands));
    tfb::print(stderr, "Run 'tfbarrier --help' for usage.\n");
    return exit_code::usage;
  }
  if (argc <= 1) {
    print_error(fmt::format("a command is required; the commands are {}", commands));
    tfb::print(stderr, "Run 'tfbarrier --help' for usage.\n");
    return exit_code::usage;
  }
  if (!first_word && first_option && !help) {
    print_error(fmt::format("unknown option '{}' (or a command is missing); the commands are {}", first_option,
                            commands));
    tfb::print(stderr, "Run 'tfbarrier --help' for usage.\n");
    return exit_code::usage;
  }
  selected = known && !help ? std::string_view(first_word) : std::string_view();
  return -1;
}

// ---- Monitoring options (issue 21: serve --metrics*, status --watch) ----
// One block, so that moving the definitions into src/cmd/*.cpp moves it whole.
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
                "Write the metrics to FILE every 5s, atomically (for node_exporter's textfile collector)")
      ->type_name("FILE");
}
void define_status_watch(CLI::App* st, parsed_values& v) {
  v.status_watch_opt = st->add_option("--watch", v.status_watch,
                                      "Redraw a live view every INTERVAL (default 1s, at least 100ms) until Ctrl-C")
                           ->expected(0, 1)
                           ->check(duration_validator(std::chrono::milliseconds(100)))
                           ->type_name("[INTERVAL]");
}
void set_status_watch(parsed_values& v) {
  if (!v.status_watch_opt || v.status_watch_opt->count() == 0) return;
  v.status.watch = v.status_watch.empty() ? duration(std::chrono::seconds(1)) : *parse_duration(v.status_watch);
}
// ---- end of the monitoring options ----

void define_serve(CLI::App& app, parsed_values& v) {
  serve_options& serve = v.serve;
  std::string& idle_exit = v.idle_exit;
  std::string& forget_after = v.forget_after;
  CLI::App*& s = v.s;
  s = app.add_subcommand("serve", "Run the rendezvous host");
  s->add_option("--listen", serve.listen,
                "Listen on HOST:PORT, :PORT (all interfaces) or [IPv6]:PORT; port 0 picks a free port "
                "(default: the resolved host address, else 127.0.0.1:7727)")
      ->envname("TFBARRIER_LISTEN");
  s->add_flag("--daemon", serve.daemon, "Detach and print shell assignments of TFBARRIER_ADDR and TFBARRIER_PID");
  s->add_option("--log", serve.log_file, "Append the log to FILE (default: stderr; with --daemon $TMPDIR/tfbarrier-serve-UID.log)");
  s->add_option("--idle-exit", idle_exit, "Exit after no barrier has been active for DUR")->check(duration_validator());
  s->add_option("--forget-after", forget_after, "Forget idle barriers and aborts after DUR (default 1h, at least 1s)")
      ->check(duration_validator(std::chrono::seconds(1)));
  s->add_flag("-q,--quiet", serve.quiet, "Log only warnings, not every arrival and release");
  s->add_option("--state-dir", serve.state_dir,
                "Journal verdicts and releases in DIR (flushed before they are acknowledged) and restore them at start")
      ->envname("TFBARRIER_STATE_DIR");
  s->add_option("--max-connections", serve.max_connections, "Refuse connections past N (default: the descriptor limit)")
      ->transform(connection_limit_validator());
  s->add_option("--max-per-address", serve.max_per_address, "Refuse connections past N from one address (default 16384)")
      ->transform(connection_limit_validator());
  s->add_option("--max-barriers", serve.max_barriers,
                "Hold at most N barriers; past it, forget the longest idle (default 65536)")
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
  s->add_flag("--no-munge", serve.no_munge, "Beyond loopback, use the secret file even where munged runs");
  s->add_flag("--insecure", serve.insecure, "Listen beyond loopback without authentication: anyone who can connect "
                                            "can arrive, decide and abort");
  define_serve_metrics(s, serve);
  set_footer(s, "Examples:\n"
      "  tfbarrier serve --listen 127.0.0.1:0          # prints TFBARRIER_ADDR=127.0.0.1:PORT\n"
      "  eval \"$(tfbarrier serve --daemon --idle-exit 1h)\"; ...; kill $TFBARRIER_PID\n"
      "  tfbarrier serve --metrics 127.0.0.1:9727      # Prometheus: GET http://127.0.0.1:9727/metrics\n"
      "  tfbarrier serve --metrics-textfile /var/lib/node_exporter/textfile/tfbarrier.prom\n");
}

void define_wait(CLI::App& app, parsed_values& v) {
  wait_cmd_options& wait = v.wait;
  std::string& wait_timeout = v.wait_timeout;
  std::string& wait_progress = v.wait_progress;
  common_text& wait_text = v.wait_text;
  CLI::App*& w = v.w;
  w = app.add_subcommand("wait", "Arrive at a barrier and block until it releases");
  w->add_option("--name", wait.name, "Barrier name (1-128 of A-Z a-z 0-9 . _ : -)")
      ->required()
      ->envname("TFBARRIER_NAME")
      ->check(name_validator());
  add_counts(w, wait.n, wait.rank, "Participants in the round (default: from the launcher)",
             "This participant's rank, 0 to n-1 (default: from the launcher)");
  w->add_flag("--chief", wait.chief, "Arrive as the chief: return when all are present; the others wait for `decide`");
  w->add_option("--timeout", wait_timeout, "Withdraw and exit 124 when not released DUR after arriving (default: no timeout; "
                "connecting is bounded by --connect-timeout)")
      ->envname("TFBARRIER_TIMEOUT")
      ->check(duration_validator());
  w->add_option("--progress", wait_progress,
                "Report progress every DUR, at least 100ms; 0 for none (default 1s on a terminal, else 30s)")
      ->check(duration_validator(std::chrono::milliseconds(100), true));
  add_common(w, wait.common, wait_text);
  set_footer(w, "Examples:\n"
      "  tfbarrier wait --name epoch3 --n 6 --rank 2\n"
      "  msg=$(tfbarrier wait --name epoch3 --timeout 10m); rc=$?   # rc 0 go on, 1 stop\n"
      "  tfbarrier wait --name epoch3 --chief && ./evaluate && tfbarrier decide continue\n");
}

void define_decide(CLI::App& app, parsed_values& v) {
  decide_options& decide = v.decide;
  std::string& decide_timeout = v.decide_timeout;
  common_text& decide_text = v.decide_text;
  CLI::App*& d = v.d;
  d = app.add_subcommand("decide", "Give the chief's verdict for the current round");
  d->add_option("verdict", decide.verdict, "continue or stop")->required()->check(verdict_validator());
  d->add_option("--name", decide.name, "Barrier name (default: the one round that awaits a verdict)")
      ->envname("TFBARRIER_NAME")
      ->check(name_validator());
  d->add_option("-m,--message", decide.message, "Text every participant prints on stdout")
      ->check(text_validator("message"));
  d->add_flag("--no-wait", decide.no_wait, "Return once the verdict is recorded, not when it is delivered");
  d->add_option("--timeout", decide_timeout,
                "Exit 124 when the round has not released DUR after the verdict was recorded; the verdict "
                "stands (default: no timeout)")
      ->envname("TFBARRIER_TIMEOUT")
      ->check(duration_validator());
  add_counts(d, decide.n, decide.rank, "Participants in the round, if the chief arrives with this verdict",
             "The chief's rank, if it arrives with this verdict");
  add_common(d, decide.common, decide_text);
  set_footer(d, "Examples:\n"
      "  tfbarrier decide stop --message 'validation loss went up'\n"
      "  tfbarrier decide continue --name epoch3 --n 6 --rank 0   # one step: arrive with the verdict\n");
}

void define_abort(CLI::App& app, parsed_values& v) {
  abort_options& abort = v.abort;
  common_text& abort_text = v.abort_text;
  CLI::App*& a = v.a;
  a = app.add_subcommand("abort", "Abort the current round: everyone in it exits 3");
  a->add_option("--name", abort.name, "Barrier name")->required()->envname("TFBARRIER_NAME")->check(name_validator());
  a->add_option("--reason", abort.reason, "Text every participant prints on stderr")
      ->check(text_validator("reason"));
  add_common(a, abort.common, abort_text);
  set_footer(a, "Example:\n  tfbarrier abort --name epoch3 --reason 'rank 4 ran out of memory'\n");
}

void define_status(CLI::App& app, parsed_values& v) {
  status_options& status = v.status;
  common_text& status_text = v.status_text;
  CLI::App*& st = v.st;
  st = app.add_subcommand("status", "Show the barriers the host holds");
  st->add_option("--name", status.name, "Only this barrier, with its members")->check(name_validator());
  st->add_flag("--json", status.json, "JSON for scripts (see tfbarrier(1))");
  st->add_flag("--all-scopes", status.all_scopes, "Barriers of every scope, not just this job's");
  define_status_watch(st, v);
  add_common(st, status.common, status_text);
  set_footer(st, "Examples:\n  tfbarrier status\n  tfbarrier status --name epoch3 --json | jq .barriers[0].missing\n"
                 "  tfbarrier status --watch 500ms                # a live view; Ctrl-C ends it\n");
}

// ---- tfbarrier report (issue #21): its whole CLI11 definition ----
void define_report(CLI::App& app, parsed_values& v) {
  report_options& r = v.report;
  v.rp = app.add_subcommand("report", "Who is late: arrivals per round, stragglers by rank and node");
  CLI::App* rp = v.rp;
  rp->add_option("--name", r.name, "Only barriers whose name matches GLOB (* and ?)")->type_name("GLOB");
  rp->add_option("--last", r.last, "Only the last K rounds")->check(CLI::PositiveNumber)->type_name("K");
  rp->add_option("--file", r.file, "Read HISTORY (serve --history-file), not the host")->type_name("HISTORY");
  auto* json = rp->add_flag("--json", r.json, "JSON for scripts: every round's arrivals and the stragglers");
  auto* csv = rp->add_flag("--csv", r.csv, "CSV, one row per arrival, with a header");
  auto* svg = rp->add_option("--svg", r.svg, "Write the heatmap as an SVG picture to FILE")->type_name("FILE");
  json->excludes(csv)->excludes(svg);
  csv->excludes(svg);
  rp->add_flag("--all-scopes", r.all_scopes, "Rounds of every scope, not just this job's");
  add_common(rp, r.common, v.report_text);
  set_footer(rp, "Examples:\n"
      "  tfbarrier report                              # tables (and a heatmap on a terminal)\n"
      "  tfbarrier report --name 'epoch*' --last 20\n"
      "  tfbarrier report --svg late.svg\n"
      "  tfbarrier report --file ~/.tfbarrier/serve-node1-123.history --csv > arrivals.csv\n");
}
// ---- end of report

void define_config(CLI::App& app, parsed_values& v) {
  config_options& config = v.config;
  common_text& config_text = v.config_text;
  CLI::App*& cf = v.cf;
  cf = app.add_subcommand("config", "Print every resolved setting and where it came from");
  add_counts(cf, config.n, config.rank, "As for wait", "As for wait");
  cf->add_flag("--json", config.json, "JSON for scripts");
  add_common(cf, config.common, config_text);
  set_footer(cf, "Example:\n  srun -n 2 tfbarrier config\n");
}

void define_secret(CLI::App& app, parsed_values& v) {
  secret_options& secret = v.secret;
  CLI::App*& sec = v.sec;
  sec = app.add_subcommand("secret", "Write a fresh shared secret for authentication");
  sec->add_option("--file", secret.file, "Where (default ~/.tfbarrier/secret, or TFBARRIER_SECRET_FILE)");
  sec->add_flag("--force", secret.force, "Replace an existing secret (every node then needs the new one)");
  set_footer(sec, "Example:\n  tfbarrier secret && tfbarrier serve --listen :7727\n");
}

void define_commands(CLI::App& app, std::string_view selected, parsed_values& v) {
  // Build only the command being run: CLI11 spends most of a short command's
  // start-up building options, and a `wait` needs only its own. With no command
  // (or --help before it), build them all for the top-level help.
  auto want = [&](std::string_view name) { return selected.empty() || selected == name; };
  if (want("serve")) define_serve(app, v);
  if (want("wait")) define_wait(app, v);
  if (want("decide")) define_decide(app, v);
  if (want("abort")) define_abort(app, v);
  if (want("status")) define_status(app, v);
  if (want("report")) define_report(app, v);
  if (want("config")) define_config(app, v);
  if (want("secret")) define_secret(app, v);
}

void label_options(CLI::App& app, int argc, char** argv) {
  // --help shows what each option takes (DUR, FILE, HOST:PORT), not CLI11's
  // "TEXT:DUR" or "UINT:in [1 - 1000000]". Only when help is asked for.
  bool any_help = false;
  for (int i = 1; i < argc; ++i)
    any_help = any_help || std::string_view(argv[i]) == "-h" || std::string_view(argv[i]) == "--help" ||
               std::string_view(argv[i]) == "--help-all";
  if (any_help) {
    auto label = [](const CLI::Option* o) -> std::string {
      std::string n = o->get_name(false, true);
      if (n == "--addr" || n == "--listen") return "HOST:PORT";
      if (n == "--secret-file" || n == "--log" || n == "--file") return "FILE";
      if (n == "--state-dir") return "DIR";
      if (n == "--n" || n == "--max-connections" || n == "--max-per-address" || n == "--max-barriers") return "N";
      if (n == "--rank") return "RANK";
      if (n == "verdict") return "continue|stop";
      std::string t = o->get_type_name();  // "TEXT:DUR" -> "DUR"
      auto colon = t.rfind(':');
      return colon == std::string::npos ? t : t.substr(colon + 1);
    };
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      for (CLI::Option* o : sub->get_options()) {
        if (o->get_type_size() == 0) continue;
        std::string text = label(o);
        if (o->get_required()) text += " REQUIRED";
        if (!o->get_envname().empty()) text += fmt::format(" (env {})", o->get_envname());
        o->option_text(text);
      }
  }

}

/// Prints a parse error in our words and returns the usage exit code.
int report_parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  CLI::App* sub = nullptr;  // the command that was being parsed, if any
  for (auto* parsed : app.get_subcommands()) sub = parsed;
  std::string which = sub ? sub->get_name() : "";
  // CLI11 writes sentences ("The following argument was not expected: x"); ours start lower-case.
  std::string text = e.what();
  // CLI11 checks required options before unknown arguments, so a typo such
  // as `wait --nme x` would be reported as the missing --name: name the typo.
  // And list unexpected arguments in the order given (CLI11 reverses them).
  // A lone `--` left over (`decide -- $EMPTY`) is not a typo: keep CLI11's text then.
  if (sub && (dynamic_cast<const CLI::RequiredError*>(&e) || dynamic_cast<const CLI::ExtrasError*>(&e))) {
    // app's own as well: CLI11 hands what follows `--` to the top level.
    auto extra = in_given_order(app.remaining(true), argc, argv);
    std::erase(extra, "--");
    if (!extra.empty())
      text = fmt::format("the following argument{} not expected: {}{}", extra.size() > 1 ? "s were" : " was",
                         fmt::join(extra, " "), option_hint(sub, extra));
  }
  // A typo that made a bad value look like the verdict (`decide --nme x stop`
  // takes x as the verdict): name the unknown option, not the value.
  if (sub && dynamic_cast<const CLI::ValidationError*>(&e)) {
    auto extra = sub->remaining();
    std::erase_if(extra, [](const std::string& arg) { return arg.size() < 2 || arg[0] != '-' || arg == "--"; });
    if (!extra.empty())
      text = fmt::format("unknown option{} {}{}", extra.size() > 1 ? "s" : "", fmt::join(extra, " "),
                         option_hint(sub, extra));
  }
  if (text.size() > 1 && text[0] >= 'A' && text[0] <= 'Z' && text[1] >= 'a' && text[1] <= 'z')
    text[0] = static_cast<char>(text[0] - 'A' + 'a');
  // "--timeout: 1 required TEXT:DUR missing": say it plainly.
  if (auto at = text.find(": 1 required "); at != std::string::npos && text.ends_with(" missing"))
    text = text.substr(0, at) + " needs a value";
  // A bad value that came from the environment: name the variable, which is
  // what the user must fix ("TFBARRIER_KEEPALIVE (for --keepalive): ...").
  if (sub)
    for (const CLI::Option* o : sub->get_options()) {
      std::string name = o->get_name(false, true), env = o->get_envname();
      if (env.empty() || !text.starts_with(name + ": ") || !std::getenv(env.c_str())) continue;
      bool typed = false;
      for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        typed = typed || arg == name || arg.starts_with(name + "=");
      }
      if (!typed) text = fmt::format("{} (for {}): {}", env, name, text.substr(name.size() + 2));
    }
  print_error(text);
  tfb::print(stderr, "Run 'tfbarrier{}{} --help' for usage.\n", which.empty() ? "" : " ", which);
  return exit_code::usage;
}

/// Converts what is typed (durations) and runs the command that was parsed.
int dispatch(parsed_values& v) {
  if (v.s && v.s->parsed()) {
    set_duration(v.idle_exit, v.serve.idle_exit);
    set_duration(v.forget_after, v.serve.forget_after);
    return run_serve(v.serve);
  }
  if (v.w && v.w->parsed()) {
    set_duration(v.wait_timeout, v.wait.timeout);
    set_duration(v.wait_progress, v.wait.progress);
    set_common(v.wait_text, v.wait.common);
    return run_wait(v.wait);
  }
  if (v.d && v.d->parsed()) {
    set_duration(v.decide_timeout, v.decide.timeout);
    set_common(v.decide_text, v.decide.common);
    return run_decide(v.decide);
  }
  if (v.a && v.a->parsed()) {
    set_common(v.abort_text, v.abort.common);
    return run_abort(v.abort);
  }
  if (v.st && v.st->parsed()) {
    set_common(v.status_text, v.status.common);
    set_status_watch(v);
    return run_status(v.status);
  }
  if (v.rp && v.rp->parsed()) {
    set_common(v.report_text, v.report.common);
    return run_report(v.report);
  }
  if (v.sec && v.sec->parsed()) return run_secret(v.secret);
  if (v.cf && v.cf->parsed()) {
    set_common(v.config_text, v.config.common);
    return run_config(v.config);
  }
  return exit_code::usage;
}

}  // namespace

int run_cli(int argc, char** argv) {
  // `tfbarrier help [COMMAND]`, as git and cargo have it: the same as
  // `tfbarrier [COMMAND] --help`.
  if (argc > 3 && std::string_view(argv[1]) == "help") {
    std::string words;
    for (int i = 2; i < argc; ++i) words += fmt::format("{}{}", i > 2 ? " " : "", argv[i]);
    print_error(fmt::format("help takes one command at most, not '{}'", words));
    tfb::print(stderr, "Run 'tfbarrier help [COMMAND]'.\n");
    return exit_code::usage;
  }
  if (argc >= 2 && argc <= 3 && std::string_view(argv[1]) == "help") {
    static std::string help_flag = "--help";
    static std::vector<char*> args;
    args = {argv[0]};
    if (argc == 3) args.push_back(argv[2]);
    args.push_back(help_flag.data());
    args.push_back(nullptr);
    return run_cli(static_cast<int>(args.size()) - 1, args.data());
  }
  // Never destroyed: the process exits soon after the command returns, and
  // tearing CLI11's options down cost a `wait` 40,000 instructions (6%). A
  // static keeps it reachable, so leak checkers do not report it.
  static CLI::App* command_line = nullptr;
  CLI::App& app = *(command_line = new CLI::App{"tfbarrier: a named, reusable barrier for cluster job scripts.\n"
               "After each epoch every worker waits at a barrier; the chief (rank 0) decides\n"
               "whether the job goes on (exit 0) or stops (exit 1).",
               "tfbarrier"});
  app.set_version_flag("--version", fmt::format("tfbarrier {} (protocol {})", tfb::version, protocol_version));
  app.require_subcommand(1);
  app.formatter(std::make_shared<help_formatter>());  // before the commands: they take it from here
  set_footer(&app, "Examples:\n"
      "  eval \"$(tfbarrier serve --daemon)\"           # start a host, export TFBARRIER_ADDR\n"
      "  tfbarrier wait --name epoch3 --n 6 --rank 2   # a worker: block until all 6 arrive\n"
      "  tfbarrier wait --name epoch3 --n 6 --chief    # the chief: return when all are here\n"
      "  tfbarrier decide stop --message 'converged'   # the chief's verdict: everyone exits 1\n"
      "  tfbarrier status                              # what the host holds\n"
      "Run 'tfbarrier COMMAND --help' (or 'tfbarrier help COMMAND') for one command. See tfbarrier(1).\n");

  std::string_view selected;
  if (int rc = check_command_word(argc, argv, selected); rc >= 0) return rc;
  parsed_values v;
  define_commands(app, selected, v);
  label_options(app, argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report_parse_error(app, e, argc, argv);
  }
  return dispatch(v);
}

}  // namespace tfb
