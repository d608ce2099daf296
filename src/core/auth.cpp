#include "auth.h"

#include <fmt/format.h>

#include "sha256.h"

namespace tfb::auth {

std::string to_hex(const unsigned char* p, std::size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

namespace {

const char* dir_label(direction d) { return d == direction::to_host ? "to-host" : "to-client"; }

}  // namespace

std::string sha256_hex(std::string_view msg) {
  crypto::digest d = crypto::sha256_of(msg);
  return to_hex(d.data(), d.size());
}

std::string hmac_hex(std::string_view key, std::string_view msg) {
  crypto::digest d = crypto::hmac_sha256(key, msg);
  return to_hex(d.data(), d.size());
}

bool equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  // Constant time: every byte is looked at, whatever differs first.
  volatile unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = static_cast<unsigned char>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

std::string transcript(std::string_view client_hello, std::string_view host_reply_unsigned) {
  crypto::sha256 h;
  h.update(client_hello);
  h.update("\n");
  h.update(host_reply_unsigned);
  h.update("\n");
  crypto::digest d = h.finish();
  return to_hex(d.data(), d.size());
}

std::string without_field(std::string_view line, std::string_view key) {
  // Fields end where the trailing text (" :") begins; values hold no space.
  std::string_view fields = line.substr(0, line.find(" :"));
  std::string needle = fmt::format(" {}=", key);
  std::size_t at = fields.find(needle);
  if (at == std::string_view::npos) return std::string(line);
  std::size_t end = fields.find(' ', at + 1);
  if (end == std::string_view::npos) end = fields.size();
  return fmt::format("{}{}", line.substr(0, at), line.substr(end));
}

std::string host_proof(std::string_view secret, std::string_view cn, std::string_view hn, std::string_view t) {
  return hmac_hex(secret, fmt::format("tfbarrier-host-proof\n{}\n{}\n{}", cn, hn, t));
}
std::string client_proof(std::string_view secret, std::string_view cn, std::string_view hn, std::string_view t) {
  return hmac_hex(secret, fmt::format("tfbarrier-client-proof\n{}\n{}\n{}", cn, hn, t));
}
std::string session_key(std::string_view secret, std::string_view cn, std::string_view hn) {
  return hmac_hex(secret, fmt::format("tfbarrier-session-key\n{}\n{}", cn, hn));
}

std::string seal(std::string_view line, std::string_view key, direction d, std::uint64_t seq) {
  std::string mac = hmac_hex(key, fmt::format("{}\n{}\n{}", dir_label(d), seq, line)).substr(0, mac_hex_chars);
  auto sp = line.find(' ');
  std::string verb(line.substr(0, sp));
  std::string rest = sp == std::string_view::npos ? std::string() : std::string(line.substr(sp));
  return fmt::format("{} mac={}{}", verb, mac, rest);
}

bool unseal(std::string& line, std::string_view key, direction d, std::uint64_t seq) {
  auto sp = line.find(" mac=");
  if (sp == std::string::npos || line.find(' ') != sp) return false;
  std::size_t start = sp + 5, end = line.find(' ', start);
  if (end == std::string::npos) end = line.size();
  std::string mac = line.substr(start, end - start);
  std::string plain = line.substr(0, sp) + line.substr(end);
  std::string want = hmac_hex(key, fmt::format("{}\n{}\n{}", dir_label(d), seq, plain)).substr(0, mac_hex_chars);
  if (!equal(mac, want)) return false;
  line = std::move(plain);
  return true;
}

}  // namespace tfb::auth
