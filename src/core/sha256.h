#pragma once
// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for authentication.
// Small and self-contained on purpose: OpenSSL's libcrypto, once linked,
// probes the CPU's features with CPUID (each a trap to the hypervisor on a
// virtual machine) in every `tfbarrier` start, with or without a secret.
// Checked against the FIPS 180-4 and RFC 4231 test vectors in
// tests/unit/sha256_test.cpp.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tfb::crypto {

using digest = std::array<unsigned char, 32>;

class sha256 {
 public:
  sha256();
  void update(const void* data, std::size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  digest finish();  ///< the digest; the object is spent afterwards

 private:
  void block(const unsigned char* p);
  std::array<std::uint32_t, 8> h_;
  std::array<unsigned char, 64> buf_{};
  std::size_t used_ = 0;      ///< bytes in buf_
  std::uint64_t total_ = 0;   ///< message bytes so far
};

digest sha256_of(std::string_view msg);
digest hmac_sha256(std::string_view key, std::string_view msg);

}  // namespace tfb::crypto
