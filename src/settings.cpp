#include "settings.h"

#include <algorithm>
#include <charconv>
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

class resolver {
 public:
  resolver(const flag_inputs& flags, const env_lookup& env, std::string_view hostname, std::string& error)
      : flags_(flags), env_(env), hostname_(hostname), error_(error) {}

  std::optional<settings> run() {
    detect_launcher();
    resolve_store();
    if (!resolve_address() || (flags_.counts && (!resolve_n() || !resolve_rank())) || !resolve_scope() ||
        !resolve_insecure() || !resolve_node())
      return std::nullopt;
    decide_may_start();
    return s_;
  }

 private:
  /// An environment variable; unset and empty are the same.
  std::optional<std::string> get(std::string_view name) const {
    if (!env_) return std::nullopt;
    auto v = env_(name);
    if (!v || v->empty()) return std::nullopt;
    return v;
  }
  bool has(std::string_view name) const { return get(name).has_value(); }

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  void detect_launcher() {
    if (has("SLURM_JOB_ID")) {
      s_.launcher = launcher_kind::slurm;
    } else if (has("TORCHELASTIC_RUN_ID") || (has("RANK") && has("WORLD_SIZE") && has("MASTER_ADDR"))) {
      s_.launcher = launcher_kind::torchrun;
    } else if (has("OMPI_COMM_WORLD_SIZE")) {
      s_.launcher = launcher_kind::openmpi;
    } else if (has("PMI_SIZE")) {
      s_.launcher = launcher_kind::pmi;
    } else {
      s_.launcher = launcher_kind::none;
    }
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
    if (s_.launcher == launcher_kind::slurm) {
      for (std::string_view var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
        auto list = get(var);
        if (!list) continue;
        std::string list_error;
        std::string first = first_host(*list, list_error);
        if (first.empty()) return fail(fmt::format("{} holds a {}; {}", var, list_error, addr_hint));
        auto host = check_host(first, why);
        if (!host)
          return fail(fmt::format("the first node of {}, {}, is not a host name: {}; {}", var, quote_text(first), why,
                                  addr_hint));
        s_.host = {*host, fmt::format("derived:{}", var)};
        return true;
      }
      return fail(fmt::format("SLURM_JOB_ID is set but SLURM_STEP_NODELIST, SLURM_JOB_NODELIST and SLURM_NODELIST "
                              "are not, so the host's node is unknown; {}",
                              addr_hint));
    }
    if (s_.launcher == launcher_kind::torchrun) {
      auto m = get("MASTER_ADDR");
      if (!m) return fail(fmt::format("torchrun's TORCHELASTIC_RUN_ID is set but MASTER_ADDR is not; {}", addr_hint));
      auto host = check_host(*m, why);
      if (!host) return fail(fmt::format("MASTER_ADDR={} is not a host name or IP address: {}; {}", quote_text(*m), why, addr_hint));
      s_.host = {*host, "env:MASTER_ADDR"};
      return true;
    }
    s_.host = {std::string(loopback), "default"};
    if (s_.launcher == launcher_kind::openmpi || s_.launcher == launcher_kind::pmi) {
      s_.warnings.push_back(fmt::format(
          "{} does not say where rank 0 runs, so the host address is {}: that works only when all ranks share one "
          "node; on more nodes set TFBARRIER_HOST (or TFBARRIER_ADDR) to rank 0's node",
          s_.launcher == launcher_kind::openmpi ? "Open MPI" : "PMI", loopback));
    }
    return true;
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
    if (s_.launcher == launcher_kind::slurm) {
      auto job = get("SLURM_JOB_ID").value_or("");
      auto id = parse_decimal(job);
      if (!id)
        return fail(fmt::format("SLURM_JOB_ID={} is not a job number, so no port can be derived from it; set "
                                "TFBARRIER_PORT, or pass --addr HOST:PORT",
                                quote_text(job)));
      s_.port = {static_cast<std::uint16_t>(slurm_port_base + *id % slurm_port_span), "derived:SLURM_JOB_ID"};
      return true;
    }
    s_.port = {default_port_for(flags_.uid), fmt::format("default for uid {}", flags_.uid)};
    return true;
  }

  /// Reads a flag, then the TFBARRIER_ variable, then the first launcher variable that is set.
  bool resolve_number(sourced<std::uint32_t>& out, const number_rule& rule, std::optional<std::uint32_t> flag,
                      std::initializer_list<std::string_view> launcher_vars) {
    if (flag) {
      if (*flag < rule.min || *flag > rule.max)
        return fail(fmt::format("{} {} is out of range: {}", rule.flag, *flag, rule.range));
      out = {*flag, fmt::format("flag:{}", rule.flag)};
      return true;
    }
    auto take = [&](std::string_view var, const std::string& value, std::string_view hint) {
      auto v = parse_decimal(value);
      if (!v) return fail(fmt::format("{} is not {}; {}", show(var, value), rule.noun, hint));
      if (*v < rule.min || *v > rule.max)
        return fail(fmt::format("{} is out of range: {}; {}", show(var, value), rule.range, hint));
      out = {static_cast<std::uint32_t>(*v), fmt::format("env:{}", var)};
      return true;
    };
    if (auto v = get(rule.variable))
      return take(rule.variable, *v, fmt::format("fix {} or pass {}", rule.variable, rule.flag));
    for (std::string_view var : launcher_vars)
      if (auto v = get(var)) return take(var, *v, fmt::format("set {} or pass {}", rule.variable, rule.flag));
    out = {std::nullopt, "unset"};
    return true;
  }

