#include "settings.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <span>
#include <fmt/format.h>

#include "text.h"
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "address.h"
#include "hostlist.h"
#include "protocol.h"

namespace tfb {
namespace {

constexpr std::uint32_t max_tasks = proto::max_n;
constexpr std::uint32_t max_rank = max_tasks - 1;
/// Slurm ports: slurm_port_base + job id % slurm_port_span, i.e. 10000-29999,
/// below the Linux ephemeral range (32768-60999) so no client socket holds it.
constexpr std::uint64_t slurm_port_base = 10000;
constexpr std::uint64_t slurm_port_span = 20000;
constexpr std::string_view loopback = "127.0.0.1";
constexpr std::string_view scope_rule = "use 1 to 128 characters of A-Z a-z 0-9 . _ : -";
constexpr std::string_view addr_hint = "set TFBARRIER_HOST or TFBARRIER_ADDR, or pass --addr HOST:PORT";

/// A value for an error message: quoted, control bytes escaped, long values cut.

/// `VAR="value"` for a variable, `--flag "value"` for a flag.
std::string show(std::string_view name, std::string_view value) {
  if (name.starts_with("--")) return fmt::format("{} {}", name, quote_text(value));
  return fmt::format("{}={}", name, quote_text(value));
}

/// "flag:--n" -> "--n", "env:SLURM_NTASKS" -> "SLURM_NTASKS", others unchanged.
std::string_view origin(std::string_view source) {
  for (std::string_view prefix : {"flag:", "env:", "derived:"})
    if (source.starts_with(prefix)) return source.substr(prefix.size());
  return source;
}

std::optional<std::uint64_t> parse_decimal(std::string_view s) {
  if (s.empty()) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::uint16_t> parse_port(std::string_view s) {
  auto v = parse_decimal(s);
  if (!v || *v < 1 || *v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(*v);
}

/// What a scope must be, for an error about `scope`. The rule is the wire's
/// (proto::valid_name), so that what passes here is what the host accepts.
std::string scope_rule_for(std::string_view scope) {
  if (scope == "-") return fmt::format("a lone - means none on the wire; {}", scope_rule);
  return std::string(scope_rule);
}
/// Checks a host name or IP address, removing the brackets of "[v6]".
/// nullopt + why (a clause) when it is neither.
std::optional<std::string> check_host(std::string_view h, std::string& why) {
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
    std::string_view inner = h.substr(1, h.size() - 2);
    if (valid_ipv6(inner)) return std::string(inner);
    why = "brackets hold only IPv6 addresses";
    return std::nullopt;
  }
  if (valid_hostname(h)) return std::string(h);
  if (valid_ipv6(h)) return std::string(h);
  auto colons = std::count(h.begin(), h.end(), ':');
  if (colons == 1) {
    why = "it looks like HOST:PORT, which belongs in TFBARRIER_ADDR or --addr";
  } else if (h.empty()) {
    why = "it is empty";
  } else {
    why = "it is neither a host name (A-Z a-z 0-9 . - _) nor an IP address";
  }
  return std::nullopt;
}

/// How to read one numeric setting (n or rank).
struct number_rule {
  std::string_view flag;       ///< "--n"
  std::string_view variable;   ///< "TFBARRIER_N"
  std::uint32_t min = 0, max = 0;
  std::string_view noun;       ///< "a number of tasks"
  std::string_view range;      ///< "the number of tasks runs from 1 to 1000000"
};

constexpr number_rule n_rule{"--n", "TFBARRIER_N", 1, max_tasks, "a number of tasks",
                             "the number of tasks runs from 1 to 1000000"};
constexpr number_rule rank_rule{"--rank", "TFBARRIER_RANK", 0, max_rank, "a rank",
                                "a rank runs from 0 to 999999"};

const number_rule& rule_of(count_kind kind) { return kind == count_kind::n ? n_rule : rank_rule; }

}  // namespace

std::string check_count_flag(count_kind kind, std::string& text) {
  const number_rule& rule = rule_of(kind);
  auto v = parse_decimal(text);
  if (!v) return fmt::format("{} is not {}: {}", quote_text(text), rule.noun, rule.range);
  if (*v < rule.min || *v > rule.max) return fmt::format("{} is out of range: {}", quote_text(text), rule.range);
  text = std::to_string(*v);
  return {};
}

std::string count_range_text(count_kind kind) {
  const number_rule& rule = rule_of(kind);
  return fmt::format("in [{} - {}]", rule.min, rule.max);
}

namespace {

// ---- The launchers: what each one's variables say ----
//
// One row per launcher, innermost first (known_launchers()): a process started
// by mpiexec inside an sbatch has both launchers' variables, and takes its rank
// and size from the one that started it (the first row that is detected),
// the job (port and scope), the node and where the host runs from the first
// row, inner or outer, that gives them. An outer launcher never gives the rank
// or the size: those of an sbatch's own step are not this process's.
// docs/launchers.md is this table for people: keep the two together.

/// How a launcher says where rank 0 runs.
enum class host_rule {
  none,            ///< it does not: 127.0.0.1 when no other launcher says (with a warning)
  slurm_nodelist,  ///< the first node of SLURM_STEP_NODELIST (in a step), else SLURM_JOB_NODELIST, SLURM_NODELIST
  variable,        ///< host_var names it (torchrun's MASTER_ADDR)
  file_first,      ///< host_var names a file whose first line's first word is rank 0's node
  words_first,     ///< host_var's first word (LSF's LSB_MCPU_HOSTS: "hostA 4 hostB 2")
  k8s_pod,         ///< the Indexed Job's pod 0: HOSTNAME with its index replaced by 0, in SUBDOMAIN
};

/// How a launcher's job id becomes a number, for the port.
enum class job_rule {
  none,     ///< no port from this launcher's job id
  decimal,  ///< a decimal job id (Slurm, LSF, Grid Engine)
  prefix,   ///< the decimal digits that start it (PBS: "1234.server", "1234[7].server")
  flux,     ///< Flux's F58 ("ƒ2Pyjm1C", or "f2Pyjm1C" in an ASCII locale) or decimal
};

struct launcher_def {
  launcher_kind kind;
  std::string_view name;   ///< as `config` prints it
  std::string_view title;  ///< for messages
  std::string_view doc;    ///< where its variables are documented
  // Detected when every one of `all` is set and, if `any` is not empty, one of `any`.
  std::array<std::string_view, 3> all;
  std::array<std::string_view, 2> any;
  std::string_view alone;  ///< or this one alone (torchrun's TORCHELASTIC_RUN_ID)
  // Only from the innermost launcher:
  std::array<std::string_view, 3> n_vars;  ///< the first that is set
  std::string_view n_file;                 ///< else: the number of lines of the file this names (PBS)
  std::string_view rank_var;
  std::string_view rank_needs;             ///< the rank is read only where this is set too ("" = always)
  std::uint32_t rank_base = 0;             ///< the launcher's first rank (LSF's tasks count from 1)
  // From the first launcher that gives them:
  std::string_view node_var;
  std::string_view job_var;     ///< the job id, for the scope (and the port, see job)
  job_rule job = job_rule::none;
  std::string_view scope_prefix;
  std::string_view index_var;   ///< an array job's index: appended to the scope when it is a number other than 0
  std::string_view restart_var; ///< the attempt: ".N" at the end of the scope (0 when unset)
  host_rule host = host_rule::none;
  std::string_view host_var;
};

constexpr std::string_view slurm_doc = "https://slurm.schedmd.com/srun.html#SECTION_OUTPUT-ENVIRONMENT-VARIABLES";

// Order: the innermost first. Task launchers (torchrun, MPI, Flux's and
// HTCondor's task ranks, a Kubernetes index) before the schedulers they run
// in; Slurm before a bare PMI, which srun itself sets with --mpi=pmi2 (the same
// rank and size as SLURM_PROCID: then Slurm is the launcher).
constexpr launcher_def launcher_table[] = {  // constant: no initializer runs at start-up
    {.kind = launcher_kind::torchrun, .name = "torchrun", .title = "torchrun",
     .doc = "https://pytorch.org/docs/stable/elastic/run.html#environment-variables",
     .all = {"RANK", "WORLD_SIZE", "MASTER_ADDR"}, .alone = "TORCHELASTIC_RUN_ID",
     .n_vars = {"WORLD_SIZE"}, .rank_var = "RANK",
     .job_var = "TORCHELASTIC_RUN_ID", .scope_prefix = "torchrun", .restart_var = "TORCHELASTIC_RESTART_COUNT",
     .host = host_rule::variable, .host_var = "MASTER_ADDR"},
    {.kind = launcher_kind::openmpi, .name = "openmpi", .title = "Open MPI",
     .doc = "https://docs.open-mpi.org/en/v5.0.x/tuning-apps/environment-var.html",
     .all = {"OMPI_COMM_WORLD_SIZE"}, .n_vars = {"OMPI_COMM_WORLD_SIZE"}, .rank_var = "OMPI_COMM_WORLD_RANK"},
    // Hydra (MPICH's and Intel MPI's mpiexec) sets PMI_RANK, PMI_SIZE, MPI_LOCALRANKID and, for
    // this node as its host list names it, MPIR_CVAR_CH3_INTERFACE_HOSTNAME. HYDRA_HOST_FILE
    // (I_MPI_HYDRA_HOST_FILE) is the host file mpiexec reads when given none: rank 0 runs on its
    // first host.
    {.kind = launcher_kind::mpich, .name = "mpich", .title = "MPICH / Intel MPI (Hydra)",
     .doc = "https://github.com/pmodels/mpich/blob/main/doc/wiki/how_to/Using_the_Hydra_Process_Manager.md",
     .all = {"PMI_SIZE", "MPI_LOCALRANKID"}, .n_vars = {"PMI_SIZE"}, .rank_var = "PMI_RANK",
     .node_var = "MPIR_CVAR_CH3_INTERFACE_HOSTNAME", .host = host_rule::file_first, .host_var = "HYDRA_HOST_FILE"},
    {.kind = launcher_kind::flux, .name = "flux", .title = "Flux",
     .doc = "https://flux-framework.readthedocs.io/projects/flux-core/en/latest/man7/flux-environment.html",
     .all = {"FLUX_JOB_ID"}, .n_vars = {"FLUX_JOB_SIZE"}, .rank_var = "FLUX_TASK_RANK",
     .job_var = "FLUX_JOB_ID", .job = job_rule::flux, .scope_prefix = "flux"},
    {.kind = launcher_kind::condor, .name = "condor", .title = "HTCondor's parallel universe",
     .doc = "https://htcondor.readthedocs.io/en/latest/users-manual/parallel-applications.html",
     .all = {"_CONDOR_NPROCS", "_CONDOR_PROCNO"}, .n_vars = {"_CONDOR_NPROCS"}, .rank_var = "_CONDOR_PROCNO"},
    {.kind = launcher_kind::k8s, .name = "k8s", .title = "a Kubernetes Indexed Job",
     .doc = "https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode",
     .all = {"JOB_COMPLETION_INDEX"}, .rank_var = "JOB_COMPLETION_INDEX",
     .host = host_rule::k8s_pod, .host_var = "HOSTNAME"},
    {.kind = launcher_kind::slurm, .name = "slurm", .title = "Slurm", .doc = slurm_doc,
     .all = {"SLURM_JOB_ID"}, .n_vars = {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"},
     .rank_var = "SLURM_PROCID", .node_var = "SLURMD_NODENAME", .job_var = "SLURM_JOB_ID", .job = job_rule::decimal,
     .scope_prefix = "slurm", .restart_var = "SLURM_RESTART_COUNT", .host = host_rule::slurm_nodelist},
    {.kind = launcher_kind::pmi, .name = "pmi", .title = "PMI",
     .doc = "https://www.mcs.anl.gov/papers/P1760.pdf",
     .all = {"PMI_SIZE"}, .n_vars = {"PMI_SIZE"}, .rank_var = "PMI_RANK"},
    // pbsdsh sets PBS_TASKNUM, PBS_NODENUM and PBS_VNODENUM (the cpu: one per line of PBS_NODEFILE).
    {.kind = launcher_kind::pbs, .name = "pbs", .title = "PBS",
     .doc = "https://manpages.debian.org/bookworm/torque-client/pbsdsh.1.en.html",
     .all = {"PBS_JOBID"}, .n_vars = {"PBS_NP"}, .n_file = "PBS_NODEFILE", .rank_var = "PBS_VNODENUM",
     .rank_needs = "PBS_TASKNUM", .job_var = "PBS_JOBID", .job = job_rule::prefix, .scope_prefix = "pbs",
     .host = host_rule::file_first, .host_var = "PBS_NODEFILE"},
    // blaunch's tasks have LSF_PM_TASKID, from 1 (Open MPI's LSF support reads it the same way).
    {.kind = launcher_kind::lsf, .name = "lsf", .title = "LSF",
     .doc = "https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=variables-environment-set-job-execution",
     .all = {"LSB_JOBID"}, .n_vars = {"LSB_DJOB_NUMPROC"}, .rank_var = "LSF_PM_TASKID", .rank_base = 1,
     .job_var = "LSB_JOBID", .job = job_rule::decimal, .scope_prefix = "lsf", .index_var = "LSB_JOBINDEX",
     .host = host_rule::words_first, .host_var = "LSB_MCPU_HOSTS"},
    // Grid Engine gives no rank: not to the job script, not to what qrsh -inherit starts.
    {.kind = launcher_kind::sge, .name = "sge", .title = "Grid Engine",
     .doc = "https://gridengine.sourceforge.io/htmlman/htmlman1/qsub.html",
     .all = {"JOB_ID"}, .any = {"SGE_TASK_ID", "PE_HOSTFILE"}, .n_vars = {"NSLOTS"},
     .job_var = "JOB_ID", .job = job_rule::decimal, .scope_prefix = "sge", .index_var = "SGE_TASK_ID",
     .host = host_rule::file_first, .host_var = "PE_HOSTFILE"},
};

const launcher_def* def_of(launcher_kind kind) {
  for (const auto& d : launcher_table)
    if (d.kind == kind) return &d;
  return nullptr;
}

/// Flux's F58 job id ("ƒ" or "f", then base 58) or a decimal one, as a number.
std::optional<std::uint64_t> parse_flux_id(std::string_view id) {
  if (auto d = parse_decimal(id)) return d;
  if (id.starts_with("\xc6\x92")) id.remove_prefix(2);  // ƒ in UTF-8
  else if (id.starts_with('f')) id.remove_prefix(1);
  else return std::nullopt;
  constexpr std::string_view alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  if (id.empty() || id.size() > 11) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : id) {
    auto at = alphabet.find(c);
    if (at == std::string_view::npos) return std::nullopt;
    if (v > (UINT64_MAX - at) / 58) return std::nullopt;
    v = v * 58 + at;
  }
  return v;
}

/// The first word of the first line that has one ('#' starts a comment); cut at
/// ':' when `colon` (Hydra's "host:slots").
std::string first_word(std::string_view text, bool colon) {
  while (!text.empty()) {
    auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    auto start = line.find_first_not_of(" \t\r");
    if (start == std::string_view::npos) continue;
    line = line.substr(start);
    line = line.substr(0, line.find_first_of(" \t\r"));
    if (colon && line.find(':') == line.rfind(':')) line = line.substr(0, line.find(':'));
    return std::string(line);
  }
  return {};
}

/// "node01.cluster" -> "node01"; an IP address stays whole.
std::string_view short_name(std::string_view h) {
  if (h.empty() || (h.front() >= '0' && h.front() <= '9') || h.find(':') != std::string_view::npos) return h;
  return h.substr(0, h.find('.'));
}

class resolver {
 public:
  resolver(const flag_inputs& flags, const env_lookup& env, std::string_view hostname, std::string& error,
           const file_lookup& files)
      : flags_(flags), env_(env), files_(files), hostname_(hostname), error_(error) {}

