// The store's location (src/store/store_location.h): --store parsed once, into
// endpoints, a prefix and whether TLS is used; the etcd client's URLs made from it.
#include "store_location.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tfb::store {
namespace {

store_location ok(std::string_view text, bool tls = false) {
  store_location at;
  std::string error;
  EXPECT_TRUE(parse_store(text, tls, at, error)) << text << ": " << error;
  EXPECT_EQ(error, "") << text;
  return at;
}

std::string bad(std::string_view text) {
  store_location at;
  std::string error;
  EXPECT_FALSE(parse_store(text, false, at, error)) << text;
  return error;
}

TEST(StoreLocation, OneEndpointAndTheDefaultPrefix) {
  store_location at = ok("etcd://10.0.0.1:2379");
  EXPECT_EQ(at.given, "etcd://10.0.0.1:2379");
  ASSERT_EQ(at.endpoints.size(), 1u);
  EXPECT_EQ(at.endpoints[0], (address{"10.0.0.1", 2379}));
  EXPECT_EQ(at.prefix, "/tfbarrier");
  EXPECT_FALSE(at.tls);
  EXPECT_EQ(at.urls(), std::vector<std::string>{"http://10.0.0.1:2379"});
}

TEST(StoreLocation, SeveralEndpointsAPrefixAndTls) {
  store_location at = ok("etcd://etcd1:2379,[fd00::1]:2379,[fe80::2%eth0]:2380/jobs/42/", true);
  ASSERT_EQ(at.endpoints.size(), 3u);
  EXPECT_EQ(at.endpoints[0], (address{"etcd1", 2379}));
  EXPECT_EQ(at.endpoints[1], (address{"fd00::1", 2379}));
  EXPECT_EQ(at.endpoints[2], (address{"fe80::2%eth0", 2380}));
  EXPECT_EQ(at.prefix, "/jobs/42");  // as a client names it (store_prefix_of)
  EXPECT_TRUE(at.tls);
  EXPECT_EQ(at.urls(), (std::vector<std::string>{"https://etcd1:2379", "https://[fd00::1]:2379",
                                                 "https://[fe80::2%eth0]:2380"}));
}

TEST(StoreLocation, TheEndpointsRoundTrip) {
  store_location at = ok("etcd://a:1,[::1]:2,127.0.0.1:3/p");
  std::string text = "etcd://";
  for (const auto& e : at.endpoints) text += (text.size() > 7 ? "," : "") + e.text();
  text += at.prefix;
  EXPECT_EQ(text, "etcd://a:1,[::1]:2,127.0.0.1:3/p");
  store_location again = ok(text);
  EXPECT_EQ(again.endpoints, at.endpoints);
  EXPECT_EQ(again.prefix, at.prefix);
}

TEST(StoreLocation, Malformed) {
  EXPECT_NE(bad("http://a:1").find("it must start with etcd://"), std::string::npos);
  EXPECT_NE(bad("etcd://").find("no endpoint"), std::string::npos);
  EXPECT_NE(bad("etcd://a:1/").find("the prefix is empty"), std::string::npos);
  EXPECT_NE(bad("etcd://a").find("'a' is not HOST:PORT"), std::string::npos);
  EXPECT_NE(bad("etcd://fd00::1:2379").find("is not HOST:PORT"), std::string::npos);
  EXPECT_NE(bad("etcd://a:0").find("is not HOST:PORT"), std::string::npos);
  EXPECT_NE(bad("etcd://a:1/x y").find("space or control character"), std::string::npos);
}

}  // namespace
}  // namespace tfb::store
