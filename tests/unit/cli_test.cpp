// The command line as a library: argument vectors and an environment in,
// the options each command receives out. Nothing is run and nothing is
// connected to. Precedence: flag > TFBARRIER_* > launcher > default.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cli.h"
#include "cmd/common.h"
#include "exit_codes.h"
#include <fmt/format.h>

extern char** environ;

namespace tfb {
namespace {

class CommandLine : public ::testing::Test {
 protected:
  // The test runs with exactly the variables it sets: the process's own
  // (a Slurm job's, a developer's TFBARRIER_ADDR) are put back afterwards.
  void SetUp() override {
    for (char** e = environ; *e; ++e) saved_.emplace_back(*e);
    ::clearenv();
  }
  void TearDown() override {
    ::clearenv();
    for (const auto& kv : saved_) {
      auto eq = kv.find('=');
      ::setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
  }
  static void env(const std::map<std::string, std::string>& vars) {
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }

  static parsed_command parse(std::vector<std::string> args) {
    args.insert(args.begin(), "tfbarrier");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return parse_command_line(static_cast<int>(args.size()), argv.data());
  }
  template <class T>
  static T options(std::vector<std::string> args) {
    parsed_command p = parse(std::move(args));
    EXPECT_TRUE(p.options.has_value()) << "exit " << p.exit;
    EXPECT_TRUE(p.options && std::holds_alternative<T>(*p.options));
    return p.options && std::holds_alternative<T>(*p.options) ? std::get<T>(*p.options) : T{};
  }
  /// The exit code of a command line that must not parse, and what it printed.
  static int refused(std::vector<std::string> args, std::string& printed) {
    ::testing::internal::CaptureStderr();
    parsed_command p = parse(std::move(args));
    printed = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(p.options.has_value());
    return p.exit;
  }
  /// The settings a client command resolves from its options (cmd::resolve, as it runs).
  static settings resolved(const common_options& c, std::optional<std::uint32_t> n, std::optional<std::uint32_t> rank) {
    auto s = cmd::resolve(c, n, rank);
    EXPECT_TRUE(s.has_value());
    return s ? *s : settings{};
  }

 private:
  std::vector<std::string> saved_;
};

TEST_F(CommandLine, EachCommandGetsItsOwnOptions) {
  EXPECT_TRUE(std::holds_alternative<serve_options>(*parse({"serve"}).options));
  EXPECT_TRUE(std::holds_alternative<status_options>(*parse({"status"}).options));
  EXPECT_TRUE(std::holds_alternative<report_options>(*parse({"report"}).options));
  EXPECT_TRUE(std::holds_alternative<config_options>(*parse({"config"}).options));
  EXPECT_TRUE(std::holds_alternative<secret_options>(*parse({"secret"}).options));
  auto a = options<abort_options>({"abort", "--name", "e1", "--reason", "rank 4 is gone"});
  EXPECT_EQ(a.name, "e1");
  EXPECT_EQ(a.reason, "rank 4 is gone");
  auto d = options<decide_options>({"decide", "stop", "-m", "converged", "--no-wait", "--n", "6", "--rank", "0"});
  EXPECT_EQ(d.verdict, "stop");
  EXPECT_EQ(d.message, "converged");
  EXPECT_TRUE(d.no_wait);
  EXPECT_EQ(d.n, 6u);
  EXPECT_EQ(d.rank, 0u);
  auto sec = options<secret_options>({"secret", "--file", "/x/s", "--force"});
  EXPECT_EQ(sec.file, "/x/s");
  EXPECT_TRUE(sec.force);
}

TEST_F(CommandLine, NameFlagBeatsTheVariable) {
  env({{"TFBARRIER_NAME", "from-env"}});
  EXPECT_EQ(options<wait_cmd_options>({"wait", "--name", "from-flag"}).name, "from-flag");
  EXPECT_EQ(options<wait_cmd_options>({"wait"}).name, "from-env");
  EXPECT_EQ(options<abort_options>({"abort"}).name, "from-env");
  EXPECT_EQ(options<decide_options>({"decide", "stop"}).name, "from-env");
}

TEST_F(CommandLine, DurationsArriveConverted) {
  env({{"TFBARRIER_TIMEOUT", "10s"}, {"TFBARRIER_CONNECT_TIMEOUT", "3s"}, {"TFBARRIER_KEEPALIVE", "250ms"}});
  auto w = options<wait_cmd_options>({"wait", "--name", "e", "--timeout", "2m", "--progress", "0"});
  EXPECT_EQ(w.timeout, duration(std::chrono::minutes(2)));
  EXPECT_EQ(w.progress, duration::zero());  // 0: no progress at all
  EXPECT_EQ(w.common.connect_timeout, duration(std::chrono::seconds(3)));
  EXPECT_EQ(w.common.keepalive, duration(std::chrono::milliseconds(250)));
  auto w2 = options<wait_cmd_options>({"wait", "--name", "e", "--connect-timeout", "1500ms"});
  EXPECT_EQ(w2.timeout, duration(std::chrono::seconds(10)));
  EXPECT_EQ(w2.common.connect_timeout, duration(std::chrono::milliseconds(1500)));
  EXPECT_FALSE(w2.progress.has_value());  // the command picks 1s or 30s
  EXPECT_EQ(options<decide_options>({"decide", "stop"}).timeout, duration(std::chrono::seconds(10)));
  auto s = options<serve_options>({"serve", "--idle-exit", "1h", "--forget-after", "2m", "--max-barriers", "010"});
  EXPECT_EQ(s.idle_exit, duration(std::chrono::hours(1)));
  EXPECT_EQ(s.forget_after, duration(std::chrono::minutes(2)));
  EXPECT_EQ(s.max_barriers, 10u);  // decimal, not octal
  EXPECT_EQ(options<serve_options>({"serve"}).forget_after, duration(std::chrono::hours(1)));
}

TEST_F(CommandLine, StatusWatchTakesAnOptionalInterval) {
  EXPECT_FALSE(options<status_options>({"status"}).watch.has_value());
  EXPECT_EQ(options<status_options>({"status", "--watch"}).watch, duration(std::chrono::seconds(1)));
  EXPECT_EQ(options<status_options>({"status", "--watch", "500ms"}).watch, duration(std::chrono::milliseconds(500)));
  std::string err;
  EXPECT_EQ(refused({"status", "--watch", "10ms"}, err), exit_code::usage);
  EXPECT_NE(err.find("at least 100ms"), std::string::npos) << err;
}

TEST_F(CommandLine, ListenFlagBeatsTheVariable) {
  env({{"TFBARRIER_LISTEN", "127.0.0.1:4000"}});
  EXPECT_EQ(options<serve_options>({"serve"}).listen, "127.0.0.1:4000");
  EXPECT_EQ(options<serve_options>({"serve", "--listen", "127.0.0.1:5000"}).listen, "127.0.0.1:5000");
}

TEST_F(CommandLine, CountsComeFromFlagThenVariableThenLauncher) {
  env({{"SLURM_JOB_ID", "42"}, {"SLURM_STEP_NODELIST", "node[3-4]"}, {"SLURM_STEP_NUM_TASKS", "8"},
       {"SLURM_PROCID", "5"}});
  auto w = options<wait_cmd_options>({"wait", "--name", "e"});
  settings s = resolved(w.common, w.n, w.rank);
  EXPECT_EQ(s.launcher, launcher_kind::slurm);
  EXPECT_EQ(s.n.value, 8u);
  EXPECT_EQ(s.n.source, "env:SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(s.rank.value, 5u);
  EXPECT_EQ(s.host.value, "node3");
  EXPECT_EQ(s.port.source, "derived:SLURM_JOB_ID");

  env({{"TFBARRIER_N", "6"}, {"TFBARRIER_RANK", "2"}, {"TFBARRIER_ADDR", "10.1.2.3:4444"}});
  w = options<wait_cmd_options>({"wait", "--name", "e"});
  s = resolved(w.common, w.n, w.rank);
  EXPECT_EQ(s.n.value, 6u);
  EXPECT_EQ(s.n.source, "env:TFBARRIER_N");
  EXPECT_EQ(s.rank.value, 2u);
  EXPECT_EQ(s.host.value, "10.1.2.3");
  EXPECT_EQ(s.port.value, 4444);
  EXPECT_EQ(s.port.source, "env:TFBARRIER_ADDR");

  w = options<wait_cmd_options>({"wait", "--name", "e", "--n", "3", "--rank", "1", "--addr", "127.0.0.1:5555"});
  s = resolved(w.common, w.n, w.rank);
  EXPECT_EQ(s.n.value, 3u);
  EXPECT_EQ(s.n.source, "flag:--n");
  EXPECT_EQ(s.rank.source, "flag:--rank");
  EXPECT_EQ(s.port.value, 5555);
  EXPECT_EQ(s.port.source, "flag:--addr");
}

TEST_F(CommandLine, DefaultsWithoutLauncherOrVariables) {
  auto c = options<config_options>({"config"});
  settings s = resolved(c.common, c.n, c.rank);
  EXPECT_EQ(s.launcher, launcher_kind::none);
  EXPECT_EQ(s.host.source, "default");
  EXPECT_EQ(s.port.value, default_port_for(::getuid()));
  EXPECT_EQ(s.port.source, fmt::format("default for uid {}", ::getuid()));
  EXPECT_EQ(s.scope.value, "default");
  EXPECT_FALSE(*s.insecure.value);
  EXPECT_FALSE(s.n.value.has_value());
  EXPECT_FALSE(s.rank.value.has_value());
}

TEST_F(CommandLine, ScopeFlagThenVariableThenJob) {
  env({{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_NODELIST", "n1"}});
  auto c = options<config_options>({"config"});
  EXPECT_EQ(resolved(c.common, c.n, c.rank).scope.source.rfind("derived:", 0), 0u);
  env({{"TFBARRIER_SCOPE", "mine"}});
  c = options<config_options>({"config"});
  EXPECT_EQ(resolved(c.common, c.n, c.rank).scope.value, "mine");
  c = options<config_options>({"config", "--scope", "theirs"});
  EXPECT_EQ(resolved(c.common, c.n, c.rank).scope.value, "theirs");
}

TEST_F(CommandLine, InsecureFlagThenVariable) {
  env({{"TFBARRIER_INSECURE", "1"}});
  auto w = options<wait_cmd_options>({"wait", "--name", "e"});
  EXPECT_EQ(resolved(w.common, w.n, w.rank).insecure.source, "env:TFBARRIER_INSECURE");
  EXPECT_TRUE(cmd::connection(resolved(w.common, w.n, w.rank), w.common).insecure);
  env({{"TFBARRIER_INSECURE", "0"}});
  w = options<wait_cmd_options>({"wait", "--name", "e", "--insecure"});
  EXPECT_EQ(resolved(w.common, w.n, w.rank).insecure.source, "flag:--insecure");
  EXPECT_TRUE(cmd::connection(resolved(w.common, w.n, w.rank), w.common).insecure);
  w = options<wait_cmd_options>({"wait", "--name", "e"});
  EXPECT_FALSE(cmd::connection(resolved(w.common, w.n, w.rank), w.common).insecure);
}

TEST_F(CommandLine, SecretFileFlagBeatsTheVariable) {
  env({{"TFBARRIER_SECRET_FILE", "/env/secret"}});
  EXPECT_EQ(options<status_options>({"status"}).common.secret_file, "/env/secret");
  EXPECT_EQ(options<status_options>({"status", "--secret-file", "/flag/secret"}).common.secret_file, "/flag/secret");
  EXPECT_EQ(options<serve_options>({"serve"}).secret_file, "/env/secret");
}

TEST_F(CommandLine, ABadVariableIsNamed) {
  env({{"TFBARRIER_KEEPALIVE", "soon"}});
  std::string err;
  EXPECT_EQ(refused({"wait", "--name", "e"}, err), exit_code::usage);
  EXPECT_NE(err.find("TFBARRIER_KEEPALIVE (for --keepalive)"), std::string::npos) << err;
  // The flag wins, so the bad variable is not read at all.
  EXPECT_TRUE(parse({"wait", "--name", "e", "--keepalive", "1s"}).options.has_value());
}

TEST_F(CommandLine, UsageErrorsExit2WithoutOptions) {
  std::string err;
  EXPECT_EQ(refused({"wiat"}, err), exit_code::usage);
  EXPECT_NE(err.find("did you mean wait?"), std::string::npos) << err;
  EXPECT_EQ(refused({"wait", "--nme", "e"}, err), exit_code::usage);
  EXPECT_NE(err.find("did you mean --name?"), std::string::npos) << err;
  EXPECT_EQ(refused({"decide", "maybe"}, err), exit_code::usage);
  EXPECT_EQ(refused({"wait", "--name", "a b"}, err), exit_code::usage);
  EXPECT_EQ(refused({"status", "--scope", "-"}, err), exit_code::usage);
  EXPECT_EQ(refused({"report", "--json", "--csv"}, err), exit_code::usage);
  EXPECT_EQ(refused({"serve", "--max-connections", "0"}, err), exit_code::usage);
  EXPECT_EQ(refused({"--addr", "h:1", "status"}, err), exit_code::usage);
  EXPECT_NE(err.find("options go after the command"), std::string::npos) << err;
  EXPECT_EQ(refused({}, err), exit_code::usage);
  EXPECT_EQ(refused({"decide"}, err), exit_code::usage);
  EXPECT_NE(err.find("the verdict is missing: give continue"), std::string::npos) << err;
  EXPECT_EQ(refused({"abort"}, err), exit_code::usage);
  EXPECT_NE(err.find("--name is required (or set TFBARRIER_NAME)"), std::string::npos) << err;
}

TEST_F(CommandLine, HelpAndVersionRunNothing) {
  ::testing::internal::CaptureStdout();
  parsed_command h = parse({"help", "wait"});
  parsed_command v = parse({"--version"});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_FALSE(h.options.has_value());
  EXPECT_EQ(h.exit, exit_code::ok);
  EXPECT_FALSE(v.options.has_value());
  EXPECT_EQ(v.exit, exit_code::ok);
  EXPECT_NE(out.find("--name NAME REQUIRED (env TFBARRIER_NAME)"), std::string::npos) << out;
  EXPECT_NE(out.find("Exit codes:"), std::string::npos);
}

TEST_F(CommandLine, HelpNamesWhatEachOptionTakes) {
  ::testing::internal::CaptureStdout();
  parse({"status", "--help"});
  parse({"serve", "--help"});
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("--watch [INTERVAL] "), std::string::npos) << out;  // not "DUR": it may stand alone
  EXPECT_NE(out.find("--connect-timeout DUR (env TFBARRIER_CONNECT_TIMEOUT)"), std::string::npos) << out;
  EXPECT_NE(out.find("--listen HOST:PORT (env TFBARRIER_LISTEN)"), std::string::npos) << out;
  EXPECT_NE(out.find("--max-barriers N "), std::string::npos) << out;
}

}  // namespace
}  // namespace tfb