  std::optional<settings> run() {
    detect_launchers();
    resolve_store();
    if (!resolve_node() || !resolve_address() || (flags_.counts && (!resolve_n() || !resolve_rank())) ||
        !resolve_scope() || !resolve_insecure())
      return std::nullopt;
    decide_may_start();
    return s_;
  }

 private:
  /// An environment variable; unset and empty are the same.
  std::optional<std::string> get(std::string_view name) const {
    if (!env_ || name.empty()) return std::nullopt;
    auto v = env_(name);
    if (!v || v->empty()) return std::nullopt;
    return v;
  }
  bool has(std::string_view name) const { return get(name).has_value(); }

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  bool detected(const launcher_def& d) const {
    if (!d.alone.empty() && has(d.alone)) return true;
    for (std::string_view v : d.all)
      if (!v.empty() && !has(v)) return false;
    if (d.any[0].empty()) return true;
    for (std::string_view v : d.any)
      if (!v.empty() && has(v)) return true;
    return false;
  }

  void detect_launchers() {
    for (const auto& d : launcher_table) {
      if (d.kind == launcher_kind::pmi &&
          std::find(s_.launchers.begin(), s_.launchers.end(), launcher_kind::mpich) != s_.launchers.end())
        continue;  // Hydra's PMI is MPICH's
      if (detected(d)) s_.launchers.push_back(d.kind);
    }
    s_.launcher = s_.launchers.empty() ? launcher_kind::none : s_.launchers.front();
    inner_ = def_of(s_.launcher);
  }

