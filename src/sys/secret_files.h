#pragma once
// The secret side of authentication (docs/security.md): random nonces and
// secrets from the kernel (getrandom), and the secret files. The HMAC that
// uses them is the core's (core/auth.h).
#include <cstddef>
#include <optional>
#include <string>

#include "auth.h"

namespace tfb::auth {

/// Fills out with bytes from the kernel's CSPRNG (getrandom); aborts if it has none.
void fill_random(void* out, std::size_t size);
/// A fresh random nonce, hex-encoded.
std::string make_nonce();
/// The default secret file: $TFBARRIER_SECRET_FILE, else ~/.tfbarrier/secret ($HOME, else the
/// password database's home; never /tmp).
std::string default_secret_path();
/// Reads a secret file. Refuses one that others can read. nullopt + error (a sentence).
std::optional<std::string> load_secret(const std::string& path, std::string& error);
/// A fresh secret: 64 hex digits of getrandom(), as a secret file holds them (no newline).
std::string fresh_secret();
/// Writes text as the secret file (mode 0600, parent made 0700). Refuses to overwrite unless force.
bool write_secret(const std::string& path, const std::string& text, bool force, std::string& error);
/// Writes a fresh secret.
inline bool write_secret(const std::string& path, bool force, std::string& error) {
  return write_secret(path, fresh_secret(), force, error);
}

}  // namespace tfb::auth
