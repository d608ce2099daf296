// tfbarrier report: who is late (issue #21). Reads the rounds from a running
// host (HISTORY) or from its history file, and prints what report.h makes of
// them: tables, a heatmap on a terminal, JSON, CSV or an SVG.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <set>

#include "cmd/common.h"
#include "exit_codes.h"
#include "history_file.h"
#include "private_files.h"
#include "report.h"
#include "text.h"
#ifndef TFB_NO_CLI
#include "cmd/define.h"
#endif

namespace tfb {
using namespace cmd;
namespace {

/// The terminal's width (or height): the kernel's, else $COLUMNS ($LINES), else 80 (24).
std::size_t screen_size(bool width) {
  struct winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && (width ? ws.ws_col : ws.ws_row) > 0)
    return width ? ws.ws_col : ws.ws_row;
  // std::from_chars, not strtol: every libc function the binary imports is
  // bound when any command starts, wait included (bench/startup-cost.sh).
  if (const char* c = std::getenv(width ? "COLUMNS" : "LINES")) {
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(c, c + std::strlen(c), n);
    if (ec == std::errc() && *end == '\0' && n > 0) return n;
  }
  return width ? 80 : 24;
}

/// Whether the locale's characters are UTF-8 (LC_ALL, else LC_CTYPE, else LANG), without setlocale.
bool utf8_locale() {
  for (const char* var : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    std::string s(v);
    for (char& ch : s)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    return s.find("utf-8") != std::string::npos || s.find("utf8") != std::string::npos;
  }
  return false;
}

/// report --svg's picture: made 0644 less the umask (a picture is for
/// sharing; the umask says how far), through files::open_path: never through
/// a symlink, and never into a file of another user or one others can write.
std::optional<error> write_file(const std::string& path, const std::string& text) {
  std::string why;
  auto f = files::open_path(path, O_WRONLY | O_CREAT | O_TRUNC, 0644, why,
                            {"the --svg file", "give another --svg FILE", true});
  if (!f) return error{error_kind::usage, why};
  if (!files::write_all(f->get(), text))
    return error{error_kind::usage, fmt::format("cannot write {}: {}", path, std::strerror(errno))};
  return std::nullopt;
}

/// The rounds from the host, or why not (unreachable or host_lost: there is no host).
std::optional<error> from_host(const report_options& o, const settings& s, std::vector<hist::round_view>& rounds) {
  proto::history_req req{o.all_scopes ? "*" : *s.scope.value, o.name, o.last, 0};
  common_options common = o.common;
  if (!common.connect_timeout) common.connect_timeout = std::chrono::seconds(2);
  auto conn = connection(s, common);
  conn.quiet_reconnect = true;
  if (auto e = client_secret(o.common, conn)) return e;
  auto c = make_tcp_coordinator(std::move(conn));
  outcome out = c->history(req);
  if (out.cause) return error{*out.cause, out.err};
  // A bad line costs its round, not the report.
  hist::round_parser p;
  for (const auto& line : out.history) {
    std::string why;
    if (!p.feed(line, why))
      tfb::print(stderr, "tfbarrier: warning: the host at {} sent a bad history line: {}; skipped that round\n",
                 s.addr(), why);
  }
  rounds = p.take();
  return std::nullopt;
}

std::optional<error> from_file(const report_options& o, const std::string& scope, const std::string& path,
                               std::vector<hist::round_view>& rounds) {
  std::string why;
  std::vector<hist::round_view> all;
  std::vector<std::string> skipped;
  if (!hist::read_file(path, all, skipped, why))
    return error{error_kind::usage, why + "; give a history file written by tfbarrier serve (--history-file)"};
  for (const auto& w : skipped) tfb::print(stderr, "tfbarrier: warning: {}; skipped that round\n", w);
  for (auto& r : all) {
    if (!o.all_scopes && r.scope != scope) continue;
    if (!o.name.empty() && !hist::glob_match(o.name, r.name)) continue;
    rounds.push_back(std::move(r));
  }
  return std::nullopt;
}

/// Keeps one run's rounds (issue #32 item 2): --run's, else the newest
/// round's, unless --all-runs; says on stderr what it left out.
void keep_one_run(const report_options& o, std::vector<hist::round_view>& rounds) {
  if (o.all_runs || rounds.empty()) return;
  const std::string run = o.run ? *o.run : rounds.back().run;
  std::set<std::string> others;
  std::size_t left_out = 0;
  std::erase_if(rounds, [&](const hist::round_view& r) {
    if (r.run == run) return false;
    others.insert(r.run);
    ++left_out;
    return true;
  });
  if (left_out && !o.common.quiet)
    tfb::print(stderr,
               "tfbarrier: run {} ({} rounds); left out {} rounds of {} other run{}: --all-runs for every run, or "
               "--run ID\n",
               run.empty() ? "-" : printable(run), rounds.size(), left_out, others.size(), others.size() == 1 ? "" : "s");
}

int print_report(const report_options& o, std::vector<hist::round_view>& rounds) {
  keep_one_run(o, rounds);
  if (o.last && rounds.size() > o.last) rounds.erase(rounds.begin(), rounds.end() - static_cast<std::ptrdiff_t>(o.last));
  auto a = report::analyze(rounds);
  if (o.json) {
    tfb::print(stdout, "{}", report::json(a));
  } else if (o.csv) {
    tfb::print(stdout, "{}", report::csv(rounds));
  } else if (o.svg) {
    if (auto e = write_file(*o.svg, report::svg(rounds))) return fail(*e);
    tfb::print(stderr, "tfbarrier: wrote {} ({} rounds)\n", *o.svg, rounds.size());
  } else {
    // Names and nodes came from a host or a file: shown escaped, never obeyed.
    if (::isatty(STDOUT_FILENO) && !rounds.empty()) {
      // Fitted to the screen, the summary last: the stragglers' tables (a
      // tenth of the height each), the per-round table's latest rows (an
      // eighth), and the heatmap in what is left (its title, ruler and
      // legend, which may take two lines, and the shell's prompt aside).
      const std::size_t height = screen_size(false);
      const std::size_t top = std::clamp<std::size_t>(height / 10, 3, 10);
      const std::size_t per_round = std::max<std::size_t>(3, height / 8);
      const std::size_t fixed = 4 + (3 + per_round) + 2 * (3 + top) + 3 + 2;
      const std::size_t rows = height > fixed + 5 ? height - fixed : 5;
      tfb::print(stdout, "{}", printable(report::heatmap(rounds, screen_size(true), utf8_locale(), rows), true));
      tfb::print(stdout, "{}",
                 printable(report::text_for_terminal(a, per_round, top, screen_size(true)), true));
    } else {
      tfb::print(stdout, "{}", printable(report::text(a), true));
    }
  }
  return exit_code::ok;
}

}  // namespace