  /// The launchers detected, innermost first.
  template <class F>
  void each_launcher(F&& f) const {
    for (launcher_kind k : s_.launchers)
      if (f(*def_of(k))) return;
  }

  /// An Indexed Job's name: its pods' host names are NAME-INDEX (JobSet's:
  /// JOBSET-REPLICATEDJOB-JOBINDEX-INDEX, whose pod 0 of the same Job is the same rule).
  std::optional<std::string> k8s_job() const {
    auto pod = get("HOSTNAME");
    auto index = get("JOB_COMPLETION_INDEX");
    if (!pod || !index) return std::nullopt;
    std::string suffix = "-" + *index;
    if (!pod->ends_with(suffix) || pod->size() == suffix.size()) return std::nullopt;
    return pod->substr(0, pod->size() - suffix.size());
  }

  /// Reads the file a launcher's variable names; nullopt (and the error set) when it cannot.
  std::optional<std::string> read_named_file(std::string_view var, const std::string& path, std::string_view what) {
    std::string why = "no file can be read here";
    std::optional<std::string> text;
    if (files_) text = files_(path, why);
    if (!text)
      fail(fmt::format("cannot read {}, which {} names as {}: {}; {}", quote_text(path), var, what, why, addr_hint));
    return text;
  }

  /// Where the launcher `d` says rank 0 runs: false on an error, true with
  /// host_ unset when it does not say.
  bool launcher_host(const launcher_def& d, bool inner) {
    switch (d.host) {
      case host_rule::none: return true;
      case host_rule::slurm_nodelist: return slurm_host(d, inner);
      case host_rule::variable: return variable_host(d, inner);
      case host_rule::file_first: return file_first_host(d);
      case host_rule::words_first: return words_first_host(d);
      case host_rule::k8s_pod: return k8s_pod_host(d);
    }
    return true;
  }

