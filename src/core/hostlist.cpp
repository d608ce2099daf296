#include "hostlist.h"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

#include "text.h"
#include <limits>
#include <optional>
#include <vector>

// Only the first name is ever needed (the host runs on the first node), but
// the whole expression is checked, so that a malformed list is an error.
//
// Grammar (a superset of what Slurm prints in SLURM_JOB_NODELIST):
//
//   list    := item ("," item)*
//   item    := (literal | group)+           at least one character
//   group   := "[" range ("," range)* "]"
//   range   := digits ["-" digits]          lo <= hi
//   literal := any printable byte except space, ",", "[", "]"
//
// A number is zero-padded to the width of the lower bound as written
// ("node[08-11]" starts with node08).
// Text after the last group ("n[1-2]-ib") is accepted; Slurm itself rejects it.

namespace tfb {
namespace {

/// Past this many bytes of expanded names, an error (guards "a...a[1-1000000]").
constexpr std::size_t max_hostlist_bytes = std::size_t{64} << 20;

struct num_range {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::size_t width = 0;  ///< digits of the lower bound as written
};

using group = std::vector<num_range>;

/// One comma-separated item: literals.size() == groups.size() + 1.
struct pattern {
  std::vector<std::string_view> literals;
  std::vector<group> groups;
};

struct parsed_list {
  std::vector<pattern> items;
  std::size_t count = 0;
};


bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space_or_control(char c) {
  auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7f;
}

std::size_t digit_count(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

/// a * b, saturating at SIZE_MAX.
std::size_t sat_mul(std::size_t a, std::size_t b) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) return std::numeric_limits<std::size_t>::max();
  return a * b;
}
std::size_t sat_add(std::size_t a, std::size_t b) {
  if (b > std::numeric_limits<std::size_t>::max() - a) return std::numeric_limits<std::size_t>::max();
  return a + b;
}

class list_parser {
 public:
  list_parser(std::string_view expr, std::string& error) : expr_(expr), error_(error) {}

  /// Parses and sizes the whole expression without expanding it.
  std::optional<parsed_list> run() {
    if (expr_.empty()) return fail("it is empty");
    parsed_list out;
    std::size_t total_bytes = 0;
    while (true) {
      auto item = parse_item();
      if (!item) return std::nullopt;
      std::size_t count = 1;
      std::size_t longest = 0;  // upper bound on one name's length
      for (auto lit : item->literals) longest += lit.size();
      for (const auto& g : item->groups) {
        std::size_t in_group = 0;
        std::size_t widest = 0;
        for (const auto& r : g) {
          // hi - lo + 1 cannot overflow past max_hostlist_hosts: checked per range.
          in_group = sat_add(in_group, static_cast<std::size_t>(r.hi - r.lo) + 1);
          widest = std::max({widest, r.width, digit_count(r.hi)});
        }
        count = sat_mul(count, in_group);
        longest = sat_add(longest, widest);
      }
      out.count = sat_add(out.count, count);
      if (out.count > max_hostlist_hosts)
        return fail(fmt::format("it expands to more than {} names", max_hostlist_hosts));
      total_bytes = sat_add(total_bytes, sat_mul(count, longest));
      if (total_bytes > max_hostlist_bytes)
        return fail(fmt::format("its names would take more than {} MiB", max_hostlist_bytes >> 20));
      out.items.push_back(std::move(*item));
      if (pos_ == expr_.size()) break;
      ++pos_;  // the comma
    }
    return out;
  }

 private:
  std::nullopt_t fail(const std::string& why) {
    error_ = fmt::format("bad host list {}: {}", quote_text(expr_), why);
    return std::nullopt;
  }
  std::nullopt_t fail_at(std::size_t at, const std::string& why) {
    error_ = fmt::format("bad host list {} at character {}: {}", quote_text(expr_), at + 1, why);
    return std::nullopt;
  }
  std::nullopt_t unclosed(std::size_t open) { return fail_at(open, "the '[' is never closed"); }

