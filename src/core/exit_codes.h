#pragma once
// The one table of tfbarrier's exit codes. man/tfbarrier.1, --help and
// README.md repeat it; tests/bats/man.bats checks they agree.
//
// A failure carries its cause (core/error.h); exit_code_of, below, is the
// one place a cause becomes a code. Outside it, code names only ok (a
// command did what it was asked) and released_continue/released_stop (a
// verdict, which is no failure); scripts/check-layers refuses literal exit
// codes elsewhere.
#include "error.h"

namespace tfb::exit_code {
inline constexpr int ok = 0;                 ///< success: a command that is not a wait did what it was asked
inline constexpr int released_continue = 0;  ///< released; the verdict is "continue" (or no chief)
inline constexpr int released_stop = 1;      ///< released; the chief's verdict is "stop"
inline constexpr int usage = 2;              ///< bad command line or bad value
inline constexpr int aborted = 3;            ///< the round was aborted (tfbarrier abort)
inline constexpr int conflict = 4;           ///< n, rank, chief or verdict conflicts with the round
inline constexpr int unreachable = 69;       ///< host unreachable, or lost while waiting (EX_UNAVAILABLE)
inline constexpr int protocol = 70;          ///< protocol or internal error (EX_SOFTWARE)
/// --timeout passed, and the host did not confirm the withdrawal (no LEFT):
/// this participant may still be counted in the round (EX_TEMPFAIL).
inline constexpr int unconfirmed = 75;
inline constexpr int auth = 77;              ///< authentication failed (EX_NOPERM)
inline constexpr int timed_out = 124;        ///< --timeout passed before release (as timeout(1))
inline constexpr int interrupted_int = 130;  ///< SIGINT
inline constexpr int interrupted_term = 143; ///< SIGTERM
}  // namespace tfb::exit_code

namespace tfb {
/// One row of the table, for --help and the man page.
struct exit_code_row {
  int code;
  const char* meaning;
};
inline constexpr exit_code_row exit_code_table[] = {
    {exit_code::released_continue, "released: continue (the chief's verdict, or no chief)"},
    {exit_code::released_stop, "released: stop (the chief's verdict)"},
    {exit_code::usage, "usage error: bad option or value"},
    {exit_code::aborted, "the round was aborted (tfbarrier abort)"},
    {exit_code::conflict, "conflict: n, rank, chief or verdict disagrees with the round"},
    {exit_code::unreachable, "host unreachable, or lost while waiting"},
    {exit_code::protocol, "protocol or internal error"},
    {exit_code::unconfirmed, "timed out, but the withdrawal was not confirmed: may still be counted"},
    {exit_code::auth, "authentication failed"},
    {exit_code::timed_out, "timed out (--timeout)"},
    {exit_code::interrupted_int, "interrupted by SIGINT"},
    {exit_code::interrupted_term, "interrupted by SIGTERM"},
};

/// The one table from a failure's cause to its exit code.
constexpr int exit_code_of(error_kind k) {
  switch (k) {
    case error_kind::usage:
    case error_kind::settings_differ:
    case error_kind::file: return exit_code::usage;
    case error_kind::aborted: return exit_code::aborted;
    case error_kind::conflict: return exit_code::conflict;
    case error_kind::unreachable:
    case error_kind::host_lost:
    case error_kind::cannot_listen:
    case error_kind::store_unreachable: return exit_code::unreachable;
    case error_kind::store_access:
    case error_kind::auth: return exit_code::auth;
    case error_kind::protocol:
    case error_kind::internal: return exit_code::protocol;
    case error_kind::timed_out: return exit_code::timed_out;
    case error_kind::unconfirmed: return exit_code::unconfirmed;
    case error_kind::interrupted_int: return exit_code::interrupted_int;
    case error_kind::interrupted_term: return exit_code::interrupted_term;
  }
  return exit_code::protocol;
}
inline int exit_code_of(const error& e) { return exit_code_of(e.kind); }
}  // namespace tfb
