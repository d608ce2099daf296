#include "address.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <cstring>
#include <fmt/format.h>

#include "text.h"

namespace tfb {
namespace {

constexpr std::size_t max_hostname = 253;

bool is_alnum(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/// Decimal digits only, at most 65535; to listen, 0 too.
std::optional<std::uint16_t> parse_port(std::string_view s, address_use use) {
  if (s.empty()) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v > 65535) return std::nullopt;
  if (v == 0 && use == address_use::connect) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

}  // namespace

bool valid_hostname(std::string_view s) {
  if (s.empty() || s.size() > max_hostname) return false;
  for (char c : s)
    if (!is_alnum(c) && c != '.' && c != '-' && c != '_') return false;
  return true;
}

bool valid_ipv6(std::string_view s) {
  auto zone = s.find('%');
  std::string_view addr = s.substr(0, zone);
  if (zone != std::string_view::npos) {
    std::string_view z = s.substr(zone + 1);
    if (z.empty()) return false;
    for (char c : z)
      if (!is_alnum(c) && c != '.' && c != '-' && c != '_') return false;
  }
  std::size_t colons = 0;
  for (char c : addr) {
    if (c == ':') {
      ++colons;
    } else if (!is_hex(c) && c != '.') {
      return false;
    }
  }
  return colons >= 2 && addr.size() <= 45;
}

std::optional<address> parse_address(std::string_view a, address_use use, std::string& why) {
  const bool listen = use == address_use::listen;
  std::string_view host, port;
  if (a.empty()) {
    why = "it is empty";
    return std::nullopt;
  }
  if (a.front() == '[') {
    auto close = a.find(']');
    if (close == std::string_view::npos) {
      why = "the '[' has no ']'";
      return std::nullopt;
    }
    if (close + 1 >= a.size() || a[close + 1] != ':') {
      why = "there is no :PORT after the ']'";
      return std::nullopt;
    }
    host = a.substr(1, close - 1);
    port = a.substr(close + 2);
    if (!listen && !valid_ipv6(host)) {
      why = "brackets hold only IPv6 addresses";
      return std::nullopt;
    }
  } else {
    auto colon = a.rfind(':');
    if (colon == std::string_view::npos) {
      why = "there is no :PORT";
      return std::nullopt;
    }
    host = a.substr(0, colon);
    port = a.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      why = "an IPv6 address needs brackets, as in [fd00::1]:7727";
      return std::nullopt;
    }
    if (!listen && !valid_hostname(host)) {
      why = host.empty() ? "the host is empty" : "the host is neither a host name (A-Z a-z 0-9 . - _) nor an IP address";
      return std::nullopt;
    }
  }
  auto p = parse_port(port, use);
  if (!p) {
    why = fmt::format("the port {} is not a number from {} to 65535", quote_text(port), listen ? 0 : 1);
    return std::nullopt;
  }
  return address{std::string(host), *p};
}

std::string format_host(std::string_view host) {
  if (host.find(':') != std::string_view::npos) return fmt::format("[{}]", host);
  return std::string(host);
}

std::string format_address(std::string_view host, std::uint16_t port) {
  return fmt::format("{}:{}", format_host(host), port);
}

std::string address::text() const { return format_address(host, port); }

bool is_loopback(const sockaddr* resolved) {
  if (!resolved) return false;
  if (resolved->sa_family == AF_INET) {
    sockaddr_in v4;
    std::memcpy(&v4, resolved, sizeof v4);
    return (ntohl(v4.sin_addr.s_addr) >> 24) == 127;
  }
  if (resolved->sa_family == AF_INET6) {
    sockaddr_in6 v6;
    std::memcpy(&v6, resolved, sizeof v6);
    const unsigned char* b = v6.sin6_addr.s6_addr;
    static constexpr unsigned char loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static constexpr unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(b, loop6, 16) == 0) return true;
    return std::memcmp(b, mapped, 12) == 0 && b[12] == 127;
  }
  return false;
}

}  // namespace tfb