  /// Takes h, which `what` (from source) names, as the host of launcher `d`: false (and the error set) when it is
  /// not a host name.
  bool take_host(const launcher_def& d, const std::string& h, std::string source, std::string_view what) {
    std::string why;
    auto host = check_host(h, why);
    if (!host) return fail(fmt::format("{} {}, is not a host name: {}; {}", what, quote_text(h), why, addr_hint));
    s_.host = {*host, std::move(source)};
    host_is_node_ = d.host != host_rule::variable && d.host != host_rule::k8s_pod;
    return true;
  }

  /// launcher_host of host_rule::slurm_nodelist.
  bool slurm_host(const launcher_def& d, bool inner) {
    // The step's first node is rank 0's in an srun step; inside another launcher
    // (an mpirun in the batch script) the step, if any, is that launcher's own
    // daemons', so the job's first node is where its rank 0 runs.
    for (std::string_view var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      if (!inner && var == "SLURM_STEP_NODELIST") continue;
      auto list = get(var);
      if (!list) continue;
      std::string list_error;
      std::string first = first_host(*list, list_error);
      if (first.empty()) return fail(fmt::format("{} holds a {}; {}", var, list_error, addr_hint));
      return take_host(d, first, fmt::format("derived:{}", var), fmt::format("the first node of {},", var));
    }
    if (!inner) return true;
    return fail(fmt::format("SLURM_JOB_ID is set but SLURM_STEP_NODELIST, SLURM_JOB_NODELIST and SLURM_NODELIST "
                            "are not, so the host's node is unknown; {}",
                            addr_hint));
  }

  /// launcher_host of host_rule::variable.
  bool variable_host(const launcher_def& d, bool inner) {
    auto m = get(d.host_var);
    if (!m) {
      if (inner && d.kind == launcher_kind::torchrun)
        return fail(fmt::format("torchrun's TORCHELASTIC_RUN_ID is set but MASTER_ADDR is not; {}", addr_hint));
      return true;
    }
    std::string why;
    auto host = check_host(*m, why);
    if (!host)
      return fail(fmt::format("{}={} is not a host name or IP address: {}; {}", d.host_var, quote_text(*m), why,
                              addr_hint));
    s_.host = {*host, fmt::format("env:{}", d.host_var)};
    return true;
  }

  /// launcher_host of host_rule::file_first.
  bool file_first_host(const launcher_def& d) {
    std::string_view var = d.host_var;
    auto path = get(var);
    if (!path && d.kind == launcher_kind::mpich) path = get(var = "I_MPI_HYDRA_HOST_FILE");
    if (!path) return true;
    auto text = read_named_file(var, *path, "the job's hosts");
    if (!text) return false;
    std::string first = first_word(*text, d.kind == launcher_kind::mpich);
    if (first.empty())
      return fail(fmt::format("{} names {}, which lists no host; {}", var, quote_text(*path), addr_hint));
    return take_host(d, first, fmt::format("derived:{}", var), fmt::format("the first host of {},", var));
  }

  /// launcher_host of host_rule::words_first.
  bool words_first_host(const launcher_def& d) {
    auto words = get(d.host_var);
    if (!words) return true;
    std::string first = first_word(*words, false);
    if (first.empty()) return true;
    return take_host(d, first, fmt::format("derived:{}", d.host_var), fmt::format("the first host of {},", d.host_var));
  }

