// What the commands' CLI11 definitions share (define.h).
#include "cmd/define.h"

#include <fmt/format.h>

#include "exit_codes.h"
#include "protocol.h"
#include "text.h"

namespace tfb::cmd {
namespace {

std::string exit_code_help() {
  std::string s = "\nExit codes:\n";
  for (const auto& row : exit_code_table) s += fmt::format("  {:>3}  {}\n", row.code, row.meaning);
  return s;
}

}  // namespace

namespace {
int parsed_argc = 0;
char** parsed_argv = nullptr;
}  // namespace

void set_args(int argc, char** argv) {
  parsed_argc = argc;
  parsed_argv = argv;
}

bool mentions(std::string_view prefix) {
  for (int i = 1; i < parsed_argc; ++i) {
    std::string_view a = parsed_argv[i];
    if (a.starts_with(prefix) || a == "-h" || a == "--help" || a == "--help-all") return true;
  }
  return false;
}

// CLI11 prints the callback's text and a newline after it.
void set_footer(CLI::App* app, const char* examples) {
  app->footer([examples] {
    std::string s = examples + exit_code_help();
    s.pop_back();
    return s;
  });
}

namespace {
// A barrier name or a scope: what the wire's names allow (proto::valid_name).
CLI::Validator wire_name_validator(const char* what, const char* type) {
  return CLI::Validator(
      [what](std::string& s) -> std::string {
        if (proto::valid_name(s)) return {};
        return fmt::format("{} is not {}: use 1-128 of A-Z a-z 0-9 . _ : -", quote_text(s), what);
      },
      type);
}
}  // namespace

CLI::Validator name_validator() { return wire_name_validator("a barrier name", "NAME"); }
CLI::Validator scope_validator() { return wire_name_validator("a scope", "SCOPE"); }

CLI::Validator verdict_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s == "continue" || s == "stop") return {};
        return fmt::format("{} is not a verdict: use continue (exit 0 for all) or stop (exit 1 for all)",
                           quote_text(s));
      },
      "continue|stop");
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
CLI::Validator duration_validator(duration min, bool zero_is_off) {
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

void add_common(CLI::App* sub, common_typed& typed) {
  common_options& c = typed.options;
  common_typed& t = typed;
  sub->add_option("--addr", c.addr, "Host address HOST:PORT (env TFBARRIER_ADDR; default: from the launcher, else 127.0.0.1 and your own port, 30000 + uid % 2768)");
  // Not wait's, which reads TFBARRIER_STORE only: one CLI11 option more cost
  // wait's start-up 2.5% of its instructions (bench/startup-cost.sh).
  const std::string& name = sub->get_name();
  if (name == "status" || name == "decide" || name == "abort" || name == "config")
    sub->add_option("--store", c.store,
                    "Use the barriers of this store (env TFBARRIER_STORE), through this machine's own host of it, "
                    "started if need be: from a login node, for example (docs/store.md)")
        ->type_name("etcd://HOST:PORT[,HOST:PORT...][/PREFIX]");
  sub->add_option("--scope", c.scope, "Barrier namespace (env TFBARRIER_SCOPE; default: the launcher's job and attempt, else 'default')")
      ->check(scope_validator());
  sub->add_option("--connect-timeout", t.connect_timeout,
                  std::string("Give up connecting after DUR (default ") +
                      (sub->get_name() == "status" ? "10s" : sub->get_name() == "report" ? "2s" : "60s") + ", at least 1ms)")
      ->envname("TFBARRIER_CONNECT_TIMEOUT")
      ->check(duration_validator(std::chrono::milliseconds(1)));
  sub->add_flag("-q,--quiet", c.quiet, "No progress or notes on stderr; errors still go there");
  sub->add_flag("--insecure", c.insecure,
                "Take the verdict of a host beyond loopback that does not authenticate (env TFBARRIER_INSECURE=1; "
                "only on a network you trust)");
  sub->add_option("--secret-file", c.secret_file,
                  "Authenticate with the shared secret in FILE (default ~/.tfbarrier/secret if it exists)")
      ->envname("TFBARRIER_SECRET_FILE");
  sub->add_option("--keepalive", t.keepalive,
                  "Ping the host every DUR while waiting; 3 missed = host lost (default 5s, at least 100ms)")
      ->envname("TFBARRIER_KEEPALIVE")
      ->check(duration_validator(std::chrono::milliseconds(100)));
}

common_options common_typed::get() const {
  common_options c = options;
  set_duration(connect_timeout, c.connect_timeout);
  set_duration(keepalive, c.keepalive);
  return c;
}

void set_duration(const std::string& text, duration& target) {
  if (!text.empty()) target = *parse_duration(text);
}
void set_duration(const std::string& text, std::optional<duration>& target) {
  if (!text.empty()) target = *parse_duration(text);
}

}  // namespace tfb::cmd
