// tfbarrier status: what the host holds, as a table or JSON.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cmd/common.h"
#include "exit_codes.h"
#include "no_new_imports.h"
#include "text.h"
#include "watch_view.h"
#ifndef TFB_NO_CLI
#include "cmd/define.h"
#endif

namespace tfb {
using namespace cmd;
namespace {

nlohmann::json status_json(const proto::status_reply& st) {
  nlohmann::json bs = nlohmann::json::array();
  for (const auto& b : st.barriers) {
    nlohmann::json j;
    j["scope"] = b.scope;
    j["name"] = b.name;
    j["round"] = b.gen;
    j["state"] = proto::to_string(b.state);
    j["n"] = b.n ? nlohmann::json(*b.n) : nlohmann::json(nullptr);
    j["arrived"] = b.arrived;
    j["chief"] = b.chief;
    j["verdict"] = b.v == proto::verdict::none ? nlohmann::json(nullptr) : nlohmann::json(proto::to_string(b.v));
    j["age_ms"] = b.age_ms;
    if (b.missing) {
      bool cut = false;
      j["missing"] = proto::expand_ranges(*b.missing, cut);  // [0, 1, 2, 7], not "0-2,7"
      if (cut) j["missing_truncated"] = true;
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
                    {"age_ms", m.age_ms},
                    // with a store (docs/store.md): the host it came through
                    {"via", m.via.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.via)}});
    j["members"] = ms;
    nlohmann::json gone = nlohmann::json::array();
    for (const auto& g : b.gone)
      gone.push_back({{"rank", g.rank ? nlohmann::json(*g.rank) : nlohmann::json(nullptr)},
                      {"host", g.host},
                      {"pid", g.pid},
                      {"how", proto::to_string(g.how)},
                      {"ago_ms", g.ago_ms}});
    j["gone"] = gone;
    j["reason"] = b.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(b.reason);
    bs.push_back(std::move(j));
  }
  return nlohmann::json{{"barriers", bs}};
}


// The terminal's width (and height), or 80x0 when stdout is not one.
std::pair<std::size_t, std::size_t> terminal_size(bool tty) {
  struct winsize ws{};
  if (tty && ::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return {ws.ws_col, ws.ws_row};
  return {80, 0};
}

std::string clock_now() {
  char clock[16] = "";
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());  // not time(): no new libc import
  std::tm tm{};
  if (localtime_r(&t, &tm)) std::strftime(clock, sizeof clock, "%H:%M:%S", &tm);
  return clock;
}

// The terminal while status --watch draws on it: the alternate screen with
// the cursor hidden, and keys read one by one, unechoed (Ctrl-C still sends
// SIGINT). All of it is undone before anything else is printed.
class terminal {
 public:
  explicit terminal(bool keys) {
    if (keys && no_import::term_get(0, before_)) {
      struct termios raw = before_;
      raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
      raw.c_cc[VMIN] = 1;
      raw.c_cc[VTIME] = 0;
      // Keys are read on a descriptor of our own: the reader makes it
      // non-blocking, which on fd 0 would make the shared stdout so too (and
      // a large frame would be cut short).
      auto path = no_import::tty_path(0);
      fd_ = path ? ::open(path->c_str(), O_RDONLY | O_NOCTTY | O_CLOEXEC) : -1;
      keys_ = fd_ >= 0 && no_import::term_set(0, raw);
    }
  }
  ~terminal() { leave(); }
  terminal(const terminal&) = delete;
  terminal& operator=(const terminal&) = delete;
  bool keys() const { return keys_; }
  int keys_fd() const { return keys_ ? fd_ : -1; }
  void draw(const std::vector<std::string>& lines) {
    if (!on_screen_) {
      std::fputs("\033[?1049h\033[?25l", stdout);
      on_screen_ = true;
    }
    std::string frame = "\033[H";
    for (const auto& l : lines) frame += l + "\033[K\r\n";
    frame += "\033[J";
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
  }
  void leave() {
    if (on_screen_) {
      on_screen_ = false;
      std::fputs("\033[?25h\033[?1049l", stdout);
      std::fflush(stdout);
    }
    if (keys_) {
      keys_ = false;
      no_import::term_set(0, before_);
    }
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

 private:
  struct termios before_{};
  bool keys_ = false;
  int fd_ = -1;
  bool on_screen_ = false;
};

// status --watch: one connection, a STATUS every interval. On a terminal the
// view is redrawn in place in the alternate screen (again at once when the
// terminal is resized), in colour unless NO_COLOR says otherwise; a lost host
// becomes a banner over the last view while it is tried again, and only
// Ctrl-C or q ends it (0). Elsewhere each refresh is a block of plain lines,
// SIGINT and SIGTERM end it with 0, and a lost host with 69: nobody is there
// to press q, and a watch that logs a job's barriers ends with the job's host.
int run_watch(const status_options& o, const proto::status_req& req, const std::string& where,
              const std::string& addr, coordinator& c) {
  bool tty = isatty(1) != 0;
  bool utf8 = watch::utf8_locale(std::getenv("LC_ALL"), std::getenv("LC_CTYPE"), std::getenv("LANG"));
  bool colour = watch::use_colour(tty, std::getenv("TERM"), std::getenv("NO_COLOR"));
  std::string every = format_duration(*o.watch);
  std::optional<terminal> term;
  if (tty) term.emplace(isatty(0) != 0);
  std::optional<proto::status_reply> last;
  std::string last_at;
  std::vector<std::string> banner;
  auto draw = [&] {
    auto [width, rows] = terminal_size(tty);
    watch::screen_state s{fmt::format("{} {}, every {}{}", clock_now(), where, every,
                                      !tty                ? ""
                                      : term && term->keys() ? " (q or Ctrl-C ends)"
                                                          : " (Ctrl-C ends)"),
                          last ? &*last : nullptr, banner};
    // One column and one row short of the terminal: a line that fills it, or
    // a line break on its last row, would scroll the screen.
    auto lines = watch::render(s, tty ? width - 1 : width, tty && rows > 1 ? rows - 1 : 0, utf8 && tty, colour);
    if (!tty) {
      for (const auto& l : lines) tfb::print(stdout, "{}\n", l);
      tfb::print(stdout, "\n");
      std::fflush(stdout);
      return;
    }
    term->draw(lines);
  };
  watch_hooks h;
  h.reply = [&](const proto::status_reply& st) {
    last = st;
    last_at = clock_now();
    banner.clear();
    draw();
  };
  h.reconnect = tty;
  h.lost = [&](const std::string& why, unsigned failed, duration next) {
    banner = {fmt::format("lost the host at {}; reconnecting{}", addr, utf8 ? "\u2026" : "..."),
              fmt::format("  {}", why),
              fmt::format("  {}next try in {}; below, the view at {}",
                          failed ? fmt::format("{} tr{} failed; ", failed, failed == 1 ? "y" : "ies") : "",
                          format_duration(next), last_at)};
    draw();
  };
  if (term && term->keys()) {
    h.keys_fd = term->keys_fd();
    h.quit_key = [](char ch) { return ch == 'q' || ch == 'Q'; };
  }
  if (tty) h.resized = [&] { draw(); };
  outcome out = c.watch(req, *o.watch, h);
  if (term) term->leave();
  if (out.cause == error_kind::interrupted_int || out.cause == error_kind::interrupted_term)
    return exit_code::ok;
  return finish(out, o.common.quiet);
}

}  // namespace