  /// launcher_host of host_rule::k8s_pod.
  bool k8s_pod_host(const launcher_def& d) {
    // An Indexed Job's pod is named JOB-INDEX, and so is its host name; pod 0 is
    // JOB-0, reached through the job's headless service (the pods' subdomain).
    auto job = k8s_job();
    if (!job) return true;
    std::string host = *job + "-0";
    std::string source = "derived:HOSTNAME";
    if (auto sub = get("SUBDOMAIN")) {
      host += "." + *sub;
      source += "+SUBDOMAIN";
    } else {
      s_.warnings.push_back(fmt::format(
          "SUBDOMAIN is not set, so the host is {}, which resolves only where the pods' subdomain is in the "
          "DNS search path; set SUBDOMAIN to the Job's spec.template.spec.subdomain (examples/kubernetes)",
          host));
    }
    return take_host(d, host, std::move(source), "the host of pod 0,");
  }

  bool resolve_address() {
    std::optional<std::string> addr;
    std::string name;
    if (flags_.addr) {
      addr = flags_.addr;
      name = "--addr";
    } else if ((addr = get("TFBARRIER_ADDR"))) {
      name = "TFBARRIER_ADDR";
    }
    if (addr) {
      std::string why;
      auto hp = parse_address(*addr, address_use::connect, why);
      if (!hp)
        return fail(fmt::format("{} is not HOST:PORT: {}; write it as node01:31000 or [fd00::1]:31000",
                                show(name, *addr), why));
      std::string source = name.starts_with("--") ? "flag:" + name : "env:" + name;
      s_.host = {hp->host, source};
      s_.port = {hp->port, source};
      s_.addr_explicit = true;
      for (std::string_view ignored : {"TFBARRIER_HOST", "TFBARRIER_PORT"})
        if (has(ignored)) s_.warnings.push_back(fmt::format("{} is ignored: the address comes from {}", ignored, name));
      return true;
    }
    return resolve_host() && resolve_port();
  }

  bool resolve_host() {
    std::string why;
    if (auto h = get("TFBARRIER_HOST")) {
      auto host = check_host(*h, why);
      if (!host)
        return fail(fmt::format("TFBARRIER_HOST={} is not a host name or IP address: {}; fix it, or pass --addr HOST:PORT",
                                quote_text(*h), why));
      s_.host = {*host, "env:TFBARRIER_HOST"};
      s_.addr_explicit = true;  // the man page's "explicit": --addr, TFBARRIER_ADDR or TFBARRIER_HOST
      return true;
    }
    if (s_.store.value) {
      // With a store, every node has its own host (docs/store.md): this node's, on loopback.
      s_.host = {std::string(loopback), "derived:TFBARRIER_STORE (the host of this node)"};
      return true;
    }
    bool ok = true;
    each_launcher([&](const launcher_def& d) {
      ok = launcher_host(d, &d == inner_);
      return !ok || s_.host.value.has_value();
    });
    if (!ok) return false;
    if (s_.host.value) return true;
    s_.host = {std::string(loopback), "default"};
    if (inner_)
      s_.warnings.push_back(fmt::format(
          "{} does not say where rank 0 runs, so the host address is {}: that works only when all ranks share one "
          "node; on more nodes set TFBARRIER_HOST (or TFBARRIER_ADDR) to rank 0's node",
          inner_->title, loopback));
    return true;
  }

  /// The job id of launcher d as a number, for the port: nullopt when d gives none.
  /// Sets the error (and failed_) when its job id is there but not a number.
  std::optional<std::uint64_t> job_number(const launcher_def& d) {
    if (d.job == job_rule::none) return std::nullopt;
    auto job = get(d.job_var);
    if (!job) return std::nullopt;
    std::optional<std::uint64_t> id;
    if (d.job == job_rule::decimal) {
      id = parse_decimal(*job);
    } else if (d.job == job_rule::flux) {
      id = parse_flux_id(*job);
    } else {
      auto digits = job->find_first_not_of("0123456789");
      id = parse_decimal(std::string_view(*job).substr(0, digits));
    }
    if (!id) {
      failed_ = true;
      fail(fmt::format("{}={} is not a job number, so no port can be derived from it; set TFBARRIER_PORT, or pass "
                       "--addr HOST:PORT",
                       d.job_var, quote_text(*job)));
    }
    return id;
  }

  bool resolve_port() {
    if (auto p = get("TFBARRIER_PORT")) {
      auto port = parse_port(*p);
      if (!port)
        return fail(fmt::format("TFBARRIER_PORT={} is not a port (a number from 1 to 65535); fix it, or pass "
                                "--addr HOST:PORT",
                                quote_text(*p)));
      s_.port = {*port, "env:TFBARRIER_PORT"};
      return true;
    }
    each_launcher([&](const launcher_def& d) {
      auto id = job_number(d);
      if (id)
        s_.port = {static_cast<std::uint16_t>(slurm_port_base + *id % slurm_port_span),
                   fmt::format("derived:{}", d.job_var)};
      return failed_ || id.has_value();
    });
    if (failed_) return false;
    if (!s_.port.value) s_.port = {default_port_for(flags_.uid), fmt::format("default for uid {}", flags_.uid)};
    return true;
  }

