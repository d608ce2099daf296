#pragma once
// Addresses, parsed in one place: what --addr, TFBARRIER_ADDR, --listen and
// TFBARRIER_LISTEN take, and whether a resolved address is this machine's
// loopback. Pure: no name service, no sockets (the callers resolve).
//
// Parse once: an address is parsed where it enters (the command line, the
// environment) and travels as an `address` to the socket; format_host is the
// one place that puts an IPv6 literal in brackets (scripts/check-layers).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sockaddr;

namespace tfb {

/// A connect address needs a host and a port from 1 to 65535. A listen address
/// may leave the host out (":PORT", all interfaces) and take port 0 (any free
/// port); its host is resolved by the listener, so only its form is checked.
enum class address_use { connect, listen };

struct address {
  std::string host;  ///< without the brackets of "[v6]"; empty: all interfaces (listen only)
  std::uint16_t port = 0;
  /// "host:port", "[v6]:port" or, to listen on all interfaces, ":port" (format_address).
  std::string text() const;
  bool operator==(const address&) const = default;
};

/// An address as it was given, parsed once: `at` goes to the socket, `given`
/// (the text as typed, or as derived) into messages.
struct given_address {
  address at;
  std::string given;
};

/// Parses "HOST:PORT", "[v6]:PORT" and, to listen, ":PORT". nullopt + why (a
/// clause: "there is no :PORT") when malformed. A bare IPv6 address needs brackets.
std::optional<address> parse_address(std::string_view text, address_use use, std::string& why);

/// The host as an address names it: "[v6]" for an IPv6 literal (it has a
/// ':'), else as it is. The one place of the bracketing rule.
std::string format_host(std::string_view host);
/// "host:port", or "[v6]:port" for an IPv6 literal (format_host).
std::string format_address(std::string_view host, std::uint16_t port);

/// A host name as a resolver takes it: 1-253 of A-Z a-z 0-9 . - _
bool valid_hostname(std::string_view s);
/// A loose IPv6 literal check: hex digits, ':' and '.', at least two ':', an optional %zone.
bool valid_ipv6(std::string_view s);

/// The one loopback test, on a resolved address: 127.0.0.0/8 (Debian maps the
/// host's own name to 127.0.1.1), ::1 and ::ffff:127.x.x.x. False for anything
/// else, including a null pointer and the wildcard addresses.
bool is_loopback(const sockaddr* resolved);

}  // namespace tfb
