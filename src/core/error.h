#pragma once
// A failure as data: what caused it (error_kind) and a sentence for stderr
// (text). The exit code is not carried: it is chosen from the kind, in one
// place (exit_code_of, core/exit_codes.h), where the command ends. Pure and
// header-only: no static initializer, no system call.
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace tfb {

/// Why something failed: the causes that decide an exit code. Names of
/// causes, not of codes: exit_code_of maps each to its code.
enum class error_kind : std::uint8_t {
  usage,             ///< a bad command line, option or value
  settings_differ,   ///< this host's settings disagree with the store's (a usage error)
  file,              ///< a file or directory of ours cannot be used: journal, history, log
  aborted,           ///< the round was aborted
  conflict,          ///< n, rank, chief or verdict disagrees with the round
  unreachable,       ///< the host cannot be reached, is full, or is another job's
  host_lost,         ///< the host was lost while waiting (or shut down)
  cannot_listen,     ///< the host (or its metrics endpoint) cannot listen on its address
  store_unreachable, ///< the store (etcd) cannot be reached, or was lost
  store_access,      ///< the store refused this host: TLS, etcd's authentication, or another's key
  protocol,          ///< the other end broke the protocol
  internal,          ///< an internal failure: a journal write, a pipe or a fork that failed
  auth,              ///< authentication failed
  timed_out,         ///< --timeout passed, and the withdrawal was confirmed
  unconfirmed,       ///< --timeout passed, and the withdrawal was not confirmed
  interrupted_int,   ///< SIGINT
  interrupted_term,  ///< SIGTERM
};

/// Every kind, for tests and the table's checks.
inline constexpr error_kind all_error_kinds[] = {
    error_kind::usage,         error_kind::settings_differ, error_kind::file,
    error_kind::aborted,       error_kind::conflict,        error_kind::unreachable,
    error_kind::host_lost,     error_kind::cannot_listen,   error_kind::store_unreachable,
    error_kind::store_access,  error_kind::protocol,        error_kind::internal,
    error_kind::auth,          error_kind::timed_out,       error_kind::unconfirmed,
    error_kind::interrupted_int, error_kind::interrupted_term,
};

struct error {
  error_kind kind = error_kind::protocol;
  std::string text;  ///< what happened and what to do, a sentence for stderr
};

/// A value, or the error that prevented it (C++20 has no std::expected).
template <class T>
class result {
 public:
  result(T v) : v_(std::in_place_index<0>, std::move(v)) {}  // NOLINT: implicit, as a return value
  result(error e) : v_(std::in_place_index<1>, std::move(e)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& operator*() { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  /// The error; only when !ok().
  const error& err() const { return std::get<1>(v_); }
  error& err() { return std::get<1>(v_); }

 private:
  std::variant<T, error> v_;
};

}  // namespace tfb
