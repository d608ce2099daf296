#pragma once
// Durations on the command line: "500ms", "90s", "10m", "1h", "1m30s"; a bare number is seconds.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tfb {

using duration = std::chrono::milliseconds;

/// Parses a duration. nullopt when malformed or above 100 days.
std::optional<duration> parse_duration(std::string_view s);
/// Formats for people: "1m12s", "850ms", "2h0m".
std::string format_duration(duration d);

}  // namespace tfb
