#pragma once
// Where every setting comes from: flag, then TFBARRIER_* variables, then the
// launchers' variables (innermost launcher first: docs/launchers.md has the
// table of every variable read), then defaults.
// Pure: the environment and the files it names are passed in, nothing is read
// from the process.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "address.h"

namespace tfb {

/// The port when nothing (flag, TFBARRIER_*, launcher) gives one: the user's
/// own, 30000 + uid % 2768 (30000-32767: above the ports derived from Slurm
/// job ids, below Linux's ephemeral range), so that two users of one machine
/// with default settings never meet. Where two uids share a port, a
/// participant still refuses a host run by another user (client.cpp).
constexpr std::uint16_t default_port_for(std::uint32_t uid) { return static_cast<std::uint16_t>(30000 + uid % 2768); }

/// Reads one environment variable; nullopt when unset.
using env_lookup = std::function<std::optional<std::string>(std::string_view)>;
/// Reads a file that a launcher's variable names (PBS_NODEFILE, PE_HOSTFILE,
/// HYDRA_HOST_FILE): its text, or nullopt and why not (a clause: "No such
/// file or directory", "it is larger than 1 MiB").
using file_lookup = std::function<std::optional<std::string>(const std::string& path, std::string& why)>;
/// The most of a launcher's file that is read (read_launcher_file's bound).
inline constexpr std::size_t max_launcher_file = 1 << 20;

/// What the command line gave (already parsed, not yet validated against the env).
struct flag_inputs {
  std::optional<std::string> addr;   // --addr HOST:PORT
  std::optional<std::uint32_t> n;    // --n
  std::optional<std::uint32_t> rank; // --rank
  std::optional<std::string> scope;  // --scope
  std::optional<std::string> store;  // --store (status, decide, abort)
  bool insecure = false;             // --insecure: take a host that does not authenticate, beyond loopback too
  std::uint32_t uid = 0;             // not a flag: the process's uid, for default_port_for
  // false for commands that take no --n or --rank (status, abort, serve): the
  // variables that give n and rank are then not read, so that a bad one
  // (TFBARRIER_N=abc) cannot stop a command that does not use it.
  bool counts = true;
};

/// A value and where it came from: "flag:--n", "env:SLURM_NTASKS", "default", ...
template <class T>
struct sourced {
  std::optional<T> value;
  std::string source;
};

/// Who started this process, read from its variables. docs/launchers.md.
enum class launcher_kind { none, slurm, torchrun, openmpi, pmi, mpich, flux, condor, k8s, pbs, lsf, sge };
/// "none", "slurm", "torchrun", "openmpi", "pmi", "mpich", "flux", "condor",
/// "k8s", "pbs", "lsf" or "sge", as `tfbarrier config` prints it.
std::string_view to_string(launcher_kind l);
/// Every launcher tfbarrier knows, innermost first: the order in which two
/// launchers' variables in one environment are read (an mpiexec inside an
/// sbatch: MPICH's rank, then Slurm's job).
const std::vector<launcher_kind>& known_launchers();

struct settings {
  launcher_kind launcher = launcher_kind::none;   ///< the innermost launcher: the one that started this process
  std::vector<launcher_kind> launchers;           ///< every launcher whose variables are set, innermost first
  sourced<std::string> host;     ///< where the host runs (name or address)
  sourced<std::uint16_t> port;
  sourced<std::uint32_t> n;
  sourced<std::uint32_t> rank;
  sourced<std::string> scope;    ///< barrier namespace: job and attempt
  sourced<std::string> node;     ///< this machine's node name (TFBARRIER_NODE, else the launcher's, else hostname passed in)
  sourced<bool> insecure;        ///< --insecure or TFBARRIER_INSECURE: auth=none accepted beyond loopback
  sourced<std::string> store;    ///< TFBARRIER_STORE: the store a host of this job keeps the barriers in (serve --store)
  sourced<std::string> store_user;  ///< TFBARRIER_STORE_USER: the etcd user a host logs in as (never its password)
  bool addr_explicit = false;    ///< from --addr, TFBARRIER_ADDR or TFBARRIER_HOST: never self-start a host
  bool may_start_host = false;   ///< this process belongs on the host's node and may start it
  std::vector<std::string> warnings;

  /// The host's address as resolved (--addr and TFBARRIER_ADDR parsed once,
  /// here): what a client connects to, with no second parse.
  address host_address() const;
  std::string addr() const;      ///< "host:port" ("[v6]:port" for IPv6 literals): address() as text
};

/// Resolves all settings. `hostname` is this machine's short host name;
/// `files` reads the files that launchers' variables name (none without it).
/// Returns nullopt and sets error (a full sentence: what is wrong, what to do) on bad input.
std::optional<settings> resolve_settings(const flag_inputs& flags, const env_lookup& env,
                                         std::string_view hostname, std::string& error,
                                         const file_lookup& files = {});
/// (file_lookup for the real file system: sys/launcher_file.h's read_launcher_file.)

/// Checks the text of --n or --rank: "" when valid, else why not
/// ("\"abc\" is not a rank: a rank runs from 0 to 999999"). Decimal only: a
/// valid text is rewritten without leading zeros, so that "010" is 10 (CLI11
/// would read it as octal).
enum class count_kind { n, rank };
std::string check_count_flag(count_kind kind, std::string& text);
/// "in [1 - 1000000]", for --help.
std::string count_range_text(count_kind kind);

/// `tfbarrier config` output.
std::string settings_to_text(const settings& s);
std::string settings_to_json(const settings& s);

}  // namespace tfb
