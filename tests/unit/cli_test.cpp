// The command line (src/cli.h): argument vectors parsed with an environment of
// their own, and what each command then receives. Precedence: flag, then
// TFBARRIER_*, then the launcher's variables (Slurm here), then the default.
#include "cli.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cmd/common.h"
#include "exit_codes.h"

namespace tfb {
namespace {

using env_map = std::map<std::string, std::string, std::less<>>;

env_lookup lookup(const env_map& env) {
  return [&env](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

parsed_command parse(std::vector<std::string> words, const env_map& env) {
  words.insert(words.begin(), "tfbarrier");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return parse_command_line(static_cast<int>(words.size()), argv.data(), lookup(env));
}

// What a command resolves from its options and the same environment.
settings resolved(const common_options& c, std::optional<std::uint32_t> n, std::optional<std::uint32_t> rank,
                  const env_map& env, bool counts = true) {
  std::string error;
  auto s = resolve_settings(cmd::flags_of(c, n, rank, counts), lookup(env), "myhost", error);
  EXPECT_TRUE(s.has_value()) << error;
  return s.value_or(settings{});
}

const env_map slurm{{"SLURM_JOB_ID", "1234"},
                    {"SLURM_STEP_NODELIST", "node01"},
                    {"SLURM_STEP_NUM_TASKS", "8"},
                    {"SLURM_PROCID", "3"}};

env_map with(env_map env, const env_map& more) {
  for (const auto& [k, v] : more) env[k] = v;
  return env;
}

const env_map tfb_vars{{"TFBARRIER_N", "6"},
                       {"TFBARRIER_RANK", "2"},
                       {"TFBARRIER_ADDR", "10.0.0.5:9000"},
                       {"TFBARRIER_SCOPE", "envscope"}};

const std::vector<std::string> all_flags{"--n", "4", "--rank", "1", "--addr", "127.0.0.1:8000", "--scope", "flagscope"};

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void expect_flags(const settings& s) {
  EXPECT_EQ(s.n.value, 4u);
  EXPECT_EQ(s.n.source, "flag:--n");
  EXPECT_EQ(s.rank.value, 1u);
  EXPECT_EQ(s.host.value, "127.0.0.1");
  EXPECT_EQ(s.port.value, 8000);
  EXPECT_EQ(s.host.source, "flag:--addr");
  EXPECT_EQ(s.scope.value, "flagscope");
  EXPECT_EQ(s.scope.source, "flag:--scope");
}
void expect_tfb_vars(const settings& s) {
  EXPECT_EQ(s.n.value, 6u);
  EXPECT_EQ(s.n.source, "env:TFBARRIER_N");
  EXPECT_EQ(s.rank.value, 2u);
  EXPECT_EQ(s.host.value, "10.0.0.5");
  EXPECT_EQ(s.port.value, 9000);
  EXPECT_EQ(s.host.source, "env:TFBARRIER_ADDR");
  EXPECT_EQ(s.scope.value, "envscope");
}
void expect_slurm(const settings& s) {
  EXPECT_EQ(s.launcher, launcher_kind::slurm);
  EXPECT_EQ(s.n.value, 8u);
  EXPECT_EQ(s.n.source, "env:SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(s.rank.value, 3u);
  EXPECT_EQ(s.rank.source, "env:SLURM_PROCID");
  EXPECT_EQ(s.host.value, "node01");
  EXPECT_EQ(s.port.source, "derived:SLURM_JOB_ID");
  EXPECT_EQ(s.scope.value, "slurm-1234.0");
}
void expect_defaults(const settings& s) {
  EXPECT_EQ(s.launcher, launcher_kind::none);
  EXPECT_FALSE(s.n.value);
  EXPECT_FALSE(s.rank.value);
  EXPECT_EQ(s.host.value, "127.0.0.1");
  EXPECT_EQ(s.port.value, default_port);
  EXPECT_EQ(s.scope.value, "default");
  EXPECT_EQ(s.scope.source, "default");
}

TEST(Cli, WaitPrecedence) {
  const std::vector<std::string> base{"wait", "--name", "epoch3"};
  auto check = [&](const std::vector<std::string>& words, const env_map& env, auto expect) {
    auto c = parse(words, env);
    ASSERT_EQ(c.kind, command_kind::wait);
    EXPECT_EQ(c.wait.name, "epoch3");
    expect(resolved(c.wait.common, c.wait.n, c.wait.rank, env));
  };
  check(cat(base, all_flags), with(slurm, tfb_vars), expect_flags);
  check(base, with(slurm, tfb_vars), expect_tfb_vars);
  check(base, slurm, expect_slurm);
  check(base, {}, expect_defaults);
}

TEST(Cli, DecidePrecedence) {
  const std::vector<std::string> base{"decide", "stop", "-m", "done"};
  auto check = [&](const std::vector<std::string>& words, const env_map& env, auto expect) {
    auto c = parse(words, env);
    ASSERT_EQ(c.kind, command_kind::decide);
    EXPECT_EQ(c.decide.verdict, "stop");
    EXPECT_EQ(c.decide.message, "done");
    expect(resolved(c.decide.common, c.decide.n, c.decide.rank, env));
  };
  check(cat(base, all_flags), with(slurm, tfb_vars), expect_flags);
  check(base, with(slurm, tfb_vars), expect_tfb_vars);
  check(base, slurm, expect_slurm);
  check(base, {}, expect_defaults);
}

TEST(Cli, ConfigPrecedence) {
  auto check = [&](const std::vector<std::string>& words, const env_map& env, auto expect) {
    auto c = parse(words, env);
    ASSERT_EQ(c.kind, command_kind::config);
    expect(resolved(c.config.common, c.config.n, c.config.rank, env));
  };
  check(cat({"config", "--json"}, all_flags), with(slurm, tfb_vars), expect_flags);
  check({"config"}, with(slurm, tfb_vars), expect_tfb_vars);
  check({"config"}, slurm, expect_slurm);
  check({"config"}, {}, expect_defaults);
  EXPECT_TRUE(parse({"config", "--json"}, {}).config.json);
}

TEST(Cli, StatusPrecedenceWithoutCounts) {
  // status takes no --n or --rank, and a bad TFBARRIER_N does not stop it.
  auto env = with(with(slurm, tfb_vars), {{"TFBARRIER_N", "abc"}});
  auto c = parse({"status", "--addr", "127.0.0.1:8000", "--scope", "flagscope", "--json"}, env);
  ASSERT_EQ(c.kind, command_kind::status);
  EXPECT_TRUE(c.status.json);
  auto s = resolved(c.status.common, std::nullopt, std::nullopt, env, false);
  EXPECT_EQ(s.host.source, "flag:--addr");
  EXPECT_EQ(s.scope.value, "flagscope");
  c = parse({"status"}, env);
  s = resolved(c.status.common, std::nullopt, std::nullopt, env, false);
  EXPECT_EQ(s.host.source, "env:TFBARRIER_ADDR");
  EXPECT_EQ(s.scope.value, "envscope");
  c = parse({"status"}, slurm);
  s = resolved(c.status.common, std::nullopt, std::nullopt, slurm, false);
  EXPECT_EQ(s.host.value, "node01");
  EXPECT_EQ(s.scope.value, "slurm-1234.0");
  c = parse({"status"}, {});
  s = resolved(c.status.common, std::nullopt, std::nullopt, {}, false);
  EXPECT_EQ(s.host.source, "default");
  EXPECT_EQ(s.scope.source, "default");
}

// The options' own variables come from the environment passed in; a flag wins.
TEST(Cli, OptionVariablesFromTheGivenEnvironment) {
  env_map env{{"TFBARRIER_NAME", "fromenv"},
              {"TFBARRIER_TIMEOUT", "90s"},
              {"TFBARRIER_KEEPALIVE", "2s"},
              {"TFBARRIER_CONNECT_TIMEOUT", "3s"},
              {"TFBARRIER_SECRET_FILE", "/s"}};
  auto c = parse({"wait"}, env);
  ASSERT_EQ(c.kind, command_kind::wait);
  EXPECT_EQ(c.wait.name, "fromenv");
  EXPECT_EQ(c.wait.timeout, std::chrono::seconds(90));
  EXPECT_EQ(c.wait.common.keepalive, std::chrono::seconds(2));
  EXPECT_EQ(c.wait.common.connect_timeout, std::chrono::seconds(3));
  EXPECT_EQ(c.wait.common.secret_file, "/s");
  c = parse({"wait", "--name", "typed", "--timeout=5s", "--keepalive", "1s"}, env);
  ASSERT_EQ(c.kind, command_kind::wait);
  EXPECT_EQ(c.wait.name, "typed");
  EXPECT_EQ(c.wait.timeout, std::chrono::seconds(5));
  EXPECT_EQ(c.wait.common.keepalive, std::chrono::seconds(1));
  // --name is required: nothing in this environment gives it, and the process's does not count.
  ::setenv("TFBARRIER_NAME", "fromprocess", 1);
  testing::internal::CaptureStderr();
  c = parse({"wait"}, {});
  std::string err = testing::internal::GetCapturedStderr();
  ::unsetenv("TFBARRIER_NAME");
  EXPECT_EQ(c.kind, command_kind::none);
  EXPECT_EQ(c.exit_code, exit_code::usage);
  EXPECT_NE(err.find("--name is required"), std::string::npos) << err;
}

TEST(Cli, UsageErrorExitsTwo) {
  testing::internal::CaptureStderr();
  auto c = parse({"wait", "--name", "x", "--nme", "y"}, {});
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.kind, command_kind::none);
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_EQ(run_command(c), 2);
  EXPECT_NE(err.find("tfbarrier: error: "), std::string::npos) << err;
  EXPECT_NE(err.find("Run 'tfbarrier wait --help' for usage."), std::string::npos) << err;

  testing::internal::CaptureStderr();
  c = parse({"config"}, {{"TFBARRIER_KEEPALIVE", "1ms"}});
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(err.find("TFBARRIER_KEEPALIVE (for --keepalive)"), std::string::npos) << err;
}

}  // namespace
}  // namespace tfb