int run_report(const report_options& o) {
  if (int(o.json) + int(o.csv) + int(o.svg.has_value()) > 1) {
    print_error("give one of --json, --csv and --svg FILE");
    return exit_code::usage;
  }
  auto s = resolve(o.common, std::nullopt, std::nullopt, false);
  if (!s) return exit_code::usage;
  s->may_start_host = false;  // a question: it never starts a host
  std::vector<hist::round_view> rounds;
  if (o.file) {
    if (auto e = from_file(o, *s->scope.value, *o.file, rounds)) return fail(*e);
    return print_report(o, rounds);
  }
  auto failed = from_host(o, *s, rounds);
  if (failed && (failed->kind == error_kind::unreachable || failed->kind == error_kind::host_lost)) {
    // The host is gone (a self-started one exits when idle): its file remains.
    std::string path = default_history_file();
    if (path.empty() || ::access(path.c_str(), F_OK) != 0)
      return fail({error_kind::unreachable,
                   fmt::format("no host answers at {}, and there is no history file at {}; give --addr of a running "
                               "host or --file HISTORY",
                               s->addr(), path.empty() ? "(no private directory)" : path)});
    if (!o.common.quiet) tfb::print(stderr, "tfbarrier: no host at {}; reading {}\n", s->addr(), path);
    failed = from_file(o, *s->scope.value, path, rounds);
  }
  if (failed) return fail(*failed);
  return print_report(o, rounds);
}

#ifndef TFB_NO_CLI
// ---- The command line: CLI11's definition of `tfbarrier report` ----
namespace cmd {

command_parser define_report(CLI::App& app) {
  auto v = std::make_shared<client_typed<report_options>>();
  report_options& r = v->o;
  CLI::App* rp = app.add_subcommand("report", "Who is late: arrivals per round, stragglers by rank and node");
  rp->add_option("--name", r.name, "Only barriers whose name matches GLOB (* and ?)")->type_name("GLOB");
  rp->add_option("--last", r.last, "Only the last K rounds")->check(CLI::PositiveNumber)->type_name("K");
  rp->add_option("--file", r.file, "Read HISTORY (serve --history-file), not the host")->type_name("HISTORY");
  auto* json = rp->add_flag("--json", r.json, "JSON for scripts: every round's arrivals and the stragglers");
  auto* csv = rp->add_flag("--csv", r.csv, "CSV, one row per arrival, with a header");
  auto* svg = rp->add_option("--svg", r.svg, "Write the heatmap as an SVG picture to FILE")->type_name("FILE");
  json->excludes(csv)->excludes(svg);
  csv->excludes(svg);
  rp->add_flag("--all-scopes", r.all_scopes, "Rounds of every scope, not just this job's");
  auto* all_runs = rp->add_flag("--all-runs", r.all_runs, "Rounds of every run of the host (default: the newest run)");
  rp->add_option("--run", r.run, "Rounds of run ID only (as the host's log and --json name it)")
      ->type_name("ID")
      ->check([](const std::string& id) {
        return hist::valid_run(id) ? std::string() : "a run ID is 1-64 of A-Z a-z 0-9 . _ : - (the host's log names it)";
      })
      ->excludes(all_runs);
  add_common(rp, v->common);
  set_footer(rp, "Examples:\n"
      "  tfbarrier report                              # tables (and a heatmap on a terminal)\n"
      "  tfbarrier report --name 'epoch*' --last 20\n"
      "  tfbarrier report --svg late.svg\n"
      "  tfbarrier report --file ~/.tfbarrier/serve-node1-123.history --csv > arrivals.csv\n");
  return [v] { return command_options(v->parsed()); };
}

}  // namespace cmd
#endif

}  // namespace tfb