  /// Reads a flag, then the TFBARRIER_ variable, then the first launcher variable that is set.
  bool resolve_number(sourced<std::uint32_t>& out, const number_rule& rule, std::optional<std::uint32_t> flag,
                      std::span<const std::string_view> launcher_vars, std::uint32_t base = 0) {
    if (flag) {
      if (*flag < rule.min || *flag > rule.max)
        return fail(fmt::format("{} {} is out of range: {}", rule.flag, *flag, rule.range));
      out = {*flag, fmt::format("flag:{}", rule.flag)};
      return true;
    }
    auto take = [&](std::string_view var, const std::string& value, std::string_view hint) {
      auto v = parse_decimal(value);
      if (!v || *v < base) return fail(fmt::format("{} is not {}; {}", show(var, value), rule.noun, hint));
      *v -= base;
      if (*v < rule.min || *v > rule.max)
        return fail(fmt::format("{} is out of range: {}; {}", show(var, value), rule.range, hint));
      out = {static_cast<std::uint32_t>(*v),
             base ? fmt::format("env:{} (minus {})", var, base) : fmt::format("env:{}", var)};
      return true;
    };
    if (auto v = get(rule.variable)) {
      base = 0;  // the launcher's numbering is its own variables'
      return take(rule.variable, *v, fmt::format("fix {} or pass {}", rule.variable, rule.flag));
    }
    for (std::string_view var : launcher_vars)
      if (auto v = get(var)) return take(var, *v, fmt::format("set {} or pass {}", rule.variable, rule.flag));
    out = {std::nullopt, "unset"};
    return true;
  }

  bool resolve_n() {
    std::vector<std::string_view> vars;
    if (inner_)
      for (std::string_view v : inner_->n_vars)
        if (!v.empty()) vars.push_back(v);
    if (!resolve_number(s_.n, n_rule, flags_.n, vars)) return false;
    if (s_.n.value || !inner_ || inner_->n_file.empty() || has(n_rule.variable)) return true;
    // PBS: one line of PBS_NODEFILE per cpu, and so per task of pbsdsh.
    auto path = get(inner_->n_file);
    if (!path) return true;
    std::string why = "no file can be read here";
    std::optional<std::string> text;
    if (files_) text = files_(*path, why);
    if (!text)
      return fail(fmt::format("cannot read {}, which {} names as the job's cpus: {}; set TFBARRIER_N or pass --n",
                              quote_text(*path), inner_->n_file, why));
    std::uint64_t lines = 0;
    for (std::size_t at = 0; at < text->size();) {
      auto eol = text->find('\n', at);
      std::string_view line(text->data() + at, (eol == std::string::npos ? text->size() : eol) - at);
      if (line.find_first_not_of(" \t\r") != std::string_view::npos) ++lines;
      at = eol == std::string::npos ? text->size() : eol + 1;
    }
    if (lines < n_rule.min || lines > n_rule.max)
      return fail(fmt::format("{} names {}, whose {} lines are not a number of tasks ({}); set TFBARRIER_N or pass --n",
                              inner_->n_file, quote_text(*path), lines, n_rule.range));
    s_.n = {static_cast<std::uint32_t>(lines), fmt::format("derived:{} (lines)", inner_->n_file)};
    return true;
  }

  bool resolve_rank() {
    bool ok = true;
    std::vector<std::string_view> vars;
    if (inner_ && !inner_->rank_var.empty() && (inner_->rank_needs.empty() || has(inner_->rank_needs)))
      vars.push_back(inner_->rank_var);
    if (s_.launcher == launcher_kind::slurm) {
      // Only srun's tasks have a rank. The batch script itself has SLURM_PROCID=0 but no
      // SLURM_STEP_* variables: it is not task 0 and must not arrive as one.
      bool in_step = has("SLURM_STEP_NUM_TASKS") || has("SLURM_STEP_NODELIST");
      if (!in_step) vars.clear();
      ok = resolve_number(s_.rank, rank_rule, flags_.rank, vars);
      if (ok && !in_step && !s_.rank.value && has("SLURM_PROCID"))
        s_.warnings.push_back(
            "SLURM_PROCID is ignored outside an srun step (no SLURM_STEP_NUM_TASKS): this shell is the batch "
            "script, not a task; pass --rank if it should count as one");
    } else {
      ok = resolve_number(s_.rank, rank_rule, flags_.rank, vars, inner_ ? inner_->rank_base : 0);
    }
    if (!ok) return false;
    if (s_.n.value && s_.rank.value && *s_.rank.value >= *s_.n.value)
      return fail(fmt::format("rank {} (from {}) is not below n={} (from {}): ranks run from 0 to n-1; pass --rank "
                              "and --n (or set TFBARRIER_RANK and TFBARRIER_N) that agree",
                              *s_.rank.value, origin(s_.rank.source), *s_.n.value, origin(s_.n.source)));
    return true;
  }

  /// A numeric variable that may be absent (then 0), e.g. SLURM_RESTART_COUNT.
  std::optional<std::uint64_t> optional_count(std::string_view var) {
    auto v = get(var);
    if (!v) return 0;
    auto n = parse_decimal(*v);
    if (!n) fail(fmt::format("{} is not a number, so no scope can be derived from it; set TFBARRIER_SCOPE or pass --scope",
                             show(var, *v)));
    return n;
  }

