// Addresses (src/core/address.h): the forms --addr and --listen take, and the one
// loopback test. These tests are the spec.
#include "address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <string>

namespace tfb {
namespace {

address ok(std::string_view text, address_use use = address_use::connect) {
  std::string why;
  auto a = parse_address(text, use, why);
  EXPECT_TRUE(a.has_value()) << text << ": " << why;
  EXPECT_EQ(why, "") << text;
  return a.value_or(address{});
}

std::string bad(std::string_view text, address_use use = address_use::connect) {
  std::string why;
  auto a = parse_address(text, use, why);
  EXPECT_FALSE(a.has_value()) << text << " parsed as " << (a ? a->host : "");
  EXPECT_FALSE(why.empty()) << text;
  return why;
}

constexpr auto listen = address_use::listen;

TEST(Address, ConnectForms) {
  auto a = ok("node01:7727");
  EXPECT_EQ(a.host, "node01");
  EXPECT_EQ(a.port, 7727);
  a = ok("127.0.0.1:1");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 1);
  a = ok("[fd00::1]:65535");
  EXPECT_EQ(a.host, "fd00::1");
  EXPECT_EQ(a.port, 65535);
  EXPECT_EQ(ok("[fe80::1%eth0]:9").host, "fe80::1%eth0");
  EXPECT_EQ(ok("[::ffff:127.0.0.1]:9").host, "::ffff:127.0.0.1");
}

TEST(Address, ConnectErrorsSayWhy) {
  EXPECT_EQ(bad(""), "it is empty");
  EXPECT_EQ(bad("node01"), "there is no :PORT");
  EXPECT_EQ(bad("[fd00::1"), "the '[' has no ']'");
  EXPECT_EQ(bad("[fd00::1]7727"), "there is no :PORT after the ']'");
  EXPECT_EQ(bad("[node1]:7727"), "brackets hold only IPv6 addresses");
  EXPECT_EQ(bad("fd00::1:7727"), "an IPv6 address needs brackets, as in [fd00::1]:7727");
  EXPECT_EQ(bad(":7727"), "the host is empty");
  EXPECT_EQ(bad("a b:7727"), "the host is neither a host name (A-Z a-z 0-9 . - _) nor an IP address");
  EXPECT_EQ(bad("node:0"), "the port \"0\" is not a number from 1 to 65535");
  EXPECT_EQ(bad("node:65536"), "the port \"65536\" is not a number from 1 to 65535");
  bad("node:");
  bad("node:-1");
  bad("node:+1");
  bad("node:99999999999999999999999");
}

TEST(Address, ListenForms) {
  auto a = ok(":7727", listen);
  EXPECT_EQ(a.host, "");  // all interfaces
  EXPECT_EQ(a.port, 7727);
  EXPECT_EQ(ok("127.0.0.1:0", listen).port, 0);  // any free port
  EXPECT_EQ(ok("[::1]:0", listen).host, "::1");
  EXPECT_EQ(ok("0.0.0.0:7727", listen).host, "0.0.0.0");
  EXPECT_EQ(ok("localhost:80", listen).host, "localhost");
}

TEST(Address, ListenErrors) {
  for (std::string_view text : {"garbage", "127.0.0.1:99999", ":abc", "[::1]7727", "::1:7727", "", "[::1", "h:"})
    bad(text, listen);
  EXPECT_EQ(bad("h:70000", listen), "the port \"70000\" is not a number from 0 to 65535");
}

TEST(Address, FormatPutsIPv6InBrackets) {
  EXPECT_EQ(format_address("node01", 7727), "node01:7727");
  EXPECT_EQ(format_address("10.0.0.1", 1), "10.0.0.1:1");
  EXPECT_EQ(format_address("fd00::1", 9000), "[fd00::1]:9000");
}

TEST(Address, FormatAndParseRoundTrip) {
  for (std::string_view host : {"node01", "10.1.2.3", "fd00::1", "::1", "a-b_c.d"}) {
    auto a = ok(format_address(host, 4242));
    EXPECT_EQ(a.host, host);
    EXPECT_EQ(a.port, 4242);
  }
}

TEST(Address, HostnamesAndIPv6Literals) {
  EXPECT_TRUE(valid_hostname("node-01.cluster_a"));
  EXPECT_FALSE(valid_hostname(""));
  EXPECT_FALSE(valid_hostname(std::string(254, 'a')));
  EXPECT_TRUE(valid_hostname(std::string(253, 'a')));
  EXPECT_FALSE(valid_hostname("a/b"));
  EXPECT_TRUE(valid_ipv6("::1"));
  EXPECT_TRUE(valid_ipv6("fe80::1%eth0"));
  EXPECT_FALSE(valid_ipv6("fe80::1%"));
  EXPECT_FALSE(valid_ipv6("1:2"));
  EXPECT_FALSE(valid_ipv6("g::1"));
}

bool loopback(const char* ip) {
  sockaddr_storage ss{};
  if (inet_pton(AF_INET, ip, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr) == 1) {
    ss.ss_family = AF_INET;
  } else if (inet_pton(AF_INET6, ip, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr) == 1) {
    ss.ss_family = AF_INET6;
  } else {
    ADD_FAILURE() << ip << " is not an address";
  }
  return is_loopback(reinterpret_cast<const sockaddr*>(&ss));
}

TEST(Loopback, TheWholeOf127Slash8) {
  EXPECT_TRUE(loopback("127.0.0.1"));
  EXPECT_TRUE(loopback("127.0.1.1"));  // Debian's mapping of the host's own name
  EXPECT_TRUE(loopback("127.255.255.254"));
  EXPECT_FALSE(loopback("128.0.0.1"));
  EXPECT_FALSE(loopback("126.255.255.255"));
  EXPECT_FALSE(loopback("10.0.0.1"));
  EXPECT_FALSE(loopback("0.0.0.0"));
}

TEST(Loopback, IPv6AndMappedIPv4) {
  EXPECT_TRUE(loopback("::1"));
  EXPECT_TRUE(loopback("::ffff:127.0.0.1"));
  EXPECT_TRUE(loopback("::ffff:127.0.1.1"));
  EXPECT_FALSE(loopback("::ffff:10.0.0.1"));
  EXPECT_FALSE(loopback("::"));
  EXPECT_FALSE(loopback("::2"));
  EXPECT_FALSE(loopback("fd00::1"));
  EXPECT_FALSE(loopback("::127.0.0.1"));  // IPv4-compatible, deprecated: not the loopback
}

TEST(Loopback, NothingElse) {
  EXPECT_FALSE(is_loopback(nullptr));
  sockaddr_storage unix_addr{};
  unix_addr.ss_family = AF_UNIX;
  EXPECT_FALSE(is_loopback(reinterpret_cast<const sockaddr*>(&unix_addr)));
}

// Parse once: an address travels as an `address`, and its text is made in one
// place (format_host). Text in the canonical form comes back as it went in.
TEST(AddressText, RoundTrips) {
  for (std::string_view text : {"node01:7727", "node01.cluster.example:1", "127.0.0.1:31000", "[fd00::1]:7727",
                                "[::1]:65535", "[fe80::1%eth0]:31000", "[::ffff:10.0.0.1]:80"}) {
    address a = ok(text);
    EXPECT_EQ(a.text(), text);
    EXPECT_EQ(format_address(a.host, a.port), text);
    EXPECT_EQ(ok(a.text()), a) << text;
  }
  for (std::string_view text : {":0", ":7727", "0.0.0.0:0", "[::]:0", "localhost:7727"}) {
    address a = ok(text, listen);
    EXPECT_EQ(a.text(), text);
    EXPECT_EQ(ok(a.text(), listen), a) << text;
  }
}

TEST(AddressText, TheCanonicalFormDropsLeadingZerosOfThePort) {
  EXPECT_EQ(ok("node01:0080").text(), "node01:80");
}

TEST(AddressText, BracketsOnceAndOnlyForIPv6) {
  EXPECT_EQ(format_host("fd00::1"), "[fd00::1]");
  EXPECT_EQ(format_host("fe80::1%eth0"), "[fe80::1%eth0]");
  EXPECT_EQ(format_host("node01"), "node01");
  EXPECT_EQ(format_host("10.0.0.1"), "10.0.0.1");
  EXPECT_EQ(format_host(""), "");
  EXPECT_EQ((address{"::1", 7727}.text()), "[::1]:7727");
  EXPECT_EQ((address{"", 7727}.text()), ":7727");
  // The host is held without its brackets, so text of text adds none.
  address a = ok("[fd00::1]:7727");
  EXPECT_EQ(a.host, "fd00::1");
  for (int i = 0; i < 3; ++i) a = ok(a.text());
  EXPECT_EQ(a.host, "fd00::1");
  EXPECT_EQ(a.text(), "[fd00::1]:7727");
}

}  // namespace
}  // namespace tfb
