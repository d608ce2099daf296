#pragma once
// Slurm host-list and tasks-per-node expressions, parsed without scontrol.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfb {

/// Upper bound on how many names one expression may expand to; past it, an error.
inline constexpr std::size_t max_hostlist_hosts = 1'000'000;

/// Expands a Slurm host list ("node[01-04,07]", "rack[1-2]-n[01-02]", "a,b[1-3],c").
/// Zero padding is kept. On a malformed expression returns an empty vector and sets error.
std::vector<std::string> expand_hostlist(std::string_view expr, std::string& error);

/// The first host of a host list, without expanding the rest. Empty + error when malformed.
std::string first_host(std::string_view expr, std::string& error);

/// Expands SLURM_TASKS_PER_NODE-style counts ("4,1(x2)" -> {4,1,1}).
std::vector<std::uint32_t> expand_tasks_per_node(std::string_view expr, std::string& error);

}  // namespace tfb