int run_status(const status_options& o) {
  if (o.watch && o.json) {
    print_error("--watch draws a live view and --json prints one answer for scripts: give one of them");
    return exit_code::usage;
  }
  auto s = resolve(o.common, std::nullopt, std::nullopt, false);
  if (!s) return exit_code::usage;
  // A question: it never starts the host it asks about. With a store, this
  // machine's host is only a door to the store's barriers: it may start one.
  s->may_start_host = s->store.value && !s->addr_explicit;
  proto::status_req req{o.all_scopes ? "*" : *s->scope.value, o.name, true};
  // A question, not a wait: with no host there, say so within 10 s, not 60.
  common_options common = o.common;
  if (!common.connect_timeout) common.connect_timeout = std::chrono::seconds(10);
  auto conn = connection(*s, common);
  if (auto e = client_secret(o.common, conn)) return fail(*e);
  auto c = make_tcp_coordinator(std::move(conn));
  if (o.watch) {
    req.detail = false;
    req.last = true;  // barriers between rounds too, with their last round (docs/protocol.md)
    std::string where = o.all_scopes ? fmt::format("all scopes on {}", s->addr())
                                     : fmt::format("scope {} on {}", *s->scope.value, s->addr());
    return run_watch(o, req, where, s->addr(), *c);
  }
  outcome out = c->status(req);
  if (out.exit_code != exit_code::ok || !out.status) return finish(out, o.common.quiet);
  const auto& st = *out.status;
  if (o.json) {
    // ASCII (\u202e for U+202E): safe on a terminal, and decoded alike by a JSON reader.
    tfb::print(stdout, "{}\n", status_json(st).dump(2, ' ', true, nlohmann::json::error_handler_t::replace));
    return exit_code::ok;
  }
  if (st.barriers.empty()) {
    tfb::print(stdout, "no barriers{} on {}\n", o.all_scopes ? "" : fmt::format(" in scope {}", *s->scope.value),
               printable(s->addr()));
    return exit_code::ok;
  }
  for (const auto& line : watch::table(st, !o.name.empty())) tfb::print(stdout, "{}\n", line);
  return exit_code::ok;
}

#ifndef TFB_NO_CLI
// ---- The command line: CLI11's definition of `tfbarrier status` ----
namespace cmd {

command_parser define_status(CLI::App& app) {
  struct typed : client_typed<status_options> {
    std::string watch;  // --watch [INTERVAL] as typed
    CLI::Option* watch_opt = nullptr;
  };
  auto v = std::make_shared<typed>();
  CLI::App* st = app.add_subcommand("status", "Show the barriers the host holds");
  st->add_option("--name", v->o.name, "Only this barrier, with its members")->check(name_validator());
  st->add_flag("--json", v->o.json, "JSON for scripts (see tfbarrier(1))");
  st->add_flag("--all-scopes", v->o.all_scopes, "Barriers of every scope, not just this job's");
  v->watch_opt = st->add_option("--watch", v->watch,
                                "Redraw a live view every INTERVAL (default 1s, at least 100ms) until q or "
                                "Ctrl-C; each barrier keeps its last round between rounds, missing ranks name "
                                "their nodes, and a lost host is tried again under a banner. Colour unless "
                                "NO_COLOR is set")
                     ->expected(0, 1)
                     ->check(duration_validator(std::chrono::milliseconds(100)))
                     ->type_name("[INTERVAL]");
  add_common(st, v->common);
  set_footer(st, "Examples:\n  tfbarrier status\n  tfbarrier status --name epoch3 --json | jq .barriers[0].missing\n"
                 "  tfbarrier status --watch 500ms                # a live view; q or Ctrl-C ends it\n"
                 "  NO_COLOR=1 tfbarrier status --watch           # the same without colour\n");
  return [v] {
    status_options o = v->parsed();
    if (v->watch_opt->count() > 0)
      o.watch = v->watch.empty() ? duration(std::chrono::seconds(1)) : *parse_duration(v->watch);
    return command_options(std::move(o));
  };
}

}  // namespace cmd
#endif

}  // namespace tfb
