#include "munge_auth.h"

#include <dlfcn.h>
#include <munge.h>

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>

namespace tfb::munge_auth {
namespace {

struct library {
  decltype(&munge_encode) encode = nullptr;
  decltype(&munge_decode) decode = nullptr;
  decltype(&munge_strerror) strerror = nullptr;
  decltype(&munge_ctx_create) ctx_create = nullptr;
  decltype(&munge_ctx_set) ctx_set = nullptr;
  decltype(&munge_ctx_destroy) ctx_destroy = nullptr;
  std::string error;
};

const library& lib() {
  static const library l = [] {
    library x;
    void* h = dlopen("libmunge.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      x.error = "libmunge.so.2 is not installed";
      return x;
    }
    x.encode = reinterpret_cast<decltype(x.encode)>(dlsym(h, "munge_encode"));
    x.decode = reinterpret_cast<decltype(x.decode)>(dlsym(h, "munge_decode"));
    x.strerror = reinterpret_cast<decltype(x.strerror)>(dlsym(h, "munge_strerror"));
    x.ctx_create = reinterpret_cast<decltype(x.ctx_create)>(dlsym(h, "munge_ctx_create"));
    x.ctx_set = reinterpret_cast<decltype(x.ctx_set)>(dlsym(h, "munge_ctx_set"));
    x.ctx_destroy = reinterpret_cast<decltype(x.ctx_destroy)>(dlsym(h, "munge_ctx_destroy"));
    if (!x.encode || !x.decode || !x.strerror || !x.ctx_create || !x.ctx_set || !x.ctx_destroy) {
      x.encode = nullptr;
      x.error = "libmunge.so.2 lacks the functions tfbarrier needs";
    }
    return x;
  }();
  return l;
}

}  // namespace

bool available(std::string& why_not) {
  std::string error;
  if (!lib().encode) {
    why_not = lib().error;
    return false;
  }
  if (!encode("", std::nullopt, error)) {
    why_not = error;
    return false;
  }
  return true;
}

namespace {

/// A credential of payload; only restrict_uid may decode it (if given); with
/// aes, encrypted with AES whatever munged's default cipher.
std::optional<std::string> encode_with(std::string_view payload, std::optional<uid_t> restrict_uid, bool aes,
                                       std::string& error) {
  const library& l = lib();
  if (!l.encode) {
    error = l.error;
    return std::nullopt;
  }
  munge_ctx_t ctx = l.ctx_create();
  if (!ctx) {
    error = "cannot create a MUNGE context";
    return std::nullopt;
  }
  bool set = (!restrict_uid || l.ctx_set(ctx, MUNGE_OPT_UID_RESTRICTION, *restrict_uid) == EMUNGE_SUCCESS) &&
             (!aes || l.ctx_set(ctx, MUNGE_OPT_CIPHER_TYPE, MUNGE_CIPHER_AES128) == EMUNGE_SUCCESS);
  char* cred = nullptr;
  munge_err_t e = set ? l.encode(&cred, ctx, payload.data(), static_cast<int>(payload.size())) : EMUNGE_SNAFU;
  l.ctx_destroy(ctx);
  if (e != EMUNGE_SUCCESS) {
    error = set ? fmt::format("MUNGE: {}", l.strerror(e)) : "MUNGE: cannot set the credential's options";
    if (cred) std::free(cred);
    return std::nullopt;
  }
  std::string out(cred);
  std::free(cred);
  return out;
}

}  // namespace

std::optional<std::string> encode(std::string_view payload, std::optional<uid_t> restrict_uid, std::string& error) {
  return encode_with(payload, restrict_uid, false, error);
}

namespace {

std::optional<decoded> decode_with(std::string_view cred, bool any_age, bool& refused, std::string& error) {
  refused = false;
  const library& l = lib();
  if (!l.decode) {
    error = l.error;
    return std::nullopt;
  }
  std::string c(cred);
  void* buf = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t e = l.decode(c.c_str(), nullptr, &buf, &len, &uid, &gid);
  bool stale = e == EMUNGE_CRED_EXPIRED || e == EMUNGE_CRED_REPLAYED || e == EMUNGE_CRED_REWOUND;
  if (e != EMUNGE_SUCCESS && !(any_age && stale)) {
    // Past munged's door, it judged the credential; before it, it was not asked.
    refused = e != EMUNGE_SOCKET && e != EMUNGE_TIMEOUT && e != EMUNGE_NO_MEMORY && e != EMUNGE_SNAFU;
    error = fmt::format("MUNGE: {}", l.strerror(e));
    if (buf) std::free(buf);
    return std::nullopt;
  }
  decoded d;
  if (buf && len > 0) d.payload.assign(static_cast<const char*>(buf), static_cast<std::size_t>(len));
  if (buf) std::free(buf);
  d.uid = uid;
  return d;
}

}  // namespace

std::optional<decoded> decode(std::string_view cred, std::string& error) {
  bool refused = false;
  return decode_with(cred, false, refused, error);
}

std::optional<decoded> unseal(std::string_view cred, bool& refused, std::string& error) {
  return decode_with(cred, true, refused, error);
}

std::optional<std::string> seal(std::string_view payload, uid_t uid, std::string& error) {
  return encode_with(payload, uid, true, error);
}

}  // namespace tfb::munge_auth
