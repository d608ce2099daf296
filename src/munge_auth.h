#pragma once
// MUNGE credentials, for authentication with no set-up where munged runs
// (every Slurm cluster). libmunge is loaded at run time (dlopen), so the
// binary still runs on machines without it.
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace tfb::munge_auth {

/// True when libmunge loads and munged answers.
bool available(std::string& why_not);

/// A credential carrying payload; only restrict_uid may decode it (if given).
std::optional<std::string> encode(std::string_view payload, std::optional<uid_t> restrict_uid, std::string& error);

struct decoded {
  std::string payload;
  uid_t uid = 0;
};
/// Decodes and checks a credential (munged rejects replays and expired ones).
std::optional<decoded> decode(std::string_view cred, std::string& error);

/// Credentials are base64 with '=' padding; protocol values cannot hold '='.
std::string to_wire(std::string cred);
std::string from_wire(std::string value);

}  // namespace tfb::munge_auth
