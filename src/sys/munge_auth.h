#pragma once
// MUNGE credentials, for authentication with no set-up where munged runs
// (every Slurm cluster). libmunge is loaded at run time (dlopen), so the
// binary still runs on machines without it. What a credential decodes to,
// and its form on the wire, are the core's (core/munge_wire.h).
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "munge_wire.h"

namespace tfb::munge_auth {

/// True when libmunge loads and munged answers.
bool available(std::string& why_not);

/// A credential carrying payload; only restrict_uid may decode it (if given).
std::optional<std::string> encode(std::string_view payload, std::optional<uid_t> restrict_uid, std::string& error);

/// Decodes and checks a credential (munged rejects replays and expired ones).
std::optional<decoded> decode(std::string_view cred, std::string& error);

/// A credential that keeps payload secret in a shared place (a store's key,
/// docs/store.md): AES-encrypted with the cluster's MUNGE key, and only uid
/// may decode it (munged returns no payload to anyone else).
std::optional<std::string> seal(std::string_view payload, uid_t uid, std::string& error);
/// Decodes a sealed credential at any age: one that is expired, replayed
/// (decoded before on this node) or from a clock ahead is still authentic
/// (munged checked its MAC first, and returns its payload and uid). Other
/// failures (another cluster's key, a uid restriction to someone else):
/// nullopt, with error; refused is true when munged refused it, false when
/// munged could not be asked.
std::optional<decoded> unseal(std::string_view cred, bool& refused, std::string& error);

}  // namespace tfb::munge_auth
