// libFuzzer target: arbitrary bytes as an HTTP request to `serve --metrics`
// (src/observe/metrics.h). scripts/fuzz builds and runs it. Invariants, each a
// __builtin_trap() when broken:
//   - parse_request says the same whether it gets the bytes at once or the
//     stream grows read by read (incomplete until it decides, then the same
//     decision for every longer prefix that holds the same head);
//   - nothing past max_request_head bytes without an end of head is
//     "incomplete": the host never buffers more;
//   - every answer (respond or refusal) is one HTTP/1.1 response whose
//     Content-Length is the length of its body, and a 200 only with the token.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "metrics.h"

namespace {

using namespace tfb::metrics;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_response(const std::string& r, bool head) {
  check(r.rfind("HTTP/1.1 ", 0) == 0);
  auto end = r.find("\r\n\r\n");
  check(end != std::string::npos);
  auto cl = r.find("Content-Length: ");
  check(cl != std::string::npos && cl < end);
  std::size_t len = std::stoul(r.substr(cl + 16));
  if (!head) check(r.size() - (end + 4) == len);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto whole = parse_request(in);
  if (whole.st == http_parse::state::incomplete) check(in.size() <= max_request_head);
  // Read by read: the first decision is the one for the whole input.
  std::size_t step = size % 7 + 1;
  for (std::size_t n = step; n < size; n += step) {
    auto p = parse_request(in.substr(0, n));
    if (p.st == http_parse::state::incomplete) continue;
    check(p.st == whole.st);
    if (p.st == http_parse::state::complete) check(p.req.target == whole.req.target && p.req.method == whole.req.method);
    break;
  }
  std::optional<std::string> token = std::string("0123456789abcdef");
  if (whole.st == http_parse::state::complete) {
    std::string r = respond(whole.req, token, [] { return std::string("x 1\n"); });
    check_response(r, whole.req.method == "HEAD");
    if (r.rfind("HTTP/1.1 200", 0) == 0) check(bearer_matches(whole.req.authorization, *token));
  } else if (whole.st != http_parse::state::incomplete) {
    check_response(refusal(whole.st), false);
  }
  return 0;
}
