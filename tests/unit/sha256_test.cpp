// SHA-256 and HMAC-SHA-256 (src/core/sha256.cpp) against the published vectors:
// FIPS 180-4's examples and RFC 4231's HMAC test cases, then 200 key and
// message lengths across the block boundaries against Python's hashlib/hmac.
#include "sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "auth.h"

namespace {

using tfb::crypto::digest;

std::string hex(const digest& d) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : d) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

std::string unhex(std::string_view h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16));
  return out;
}

TEST(Sha256, Fips180Examples) {
  EXPECT_EQ(hex(tfb::crypto::sha256_of("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(tfb::crypto::sha256_of("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(tfb::crypto::sha256_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(tfb::crypto::sha256_of(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecesGiveTheSameDigestAsOneUpdate) {
  std::string msg;
  for (int i = 0; i < 300; ++i) msg += static_cast<char>(i * 31);
  digest whole = tfb::crypto::sha256_of(msg);
  for (std::size_t cut : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 127u, 128u, 200u}) {
    tfb::crypto::sha256 s;
    std::string_view v(msg);
    while (!v.empty()) {
      std::size_t n = std::min(cut, v.size());
      s.update(v.substr(0, n));
      v.remove_prefix(n);
    }
    EXPECT_EQ(hex(s.finish()), hex(whole)) << "pieces of " << cut;
  }
}

TEST(HmacSha256, Rfc4231TestCases) {
  struct tc {
    std::string key, data, mac;
  };
  const tc cases[] = {
      {std::string(20, '\x0b'), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {std::string(20, '\xaa'), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"), std::string(50, '\xcd'),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {std::string(131, '\xaa'),
       "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
       "hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(hex(tfb::crypto::hmac_sha256(c.key, c.data)), c.mac) << c.data;
    EXPECT_EQ(tfb::auth::hmac_hex(c.key, c.data), c.mac);
  }
  // Test case 5: truncated to 128 bits, as the line MACs are (auth::mac_hex_chars).
  EXPECT_EQ(hex(tfb::crypto::hmac_sha256(std::string(20, '\x0c'), "Test With Truncation")).substr(0, tfb::auth::mac_hex_chars),
            "a3b6167473100ee06e0c796c2955552b");
}

TEST(HmacSha256, MatchesPythonAcrossBlockBoundaries) {
  // The SHA-256 of the concatenation, for L = 0..199, of
  // hmac(key_L, msg_L) and sha256(msg_L), where msg_L[i] = (7i + L) % 256 and
  // key_L has (11L) % 150 bytes key_L[i] = (13i + 5) % 256. Computed with
  // Python 3.11's hashlib and hmac (tests/unit/sha256_vectors.py prints it).
  tfb::crypto::sha256 acc;
  for (int L = 0; L < 200; ++L) {
    std::string msg, key;
    for (int i = 0; i < L; ++i) msg += static_cast<char>((i * 7 + L) % 256);
    for (int i = 0; i < (L * 11) % 150; ++i) key += static_cast<char>((i * 13 + 5) % 256);
    digest m = tfb::crypto::hmac_sha256(key, msg);
    digest h = tfb::crypto::sha256_of(msg);
    acc.update(m.data(), m.size());
    acc.update(h.data(), h.size());
  }
  EXPECT_EQ(hex(acc.finish()), "1ccf8a718bce6b93ab0acda30201258b2fbdb65f4e34f36e6ad96705cf4e308b");
}

TEST(AuthEqual, ComparesWholeStrings) {
  EXPECT_TRUE(tfb::auth::equal("abc", "abc"));
  EXPECT_TRUE(tfb::auth::equal("", ""));
  EXPECT_FALSE(tfb::auth::equal("abc", "abd"));
  EXPECT_FALSE(tfb::auth::equal("abc", "xbc"));
  EXPECT_FALSE(tfb::auth::equal("abc", "abcd"));
}

}  // namespace
