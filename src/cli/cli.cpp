// The command line: the table of commands, what they share (help, errors in
// our words), and the dispatch. Each command's own options are defined in
// src/cli/cmd/NAME.cpp (define_NAME).
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

#include "cmd/define.h"
#include "exit_codes.h"
#include "protocol.h"
#include "settings.h"
#include "text.h"
#include "version.h"

namespace tfb {
namespace {



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





// The commands, in the order of the help.
struct command_def {
  std::string_view name;
  cmd::command_parser (*define)(CLI::App& app);
};
constexpr std::array<command_def, 8> commands{{{"serve", cmd::define_serve},
                                               {"wait", cmd::define_wait},
                                               {"decide", cmd::define_decide},
                                               {"abort", cmd::define_abort},
                                               {"status", cmd::define_status},
                                               {"report", cmd::define_report},
                                               {"config", cmd::define_config},
                                               {"secret", cmd::define_secret}}};

/// The command word (and options before it) checked before CLI11 parses, for
/// errors that name what is wrong. Sets selected to the command to build ("":
/// all of them, for the top-level help). Returns an exit code, or nullopt to go on.
std::optional<int> check_command_word(int argc, char** argv, std::string_view& selected) {
  const char* first_word = nullptr;
  const char* first_option = nullptr;
  for (int i = 1; i < argc && !first_word; ++i) {
    if (argv[i][0] != '-') first_word = argv[i];
    else if (!first_option) first_option = argv[i];
  }
  std::string_view opt = first_option ? first_option : "";
  bool help = opt == "-h" || opt == "--help" || opt == "--help-all" || opt == "--version";
  std::string names;  // "serve, wait, ..."
  bool known = false;
  for (const auto& c : commands) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", c.name);
    if (first_word && c.name == first_word) known = true;
  }
  // `tfbarrier --addr H:P status`: options go after the command. Say so, with
  // the command line in that order, rather than "unknown command 'H:P'".
  if (first_option && !help) {
    int cmd = 0;
    for (int i = 1; i < argc && !cmd; ++i)
      for (const auto& c : commands)
        if (c.name == argv[i]) cmd = i;
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
    std::vector<std::string> words;
    for (const auto& c : commands) words.emplace_back(c.name);
    auto near = nearest(first_word, words);
    print_error(fmt::format("unknown command '{}'{}; the commands are {}", first_word,
                            near ? fmt::format(" (did you mean {}?)", *near) : "", names));
    tfb::print(stderr, "Run 'tfbarrier --help' for usage.\n");
    return exit_code::usage;
  }
  if (argc <= 1) {
    print_error(fmt::format("a command is required; the commands are {}", names));
    tfb::print(stderr, "Run 'tfbarrier --help' for usage.\n");
    return exit_code::usage;
  }
  if (!first_word && first_option && !help) {
    print_error(fmt::format("unknown option '{}' (or a command is missing); the commands are {}", first_option,
                            names));
    tfb::print(stderr, "Run 'tfbarrier --help' for usage.\n");
    return exit_code::usage;
  }
  selected = known && !help ? std::string_view(first_word) : std::string_view();
  return std::nullopt;
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
      if (n == "--n" || n == "--max-connections" || n == "--max-per-address" || n == "--max-barriers" ||
          n == "--store-snapshot-every")
        return "N";
      if (n == "--last") return "K";
      if (n == "--rank") return "RANK";
      if (n == "verdict") return "continue|stop";
      if (n == "--watch") return "[INTERVAL]";  // a value may follow, or not
      // CLI11 puts its own type before a validator's name ("TEXT:DUR" -> "DUR");
      // a label of ours may hold colons (HOST:PORT, etcd://HOST:PORT...), so
      // only CLI11's own type is cut (an option with a label and a validator
      // is named above: CLI11 would show "K:POSITIVE").
      std::string t = o->get_type_name();
      for (std::string_view cli11 : {"TEXT:", "UINT:", "INT:", "FLOAT:", "NUMBER:"})
        if (t.starts_with(cli11)) return t.substr(cli11.size());
      return t;
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
  // What is required, and how to give it.
  if (text == "verdict is required") text = "the verdict is missing: give continue (exit 0 for all) or stop (exit 1 for all)";
  if (text == "--name is required") text = "--name is required (or set TFBARRIER_NAME): the barrier to use, such as epoch3";
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


CLI::App* kept_app = nullptr;  // parse_command_line's keep_app

/// Builds the command being run (all of them for the top-level help) and parses.
parsed_command parse_with(CLI::App& app, int argc, char** argv, std::string_view selected) {
  app.set_version_flag("--version", fmt::format("tfbarrier {} (protocol {})", tfb::version, protocol_version));
  app.require_subcommand(1);
  app.formatter(std::make_shared<help_formatter>());  // before the commands: they take it from here
  cmd::set_footer(&app, "Examples:\n"
      "  eval \"$(tfbarrier serve --daemon)\"           # start a host, export TFBARRIER_ADDR\n"
      "  tfbarrier wait --name epoch3 --n 6 --rank 2   # a worker: block until all 6 arrive\n"
      "  tfbarrier wait --name epoch3 --n 6 --chief    # the chief: return when all are here\n"
      "  tfbarrier decide stop --message 'converged'   # the chief's verdict: everyone exits 1\n"
      "  tfbarrier status                              # what the host holds\n"
      "Run 'tfbarrier COMMAND --help' (or 'tfbarrier help COMMAND') for one command. See tfbarrier(1).\n");
  // Build only the command being run: CLI11 spends most of a short command's
  // start-up building options, and a `wait` needs only its own.
  cmd::set_args(argc, argv);
  std::array<cmd::command_parser, commands.size()> parsers;
  std::array<CLI::App*, commands.size()> built{};
  for (std::size_t i = 0; i < commands.size(); ++i)
    if (selected.empty() || selected == commands[i].name) {
      parsers[i] = commands[i].define(app);
      built[i] = app.get_subcommand(std::string(commands[i].name));
    }
  label_options(app, argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return {std::nullopt, app.exit(e)};
  } catch (const CLI::CallForAllHelp& e) {
    return {std::nullopt, app.exit(e)};
  } catch (const CLI::CallForVersion& e) {
    return {std::nullopt, app.exit(e)};
  } catch (const CLI::ParseError& e) {
    return {std::nullopt, report_parse_error(app, e, argc, argv)};
  }
  for (std::size_t i = 0; i < commands.size(); ++i)
    if (built[i] && built[i]->parsed()) return {parsers[i](), exit_code::ok};
  return {std::nullopt, exit_code::usage};
}

}  // namespace

parsed_command parse_command_line(int argc, char** argv, bool keep_app) {
  // `tfbarrier help [COMMAND]`, as git and cargo have it: the same as
  // `tfbarrier [COMMAND] --help`.
  if (argc > 3 && std::string_view(argv[1]) == "help") {
    std::string words;
    for (int i = 2; i < argc; ++i) words += fmt::format("{}{}", i > 2 ? " " : "", argv[i]);
    print_error(fmt::format("help takes one command at most, not '{}'", words));
    tfb::print(stderr, "Run 'tfbarrier help [COMMAND]'.\n");
    return {std::nullopt, exit_code::usage};
  }
  if (argc >= 2 && argc <= 3 && std::string_view(argv[1]) == "help") {
    std::string help_flag = "--help";
    std::vector<char*> args{argv[0]};
    if (argc == 3) args.push_back(argv[2]);
    args.push_back(help_flag.data());
    args.push_back(nullptr);
    return parse_command_line(static_cast<int>(args.size()) - 1, args.data(), keep_app);
  }
  std::string_view selected;
  if (auto rc = check_command_word(argc, argv, selected)) return {std::nullopt, *rc};
  auto app = std::make_unique<CLI::App>(
      "tfbarrier: a named, reusable barrier for cluster job scripts.\n"
      "After each epoch every worker waits at a barrier; the chief (rank 0) decides\n"
      "whether the job goes on (exit 0) or stops (exit 1).",
      "tfbarrier");
  parsed_command p = parse_with(*app, argc, argv, selected);
  if (keep_app) {
    // Never destroyed: the process exits soon after the command returns, and
    // tearing CLI11's options down would be a large part of a `wait`. Kept
    // reachable, so leak checkers do not report it.
    kept_app = app.release();
  }
  return p;
}

int run_command(const command_options& options) {
  struct runner {
    int operator()(const serve_options& o) const { return run_serve(o); }
    int operator()(const wait_cmd_options& o) const { return run_wait(o); }
    int operator()(const decide_options& o) const { return run_decide(o); }
    int operator()(const abort_options& o) const { return run_abort(o); }
    int operator()(const status_options& o) const { return run_status(o); }
    int operator()(const report_options& o) const { return run_report(o); }
    int operator()(const config_options& o) const { return run_config(o); }
    int operator()(const secret_options& o) const { return run_secret(o); }
  };
  return std::visit(runner{}, options);
}

int run_cli(int argc, char** argv) {
  parsed_command p = parse_command_line(argc, argv, true);
  return p.options ? run_command(*p.options) : p.exit;
}

}  // namespace tfb
