#include "duration.h"

#include <cstdint>
#include <fmt/format.h>

namespace tfb {

std::optional<duration> parse_duration(std::string_view s, bool* too_long) {
  if (too_long) *too_long = false;
  if (s.empty() || s.size() > 32) return std::nullopt;
  const std::int64_t max_ms = max_duration.count();
  std::int64_t total = 0;
  std::size_t i = 0;
  bool any = false, over = false;
  while (i < s.size()) {
    std::int64_t v = 0;
    std::size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      v = v * 10 + (s[i] - '0');
      if (v > max_ms) {  // saturate, and read on: the rest must still be well formed
        over = true;
        v = max_ms;
      }
      ++i;
    }
    if (i == start) return std::nullopt;
    std::size_t ustart = i;
    while (i < s.size() && s[i] >= 'a' && s[i] <= 'z') ++i;
    std::string_view unit = s.substr(ustart, i - ustart);
    std::int64_t mult = 0;
    if (unit == "ms") mult = 1;
    else if (unit == "s" || (unit.empty() && !any && i == s.size())) mult = 1000;
    else if (unit == "m") mult = 60'000;
    else if (unit == "h") mult = 3'600'000;
    else if (unit == "d") mult = 86'400'000;
    else return std::nullopt;
    total += v * mult;
    if (total > max_ms) {
      over = true;
      total = max_ms;
    }
    any = true;
  }
  if (over) {
    if (too_long) *too_long = true;
    return std::nullopt;
  }
  return duration(total);
}

std::string format_duration(duration d) {
  std::int64_t ms = d.count();
  if (ms < 0) ms = 0;
  if (ms < 1000) return fmt::format("{}ms", ms);
  std::int64_t s = ms / 1000;
  // Tenths under a minute: a --timeout of 1500ms "timed out after 1.5s", not "1s".
  if (s < 60) return ms % 1000 ? fmt::format("{}.{}s", s, ms % 1000 / 100) : fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{}s", s / 60, s % 60);
  return fmt::format("{}h{}m", s / 3600, (s % 3600) / 60);
}

}  // namespace tfb
