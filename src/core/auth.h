#pragma once
// Shared-secret authentication (docs/security.md): mutual HMAC-SHA-256
// challenge-response over fresh nonces from both sides, then every line in
// both directions is sealed with a MAC under a per-connection session key and
// a sequence number. The hash is sha256.cpp's. Pure: the nonces, the random
// secrets and the secret files are sys/secret_files.h's.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tfb::auth {

inline constexpr std::size_t nonce_bytes = 16;
inline constexpr std::size_t mac_hex_chars = 32;  ///< a line MAC: the first 128 bits of HMAC-SHA-256

/// p[0..n) in lower-case hex.
std::string to_hex(const unsigned char* p, std::size_t n);
/// HMAC-SHA-256(key, msg), hex-encoded (64 chars).
std::string hmac_hex(std::string_view key, std::string_view msg);
/// SHA-256 of msg, in hex (a store's digest of its state).
std::string sha256_hex(std::string_view msg);
/// Constant-time comparison.
bool equal(std::string_view a, std::string_view b);

/// The handshake's transcript (protocol 2, docs/protocol.md): SHA-256, in hex,
/// of the client's HELLO line, "\n", the host's HELLO reply line without its
/// proof= or cred= field (unsigned_reply), "\n"; each line as sent, without its
/// line ending. Both proofs and both MUNGE payloads carry it, so that a
/// rewritten keepalive=, host=, pid=, server= or auth= fails the handshake.
std::string transcript(std::string_view client_hello, std::string_view host_reply_unsigned);
/// The reply line without its field KEY=VALUE (and the space before it):
/// what the host's proof or credential covers. The line as given when the
/// field is missing.
std::string without_field(std::string_view line, std::string_view key);

/// The host's proof that it knows the secret, bound to both nonces and the transcript.
std::string host_proof(std::string_view secret, std::string_view client_nonce, std::string_view host_nonce,
                       std::string_view transcript);
/// The client's proof, with the roles swapped, so one cannot stand for the other.
std::string client_proof(std::string_view secret, std::string_view client_nonce, std::string_view host_nonce,
                         std::string_view transcript);
/// The key that seals every later line of this connection.
std::string session_key(std::string_view secret, std::string_view client_nonce, std::string_view host_nonce);

enum class direction { to_host, to_client };
/// Inserts " mac=HEX" after the verb of one line (without its newline).
std::string seal(std::string_view line, std::string_view key, direction d, std::uint64_t seq);
/// Checks and removes the MAC; false when missing or wrong.
bool unseal(std::string& line, std::string_view key, direction d, std::uint64_t seq);

}  // namespace tfb::auth
