// libFuzzer target: arbitrary bytes through the wire protocol (src/core/protocol.h).
//   scripts/fuzz builds and runs it.
//
// The bytes are one stream, as a socket would deliver it. Invariants, each a
// __builtin_trap() when broken:
//   - line_splitter gives the same lines (and the same overflow) however the
//     stream is cut into reads; no line holds '\n' or is longer than the limit
//     (one exception: fed at once, complete lines that precede an over-long
//     unfinished tail are not handed out; reads of at most 4096 bytes, as the
//     host and the client make, never meet it);
//   - parse_request never says TOOLONG for a line the splitter let through;
//     a parsed request formats to one line that parses back to the same line;
//     a refused one gets an ERR line that is itself a valid protocol line;
//   - whatever reply_reader accepts, format_reply writes as lines that a
//     reader reads back without error, and a second trip changes nothing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol.h"

namespace {

using namespace tfb::proto;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

/// Each line of bytes is newline-terminated and within the limit.
bool lines_fit(const std::string& bytes) {
  if (bytes.empty() || bytes.back() != '\n') return false;
  std::size_t start = 0;
  while (start < bytes.size()) {
    std::size_t nl = bytes.find('\n', start);
    if (nl - start + 1 > max_line) return false;
    start = nl + 1;
  }
  return true;
}

/// The one reply in bytes, as a client reads it; nullopt when unreadable.
std::optional<reply> read_back(const std::string& bytes) {
  line_splitter s;
  reply_reader rd;
  s.feed(bytes);
  std::optional<reply> out;
  int count = 0;
  while (auto l = s.next()) {
    std::string error;
    auto r = rd.feed(*l, error);
    if (!error.empty()) return std::nullopt;
    if (r) {
      out = std::move(r);
      ++count;
    }
  }
  if (s.overflow() || s.buffered() != 0 || count != 1) return std::nullopt;
  return out;
}

bool negative_age(const reply& r) {
  // A hostile host may send age_ms above 2^63; the reader wraps it. Not worth
  // refusing (the host never sends it), so such replies are not round-tripped.
  if (const auto* s = std::get_if<status_reply>(&r))
    for (const auto& b : s->barriers) {
      if (b.age_ms < 0) return true;
      for (const auto& m : b.members)
        if (m.age_ms < 0) return true;
      for (const auto& g : b.gone)
        if (g.ago_ms < 0) return true;
    }
  return false;
}

void check_reply(const reply& r) {
  std::string b1 = format_reply(r);
  // A reply read from a hostile host can hold values longer than any the host
  // makes (a 1024-byte scope and name, ...): only replies that fit a line go on.
  if (!lines_fit(b1) || negative_age(r)) return;
  auto r2 = read_back(b1);
  check(r2.has_value());
  std::string b2 = format_reply(*r2);
  auto r3 = read_back(b2);
  check(r3.has_value());
  check(format_reply(*r3) == b2);
}

void check_request_line(const std::string& l) {
  auto r = parse_request(l);
  if (const auto* e = std::get_if<request_error>(&r)) {
    check(e->kind != error_kind::toolong);  // the splitter already bounds the line
    check(!e->text.empty());
    std::string bytes = format_reply(error_reply{e->kind, e->text});
    check(lines_fit(bytes));
    std::string_view one(bytes.data(), bytes.size() - 1);
    check(one.find('\n') == std::string_view::npos);
    auto colon = one.find(" :");
    check(colon != std::string_view::npos && valid_text(one.substr(colon + 2)));
    auto back = read_back(bytes);
    check(back && std::holds_alternative<error_reply>(*back) && std::get<error_reply>(*back).kind == e->kind);
    return;
  }
  const request& q = std::get<request>(r);
  std::string f = format_request(q);
  check(lines_fit(f));
  check(f.find('\n') == f.size() - 1);
  auto again = parse_request(std::string_view(f).substr(0, f.size() - 1));
  check(std::holds_alternative<request>(again));
  check(std::get<request>(again).index() == q.index());
  check(format_request(std::get<request>(again)) == f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);

  // The same stream, whole and in reads of varying sizes.
  line_splitter whole;
  whole.feed(in);
  std::vector<std::string> lines;
  while (auto l = whole.next()) lines.push_back(*l);

  line_splitter parts;
  std::vector<std::string> lines2;
  std::size_t step = size ? data[0] % 13 + 1 : 1;
  for (std::size_t i = 0; i < size;) {
    std::size_t n = std::min(step, size - i);
    parts.feed(in.substr(i, n));
    i += n;
    while (auto l = parts.next()) lines2.push_back(*l);
    step = step * 7 % 4111 + 1;  // small and large reads
  }
  while (auto l = parts.next()) lines2.push_back(*l);
  check(whole.overflow() == parts.overflow());
  if (!whole.overflow())
    check(lines == lines2);
  else
    check(lines.size() <= lines2.size() && std::equal(lines.begin(), lines.end(), lines2.begin()));

  reply_reader rd;
  for (const auto& l : lines) {
    check(l.size() + 1 <= max_line);
    check(l.find('\n') == std::string::npos);
    check_request_line(l);
    std::string error;
    auto rep = rd.feed(l, error);
    if (rep) {
      check(error.empty());
      check_reply(*rep);
    }
  }
  return 0;
}
