// Where every setting comes from (src/core/settings.h). These tests are the spec.
#include "settings.h"

#include "launcher_file.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>
#include <string>

namespace tfb {
// For GoogleTest's messages.
void PrintTo(launcher_kind l, std::ostream* os) { *os << to_string(l); }

namespace {

using env_map = std::map<std::string, std::string, std::less<>>;

env_lookup lookup(const env_map& env) {
  return [&env](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

file_lookup files_of(const env_map& files) {
  return [&files](const std::string& path, std::string& why) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) {
      why = "No such file or directory";
      return std::nullopt;
    }
    return it->second;
  };
}

settings ok_files(const env_map& env, const env_map& files, const flag_inputs& flags = {},
                  std::string_view hostname = "myhost") {
  std::string error;
  auto s = resolve_settings(flags, lookup(env), hostname, error, files_of(files));
  EXPECT_TRUE(s.has_value()) << error;
  return s.value_or(settings{});
}

std::string err_files(const env_map& env, const env_map& files, std::string_view hostname = "myhost") {
  std::string error;
  auto s = resolve_settings({}, lookup(env), hostname, error, files_of(files));
  EXPECT_FALSE(s.has_value()) << "resolved to " << (s ? settings_to_text(*s) : "");
  return error;
}

settings ok(const env_map& env, const flag_inputs& flags = {}, std::string_view hostname = "myhost") {
  std::string error;
  auto s = resolve_settings(flags, lookup(env), hostname, error);
  EXPECT_TRUE(s.has_value()) << error;
  EXPECT_EQ(error, "");
  return s.value_or(settings{});
}

std::string err(const env_map& env, const flag_inputs& flags = {}, std::string_view hostname = "myhost") {
  std::string error;
  auto s = resolve_settings(flags, lookup(env), hostname, error);
  EXPECT_FALSE(s.has_value()) << "resolved to " << (s ? settings_to_text(*s) : "");
  EXPECT_FALSE(error.empty());
  return error;
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

flag_inputs with_n(std::uint32_t n) {
  flag_inputs f;
  f.n = n;
  return f;
}
flag_inputs with_rank(std::uint32_t r) {
  flag_inputs f;
  f.rank = r;
  return f;
}
flag_inputs with_addr(std::string a) {
  flag_inputs f;
  f.addr = std::move(a);
  return f;
}
flag_inputs with_scope(std::string sc) {
  flag_inputs f;
  f.scope = std::move(sc);
  return f;
}

// A task of `srun -n 8` in job 4242, on node n03 of n[01-04].
env_map slurm_step() {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_JOB_NODELIST", "n[01-04]"},
          {"SLURM_NODELIST", "n[01-04]"},
          {"SLURM_STEP_NODELIST", "n[01-04]"},
          {"SLURM_NTASKS", "8"},
          {"SLURM_NPROCS", "8"},
          {"SLURM_STEP_NUM_TASKS", "8"},
          {"SLURM_PROCID", "5"},
          {"SLURMD_NODENAME", "n03"}};
}

// The batch script of job 4242 (runs on n01, outside srun).
env_map slurm_batch() {
  return {{"SLURM_JOB_ID", "4242"},    {"SLURM_JOB_NODELIST", "n[01-04]"}, {"SLURM_NODELIST", "n[01-04]"},
          {"SLURM_NTASKS", "8"},       {"SLURM_NPROCS", "8"},             {"SLURM_PROCID", "0"},
          {"SLURMD_NODENAME", "n01"}};
}

// An salloc shell on the login node.
env_map slurm_salloc() {
  return {{"SLURM_JOB_ID", "4242"}, {"SLURM_JOB_NODELIST", "n[01-04]"}, {"SLURM_NODELIST", "n[01-04]"},
          {"SLURM_NTASKS", "8"},    {"SLURM_NPROCS", "8"}};
}

// Worker 2 of a torchrun job with 4 workers.
env_map torchrun_worker() {
  return {{"TORCHELASTIC_RUN_ID", "job7"}, {"TORCHELASTIC_RESTART_COUNT", "0"}, {"RANK", "2"},
          {"WORLD_SIZE", "4"},             {"MASTER_ADDR", "trainer0"},          {"MASTER_PORT", "29500"},
          {"LOCAL_RANK", "2"}};
}

env_map openmpi_rank(std::string rank) {
  return {{"OMPI_COMM_WORLD_SIZE", "6"}, {"OMPI_COMM_WORLD_RANK", std::move(rank)}};
}

env_map pmi_rank(std::string rank) { return {{"PMI_SIZE", "3"}, {"PMI_RANK", std::move(rank)}}; }

// ---- launcher detection ----

std::string count_error(count_kind kind, std::string text) { return check_count_flag(kind, text); }

TEST(CountFlag, AcceptsTheRangeOfEach) {
  EXPECT_EQ(count_error(count_kind::n, "1"), "");
  EXPECT_EQ(count_error(count_kind::n, "1000000"), "");
  EXPECT_EQ(count_error(count_kind::rank, "0"), "");
  EXPECT_EQ(count_error(count_kind::rank, "999999"), "");
}

TEST(CountFlag, ReadsDecimalWithLeadingZeros) {
  // CLI11 would read "010" as octal 8: the text is rewritten before it converts.
  std::string text = "010";
  EXPECT_EQ(check_count_flag(count_kind::rank, text), "");
  EXPECT_EQ(text, "10");
  text = "08";
  EXPECT_EQ(check_count_flag(count_kind::n, text), "");
  EXPECT_EQ(text, "8");
  text = "000";
  EXPECT_EQ(check_count_flag(count_kind::rank, text), "");
  EXPECT_EQ(text, "0");
}

TEST(CountFlag, SaysWhatIsNotANumberAndWhatIsOutOfRange) {
  EXPECT_EQ(count_error(count_kind::rank, "abc"), "\"abc\" is not a rank: a rank runs from 0 to 999999");
  EXPECT_EQ(count_error(count_kind::rank, "-1"), "\"-1\" is not a rank: a rank runs from 0 to 999999");
  EXPECT_EQ(count_error(count_kind::rank, "1.5"), "\"1.5\" is not a rank: a rank runs from 0 to 999999");
  EXPECT_EQ(count_error(count_kind::rank, ""), "\"\" is not a rank: a rank runs from 0 to 999999");
  EXPECT_EQ(count_error(count_kind::rank, "1000000"), "\"1000000\" is out of range: a rank runs from 0 to 999999");
  EXPECT_EQ(count_error(count_kind::n, "0"), "\"0\" is out of range: the number of tasks runs from 1 to 1000000");
  EXPECT_EQ(count_error(count_kind::n, "six"),
            "\"six\" is not a number of tasks: the number of tasks runs from 1 to 1000000");
  EXPECT_EQ(count_range_text(count_kind::n), "in [1 - 1000000]");
  EXPECT_EQ(count_range_text(count_kind::rank), "in [0 - 999999]");
}

TEST(CountFlag, EscapesControlCharacters) {
  std::string e = count_error(count_kind::rank, "a\x1b[7mb");
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
}

TEST(Launcher, NoneWhenNothingIsSet) { EXPECT_EQ(ok({}).launcher, launcher_kind::none); }

TEST(Launcher, SlurmWhenJobIdIsSet) { EXPECT_EQ(ok(slurm_step()).launcher, launcher_kind::slurm); }

TEST(Launcher, TheInnermostWinsAndTheOthersAreListedInOrder) {
  // torchrun inside mpirun inside an srun step: torchrun started the process.
  env_map env = slurm_step();
  env.merge(torchrun_worker());
  env.merge(openmpi_rank("1"));
  env.merge(pmi_rank("1"));
  settings s = ok(env);
  EXPECT_EQ(s.launcher, launcher_kind::torchrun);
  EXPECT_EQ(s.launchers, (std::vector<launcher_kind>{launcher_kind::torchrun, launcher_kind::openmpi,
                                                     launcher_kind::slurm, launcher_kind::pmi}));
  EXPECT_EQ(s.rank.source, "env:RANK");
  EXPECT_EQ(s.scope.value, "torchrun-job7.0");   // torchrun's own run id
  EXPECT_EQ(s.port.source, "derived:SLURM_JOB_ID");  // torchrun gives no port: the job's
}

TEST(Launcher, TorchrunByRunId) { EXPECT_EQ(ok({{"TORCHELASTIC_RUN_ID", "r"}, {"MASTER_ADDR", "m"}}).launcher, launcher_kind::torchrun); }

TEST(Launcher, TorchrunByRankWorldSizeAndMasterAddr) {
  EXPECT_EQ(ok({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}}).launcher, launcher_kind::torchrun);
}

TEST(Launcher, NotTorchrunWithoutAllThree) {
  EXPECT_EQ(ok({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).launcher, launcher_kind::none);
  EXPECT_EQ(ok({{"RANK", "0"}, {"MASTER_ADDR", "m"}}).launcher, launcher_kind::none);
  EXPECT_EQ(ok({{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}}).launcher, launcher_kind::none);
}

TEST(Launcher, TorchrunWinsOverOpenMpiAndPmi) {
  env_map env = torchrun_worker();
  env.merge(openmpi_rank("1"));
  env.merge(pmi_rank("1"));
  EXPECT_EQ(ok(env).launcher, launcher_kind::torchrun);
}

TEST(Launcher, OpenMpi) { EXPECT_EQ(ok(openmpi_rank("0")).launcher, launcher_kind::openmpi); }

TEST(Launcher, OpenMpiWinsOverPmi) {
  env_map env = openmpi_rank("0");
  env.merge(pmi_rank("1"));
  EXPECT_EQ(ok(env).launcher, launcher_kind::openmpi);
}

TEST(Launcher, Pmi) { EXPECT_EQ(ok(pmi_rank("0")).launcher, launcher_kind::pmi); }

TEST(Launcher, EmptyVariablesCountAsUnset) {
  EXPECT_EQ(ok({{"SLURM_JOB_ID", ""}}).launcher, launcher_kind::none);
  EXPECT_EQ(ok({{"TORCHELASTIC_RUN_ID", ""}}).launcher, launcher_kind::none);
  EXPECT_EQ(ok({{"OMPI_COMM_WORLD_SIZE", ""}, {"PMI_SIZE", "2"}}).launcher, launcher_kind::pmi);
}

TEST(Launcher, AnEmptyLookupFunctionMeansNoEnvironment) {
  std::string error;
  auto s = resolve_settings({}, env_lookup{}, "h", error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(s->launcher, launcher_kind::none);
}

// ---- defaults ----

TEST(Defaults, NothingSet) {
  settings s = ok({});
  EXPECT_EQ(s.host.value, "127.0.0.1");
  EXPECT_EQ(s.host.source, "default");
  EXPECT_EQ(s.port.value, default_port_for(0));
  EXPECT_EQ(s.port.value, 30000);
  EXPECT_EQ(s.port.source, "default for uid 0");
  EXPECT_EQ(s.n.value, std::nullopt);
  EXPECT_EQ(s.n.source, "unset");
  EXPECT_EQ(s.rank.value, std::nullopt);
  EXPECT_EQ(s.rank.source, "unset");
  EXPECT_EQ(s.scope.value, "default");
  EXPECT_EQ(s.scope.source, "default");
  EXPECT_EQ(s.node.value, "myhost");
  EXPECT_EQ(s.node.source, "hostname");
  EXPECT_FALSE(s.addr_explicit);
  EXPECT_TRUE(s.may_start_host);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(s.addr(), "127.0.0.1:30000");
}

TEST(Defaults, EachUserHasAPortOfTheirOwn) {
  flag_inputs root, user, other;
  user.uid = 1000;
  other.uid = 1001;
  EXPECT_EQ(ok({}, root).port.value, 30000);
  EXPECT_EQ(ok({}, user).port.value, 31000);
  EXPECT_EQ(ok({}, user).port.source, "default for uid 1000");
  EXPECT_EQ(ok({}, other).port.value, 31001);
  EXPECT_EQ(default_port_for(2767), 32767);  // below the ephemeral range (32768-60999)
  EXPECT_EQ(default_port_for(2768), 30000);  // above the Slurm-derived ports (10000-29999)
  EXPECT_EQ(default_port_for(65534), 30000 + 65534 % 2768);
  // A launcher's or an explicit port is not per-user.
  EXPECT_EQ(ok({{"TFBARRIER_PORT", "4000"}}, user).port.value, 4000);
  EXPECT_EQ(ok({{"SLURM_JOB_ID", "123"}, {"SLURM_JOB_NODELIST", "n1"}}, user).port.source, "derived:SLURM_JOB_ID");
}

TEST(Defaults, InsecureFromFlagThenVariable) {
  EXPECT_EQ(ok({}).insecure.value, false);
  EXPECT_EQ(ok({}).insecure.source, "default");
  flag_inputs f;
  f.insecure = true;
  EXPECT_EQ(ok({{"TFBARRIER_INSECURE", "0"}}, f).insecure.source, "flag:--insecure");
  EXPECT_EQ(ok({{"TFBARRIER_INSECURE", "1"}}).insecure.value, true);
  EXPECT_EQ(ok({{"TFBARRIER_INSECURE", "yes"}}).insecure.value, true);
  EXPECT_EQ(ok({{"TFBARRIER_INSECURE", "false"}}).insecure.value, false);
  EXPECT_EQ(err({{"TFBARRIER_INSECURE", "maybe"}}),
            "TFBARRIER_INSECURE=\"maybe\" is neither 1 (yes, true) nor 0 (no, false); fix it, or unset it");
}

// ---- explicit address ----

TEST(Addr, FlagGivesHostAndPort) {
  settings s = ok({}, with_addr("node07:9000"));
  EXPECT_EQ(s.host.value, "node07");
  EXPECT_EQ(s.host.source, "flag:--addr");
  EXPECT_EQ(s.port.value, 9000);
  EXPECT_EQ(s.port.source, "flag:--addr");
  EXPECT_TRUE(s.addr_explicit);
  EXPECT_FALSE(s.may_start_host);
  EXPECT_EQ(s.addr(), "node07:9000");
}

TEST(Addr, Variable) {
  settings s = ok({{"TFBARRIER_ADDR", "10.1.2.3:1234"}});
  EXPECT_EQ(s.host.value, "10.1.2.3");
  EXPECT_EQ(s.host.source, "env:TFBARRIER_ADDR");
  EXPECT_EQ(s.port.value, 1234);
  EXPECT_EQ(s.port.source, "env:TFBARRIER_ADDR");
  EXPECT_TRUE(s.addr_explicit);
  EXPECT_FALSE(s.may_start_host);
}

TEST(Addr, FlagWinsOverVariable) {
  settings s = ok({{"TFBARRIER_ADDR", "a:1"}}, with_addr("b:2"));
  EXPECT_EQ(s.host.value, "b");
  EXPECT_EQ(s.port.value, 2);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(Addr, FlagWinsEvenOverABadVariable) { EXPECT_EQ(ok({{"TFBARRIER_ADDR", "junk"}}, with_addr("b:2")).host.value, "b"); }

TEST(Addr, Ipv6InBrackets) {
  settings s = ok({}, with_addr("[fd00::1]:7000"));
  EXPECT_EQ(s.host.value, "fd00::1");
  EXPECT_EQ(s.port.value, 7000);
  EXPECT_EQ(s.addr(), "[fd00::1]:7000");
  EXPECT_EQ(ok({}, with_addr("[::1]:1")).addr(), "[::1]:1");
  EXPECT_EQ(ok({}, with_addr("[fe80::1%eth0]:7727")).host.value, "fe80::1%eth0");
  EXPECT_EQ(ok({}, with_addr("[::ffff:10.0.0.1]:80")).host.value, "::ffff:10.0.0.1");
}

TEST(Addr, ParsedOnceIntoTheHostAddress) {
  EXPECT_EQ(ok({}, with_addr("[fe80::1%eth0]:7727")).host_address(), (address{"fe80::1%eth0", 7727}));
  EXPECT_EQ(ok({}, with_addr("node07:9000")).host_address(), (address{"node07", 9000}));
  settings s = ok({{"TFBARRIER_HOST", "fd00::2"}, {"TFBARRIER_PORT", "31000"}});
  EXPECT_EQ(s.host_address(), (address{"fd00::2", 31000}));
  EXPECT_EQ(s.addr(), "[fd00::2]:31000");
  EXPECT_EQ(s.addr(), s.host_address().text());
}

TEST(Addr, PortBounds) {
  EXPECT_EQ(ok({}, with_addr("h:1")).port.value, 1);
  EXPECT_EQ(ok({}, with_addr("h:65535")).port.value, 65535);
  EXPECT_EQ(ok({}, with_addr("h:0080")).port.value, 80);
}

TEST(Addr, WinsOverTfbarrierHostAndPortWithWarnings) {
  settings s = ok({{"TFBARRIER_ADDR", "a:1"}, {"TFBARRIER_HOST", "b"}, {"TFBARRIER_PORT", "2"}});
  EXPECT_EQ(s.host.value, "a");
  EXPECT_EQ(s.port.value, 1);
  ASSERT_EQ(s.warnings.size(), 2u);
  EXPECT_EQ(s.warnings[0], "TFBARRIER_HOST is ignored: the address comes from TFBARRIER_ADDR");
  EXPECT_EQ(s.warnings[1], "TFBARRIER_PORT is ignored: the address comes from TFBARRIER_ADDR");
  EXPECT_EQ(ok({{"TFBARRIER_HOST", "b"}}, with_addr("a:1")).warnings,
            std::vector<std::string>{"TFBARRIER_HOST is ignored: the address comes from --addr"});
}

TEST(Addr, WinsOverEveryLauncher) {
  for (const env_map& env : {slurm_step(), torchrun_worker(), openmpi_rank("0"), pmi_rank("0")}) {
    settings s = ok(env, with_addr("boss:5555"));
    EXPECT_EQ(s.addr(), "boss:5555") << to_string(s.launcher);
    EXPECT_TRUE(s.addr_explicit) << to_string(s.launcher);
    EXPECT_FALSE(s.may_start_host) << to_string(s.launcher);
    EXPECT_TRUE(s.warnings.empty()) << to_string(s.launcher);
  }
}

TEST(Addr, ExplicitOnTheHostNodeStillMayNotStartTheHost) {
  env_map env = slurm_step();
  env["SLURMD_NODENAME"] = "n01";
  EXPECT_TRUE(ok(env).may_start_host);
  EXPECT_FALSE(ok(env, with_addr("n01:9000")).may_start_host);
  env["TFBARRIER_ADDR"] = "n01:9000";
  EXPECT_FALSE(ok(env).may_start_host);
}

TEST(Addr, ExactErrorMessage) {
  EXPECT_EQ(err({}, with_addr("foo")),
            "--addr \"foo\" is not HOST:PORT: there is no :PORT; write it as node01:31000 or [fd00::1]:31000");
  EXPECT_EQ(err({{"TFBARRIER_ADDR", "foo:99999"}}),
            "TFBARRIER_ADDR=\"foo:99999\" is not HOST:PORT: the port \"99999\" is not a number from 1 to 65535; "
            "write it as node01:31000 or [fd00::1]:31000");
}

TEST(Addr, Malformed) {
  for (std::string bad : {"", "foo", "foo:", ":80", "foo:0", "foo:65536", "foo:abc", "foo:-1", "foo:+80", "foo:80x",
                          "foo: 80", "::1:80", "fd00::1", "[::1]", "[::1]80", "[::1:80", "[foo]:80", "[]:80",
                          "a b:80", "bad/host:80", "h:1:2", "[::1]:", "[::1]:0"}) {
    std::string e = err({}, with_addr(bad));
    EXPECT_CONTAINS(e, "--addr \"" + bad + "\" is not HOST:PORT");
    if (bad.empty()) continue;  // an empty variable is unset
    EXPECT_CONTAINS(err({{"TFBARRIER_ADDR", bad}}), "TFBARRIER_ADDR=\"" + bad + "\" is not HOST:PORT");
  }
}

TEST(Addr, EmptyVariableIsUnsetButEmptyFlagIsAnError) {
  EXPECT_FALSE(ok({{"TFBARRIER_ADDR", ""}}).addr_explicit);
  EXPECT_CONTAINS(err({}, with_addr("")), "it is empty");
}

TEST(Addr, UnbracketedIpv6SaysHowToWriteIt) { EXPECT_CONTAINS(err({}, with_addr("fd00::1:80")), "needs brackets"); }

// ---- TFBARRIER_HOST / TFBARRIER_PORT ----

TEST(Host, TfbarrierHostWinsOverEveryLauncher) {
  for (const env_map& base : {env_map{}, slurm_step(), torchrun_worker(), openmpi_rank("0"), pmi_rank("0")}) {
    env_map env = base;
    env["TFBARRIER_HOST"] = "boss";
    settings s = ok(env);
    EXPECT_EQ(s.host.value, "boss") << to_string(s.launcher);
    EXPECT_EQ(s.host.source, "env:TFBARRIER_HOST") << to_string(s.launcher);
    EXPECT_TRUE(s.addr_explicit) << to_string(s.launcher);  // explicit as the man page defines it
    EXPECT_FALSE(s.may_start_host) << to_string(s.launcher);
  }
}

TEST(Host, TfbarrierHostNamingThisNodeStillMayNotStartTheHost) {
  env_map env = slurm_step();
  env["TFBARRIER_HOST"] = "n03";  // this task's own node
  EXPECT_FALSE(ok(env).may_start_host);
}

TEST(Host, TfbarrierHostKeepsTheLauncherPort) {
  env_map env = slurm_step();
  env["TFBARRIER_HOST"] = "boss";
  settings s = ok(env);
  EXPECT_EQ(s.port.value, 10000 + 4242);
  EXPECT_EQ(s.port.source, "derived:SLURM_JOB_ID");
}

TEST(Host, TfbarrierHostIpv6) {
  EXPECT_EQ(ok({{"TFBARRIER_HOST", "fd00::2"}}).addr(), "[fd00::2]:30000");
  EXPECT_EQ(ok({{"TFBARRIER_HOST", "[fd00::2]"}}).host.value, "fd00::2");
  EXPECT_EQ(ok({{"TFBARRIER_HOST", "10.0.0.9"}}).addr(), "10.0.0.9:30000");
}

TEST(Host, TfbarrierHostMalformed) {
  EXPECT_EQ(err({{"TFBARRIER_HOST", "boss:123"}}),
            "TFBARRIER_HOST=\"boss:123\" is not a host name or IP address: it looks like HOST:PORT, which belongs in "
            "TFBARRIER_ADDR or --addr; fix it, or pass --addr HOST:PORT");
  for (const std::string& bad : std::vector<std::string>{"a b", "bad/host", "[boss]", "x;rm", std::string(254, 'a'), "fd00::g"})
    EXPECT_CONTAINS(err({{"TFBARRIER_HOST", bad}}), "TFBARRIER_HOST=");
}

TEST(Port, TfbarrierPortWinsOverDefaultAndSlurm) {
  settings s = ok({{"TFBARRIER_PORT", "4000"}});
  EXPECT_EQ(s.port.value, 4000);
  EXPECT_EQ(s.port.source, "env:TFBARRIER_PORT");
  env_map env = slurm_step();
  env["TFBARRIER_PORT"] = "4001";
  s = ok(env);
  EXPECT_EQ(s.port.value, 4001);
  EXPECT_EQ(s.port.source, "env:TFBARRIER_PORT");
  EXPECT_EQ(s.host.value, "n01");
}

TEST(Port, TfbarrierPortMalformed) {
  EXPECT_EQ(err({{"TFBARRIER_PORT", "0"}}),
            "TFBARRIER_PORT=\"0\" is not a port (a number from 1 to 65535); fix it, or pass --addr HOST:PORT");
  for (std::string bad : {"65536", "x", "-1", "80a", " 80", "99999999999999999999999"})
    EXPECT_CONTAINS(err({{"TFBARRIER_PORT", bad}}), "TFBARRIER_PORT=\"" + bad + "\" is not a port");
}

// ---- Slurm host and port ----

TEST(SlurmHost, FirstNodeOfTheStepNodelist) {
  env_map env = slurm_step();
  env["SLURM_STEP_NODELIST"] = "n[03-04]";
  settings s = ok(env);
  EXPECT_EQ(s.host.value, "n03");
  EXPECT_EQ(s.host.source, "derived:SLURM_STEP_NODELIST");
}

TEST(SlurmHost, JobNodelistWithoutAStep) {
  settings s = ok(slurm_batch());
  EXPECT_EQ(s.host.value, "n01");
  EXPECT_EQ(s.host.source, "derived:SLURM_JOB_NODELIST");
}

TEST(SlurmHost, OldSlurmNodelistLast) {
  settings s = ok({{"SLURM_JOB_ID", "1"}, {"SLURM_NODELIST", "old[7-8]"}});
  EXPECT_EQ(s.host.value, "old7");
  EXPECT_EQ(s.host.source, "derived:SLURM_NODELIST");
}

TEST(SlurmHost, PaddingAndGroupsAreKept) {
  EXPECT_EQ(ok({{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_NODELIST", "gpu[08-11]"}}).host.value, "gpu08");
  EXPECT_EQ(ok({{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_NODELIST", "rack[2-3]-n[07,01]"}}).host.value, "rack2-n07");
  EXPECT_EQ(ok({{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_NODELIST", "login,c[1-2]"}}).host.value, "login");
}

TEST(SlurmHost, BadStepNodelistIsAnErrorEvenIfTheJobNodelistIsGood) {
  env_map env = slurm_step();
  env["SLURM_STEP_NODELIST"] = "n[01-";
  EXPECT_EQ(err(env),
            "SLURM_STEP_NODELIST holds a bad host list \"n[01-\" at character 2: the '[' is never closed; set "
            "TFBARRIER_HOST or TFBARRIER_ADDR, or pass --addr HOST:PORT");
}

TEST(SlurmHost, BadNodelists) {
  for (std::string bad : {"n[5-3]", "n[a]", "a,,b", "n[0-1000000]", "a b"}) {
    std::string e = err({{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_NODELIST", bad}});
    EXPECT_CONTAINS(e, "SLURM_JOB_NODELIST holds a bad host list");
    EXPECT_CONTAINS(e, "set TFBARRIER_HOST");
  }
  EXPECT_CONTAINS(err({{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_NODELIST", "bad/name"}}), "is not a host name");
}

TEST(SlurmHost, BadNodelistIsNotReadWhenTheHostIsGiven) {
  env_map env = slurm_step();
  env["SLURM_STEP_NODELIST"] = "n[";
  env["TFBARRIER_HOST"] = "boss";
  EXPECT_EQ(ok(env).host.value, "boss");
  env.erase("TFBARRIER_HOST");
  EXPECT_EQ(ok(env, with_addr("boss:1")).host.value, "boss");
}

TEST(SlurmHost, NoNodelistAtAll) {
  EXPECT_EQ(err({{"SLURM_JOB_ID", "1"}}),
            "SLURM_JOB_ID is set but SLURM_STEP_NODELIST, SLURM_JOB_NODELIST and SLURM_NODELIST are not, so the host's "
            "node is unknown; set TFBARRIER_HOST or TFBARRIER_ADDR, or pass --addr HOST:PORT");
}

TEST(SlurmPort, DerivedFromTheJobId) {
  settings s = ok(slurm_step());
  EXPECT_EQ(s.port.value, 14242);
  EXPECT_EQ(s.port.source, "derived:SLURM_JOB_ID");
  EXPECT_EQ(s.addr(), "n01:14242");
}

TEST(SlurmPort, Formula) {
  auto port_of = [](std::string job) { return *ok({{"SLURM_JOB_ID", job}, {"SLURM_JOB_NODELIST", "n1"}}).port.value; };
  EXPECT_EQ(port_of("0"), 10000);
  EXPECT_EQ(port_of("1"), 10001);
  EXPECT_EQ(port_of("19999"), 29999);
  EXPECT_EQ(port_of("20000"), 10000);
  EXPECT_EQ(port_of("123456"), 10000 + 123456 % 20000);
  EXPECT_EQ(port_of("4294967295"), 10000 + 4294967295ull % 20000);
  EXPECT_EQ(port_of("18446744073709551615"), 10000 + 18446744073709551615ull % 20000);
  EXPECT_NE(port_of("123"), port_of("124"));  // two jobs sharing a node
}

TEST(SlurmPort, AlwaysBelowTheEphemeralRange) {
  for (std::uint64_t job = 0; job < 100000; job += 997) {
    auto p = *ok({{"SLURM_JOB_ID", std::to_string(job)}, {"SLURM_JOB_NODELIST", "n1"}}).port.value;
    EXPECT_GE(p, 10000);
    EXPECT_LT(p, 30000);
    EXPECT_LT(p, 32768);
  }
}

TEST(SlurmPort, BadJobId) {
  EXPECT_EQ(err({{"SLURM_JOB_ID", "abc"}, {"SLURM_JOB_NODELIST", "n1"}}),
            "SLURM_JOB_ID=\"abc\" is not a job number, so no port can be derived from it; set TFBARRIER_PORT, or pass "
            "--addr HOST:PORT");
  err({{"SLURM_JOB_ID", "-1"}, {"SLURM_JOB_NODELIST", "n1"}});
  err({{"SLURM_JOB_ID", "12_3"}, {"SLURM_JOB_NODELIST", "n1"}});
  err({{"SLURM_JOB_ID", "99999999999999999999999"}, {"SLURM_JOB_NODELIST", "n1"}});
}

TEST(SlurmPort, BadJobIdIsFineWhenNothingIsDerivedFromIt) {
  settings s = ok({{"SLURM_JOB_ID", "abc"},
                   {"SLURM_JOB_NODELIST", "n1"},
                   {"TFBARRIER_PORT", "5000"},
                   {"TFBARRIER_SCOPE", "mine"}});
  EXPECT_EQ(s.launcher, launcher_kind::slurm);
  EXPECT_EQ(s.port.value, 5000);
  EXPECT_EQ(s.scope.value, "mine");
}

// ---- torchrun, Open MPI, PMI hosts ----

TEST(TorchrunHost, MasterAddr) {
  settings s = ok(torchrun_worker());
  EXPECT_EQ(s.host.value, "trainer0");
  EXPECT_EQ(s.host.source, "env:MASTER_ADDR");
}

TEST(TorchrunHost, MasterPortIsNeverUsed) {
  settings s = ok(torchrun_worker());
  EXPECT_EQ(s.port.value, default_port_for(0));
  EXPECT_EQ(s.port.source, "default for uid 0");
  EXPECT_EQ(s.addr(), "trainer0:30000");
}

TEST(TorchrunHost, Ipv6MasterAddr) {
  env_map env = torchrun_worker();
  env["MASTER_ADDR"] = "fd00::7";
  EXPECT_EQ(ok(env).addr(), "[fd00::7]:30000");
}

TEST(TorchrunHost, MissingMasterAddr) {
  EXPECT_EQ(err({{"TORCHELASTIC_RUN_ID", "r"}}),
            "torchrun's TORCHELASTIC_RUN_ID is set but MASTER_ADDR is not; set TFBARRIER_HOST or TFBARRIER_ADDR, or "
            "pass --addr HOST:PORT");
  EXPECT_EQ(ok({{"TORCHELASTIC_RUN_ID", "r"}, {"TFBARRIER_HOST", "h"}}).host.value, "h");
}

TEST(TorchrunHost, BadMasterAddr) {
  env_map env = torchrun_worker();
  env["MASTER_ADDR"] = "bad host";
  EXPECT_CONTAINS(err(env), "MASTER_ADDR=\"bad host\" is not a host name or IP address");
}

TEST(LoopbackHost, OpenMpiAndPmiUseLoopbackWithAWarning) {
  for (const env_map& env : {openmpi_rank("1"), pmi_rank("1")}) {
    settings s = ok(env);
    EXPECT_EQ(s.host.value, "127.0.0.1") << to_string(s.launcher);
    EXPECT_EQ(s.host.source, "default");
    EXPECT_EQ(s.port.value, default_port_for(0));
    ASSERT_EQ(s.warnings.size(), 1u) << to_string(s.launcher);
    EXPECT_CONTAINS(s.warnings[0], "127.0.0.1");
    EXPECT_CONTAINS(s.warnings[0], "TFBARRIER_HOST");
  }
  EXPECT_CONTAINS(ok(openmpi_rank("0")).warnings.at(0), "Open MPI");
  EXPECT_CONTAINS(ok(pmi_rank("0")).warnings.at(0), "PMI");
}

TEST(LoopbackHost, NoWarningWhenTheHostIsGiven) {
  env_map env = openmpi_rank("1");
  env["TFBARRIER_HOST"] = "n1";
  EXPECT_TRUE(ok(env).warnings.empty());
  EXPECT_TRUE(ok({}).warnings.empty());
}

// ---- n ----

TEST(N, PrecedenceSlurm) {
  env_map env = slurm_step();
  env["SLURM_STEP_NUM_TASKS"] = "4";
  env["SLURM_NTASKS"] = "8";
  env["SLURM_NPROCS"] = "16";
  env["SLURM_PROCID"] = "0";
  EXPECT_EQ(ok(env).n.value, 4u);
  EXPECT_EQ(ok(env).n.source, "env:SLURM_STEP_NUM_TASKS");
  env.erase("SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(ok(env).n.value, 8u);
  EXPECT_EQ(ok(env).n.source, "env:SLURM_NTASKS");
  env.erase("SLURM_NTASKS");
  EXPECT_EQ(ok(env).n.value, 16u);
  EXPECT_EQ(ok(env).n.source, "env:SLURM_NPROCS");
  env["SLURM_STEP_NUM_TASKS"] = "4";
  env["TFBARRIER_N"] = "3";
  EXPECT_EQ(ok(env).n.value, 3u);
  EXPECT_EQ(ok(env).n.source, "env:TFBARRIER_N");
  EXPECT_EQ(ok(env, with_n(2)).n.value, 2u);
  EXPECT_EQ(ok(env, with_n(2)).n.source, "flag:--n");
}

TEST(N, PrecedenceTorchrun) {
  env_map env = torchrun_worker();
  EXPECT_EQ(ok(env).n.value, 4u);
  EXPECT_EQ(ok(env).n.source, "env:WORLD_SIZE");
  env["TFBARRIER_N"] = "5";
  EXPECT_EQ(ok(env).n.source, "env:TFBARRIER_N");
  EXPECT_EQ(ok(env, with_n(6)).n.source, "flag:--n");
  EXPECT_EQ(ok(env, with_n(6)).n.value, 6u);
}

TEST(N, PrecedenceOpenMpi) {
  env_map env = openmpi_rank("1");
  EXPECT_EQ(ok(env).n.value, 6u);
  EXPECT_EQ(ok(env).n.source, "env:OMPI_COMM_WORLD_SIZE");
  env["TFBARRIER_N"] = "5";
  EXPECT_EQ(ok(env).n.value, 5u);
  EXPECT_EQ(ok(env).n.source, "env:TFBARRIER_N");
  EXPECT_EQ(ok(env, with_n(7)).n.source, "flag:--n");
}

TEST(N, PrecedencePmi) {
  env_map env = pmi_rank("1");
  EXPECT_EQ(ok(env).n.value, 3u);
  EXPECT_EQ(ok(env).n.source, "env:PMI_SIZE");
  env["TFBARRIER_N"] = "5";
  EXPECT_EQ(ok(env).n.source, "env:TFBARRIER_N");
  EXPECT_EQ(ok(env, with_n(7)).n.source, "flag:--n");
}

TEST(N, PrecedenceNone) {
  EXPECT_EQ(ok({}).n.value, std::nullopt);
  EXPECT_EQ(ok({{"TFBARRIER_N", "9"}}).n.value, 9u);
  EXPECT_EQ(ok({{"TFBARRIER_N", "9"}}, with_n(10)).n.value, 10u);
}

TEST(N, OtherLaunchersVariablesAreIgnored) {
  // Slurm job without SLURM_NTASKS: WORLD_SIZE (torchrun's only with RANK and
  // MASTER_ADDR) and PMI_SIZE (a bare PMI in a Slurm job is srun's) do not count.
  // OMPI_COMM_WORLD_SIZE would: that is an mpirun inside the job (Launchers.*).
  settings s = ok({{"SLURM_JOB_ID", "1"},
                   {"SLURM_JOB_NODELIST", "n1"},
                   {"WORLD_SIZE", "4"},
                   {"PMI_SIZE", "4"}});
  EXPECT_EQ(s.n.value, std::nullopt);
  EXPECT_EQ(s.n.source, "unset");
  EXPECT_EQ(ok({{"WORLD_SIZE", "4"}}).n.value, std::nullopt);       // not torchrun
  EXPECT_EQ(ok({{"SLURM_NTASKS", "4"}}).n.value, std::nullopt);     // not slurm
  EXPECT_EQ(ok({{"PMI_SIZE", "", }, {"PMI_RANK", "0"}}).n.value, std::nullopt);
}

TEST(N, SallocShell) {
  settings s = ok(slurm_salloc(), {}, "login1");
  EXPECT_EQ(s.n.value, 8u);
  EXPECT_EQ(s.n.source, "env:SLURM_NTASKS");
}

TEST(N, Bounds) {
  EXPECT_EQ(ok({{"TFBARRIER_N", "1"}}).n.value, 1u);
  EXPECT_EQ(ok({{"TFBARRIER_N", "1000000"}}).n.value, 1000000u);
  EXPECT_EQ(ok({{"TFBARRIER_N", "007"}}).n.value, 7u);
  EXPECT_EQ(ok({}, with_n(1)).n.value, 1u);
  EXPECT_EQ(ok({}, with_n(1000000)).n.value, 1000000u);
}

TEST(N, ExactMessagesForALauncherVariable) {
  env_map env = slurm_salloc();
  env["SLURM_NTASKS"] = "abc";
  EXPECT_EQ(err(env), "SLURM_NTASKS=\"abc\" is not a number of tasks; set TFBARRIER_N or pass --n");
  env["SLURM_NTASKS"] = "0";
  EXPECT_EQ(err(env),
            "SLURM_NTASKS=\"0\" is out of range: the number of tasks runs from 1 to 1000000; set TFBARRIER_N or "
            "pass --n");
}

TEST(N, ExactMessagesForTfbarrierNAndTheFlag) {
  EXPECT_EQ(err({{"TFBARRIER_N", "x"}}), "TFBARRIER_N=\"x\" is not a number of tasks; fix TFBARRIER_N or pass --n");
  EXPECT_EQ(err({{"TFBARRIER_N", "1000001"}}),
            "TFBARRIER_N=\"1000001\" is out of range: the number of tasks runs from 1 to 1000000; fix TFBARRIER_N or "
            "pass --n");
  EXPECT_EQ(err({}, with_n(0)), "--n 0 is out of range: the number of tasks runs from 1 to 1000000");
  EXPECT_EQ(err({}, with_n(1000001)), "--n 1000001 is out of range: the number of tasks runs from 1 to 1000000");
}

// status, abort and serve take no --n or --rank: a bad variable for them is
// not theirs to check (`status` is what one runs when a job is misconfigured).
TEST(N, CommandsWithoutCountsDoNotReadThem) {
  flag_inputs none;
  none.counts = false;
  env_map env = slurm_salloc();
  env["SLURM_NTASKS"] = "xyz";
  env["TFBARRIER_RANK"] = "-1";
  auto s = ok(env, none);
  EXPECT_FALSE(s.n.value);
  EXPECT_FALSE(s.rank.value);
  EXPECT_EQ(s.addr(), ok(slurm_salloc()).addr());
  EXPECT_EQ(s.scope.value, ok(slurm_salloc()).scope.value);
  EXPECT_FALSE(ok({{"TFBARRIER_N", "abc"}}, none).n.value);
  // The same variables still stop a command that uses them.
  EXPECT_CONTAINS(err(env), "SLURM_NTASKS=\"xyz\"");
}

TEST(N, NotNumbers) {
  for (std::string bad : {" 4", "4 ", "+4", "-4", "4.0", "0x4", "4e2", "99999999999999999999999", "four"}) {
    EXPECT_CONTAINS(err({{"TFBARRIER_N", bad}}), "TFBARRIER_N=\"" + bad + "\"");
    EXPECT_CONTAINS(err({{"RANK", "0"}, {"WORLD_SIZE", bad}, {"MASTER_ADDR", "m"}}), "WORLD_SIZE=\"" + bad + "\"");
    EXPECT_CONTAINS(err({{"OMPI_COMM_WORLD_SIZE", bad}}), "OMPI_COMM_WORLD_SIZE=\"" + bad + "\"");
    EXPECT_CONTAINS(err({{"PMI_SIZE", bad}}), "PMI_SIZE=\"" + bad + "\"");
  }
}

TEST(N, OnlyTheChosenValueIsValidated) {
  env_map env = slurm_step();
  env["SLURM_NTASKS"] = "abc";  // SLURM_STEP_NUM_TASKS wins, so this is never read
  EXPECT_EQ(ok(env).n.value, 8u);
  env["SLURM_STEP_NUM_TASKS"] = "junk";
  env["TFBARRIER_N"] = "8";
  EXPECT_EQ(ok(env).n.value, 8u);
  env["TFBARRIER_N"] = "junk";
  EXPECT_EQ(ok(env, with_n(8)).n.value, 8u);
}

TEST(N, EmptyVariableFallsThrough) {
  env_map env = slurm_salloc();
  env["TFBARRIER_N"] = "";
  EXPECT_EQ(ok(env).n.source, "env:SLURM_NTASKS");
}

// ---- rank ----

TEST(Rank, PrecedenceSlurmStep) {
  env_map env = slurm_step();
  EXPECT_EQ(ok(env).rank.value, 5u);
  EXPECT_EQ(ok(env).rank.source, "env:SLURM_PROCID");
  env["TFBARRIER_RANK"] = "6";
  EXPECT_EQ(ok(env).rank.value, 6u);
  EXPECT_EQ(ok(env).rank.source, "env:TFBARRIER_RANK");
  EXPECT_EQ(ok(env, with_rank(7)).rank.value, 7u);
  EXPECT_EQ(ok(env, with_rank(7)).rank.source, "flag:--rank");
}

TEST(Rank, PrecedenceTorchrun) {
  env_map env = torchrun_worker();
  EXPECT_EQ(ok(env).rank.value, 2u);
  EXPECT_EQ(ok(env).rank.source, "env:RANK");
  env["TFBARRIER_RANK"] = "3";
  EXPECT_EQ(ok(env).rank.source, "env:TFBARRIER_RANK");
  EXPECT_EQ(ok(env, with_rank(1)).rank.source, "flag:--rank");
}

TEST(Rank, PrecedenceOpenMpi) {
  env_map env = openmpi_rank("4");
  EXPECT_EQ(ok(env).rank.value, 4u);
  EXPECT_EQ(ok(env).rank.source, "env:OMPI_COMM_WORLD_RANK");
  env["TFBARRIER_RANK"] = "3";
  EXPECT_EQ(ok(env).rank.source, "env:TFBARRIER_RANK");
  EXPECT_EQ(ok(env, with_rank(1)).rank.source, "flag:--rank");
}

TEST(Rank, PrecedencePmi) {
  env_map env = pmi_rank("2");
  EXPECT_EQ(ok(env).rank.value, 2u);
  EXPECT_EQ(ok(env).rank.source, "env:PMI_RANK");
  env["TFBARRIER_RANK"] = "1";
  EXPECT_EQ(ok(env).rank.source, "env:TFBARRIER_RANK");
  EXPECT_EQ(ok(env, with_rank(0)).rank.source, "flag:--rank");
}

TEST(Rank, PrecedenceNone) {
  EXPECT_EQ(ok({}).rank.value, std::nullopt);
  EXPECT_EQ(ok({{"TFBARRIER_RANK", "3"}}).rank.value, 3u);
  EXPECT_EQ(ok({{"TFBARRIER_RANK", "3"}}, with_rank(4)).rank.value, 4u);
  EXPECT_EQ(ok({{"RANK", "3"}}).rank.value, std::nullopt);  // not torchrun
}

TEST(Rank, SallocShellHasNoRank) {
  settings s = ok(slurm_salloc(), {}, "login1");
  EXPECT_EQ(s.rank.value, std::nullopt);
  EXPECT_EQ(s.rank.source, "unset");
  EXPECT_TRUE(s.warnings.empty());
}

TEST(Rank, BatchScriptIsNotTaskZero) {
  settings s = ok(slurm_batch());
  EXPECT_EQ(s.rank.value, std::nullopt);
  EXPECT_EQ(s.rank.source, "unset");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_CONTAINS(s.warnings[0], "SLURM_PROCID is ignored outside an srun step");
  // The batch script may still say who it is.
  settings r = ok(slurm_batch(), with_rank(0));
  EXPECT_EQ(r.rank.value, 0u);
  EXPECT_TRUE(r.warnings.empty());
  env_map env = slurm_batch();
  env["TFBARRIER_RANK"] = "1";
  EXPECT_EQ(ok(env).rank.value, 1u);
}

TEST(Rank, StepDetectedByEitherStepVariable) {
  env_map env = slurm_batch();
  env["SLURM_STEP_NUM_TASKS"] = "8";
  EXPECT_EQ(ok(env).rank.value, 0u);
  env = slurm_batch();
  env["SLURM_STEP_NODELIST"] = "n[01-04]";
  EXPECT_EQ(ok(env).rank.value, 0u);
}

TEST(Rank, MustBeBelowN) {
  env_map env = slurm_step();
  env["SLURM_PROCID"] = "7";
  EXPECT_EQ(ok(env).rank.value, 7u);  // n = 8
  env["SLURM_PROCID"] = "8";
  EXPECT_EQ(err(env),
            "rank 8 (from SLURM_PROCID) is not below n=8 (from SLURM_STEP_NUM_TASKS): ranks run from 0 to n-1; pass "
            "--rank and --n (or set TFBARRIER_RANK and TFBARRIER_N) that agree");
  EXPECT_CONTAINS(err(slurm_step(), with_n(5)), "rank 5 (from SLURM_PROCID) is not below n=5 (from --n)");
  EXPECT_CONTAINS(err({{"TFBARRIER_N", "2"}}, with_rank(2)), "rank 2 (from --rank) is not below n=2 (from TFBARRIER_N)");
  EXPECT_CONTAINS(err({{"TFBARRIER_N", "1"}, {"TFBARRIER_RANK", "1"}}), "(from TFBARRIER_RANK)");
  env_map t = torchrun_worker();
  t["RANK"] = "4";
  EXPECT_CONTAINS(err(t), "rank 4 (from RANK) is not below n=4 (from WORLD_SIZE)");
  EXPECT_CONTAINS(err(openmpi_rank("6")), "(from OMPI_COMM_WORLD_RANK)");
  EXPECT_CONTAINS(err(pmi_rank("3")), "(from PMI_RANK)");
}

TEST(Rank, WithoutNAnyRankBelowTheMaximum) {
  EXPECT_EQ(ok({}, with_rank(999999)).rank.value, 999999u);
  EXPECT_EQ(err({}, with_rank(1000000)), "--rank 1000000 is out of range: a rank runs from 0 to 999999");
  EXPECT_EQ(err({{"TFBARRIER_RANK", "1000000"}}),
            "TFBARRIER_RANK=\"1000000\" is out of range: a rank runs from 0 to 999999; fix TFBARRIER_RANK or pass "
            "--rank");
}

TEST(Rank, NotNumbers) {
  env_map env = slurm_step();
  env["SLURM_PROCID"] = "x";
  EXPECT_EQ(err(env), "SLURM_PROCID=\"x\" is not a rank; set TFBARRIER_RANK or pass --rank");
  for (std::string bad : {"-1", "+1", " 1", "1.0", "one"}) {
    EXPECT_CONTAINS(err({{"TFBARRIER_RANK", bad}}), "TFBARRIER_RANK=\"" + bad + "\" is not a rank");
    env_map t = torchrun_worker();
    t["RANK"] = bad;
    EXPECT_CONTAINS(err(t), "RANK=\"" + bad + "\" is not a rank; set TFBARRIER_RANK or pass --rank");
  }
}

TEST(Rank, BadNIsReportedBeforeRank) {
  EXPECT_CONTAINS(err({{"TFBARRIER_N", "x"}, {"TFBARRIER_RANK", "y"}}), "TFBARRIER_N=");
}

// ---- scope ----

TEST(Scope, Slurm) {
  settings s = ok(slurm_step());
  EXPECT_EQ(s.scope.value, "slurm-4242.0");
  EXPECT_EQ(s.scope.source, "derived:SLURM_JOB_ID");
  env_map env = slurm_step();
  env["SLURM_RESTART_COUNT"] = "2";
  EXPECT_EQ(ok(env).scope.value, "slurm-4242.2");
}

TEST(Scope, SlurmNumbersAreCanonical) {
  env_map env = slurm_step();
  env["SLURM_JOB_ID"] = "004242";
  env["SLURM_RESTART_COUNT"] = "01";
  EXPECT_EQ(ok(env).scope.value, "slurm-4242.1");
}

TEST(Scope, SlurmBadValues) {
  env_map env = slurm_step();
  env["TFBARRIER_PORT"] = "5000";
  env["SLURM_JOB_ID"] = "12a";
  EXPECT_EQ(err(env),
            "SLURM_JOB_ID=\"12a\" is not a job number, so no scope can be derived from it; set TFBARRIER_SCOPE or "
            "pass --scope");
  env = slurm_step();
  env["SLURM_RESTART_COUNT"] = "x";
  EXPECT_EQ(err(env),
            "SLURM_RESTART_COUNT=\"x\" is not a number, so no scope can be derived from it; set TFBARRIER_SCOPE or "
            "pass --scope");
  EXPECT_EQ(ok(env, with_scope("s")).scope.value, "s");
}

TEST(Scope, Torchrun) {
  settings s = ok(torchrun_worker());
  EXPECT_EQ(s.scope.value, "torchrun-job7.0");
  EXPECT_EQ(s.scope.source, "derived:TORCHELASTIC_RUN_ID");
  env_map env = torchrun_worker();
  env["TORCHELASTIC_RESTART_COUNT"] = "3";
  EXPECT_EQ(ok(env).scope.value, "torchrun-job7.3");
  env.erase("TORCHELASTIC_RESTART_COUNT");
  EXPECT_EQ(ok(env).scope.value, "torchrun-job7.0");
  env["TORCHELASTIC_RUN_ID"] = "none";  // torchrun's default --rdzv-id
  EXPECT_EQ(ok(env).scope.value, "torchrun-none.0");
}

TEST(Scope, TorchrunWithoutRunIdIsDefault) {
  settings s = ok({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}});
  EXPECT_EQ(s.scope.value, "default");
  EXPECT_EQ(s.scope.source, "default");
}

TEST(Scope, TorchrunBadValues) {
  env_map env = torchrun_worker();
  env["TORCHELASTIC_RUN_ID"] = "my job";
  EXPECT_EQ(err(env),
            "TORCHELASTIC_RUN_ID=\"my job\" gives the scope \"torchrun-my job.0\", which is not valid (use 1 to 128 "
            "characters of A-Z a-z 0-9 . _ : -); set TFBARRIER_SCOPE or pass --scope");
  env["TORCHELASTIC_RUN_ID"] = std::string(117, 'a');  // "torchrun-" + 117 + ".0" = 128
  EXPECT_EQ(ok(env).scope.value->size(), 128u);
  env["TORCHELASTIC_RUN_ID"] = std::string(118, 'a');
  EXPECT_CONTAINS(err(env), "which is not valid");
  env = torchrun_worker();
  env["TORCHELASTIC_RESTART_COUNT"] = "-1";
  EXPECT_CONTAINS(err(env), "TORCHELASTIC_RESTART_COUNT=\"-1\" is not a number");
  env["TFBARRIER_SCOPE"] = "ok";
  EXPECT_EQ(ok(env).scope.value, "ok");
}

TEST(Scope, OtherLaunchersAreDefault) {
  EXPECT_EQ(ok(openmpi_rank("0")).scope.value, "default");
  EXPECT_EQ(ok(pmi_rank("0")).scope.value, "default");
  EXPECT_EQ(ok({}).scope.value, "default");
}

TEST(Scope, PrecedenceForEveryLauncher) {
  for (const env_map& base : {env_map{}, slurm_step(), torchrun_worker(), openmpi_rank("0"), pmi_rank("0")}) {
    env_map env = base;
    env["TFBARRIER_SCOPE"] = "from-env";
    settings s = ok(env);
    EXPECT_EQ(s.scope.value, "from-env") << to_string(s.launcher);
    EXPECT_EQ(s.scope.source, "env:TFBARRIER_SCOPE");
    s = ok(env, with_scope("from-flag"));
    EXPECT_EQ(s.scope.value, "from-flag") << to_string(s.launcher);
    EXPECT_EQ(s.scope.source, "flag:--scope");
  }
}

TEST(Scope, Charset) {
  std::string all = "AZaz09._:-";
  EXPECT_EQ(ok({}, with_scope(all)).scope.value, all);
  EXPECT_EQ(ok({}, with_scope(std::string(128, 'x'))).scope.value->size(), 128u);
  EXPECT_EQ(err({}, with_scope("a b")),
            "--scope \"a b\" is not a valid scope: use 1 to 128 characters of A-Z a-z 0-9 . _ : -");
  EXPECT_EQ(err({{"TFBARRIER_SCOPE", "a/b"}}),
            "TFBARRIER_SCOPE=\"a/b\" is not a valid scope: use 1 to 128 characters of A-Z a-z 0-9 . _ : -; fix it or "
            "pass --scope");
  for (const std::string& bad : std::vector<std::string>{"", std::string(129, 'x'), "a=b", "*", "a\nb", "ä", "a,b"})
    EXPECT_CONTAINS(err({}, with_scope(bad)), "is not a valid scope");
}

// "-" is the wire's "no value": a scope of "-" passed here once and the host
// then refused the request (BADREQUEST, exit 70 instead of 2).
TEST(Scope, ALoneDashIsRefusedAsTheWireRefusesIt) {
  EXPECT_EQ(err({{"TFBARRIER_SCOPE", "-"}}),
            "TFBARRIER_SCOPE=\"-\" is not a valid scope: a lone - means none on the wire; use 1 to 128 characters of "
            "A-Z a-z 0-9 . _ : -; fix it or pass --scope");
  EXPECT_CONTAINS(err({}, with_scope("-")), "--scope \"-\" is not a valid scope");
  EXPECT_EQ(ok({{"TFBARRIER_SCOPE", "--"}}).scope.value, "--");
  EXPECT_EQ(ok({}, with_scope("-a")).scope.value, "-a");
}

TEST(Scope, ControlBytesAreEscapedInMessages) {
  EXPECT_CONTAINS(err({}, with_scope("a\nb")), "\"a\\x0ab\"");
}

// ---- node ----

TEST(Node, SlurmdNodenameWinsOverHostname) {
  settings s = ok(slurm_step(), {}, "n03.cluster");
  EXPECT_EQ(s.node.value, "n03");
  EXPECT_EQ(s.node.source, "env:SLURMD_NODENAME");
}

TEST(Node, HostnameOtherwise) {
  settings s = ok(torchrun_worker(), {}, "box");
  EXPECT_EQ(s.node.value, "box");
  EXPECT_EQ(s.node.source, "hostname");
}

TEST(Node, TfbarrierNodeWinsOverTheLaunchersAndTheHostname) {
  // Containers on different nodes often share a host name (issue #32): the
  // node a participant names is the one it is told.
  env_map env = slurm_step();
  env["TFBARRIER_NODE"] = "gpu-node-a07x";
  settings s = ok(env, {}, "n03.cluster");
  EXPECT_EQ(s.node.value, "gpu-node-a07x");
  EXPECT_EQ(s.node.source, "env:TFBARRIER_NODE");
}

TEST(Node, ABadTfbarrierNodeIsAUsageErrorNamingIt) {
  env_map env;
  env["TFBARRIER_NODE"] = "a b";
  std::string e = err(env, {});
  EXPECT_CONTAINS(e, "TFBARRIER_NODE");
  EXPECT_CONTAINS(e, "is not a valid node name");
}

TEST(Node, UnsetWithoutEither) {
  settings s = ok({}, {}, "");
  EXPECT_EQ(s.node.value, std::nullopt);
  EXPECT_EQ(s.node.source, "unset");
}

// ---- may_start_host ----

TEST(MayStart, SlurmOnlyOnTheHostNode) {
  env_map env = slurm_step();
  env["SLURMD_NODENAME"] = "n01";
  EXPECT_TRUE(ok(env).may_start_host);
  env["SLURMD_NODENAME"] = "n02";
  EXPECT_FALSE(ok(env).may_start_host);
}

TEST(MayStart, SlurmUsesTheStepsFirstNode) {
  env_map env = slurm_step();
  env["SLURM_STEP_NODELIST"] = "n[03-04]";
  env["SLURMD_NODENAME"] = "n03";
  EXPECT_TRUE(ok(env).may_start_host);
  env["SLURMD_NODENAME"] = "n01";
  EXPECT_FALSE(ok(env).may_start_host);
}

TEST(MayStart, SlurmRankDoesNotMatter) {
  env_map env = slurm_step();
  env["SLURMD_NODENAME"] = "n01";
  env["SLURM_PROCID"] = "3";
  EXPECT_TRUE(ok(env).may_start_host);
}

TEST(MayStart, SlurmBatchScriptRunsOnTheFirstNode) { EXPECT_TRUE(ok(slurm_batch()).may_start_host); }

TEST(MayStart, SallocShellOnALoginNodeMayNot) {
  EXPECT_FALSE(ok(slurm_salloc(), {}, "login1").may_start_host);
  // Without SLURMD_NODENAME the host name is compared.
  EXPECT_TRUE(ok(slurm_salloc(), {}, "n01").may_start_host);
}

TEST(MayStart, RankZeroForTorchrunOpenMpiAndPmi) {
  env_map t = torchrun_worker();
  EXPECT_FALSE(ok(t).may_start_host);
  t["RANK"] = "0";
  EXPECT_TRUE(ok(t).may_start_host);
  EXPECT_TRUE(ok(openmpi_rank("0")).may_start_host);
  EXPECT_FALSE(ok(openmpi_rank("1")).may_start_host);
  EXPECT_TRUE(ok(pmi_rank("0")).may_start_host);
  EXPECT_FALSE(ok(pmi_rank("2")).may_start_host);
}

TEST(MayStart, RankFromTheFlagCounts) {
  EXPECT_TRUE(ok(openmpi_rank("1"), with_rank(0)).may_start_host);
  EXPECT_FALSE(ok(openmpi_rank("0"), with_rank(1)).may_start_host);
}

TEST(MayStart, TorchrunWithoutRankMayNot) {
  EXPECT_FALSE(ok({{"TORCHELASTIC_RUN_ID", "r"}, {"MASTER_ADDR", "m"}}).may_start_host);
}

TEST(MayStart, NoneAlways) {
  EXPECT_TRUE(ok({}).may_start_host);
  EXPECT_TRUE(ok({{"TFBARRIER_PORT", "9"}, {"TFBARRIER_RANK", "3"}}).may_start_host);
}

TEST(MayStart, NeverWithAGivenHostOrAddress) {
  for (const env_map& base : {env_map{}, slurm_batch(), openmpi_rank("0"), pmi_rank("0")}) {
    env_map env = base;
    env["TFBARRIER_HOST"] = "127.0.0.1";
    EXPECT_FALSE(ok(env).may_start_host);
    env.erase("TFBARRIER_HOST");
    env["TFBARRIER_ADDR"] = "127.0.0.1:7727";
    EXPECT_FALSE(ok(env).may_start_host);
  }
}

// ---- addr() ----

TEST(AddrString, Forms) {
  settings s;
  s.host = {"node1", "x"};
  s.port = {80, "x"};
  EXPECT_EQ(s.addr(), "node1:80");
  s.host = {"fd00::1", "x"};
  EXPECT_EQ(s.addr(), "[fd00::1]:80");
  s.host = {"10.0.0.1", "x"};
  EXPECT_EQ(s.addr(), "10.0.0.1:80");
}

// ---- output ----

TEST(Json, AllKeysAndSources) {
  auto j = nlohmann::json::parse(settings_to_json(ok(slurm_step())));
  EXPECT_EQ(j["addr"], "n01:14242");
  EXPECT_EQ(j["host"], "n01");
  EXPECT_EQ(j["port"], 14242);
  EXPECT_EQ(j["n"], 8);
  EXPECT_EQ(j["rank"], 5);
  EXPECT_EQ(j["scope"], "slurm-4242.0");
  EXPECT_EQ(j["launcher"], "slurm");
  EXPECT_EQ(j["node"], "n03");
  EXPECT_EQ(j["may_start_host"], false);
  EXPECT_EQ(j["addr_explicit"], false);
  EXPECT_TRUE(j["warnings"].is_array());
  EXPECT_TRUE(j["warnings"].empty());
  EXPECT_EQ(j["source"]["host"], "derived:SLURM_STEP_NODELIST");
  EXPECT_EQ(j["source"]["port"], "derived:SLURM_JOB_ID");
  EXPECT_EQ(j["source"]["n"], "env:SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(j["source"]["rank"], "env:SLURM_PROCID");
  EXPECT_EQ(j["source"]["scope"], "derived:SLURM_JOB_ID");
  EXPECT_EQ(j["source"]["node"], "env:SLURMD_NODENAME");
  EXPECT_TRUE(j["store"].is_null());
  EXPECT_EQ(j["source"]["store"], "default");
  EXPECT_TRUE(j["store_user"].is_null());  // issue #31 item 9: the etcd user, never its password
  EXPECT_EQ(j["source"]["store_user"], "default");
  EXPECT_EQ(j["launchers"], nlohmann::json::array({"slurm"}));
  EXPECT_EQ(j.size(), 16u);
  EXPECT_EQ(j["source"].size(), 9u);
}

TEST(Json, UnsetValuesAreNull) {
  auto j = nlohmann::json::parse(settings_to_json(ok({}, {}, "")));
  EXPECT_TRUE(j["n"].is_null());
  EXPECT_TRUE(j["rank"].is_null());
  EXPECT_TRUE(j["node"].is_null());
  EXPECT_EQ(j["source"]["n"], "unset");
  EXPECT_EQ(j["may_start_host"], true);
}

TEST(Json, WarningsAndIndentedKeyOrder) {
  std::string text = settings_to_json(ok(openmpi_rank("0")));
  auto j = nlohmann::json::parse(text);
  ASSERT_EQ(j["warnings"].size(), 1u);
  EXPECT_EQ(text.rfind("{\n  \"addr\": \"127.0.0.1:30000\",\n  \"host\"", 0), 0u) << text;
  EXPECT_LT(text.find("\"launcher\""), text.find("\"warnings\""));
}

TEST(Json, Ipv6AddrIsBracketed) {
  auto j = nlohmann::json::parse(settings_to_json(ok({}, with_addr("[::1]:5"))));
  EXPECT_EQ(j["addr"], "[::1]:5");
  EXPECT_EQ(j["host"], "::1");
  EXPECT_EQ(j["addr_explicit"], true);
}

TEST(Text, AlignedLinesWithSources) {
  std::string text = settings_to_text(ok(slurm_step()));
  EXPECT_EQ(text,
            "launcher        slurm\n"
            "addr            n01:14242\n"
            "host            n01           (derived:SLURM_STEP_NODELIST)\n"
            "port            14242         (derived:SLURM_JOB_ID)\n"
            "n               8             (env:SLURM_STEP_NUM_TASKS)\n"
            "rank            5             (env:SLURM_PROCID)\n"
            "scope           slurm-4242.0  (derived:SLURM_JOB_ID)\n"
            "node            n03           (env:SLURMD_NODENAME)\n"
            "insecure        no            (default)\n"
            "store           -             (default)\n"
            "addr_explicit   no\n"
            "may_start_host  no\n");
}

TEST(Store, WithAStoreEveryNodeUsesAndMayStartItsOwnHost) {
  auto env = slurm_step();  // node n03 of a job whose first node is n01
  env["TFBARRIER_STORE"] = "etcd://10.0.0.1:2379";
  auto s = ok(env);
  EXPECT_EQ(s.host.value, "127.0.0.1");
  EXPECT_EQ(s.host.source, "derived:TFBARRIER_STORE (the host of this node)");
  EXPECT_EQ(s.port.source, "derived:SLURM_JOB_ID");  // the job's port, on every node
  EXPECT_TRUE(s.may_start_host);
  // An address given wins, and is never started.
  env["TFBARRIER_ADDR"] = "n01:7000";
  auto t = ok(env);
  EXPECT_EQ(t.host.value, "n01");
  EXPECT_FALSE(t.may_start_host);
}

TEST(Store, TfbarrierStoreIsShownWithItsSource) {
  auto env = slurm_step();
  env["TFBARRIER_STORE"] = "etcd://10.0.0.1:2379/jobs";
  auto s = ok(env);
  EXPECT_EQ(s.store.value, "etcd://10.0.0.1:2379/jobs");
  EXPECT_EQ(s.store.source, "env:TFBARRIER_STORE");
  EXPECT_CONTAINS(settings_to_text(s), "store           etcd://10.0.0.1:2379/jobs  (env:TFBARRIER_STORE)\n");
}

TEST(Store, TheEtcdUserIsShownAndNeverItsPassword) {  // issue #31 item 9
  auto env = slurm_step();
  env["TFBARRIER_STORE"] = "etcd://10.0.0.1:2379/jobs";
  env["TFBARRIER_STORE_USER"] = "job42";
  env["TFBARRIER_STORE_PASSWORD_FILE"] = "/home/u/.etcd-pw";
  auto s = ok(env);
  EXPECT_EQ(s.store_user.value, "job42");
  EXPECT_EQ(s.store_user.source, "env:TFBARRIER_STORE_USER");
  std::string text = settings_to_text(s);
  EXPECT_CONTAINS(text, "store_user      job42");
  EXPECT_CONTAINS(text, "(env:TFBARRIER_STORE_USER)\n");
  auto j = nlohmann::json::parse(settings_to_json(s));
  EXPECT_EQ(j["store_user"], "job42");
  EXPECT_EQ(j["source"]["store_user"], "env:TFBARRIER_STORE_USER");
  // Without one: no line, and null in JSON.
  EXPECT_EQ(settings_to_text(ok(slurm_step())).find("store_user"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::parse(settings_to_json(ok(slurm_step())))["store_user"].is_null());
}

TEST(Text, UnsetValuesAndWarnings) {
  std::string text = settings_to_text(ok(slurm_batch()));
  EXPECT_CONTAINS(text, "rank            -             (unset)\n");
  EXPECT_CONTAINS(text, "may_start_host  yes\n");
  EXPECT_CONTAINS(text, "warning         SLURM_PROCID is ignored");
}

}  // namespace
}  // namespace tfb

// ---- Every launcher (docs/launchers.md): the environment each documents ----

namespace tfb {
namespace {
namespace launchers {

using L = launcher_kind;

// Rank 2 of `mpiexec -n 4` (Hydra), on the host that Hydra's host list calls n02.
env_map hydra(std::string rank = "2") {
  return {{"PMI_RANK", std::move(rank)}, {"PMI_SIZE", "4"},    {"PMI_FD", "6"},
          {"MPI_LOCALRANKID", "0"},      {"MPI_LOCALNRANKS", "2"}, {"HYDI_CONTROL_FD", "7"},
          {"MPIR_CVAR_CH3_INTERFACE_HOSTNAME", "n02"}};
}
// Task 3 of `pbsdsh` in job 1234.pbs01 (4 cpus on 2 nodes), on n02.
env_map pbsdsh(std::string vnode = "3") {
  return {{"PBS_JOBID", "1234.pbs01"}, {"PBS_NODEFILE", "/var/spool/pbs/aux/1234.pbs01"},
          {"PBS_TASKNUM", "5"},        {"PBS_NODENUM", "1"},
          {"PBS_VNODENUM", std::move(vnode)}, {"PBS_O_HOST", "login1"}};
}
const env_map pbs_files = {{"/var/spool/pbs/aux/1234.pbs01", "n01.cluster\nn01.cluster\nn02.cluster\nn02.cluster\n"}};
// Task 2 (LSF_PM_TASKID 3) of `blaunch` in job 77 (6 slots on two hosts).
env_map blaunch(std::string task = "3") {
  return {{"LSB_JOBID", "77"}, {"LSB_MCPU_HOSTS", "hostA 4 hostB 2"}, {"LSB_HOSTS", "hostA hostA hostA hostA hostB hostB"},
          {"LSB_DJOB_NUMPROC", "6"}, {"LSF_PM_TASKID", std::move(task)}};
}
// A task that `qrsh -inherit` started in job 42 of parallel environment with 4 slots.
env_map sge_task() {
  return {{"JOB_ID", "42"}, {"SGE_TASK_ID", "undefined"}, {"NSLOTS", "4"},
          {"PE_HOSTFILE", "/var/spool/sge/n1/active_jobs/42.1/pe_hostfile"}, {"SGE_ROOT", "/var/lib/gridengine"}};
}
const env_map sge_files = {{"/var/spool/sge/n1/active_jobs/42.1/pe_hostfile",
                            "n1.example.org 2 all.q@n1.example.org UNDEFINED\nn2.example.org 2 all.q@n2.example.org UNDEFINED\n"}};
// Task 1 of `flux run -n 3` in job ƒ22 (F58 for 59).
env_map flux_task(std::string rank = "1") {
  return {{"FLUX_JOB_ID", "\xc6\x92" "22"}, {"FLUX_JOB_SIZE", "3"}, {"FLUX_JOB_NNODES", "1"},
          {"FLUX_TASK_RANK", std::move(rank)}, {"FLUX_TASK_LOCAL_ID", "1"}, {"FLUX_URI", "local:///tmp/flux"}};
}
// Node 2 of an HTCondor parallel-universe job of 5.
env_map condor_node(std::string procno = "2") {
  return {{"_CONDOR_PROCNO", std::move(procno)}, {"_CONDOR_NPROCS", "5"}, {"_CONDOR_REMOTE_SPOOL_DIR", "/spool"}};
}
// Pod 3 of the Indexed Job "train", whose pods' subdomain (headless service) is "train-svc".
env_map indexed_pod(std::string index = "3") {
  return {{"JOB_COMPLETION_INDEX", index}, {"HOSTNAME", "train-" + index}, {"SUBDOMAIN", "train-svc"}};
}

TEST(Launchers, EachIsDetectedByItsOwnVariables) {
  EXPECT_EQ(ok(hydra()).launcher, L::mpich);
  EXPECT_EQ(ok_files(pbsdsh(), pbs_files).launcher, L::pbs);
  EXPECT_EQ(ok(blaunch()).launcher, L::lsf);
  EXPECT_EQ(ok_files(sge_task(), sge_files).launcher, L::sge);
  EXPECT_EQ(ok(flux_task()).launcher, L::flux);
  EXPECT_EQ(ok(condor_node()).launcher, L::condor);
  EXPECT_EQ(ok(indexed_pod()).launcher, L::k8s);
  // A JOB_ID alone is anybody's: Grid Engine's comes with SGE_TASK_ID or PE_HOSTFILE.
  EXPECT_EQ(ok({{"JOB_ID", "42"}}).launcher, L::none);
  EXPECT_EQ(ok({{"JOB_ID", "42"}, {"SGE_TASK_ID", "undefined"}}).launcher, L::sge);
}

TEST(Launchers, NamesAndOrder) {
  EXPECT_EQ(to_string(L::mpich), "mpich");
  EXPECT_EQ(to_string(L::k8s), "k8s");
  EXPECT_EQ(to_string(L::sge), "sge");
  const auto& all = known_launchers();
  auto at = [&](L l) { return std::find(all.begin(), all.end(), l) - all.begin(); };
  // Task launchers before the schedulers they run inside.
  for (L inner : {L::torchrun, L::openmpi, L::mpich, L::flux, L::condor, L::k8s})
    for (L outer : {L::slurm, L::pbs, L::lsf, L::sge}) EXPECT_LT(at(inner), at(outer)) << to_string(inner);
  EXPECT_LT(at(L::slurm), at(L::pmi));  // srun --mpi=pmi2's own PMI
  EXPECT_LT(at(L::pmi), at(L::pbs));
}

TEST(Launchers, MpichRankSizeAndNodeFromHydra) {
  settings s = ok(hydra());
  EXPECT_EQ(s.rank.value, 2u);
  EXPECT_EQ(s.rank.source, "env:PMI_RANK");
  EXPECT_EQ(s.n.value, 4u);
  EXPECT_EQ(s.n.source, "env:PMI_SIZE");
  EXPECT_EQ(s.node.value, "n02");
  EXPECT_EQ(s.node.source, "env:MPIR_CVAR_CH3_INTERFACE_HOSTNAME");
  EXPECT_EQ(s.launchers, std::vector<L>{L::mpich});  // not also "pmi"
  // No host file: Hydra runs everything here, and says so.
  EXPECT_EQ(s.host.value, "127.0.0.1");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_CONTAINS(s.warnings[0], "MPICH / Intel MPI (Hydra) does not say where rank 0 runs");
  EXPECT_FALSE(s.may_start_host);
  EXPECT_TRUE(ok(hydra("0")).may_start_host);
}

TEST(Launchers, MpichHostFileGivesRankZerosHost) {
  env_map env = hydra();
  env["HYDRA_HOST_FILE"] = "/home/u/hosts";
  settings s = ok_files(env, {{"/home/u/hosts", "# the nodes\n\n  n01:2\nn02:2\n"}});
  EXPECT_EQ(s.host.value, "n01");
  EXPECT_EQ(s.host.source, "derived:HYDRA_HOST_FILE");
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_FALSE(s.may_start_host);  // this is n02
  env["MPIR_CVAR_CH3_INTERFACE_HOSTNAME"] = "n01";
  EXPECT_TRUE(ok_files(env, {{"/home/u/hosts", "n01:2\nn02:2\n"}}).may_start_host);
  // Intel MPI's name for it.
  env.erase("HYDRA_HOST_FILE");
  env["I_MPI_HYDRA_HOST_FILE"] = "/h";
  EXPECT_EQ(ok_files(env, {{"/h", "gpu7\n"}}).host.source, "derived:I_MPI_HYDRA_HOST_FILE");
  // Unreadable: a clear error, naming the variable and the file.
  EXPECT_EQ(err_files(env, {}),
            "cannot read \"/h\", which I_MPI_HYDRA_HOST_FILE names as the job's hosts: No such file or directory; set "
            "TFBARRIER_HOST or TFBARRIER_ADDR, or pass --addr HOST:PORT");
  EXPECT_CONTAINS(err_files(env, {{"/h", "# nothing\n"}}), "which lists no host");
}

TEST(Launchers, MpiexecInsideSbatchTakesMpichsRankAndSlurmsJob) {
  // Hydra under Slurm starts its proxies with srun, one per node: the step's
  // SLURM_PROCID is the node's index and the step's node list that of the proxies.
  env_map env = hydra("3");
  env.merge(env_map{{"SLURM_JOB_ID", "4242"}, {"SLURM_JOB_NODELIST", "n[01-02]"}, {"SLURM_STEP_NODELIST", "n02"},
                    {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}, {"SLURMD_NODENAME", "n02"},
                    {"SLURM_NTASKS", "8"}});
  settings s = ok(env);
  EXPECT_EQ(s.launcher, L::mpich);
  EXPECT_EQ(s.launchers, (std::vector<L>{L::mpich, L::slurm}));
  EXPECT_EQ(s.rank.value, 3u);
  EXPECT_EQ(s.rank.source, "env:PMI_RANK");
  EXPECT_EQ(s.n.value, 4u);
  EXPECT_EQ(s.host.value, "n01");  // the job's first node, not the proxies' step's
  EXPECT_EQ(s.host.source, "derived:SLURM_JOB_NODELIST");
  EXPECT_EQ(s.port.value, 14242);
  EXPECT_EQ(s.scope.value, "slurm-4242.0");
  EXPECT_EQ(s.node.source, "env:MPIR_CVAR_CH3_INTERFACE_HOSTNAME");
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_FALSE(s.may_start_host);  // n02; the tasks on n01 start it
  env["MPIR_CVAR_CH3_INTERFACE_HOSTNAME"] = "n01";
  EXPECT_TRUE(ok(env).may_start_host);
  EXPECT_CONTAINS(settings_to_text(ok(env)), "mpich (inside slurm)");
}

TEST(Launchers, OpenMpiInsideSbatch) {
  env_map env = openmpi_rank("5");
  env.merge(slurm_batch());
  settings s = ok(env);
  EXPECT_EQ(s.launchers, (std::vector<L>{L::openmpi, L::slurm}));
  EXPECT_EQ(s.rank.value, 5u);
  EXPECT_EQ(s.n.value, 6u);
  EXPECT_EQ(s.n.source, "env:OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(s.host.value, "n01");
  EXPECT_EQ(s.scope.source, "derived:SLURM_JOB_ID");
  EXPECT_TRUE(s.warnings.empty());  // no SLURM_PROCID warning: Open MPI gives the rank
}

TEST(Launchers, SrunsOwnPmiIsSlurm) {
  // srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE to the task's own rank and size.
  env_map env = slurm_step();
  env.merge(env_map{{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"PMI_FD", "5"}});
  settings s = ok(env);
  EXPECT_EQ(s.launcher, L::slurm);
  EXPECT_EQ(s.rank.source, "env:SLURM_PROCID");
  EXPECT_EQ(s.host.source, "derived:SLURM_STEP_NODELIST");
}

TEST(Launchers, PbsdshTasks) {
  settings s = ok_files(pbsdsh(), pbs_files, {}, "n02");
  EXPECT_EQ(s.rank.value, 3u);
  EXPECT_EQ(s.rank.source, "env:PBS_VNODENUM");
  EXPECT_EQ(s.n.value, 4u);
  EXPECT_EQ(s.n.source, "derived:PBS_NODEFILE (lines)");
  EXPECT_EQ(s.host.value, "n01.cluster");
  EXPECT_EQ(s.host.source, "derived:PBS_NODEFILE");
  EXPECT_EQ(s.port.value, 10000 + 1234);
  EXPECT_EQ(s.port.source, "derived:PBS_JOBID");
  EXPECT_EQ(s.scope.value, "pbs-1234.pbs01");
  EXPECT_FALSE(s.may_start_host);
  // On the first node (its short name), whatever the rank.
  EXPECT_TRUE(ok_files(pbsdsh("1"), pbs_files, {}, "n01").may_start_host);
  // Torque's PBS_NP wins over counting lines.
  env_map env = pbsdsh();
  env["PBS_NP"] = "4";
  EXPECT_EQ(ok_files(env, pbs_files).n.source, "env:PBS_NP");
}

TEST(Launchers, PbsJobScriptHasNoRankAndArraysGetTheirOwnScope) {
  env_map env = pbsdsh();
  env.erase("PBS_TASKNUM");
  settings s = ok_files(env, pbs_files);
  EXPECT_FALSE(s.rank.value);
  env["PBS_JOBID"] = "1234[7].pbs01";
  EXPECT_EQ(ok_files(env, pbs_files).scope.value, "pbs-1234_7_.pbs01");
  EXPECT_EQ(ok_files(env, pbs_files).port.value, 10000 + 1234);
  env["PBS_JOBID"] = "pbs01";
  EXPECT_CONTAINS(err_files(env, pbs_files), "PBS_JOBID=\"pbs01\" is not a job number");
}

TEST(Launchers, PbsNodefileUnreadableIsAClearError) {
  EXPECT_EQ(err_files(pbsdsh(), {}),
            "cannot read \"/var/spool/pbs/aux/1234.pbs01\", which PBS_NODEFILE names as the job's hosts: No such file "
            "or directory; set TFBARRIER_HOST or TFBARRIER_ADDR, or pass --addr HOST:PORT");
  // With the host given, the file is still read for n; with n given too, never.
  env_map env = pbsdsh();
  env["TFBARRIER_HOST"] = "n01";
  EXPECT_CONTAINS(err_files(env, {}), "which PBS_NODEFILE names as the job's cpus");
  env["TFBARRIER_N"] = "4";
  EXPECT_EQ(ok_files(env, {}).n.value, 4u);
}

TEST(Launchers, BlaunchTasks) {
  settings s = ok(blaunch(), {}, "hostB");
  EXPECT_EQ(s.rank.value, 2u);
  EXPECT_EQ(s.rank.source, "env:LSF_PM_TASKID (minus 1)");
  EXPECT_EQ(s.n.value, 6u);
  EXPECT_EQ(s.n.source, "env:LSB_DJOB_NUMPROC");
  EXPECT_EQ(s.host.value, "hostA");
  EXPECT_EQ(s.host.source, "derived:LSB_MCPU_HOSTS");
  EXPECT_EQ(s.port.value, 10077);
  EXPECT_EQ(s.scope.value, "lsf-77");
  EXPECT_FALSE(s.may_start_host);
  EXPECT_TRUE(ok(blaunch(), {}, "hostA").may_start_host);
  env_map env = blaunch();
  env["LSB_JOBINDEX"] = "5";
  EXPECT_EQ(ok(env).scope.value, "lsf-77-5");
  env["LSB_JOBINDEX"] = "0";  // not an array job
  EXPECT_EQ(ok(env).scope.value, "lsf-77");
  EXPECT_CONTAINS(err(blaunch("0")), "LSF_PM_TASKID=\"0\" is not a rank");
  EXPECT_CONTAINS(err(blaunch("7")), "rank 6 (from LSF_PM_TASKID (minus 1)) is not below n=6");
  // The job script itself (no LSF_PM_TASKID) has no rank.
  env = blaunch();
  env.erase("LSF_PM_TASKID");
  EXPECT_FALSE(ok(env).rank.value);
}

TEST(Launchers, GridEngineTasks) {
  settings s = ok_files(sge_task(), sge_files, {}, "n1");
  EXPECT_FALSE(s.rank.value);  // Grid Engine gives none: --rank, TFBARRIER_RANK or an MPI inside
  EXPECT_EQ(s.n.value, 4u);
  EXPECT_EQ(s.n.source, "env:NSLOTS");
  EXPECT_EQ(s.host.value, "n1.example.org");
  EXPECT_EQ(s.host.source, "derived:PE_HOSTFILE");
  EXPECT_EQ(s.port.value, 10042);
  EXPECT_EQ(s.scope.value, "sge-42");
  EXPECT_TRUE(s.may_start_host);  // n1 is n1.example.org's short name
  EXPECT_FALSE(ok_files(sge_task(), sge_files, {}, "n2").may_start_host);
  env_map env = sge_task();
  env["SGE_TASK_ID"] = "3";
  EXPECT_EQ(ok_files(env, sge_files).scope.value, "sge-42-3");
  EXPECT_CONTAINS(err_files(sge_task(), {}), "which PE_HOSTFILE names as the job's hosts");
  // MPICH inside a Grid Engine job: Hydra's rank, Grid Engine's job and first host.
  env = sge_task();
  env.merge(hydra("1"));
  s = ok_files(env, sge_files);
  EXPECT_EQ(s.launchers, (std::vector<L>{L::mpich, L::sge}));
  EXPECT_EQ(s.rank.value, 1u);
  EXPECT_EQ(s.host.value, "n1.example.org");
  EXPECT_EQ(s.scope.value, "sge-42");
}

TEST(Launchers, FluxTasks) {
  settings s = ok(flux_task());
  EXPECT_EQ(s.rank.value, 1u);
  EXPECT_EQ(s.rank.source, "env:FLUX_TASK_RANK");
  EXPECT_EQ(s.n.value, 3u);
  EXPECT_EQ(s.n.source, "env:FLUX_JOB_SIZE");
  EXPECT_EQ(s.scope.value, "flux-59");  // F58 "22" is 1 * 58 + 1
  EXPECT_EQ(s.port.value, 10059);
  EXPECT_EQ(s.host.value, "127.0.0.1");
  EXPECT_CONTAINS(s.warnings.at(0), "Flux does not say where rank 0 runs");
  env_map env = flux_task();
  env["FLUX_JOB_ID"] = "f22";  // the ASCII form
  EXPECT_EQ(ok(env).scope.value, "flux-59");
  env["FLUX_JOB_ID"] = "123456789";  // decimal, as `flux job id` prints it
  EXPECT_EQ(ok(env).scope.value, "flux-123456789");
  env["FLUX_JOB_ID"] = "f0OIl";  // not F58
  EXPECT_CONTAINS(err(env), "FLUX_JOB_ID=\"f0OIl\" is not a job number");
  EXPECT_CONTAINS(err(flux_task("3")), "rank 3 (from FLUX_TASK_RANK) is not below n=3 (from FLUX_JOB_SIZE)");
}

TEST(Launchers, MpiexecInsideAFluxBatchJob) {
  // The batch script is task 0 of a job of one; mpiexec's ranks are the tasks.
  env_map env = flux_task("0");
  env["FLUX_JOB_SIZE"] = "1";
  env.merge(hydra("3"));
  settings s = ok(env);
  EXPECT_EQ(s.launchers, (std::vector<L>{L::mpich, L::flux}));
  EXPECT_EQ(s.rank.value, 3u);
  EXPECT_EQ(s.n.value, 4u);
  EXPECT_EQ(s.scope.value, "flux-59");
}

TEST(Launchers, HtcondorParallelUniverse) {
  settings s = ok(condor_node());
  EXPECT_EQ(s.rank.value, 2u);
  EXPECT_EQ(s.rank.source, "env:_CONDOR_PROCNO");
  EXPECT_EQ(s.n.value, 5u);
  EXPECT_EQ(s.scope.value, "default");
  EXPECT_CONTAINS(s.warnings.at(0), "HTCondor's parallel universe does not say where rank 0 runs");
  EXPECT_TRUE(ok(condor_node("0")).may_start_host);
}

TEST(Launchers, KubernetesIndexedJob) {
  settings s = ok(indexed_pod());
  EXPECT_EQ(s.rank.value, 3u);
  EXPECT_EQ(s.rank.source, "env:JOB_COMPLETION_INDEX");
  EXPECT_FALSE(s.n.value);  // the manifest gives it (TFBARRIER_N)
  EXPECT_EQ(s.host.value, "train-0.train-svc");
  EXPECT_EQ(s.host.source, "derived:HOSTNAME+SUBDOMAIN");
  EXPECT_EQ(s.scope.value, "k8s-train");
  EXPECT_FALSE(s.may_start_host);
  EXPECT_TRUE(ok(indexed_pod("0")).may_start_host);
  EXPECT_TRUE(s.warnings.empty());
  // JobSet: pod 0 of the same Job.
  env_map env = {{"JOB_COMPLETION_INDEX", "1"}, {"HOSTNAME", "js-workers-0-1"}, {"SUBDOMAIN", "js"}};
  EXPECT_EQ(ok(env).host.value, "js-workers-0-0.js");
  // Without SUBDOMAIN: the bare name, and a warning that says what to set.
  env.erase("SUBDOMAIN");
  s = ok(env);
  EXPECT_EQ(s.host.value, "js-workers-0-0");
  EXPECT_CONTAINS(s.warnings.at(0), "set SUBDOMAIN");
  // A host name that is not JOB-INDEX says nothing: loopback, with a warning.
  s = ok({{"JOB_COMPLETION_INDEX", "1"}, {"HOSTNAME", "mypod"}});
  EXPECT_EQ(s.host.value, "127.0.0.1");
  EXPECT_EQ(s.scope.value, "default");
}

TEST(Launchers, TfbarrierVariablesStillWinOverEveryNewLauncher) {
  for (env_map env : {hydra(), blaunch(), flux_task(), condor_node(), indexed_pod()}) {
    env["TFBARRIER_ADDR"] = "boss:4000";
    env["TFBARRIER_RANK"] = "0";
    env["TFBARRIER_N"] = "2";
    env["TFBARRIER_SCOPE"] = "mine";
    settings s = ok(env);
    EXPECT_EQ(s.addr(), "boss:4000") << to_string(s.launcher);
    EXPECT_EQ(s.rank.source, "env:TFBARRIER_RANK");
    EXPECT_EQ(s.n.source, "env:TFBARRIER_N");
    EXPECT_EQ(s.scope.value, "mine");
    EXPECT_FALSE(s.may_start_host);
  }
}

TEST(Launchers, JsonListsEveryLauncherInnermostFirst) {
  env_map env = hydra();
  env.merge(slurm_batch());
  auto j = nlohmann::json::parse(settings_to_json(ok(env)));
  EXPECT_EQ(j["launcher"], "mpich");
  EXPECT_EQ(j["launchers"], nlohmann::json::array({"mpich", "slurm"}));
  EXPECT_EQ(nlohmann::json::parse(settings_to_json(ok({})))["launchers"], nlohmann::json::array());
}

TEST(LauncherFile, ReadsAFileAndRefusesOneTooLarge) {
  std::string path = ::testing::TempDir() + "tfb_launcher_file";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs("n01\nn02\n", f);
    std::fclose(f);
  }
  std::string why;
  EXPECT_EQ(read_launcher_file(path, why), "n01\nn02\n");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::string big(max_launcher_file + 1, 'x');
    std::fwrite(big.data(), 1, big.size(), f);
    std::fclose(f);
  }
  EXPECT_FALSE(read_launcher_file(path, why));
  EXPECT_EQ(why, "it is larger than 1024 KiB");
  std::remove(path.c_str());
  EXPECT_FALSE(read_launcher_file(path, why));
  EXPECT_EQ(why, "No such file or directory");
}

}  // namespace launchers
}  // namespace
}  // namespace tfb