  /// The scope launcher d gives: false on an error, true with the scope unset when it gives none.
  bool launcher_scope(const launcher_def& d) {
    if (d.scope_prefix.empty() && d.kind != launcher_kind::k8s) return true;
    std::string job;
    if (d.kind == launcher_kind::k8s) {
      auto name = k8s_job();
      if (!name) return true;
      job = *name;
    } else if (auto v = get(d.job_var)) {
      job = *v;
    } else {
      return true;
    }
    if (d.job == job_rule::decimal) {
      auto id = parse_decimal(job);
      if (!id)
        return fail(fmt::format("{} is not a job number, so no scope can be derived from it; set TFBARRIER_SCOPE or "
                                "pass --scope",
                                show(d.job_var, job)));
      job = std::to_string(*id);  // 004242 is job 4242
    } else if (d.job == job_rule::flux) {
      auto id = parse_flux_id(job);
      if (!id)
        return fail(fmt::format("{} is not a Flux job id, so no scope can be derived from it; set TFBARRIER_SCOPE or "
                                "pass --scope",
                                show(d.job_var, job)));
      job = std::to_string(*id);
    } else if (d.job == job_rule::prefix) {
      for (char& c : job) {  // PBS array jobs: "1234[7].server"
        // ASCII, whatever the locale (and no isalnum import: docs/performance.md)
        bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!(alnum || c == '.' || c == '_' || c == '-')) c = '_';
      }
      job.resize(std::min<std::size_t>(job.size(), 100));
    }
    std::string scope = fmt::format("{}-{}", d.kind == launcher_kind::k8s ? "k8s" : d.scope_prefix, job);
    if (auto index = get(d.index_var); index && parse_decimal(*index) && *parse_decimal(*index) != 0)
      scope += fmt::format("-{}", *parse_decimal(*index));
    if (!d.restart_var.empty()) {
      auto restart = optional_count(d.restart_var);
      if (!restart) return false;
      scope += fmt::format(".{}", *restart);
    }
    if (!proto::valid_name(scope))
      return fail(fmt::format("{} gives the scope {}, which is not valid ({}); set TFBARRIER_SCOPE or pass --scope",
                              show(d.kind == launcher_kind::k8s ? "HOSTNAME" : d.job_var, job), quote_text(scope),
                              scope_rule));
    s_.scope = {std::move(scope), fmt::format("derived:{}", d.kind == launcher_kind::k8s ? "HOSTNAME" : d.job_var)};
    return true;
  }

  bool resolve_scope() {
    if (flags_.scope) {
      if (!proto::valid_name(*flags_.scope))
        return fail(fmt::format("{} is not a valid scope: {}", show("--scope", *flags_.scope), scope_rule_for(*flags_.scope)));
      s_.scope = {*flags_.scope, "flag:--scope"};
      return true;
    }
    if (auto v = get("TFBARRIER_SCOPE")) {
      if (!proto::valid_name(*v))
        return fail(fmt::format("{} is not a valid scope: {}; fix it or pass --scope", show("TFBARRIER_SCOPE", *v),
                                scope_rule_for(*v)));
      s_.scope = {*v, "env:TFBARRIER_SCOPE"};
      return true;
    }
    bool ok = true;
    each_launcher([&](const launcher_def& d) {
      ok = launcher_scope(d);
      return !ok || s_.scope.value.has_value();
    });
    if (!ok) return false;
    if (!s_.scope.value) s_.scope = {"default", "default"};
    return true;
  }

  void resolve_store() {
    if (flags_.store)
      s_.store = {*flags_.store, "flag:--store"};
    else if (auto v = get("TFBARRIER_STORE"); v && !v->empty())
      s_.store = {*v, "env:TFBARRIER_STORE"};
    else
      s_.store = {std::nullopt, "default"};
    // The etcd user a host started from here logs in as (serve --store-user); its password is never shown.
    if (auto v = get("TFBARRIER_STORE_USER"); v && !v->empty())
      s_.store_user = {*v, "env:TFBARRIER_STORE_USER"};
    else
      s_.store_user = {std::nullopt, "default"};
  }

  bool resolve_insecure() {
    if (flags_.insecure) {
      s_.insecure = {true, "flag:--insecure"};
    } else if (auto v = get("TFBARRIER_INSECURE")) {
      if (*v == "1" || *v == "yes" || *v == "true") {
        s_.insecure = {true, "env:TFBARRIER_INSECURE"};
      } else if (*v == "0" || *v == "no" || *v == "false") {
        s_.insecure = {false, "env:TFBARRIER_INSECURE"};
      } else {
        return fail(fmt::format("TFBARRIER_INSECURE={} is neither 1 (yes, true) nor 0 (no, false); fix it, or unset it",
                                quote_text(*v)));
      }
    } else {
      s_.insecure = {false, "default"};
    }
    return true;
  }

  // The node a participant names in its HELLO (the report's and status's
  // node column) and the logs' names: TFBARRIER_NODE, else the launcher's,
  // else the host name. Containers on different nodes often share a host
  // name, and Slurm's test clusters run several nodes on one machine.
  bool resolve_node() {
    if (auto given = get("TFBARRIER_NODE")) {
      if (!proto::valid_name(*given))
        return fail(fmt::format("{} is not a valid node name: 1 to 128 of A-Z a-z 0-9 . _ : -; fix it, or unset it",
                                show("TFBARRIER_NODE", *given)));
      s_.node = {*given, "env:TFBARRIER_NODE"};
      return true;
    }
    each_launcher([&](const launcher_def& d) {
      auto v = get(d.node_var);
      if (v && proto::valid_name(*v)) s_.node = {*v, fmt::format("env:{}", d.node_var)};
      return s_.node.value.has_value();
    });
    if (s_.node.value) return true;
    if (auto v = get("SLURMD_NODENAME"); v && proto::valid_name(*v)) {
      s_.node = {*v, "env:SLURMD_NODENAME"};  // srun's, even where SLURM_JOB_ID is not passed on
    } else if (!hostname_.empty()) {
      s_.node = {std::string(hostname_), "hostname"};
    } else {
      s_.node = {std::nullopt, "unset"};
    }
    return true;
  }

