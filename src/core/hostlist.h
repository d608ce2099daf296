#pragma once
// Slurm host-list expressions, parsed without scontrol.
#include <cstdint>
#include <string>
#include <string_view>

namespace tfb {

/// Upper bound on how many names one expression may expand to; past it, an error.
inline constexpr std::size_t max_hostlist_hosts = 1'000'000;

/// The first host of a Slurm host list ("node[01-04,07]" -> "node01"), without
/// expanding the rest. Empty + error when the expression is malformed.
std::string first_host(std::string_view expr, std::string& error);

}  // namespace tfb