  bool resolve_n() {
    const launcher_kind l = s_.launcher;
    if (l == launcher_kind::slurm) return resolve_number(s_.n, n_rule, flags_.n, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
    if (l == launcher_kind::torchrun) return resolve_number(s_.n, n_rule, flags_.n, {"WORLD_SIZE"});
    if (l == launcher_kind::openmpi) return resolve_number(s_.n, n_rule, flags_.n, {"OMPI_COMM_WORLD_SIZE"});
    if (l == launcher_kind::pmi) return resolve_number(s_.n, n_rule, flags_.n, {"PMI_SIZE"});
    return resolve_number(s_.n, n_rule, flags_.n, {});
  }

  bool resolve_rank() {
    const launcher_kind l = s_.launcher;
    bool ok = true;
    if (l == launcher_kind::slurm) {
      // Only srun's tasks have a rank. The batch script itself has SLURM_PROCID=0 but no
      // SLURM_STEP_* variables: it is not task 0 and must not arrive as one.
      bool in_step = has("SLURM_STEP_NUM_TASKS") || has("SLURM_STEP_NODELIST");
      if (in_step) {
        ok = resolve_number(s_.rank, rank_rule, flags_.rank, {"SLURM_PROCID"});
      } else {
        ok = resolve_number(s_.rank, rank_rule, flags_.rank, {});
        if (ok && !s_.rank.value && has("SLURM_PROCID"))
          s_.warnings.push_back(
              "SLURM_PROCID is ignored outside an srun step (no SLURM_STEP_NUM_TASKS): this shell is the batch "
              "script, not a task; pass --rank if it should count as one");
      }
    } else if (l == launcher_kind::torchrun) {
      ok = resolve_number(s_.rank, rank_rule, flags_.rank, {"RANK"});
    } else if (l == launcher_kind::openmpi) {
      ok = resolve_number(s_.rank, rank_rule, flags_.rank, {"OMPI_COMM_WORLD_RANK"});
    } else if (l == launcher_kind::pmi) {
      ok = resolve_number(s_.rank, rank_rule, flags_.rank, {"PMI_RANK"});
    } else {
      ok = resolve_number(s_.rank, rank_rule, flags_.rank, {});
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
    if (s_.launcher == launcher_kind::slurm) {
      auto job = get("SLURM_JOB_ID").value_or("");
      auto id = parse_decimal(job);
      if (!id)
        return fail(fmt::format("{} is not a job number, so no scope can be derived from it; set TFBARRIER_SCOPE or "
                                "pass --scope",
                                show("SLURM_JOB_ID", job)));
      auto restart = optional_count("SLURM_RESTART_COUNT");
      if (!restart) return false;
      s_.scope = {fmt::format("slurm-{}.{}", *id, *restart), "derived:SLURM_JOB_ID"};
      return true;
    }
    if (s_.launcher == launcher_kind::torchrun) {
      if (auto run = get("TORCHELASTIC_RUN_ID")) {
        auto restart = optional_count("TORCHELASTIC_RESTART_COUNT");
        if (!restart) return false;
        std::string scope = fmt::format("torchrun-{}.{}", *run, *restart);
        if (!proto::valid_name(scope))
          return fail(fmt::format("{} gives the scope {}, which is not valid ({}); set TFBARRIER_SCOPE or pass --scope",
                                  show("TORCHELASTIC_RUN_ID", *run), quote_text(scope), scope_rule));
        s_.scope = {std::move(scope), "derived:TORCHELASTIC_RUN_ID"};
        return true;
      }
    }
    s_.scope = {"default", "default"};
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
    } else if (auto v = get("SLURMD_NODENAME")) {
      s_.node = {*v, "env:SLURMD_NODENAME"};
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
    } else if (s_.launcher == launcher_kind::slurm) {
      s_.may_start_host = s_.node.value && s_.host.value && *s_.node.value == *s_.host.value;
    } else if (s_.launcher == launcher_kind::none) {
      s_.may_start_host = true;
    } else {
      s_.may_start_host = s_.rank.value && *s_.rank.value == 0;
    }
  }

  const flag_inputs& flags_;
  const env_lookup& env_;
  std::string_view hostname_;
  std::string& error_;
  settings s_;
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
  switch (l) {
    case launcher_kind::slurm: return "slurm";
    case launcher_kind::torchrun: return "torchrun";
    case launcher_kind::openmpi: return "openmpi";
    case launcher_kind::pmi: return "pmi";
    case launcher_kind::none: break;
  }
  return "none";
}

std::string settings::addr() const {
  std::string h = host.value.value_or("");
  if (!port.value) return h.find(':') != std::string::npos ? "[" + h + "]" : h;
  return format_address(h, *port.value);
}

std::optional<settings> resolve_settings(const flag_inputs& flags, const env_lookup& env, std::string_view hostname,
                                         std::string& error) {
  return resolver(flags, env, hostname, error).run();
}

std::string settings_to_text(const settings& s) {
  struct row {
    std::string key, value, source;
  };
  std::vector<row> rows;
  rows.push_back({"launcher", std::string(to_string(s.launcher)), ""});
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