  void decide_may_start() {
    if (s_.addr_explicit) {
      s_.may_start_host = false;
    } else if (s_.store.value) {
      s_.may_start_host = true;  // the first participant on each node starts that node's host
    } else if (host_is_node_) {
      // The host is a node of the job's list: whoever runs there starts it (Slurm's
      // first task on the first node, the job script on PBS's first node, ...).
      s_.may_start_host = s_.node.value && s_.host.value && short_name(*s_.node.value) == short_name(*s_.host.value);
    } else if (s_.launcher == launcher_kind::none) {
      s_.may_start_host = true;
    } else {
      s_.may_start_host = s_.rank.value && *s_.rank.value == 0;
    }
  }

  const flag_inputs& flags_;
  const env_lookup& env_;
  const file_lookup& files_;
  std::string_view hostname_;
  std::string& error_;
  settings s_;
  const launcher_def* inner_ = nullptr;  ///< the innermost launcher's row, null for none
  bool host_is_node_ = false;            ///< the host came from a node list: its node may start it
  bool failed_ = false;
};

template <class T>
std::string text_value(const sourced<T>& v) {
  if (!v.value) return "-";
  if constexpr (std::is_same_v<T, std::string>) {
    return *v.value;
  } else if constexpr (std::is_same_v<T, bool>) {
    return *v.value ? "yes" : "no";
  } else {
    return std::to_string(*v.value);
  }
}

template <class T>
nlohmann::ordered_json json_value(const sourced<T>& v) {
  if (!v.value) return nullptr;
  return *v.value;
}

}  // namespace

std::string_view to_string(launcher_kind l) {
  const launcher_def* d = def_of(l);
  return d ? d->name : "none";
}

const std::vector<launcher_kind>& known_launchers() {
  static const std::vector<launcher_kind> all = [] {
    std::vector<launcher_kind> v;
    for (const auto& d : launcher_table) v.push_back(d.kind);
    return v;
  }();
  return all;
}

address settings::host_address() const { return tfb::address{host.value.value_or(""), port.value.value_or(0)}; }

std::string settings::addr() const {
  std::string h = host.value.value_or("");
  if (!port.value) return format_host(h);
  return format_address(h, *port.value);
}

std::optional<settings> resolve_settings(const flag_inputs& flags, const env_lookup& env, std::string_view hostname,
                                         std::string& error, const file_lookup& files) {
  return resolver(flags, env, hostname, error, files).run();
}

std::string settings_to_text(const settings& s) {
  struct row {
    std::string key, value, source;
  };
  std::vector<row> rows;
  std::string launcher(to_string(s.launcher));
  for (std::size_t i = 1; i < s.launchers.size(); ++i)
    launcher += fmt::format("{}{}", i == 1 ? " (inside " : ", inside ", to_string(s.launchers[i]));
  if (s.launchers.size() > 1) launcher += ")";
  rows.push_back({"launcher", launcher, ""});
  rows.push_back({"addr", s.host.value ? s.addr() : "-", ""});
  rows.push_back({"host", text_value(s.host), s.host.source});
  rows.push_back({"port", text_value(s.port), s.port.source});
  rows.push_back({"n", text_value(s.n), s.n.source});
  rows.push_back({"rank", text_value(s.rank), s.rank.source});
  rows.push_back({"scope", text_value(s.scope), s.scope.source});
  rows.push_back({"node", text_value(s.node), s.node.source});
  rows.push_back({"insecure", text_value(s.insecure), s.insecure.source});
  rows.push_back({"store", text_value(s.store), s.store.source});
  if (s.store_user.value) rows.push_back({"store_user", text_value(s.store_user), s.store_user.source});
  rows.push_back({"addr_explicit", s.addr_explicit ? "yes" : "no", ""});
  rows.push_back({"may_start_host", s.may_start_host ? "yes" : "no", ""});
  std::size_t key_width = 0, value_width = 0;
  for (const auto& r : rows) {
    key_width = std::max(key_width, r.key.size());
    if (!r.source.empty()) value_width = std::max(value_width, r.value.size());
  }
  std::string out;
  for (const auto& r : rows) {
    if (r.source.empty()) {
      out += fmt::format("{:<{}}  {}\n", r.key, key_width, r.value);
    } else {
      out += fmt::format("{:<{}}  {:<{}}  ({})\n", r.key, key_width, r.value, value_width, r.source);
    }
  }
  for (const auto& w : s.warnings) out += fmt::format("{:<{}}  {}\n", "warning", key_width, w);
  return out;
}

std::string settings_to_json(const settings& s) {
  nlohmann::ordered_json j;
  j["addr"] = s.host.value ? nlohmann::ordered_json(s.addr()) : nlohmann::ordered_json(nullptr);
  j["host"] = json_value(s.host);
  j["port"] = json_value(s.port);
  j["n"] = json_value(s.n);
  j["rank"] = json_value(s.rank);
  j["scope"] = json_value(s.scope);
  j["launcher"] = to_string(s.launcher);
  j["launchers"] = nlohmann::ordered_json::array();
  for (launcher_kind l : s.launchers) j["launchers"].push_back(to_string(l));
  j["node"] = json_value(s.node);
  j["insecure"] = s.insecure.value.value_or(false);
  j["store"] = json_value(s.store);
  j["store_user"] = json_value(s.store_user);
  j["may_start_host"] = s.may_start_host;
  j["addr_explicit"] = s.addr_explicit;
  j["warnings"] = s.warnings;
  j["source"] = {{"host", s.host.source}, {"port", s.port.source}, {"n", s.n.source},
                 {"rank", s.rank.source}, {"scope", s.scope.source}, {"node", s.node.source},
                 {"insecure", s.insecure.source}, {"store", s.store.source},
                 {"store_user", s.store_user.source}};
  return j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace);  // ASCII: safe on a terminal
}

}  // namespace tfb
