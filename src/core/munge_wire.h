#pragma once
// MUNGE credentials as the protocol carries them: what one decodes to, and
// its form in a protocol value. Pure; the calls to libmunge are
// sys/munge_auth.h's.
#include <sys/types.h>

#include <algorithm>
#include <string>

namespace tfb::munge_auth {

struct decoded {
  std::string payload;
  uid_t uid = 0;
};

/// Credentials are base64 with '=' padding; protocol values cannot hold '='.
inline std::string to_wire(std::string cred) {
  std::replace(cred.begin(), cred.end(), '=', '_');
  return cred;
}
inline std::string from_wire(std::string value) {
  std::replace(value.begin(), value.end(), '_', '=');
  return value;
}

}  // namespace tfb::munge_auth