  std::optional<pattern> parse_item() {
    pattern p;
    std::size_t start = pos_;
    std::size_t lit_start = pos_;
    while (pos_ < expr_.size() && expr_[pos_] != ',') {
      char c = expr_[pos_];
      if (is_space_or_control(c))
        return fail_at(pos_, "whitespace or a control character (host lists have no spaces)");
      if (c == ']') return fail_at(pos_, "a ']' without its '['");
      if (c == '[') {
        p.literals.push_back(expr_.substr(lit_start, pos_ - lit_start));
        auto g = parse_group();
        if (!g) return std::nullopt;
        p.groups.push_back(std::move(*g));
        lit_start = pos_;
        continue;
      }
      ++pos_;
    }
    if (pos_ == start) return fail_at(start, "an empty name");
    p.literals.push_back(expr_.substr(lit_start, pos_ - lit_start));
    return p;
  }

  // At '['; leaves pos_ after the matching ']'.
  std::optional<group> parse_group() {
    std::size_t open = pos_++;
    group g;
    while (true) {
      auto r = parse_range(open);
      if (!r) return std::nullopt;
      g.push_back(*r);
      if (pos_ >= expr_.size()) return unclosed(open);
      char c = expr_[pos_];
      if (c == ']') {
        ++pos_;
        return g;
      }
      if (c == ',') {
        ++pos_;
        continue;
      }
      return bad_char(open, "',' or ']'");
    }
  }

  std::nullopt_t bad_char(std::size_t open, std::string_view expected) {
    if (pos_ >= expr_.size()) return unclosed(open);
    char c = expr_[pos_];
    if (c == '[') return fail_at(pos_, "a '[' inside brackets");
    if (is_space_or_control(c)) return fail_at(pos_, "whitespace or a control character (host lists have no spaces)");
    return fail_at(pos_, fmt::format("'{}' where {} belongs", c, expected));
  }

  std::optional<num_range> parse_range(std::size_t open) {
    num_range r;
    std::size_t lo_start = pos_;
    auto lo = parse_number(open, false);
    if (!lo) return std::nullopt;
    r.lo = *lo;
    r.hi = *lo;
    r.width = pos_ - lo_start;
    if (pos_ < expr_.size() && expr_[pos_] == '-') {
      ++pos_;
      auto hi = parse_number(open, true);
      if (!hi) return std::nullopt;
      r.hi = *hi;
      if (r.hi < r.lo)
        return fail_at(lo_start, fmt::format("the range {} is reversed; write {}-{}",
                                             expr_.substr(lo_start, pos_ - lo_start),
                                             expr_.substr(lo_start + r.width + 1, pos_ - lo_start - r.width - 1),
                                             expr_.substr(lo_start, r.width)));
    }
    if (r.hi - r.lo >= max_hostlist_hosts)
      return fail_at(lo_start, fmt::format("the range {} holds more than {} names",
                                           expr_.substr(lo_start, pos_ - lo_start), max_hostlist_hosts));
    return r;
  }

  std::optional<std::uint64_t> parse_number(std::size_t open, bool upper) {
    std::size_t start = pos_;
    while (pos_ < expr_.size() && is_digit(expr_[pos_])) ++pos_;
    if (pos_ == start) {
      if (pos_ >= expr_.size()) return unclosed(open);
      char c = expr_[pos_];
      if (upper && (c == ']' || c == ',' || c == '-')) return fail_at(pos_, "a range without its upper bound");
      if (c == '-') return fail_at(pos_, "a range without its lower bound (negative numbers are not allowed)");
      if (c == ']' && pos_ == open + 1) return fail_at(open, "empty brackets");
      if (c == ']' || c == ',') return fail_at(pos_, "an empty range");
      return bad_char(open, upper ? "a digit" : "a digit or ']'");
    }
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(expr_.data() + start, expr_.data() + pos_, v);
    if (ec != std::errc{} || p != expr_.data() + pos_)
      return fail_at(start, fmt::format("the number {} is too large", expr_.substr(start, pos_ - start)));
    return v;
  }

  std::string_view expr_;
  std::string& error_;
  std::size_t pos_ = 0;
};

void append_padded(std::string& out, std::uint64_t v, std::size_t width) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  auto digits = static_cast<std::size_t>(p - buf);
  if (digits < width) out.append(width - digits, '0');
  out.append(buf, digits);
}

}  // namespace

std::string first_host(std::string_view expr, std::string& error) {
  auto parsed = list_parser(expr, error).run();
  if (!parsed) return {};
  // The first name: each group at the lower bound of its first range.
  const pattern& p = parsed->items.front();
  std::string name;
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    name += p.literals[g];
    append_padded(name, p.groups[g][0].lo, p.groups[g][0].width);
  }
  name += p.literals.back();
  return name;
}

}  // namespace tfb
