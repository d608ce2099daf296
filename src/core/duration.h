#pragma once
// Durations on the command line: "500ms", "90s", "10m", "1h", "1m30s"; a bare number is seconds.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tfb {

using duration = std::chrono::milliseconds;

/// The longest duration anything accepts.
inline constexpr duration max_duration = std::chrono::hours(24 * 100);
/// Parses a duration. nullopt when malformed or above max_duration; too_long
/// (when given) then says which: well formed, only too long.
std::optional<duration> parse_duration(std::string_view s, bool* too_long = nullptr);
/// Formats for people: "850ms", "1.5s", "1m12s", "2h0m" (tenths of a second under a minute).
std::string format_duration(duration d);

}  // namespace tfb
