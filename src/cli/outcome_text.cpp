// The words of a call's result (outcome_text.h).
#include "outcome_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "exit_codes.h"

namespace tfb::cmd {
namespace {

using client::call_result;
using kind = call_result::kind;
using how = call_result::interrupt_how;

std::string join_members(const proto::barrier_info& b) {
  std::string s;
  std::size_t shown = 0;
  for (const auto& m : b.members) {
    if (shown == 20) {
      s += fmt::format(", and {} more", b.members.size() - shown);
      break;
    }
    if (!s.empty()) s += ", ";
    s += m.rank ? fmt::format("rank {} ({} pid {})", *m.rank, m.host, m.pid) : fmt::format("{} pid {}", m.host, m.pid);
    ++shown;
  }
  return s;
}

/// Who never arrived: the missing ranks that did not leave.
std::string never_arrived(const proto::barrier_info& b, const std::vector<std::uint32_t>& left_ranks) {
  if (!b.missing || b.missing->empty()) return {};
  bool cut = false;
  std::vector<std::uint32_t> never;
  for (std::uint32_t r : proto::expand_ranges(*b.missing, cut))
    if (std::find(left_ranks.begin(), left_ranks.end(), r) == left_ranks.end()) never.push_back(r);
  if (never.empty() && !cut) return {};
  return fmt::format("; never arrived: rank{} {}", never.size() == 1 && !cut ? "" : "s",
                     proto::format_ranges(never, proto::max_missing_ranges) + (cut ? ",+" : ""));
}

/// How the missing ones left: "rank 4 disconnected 5s ago (node2 pid 77)", and who never arrived.
std::string describe_gone(const proto::barrier_info& b) {
  std::string s;
  std::vector<std::string> seen;
  std::vector<std::uint32_t> left_ranks;
  for (auto it = b.gone.rbegin(); it != b.gone.rend(); ++it) {
    const auto& g = *it;
    // A rank that came back is present again; a rank that left twice is told once (the latest).
    bool present = std::any_of(b.members.begin(), b.members.end(),
                               [&](const auto& m) { return g.rank && m.rank == g.rank; });
    std::string who = g.rank ? fmt::format("rank {}", *g.rank) : fmt::format("{} pid {}", g.host, g.pid);
    if (present || std::find(seen.begin(), seen.end(), who) != seen.end()) continue;
    seen.push_back(who);
    if (g.rank) left_ranks.push_back(*g.rank);
    std::string_view how_left = g.how == proto::departure::unresponsive ? "stopped answering (unreachable or stopped)"
                                : g.how == proto::departure::lost       ? "was lost with the host of its node"
                                                                        : proto::to_string(g.how);
    s += fmt::format("{}{} {} {} ago", s.empty() ? "" : ", ", who, how_left, format_duration(duration(g.ago_ms)));
    if (g.rank) s += fmt::format(" ({} pid {})", g.host, g.pid);
  }
  return (s.empty() ? std::string() : "; left: " + s) + never_arrived(b, left_ranks);
}

/// "K/N arrived" and who is missing, for a timeout's message.
std::string arrived_text(const proto::barrier_info& b) {
  std::string s = fmt::format("{}/{} arrived", b.arrived, b.n ? std::to_string(*b.n) : "?");
  if (b.state == proto::round_state::gathered)
    s += "; everyone had arrived, and the round was waiting for the chief's verdict (tfbarrier decide)";
  else if (b.missing && !b.missing->empty())
    s += fmt::format("; missing ranks {}", *b.missing);
  return s;
}

std::string aborted_text(const call_result& r) {
  return fmt::format("barrier {} (round {}) was aborted{}{}", r.name, r.gen, r.message.empty() ? "" : ": ", r.message);
}

/// "barrier NAME (round GEN)", or without the round before the host said which.
std::string where(const call_result& r) {
  return r.gen ? fmt::format("barrier {} (round {})", r.name, r.gen) : fmt::format("barrier {}", r.name);
}

std::string timed_out_text(const call_result& r) {
  std::string text = fmt::format("timed out after {} waiting at {}", format_duration(r.timeout), where(r));
  if (r.last) {
    text += ": " + arrived_text(*r.last);
    if (!r.last->members.empty()) text += fmt::format("; arrived: {}", join_members(*r.last));
    text += describe_gone(*r.last);
  }
  return text;
}

/// The timeout passed and no LEFT confirmed the withdrawal: exit 75.
std::string unconfirmed_text(const call_result& r) {
  std::string why = r.why == call_result::no_left::reconnecting
                        ? fmt::format("while reconnecting to the host at {}, so the withdrawal could not be sent", r.addr)
                        : fmt::format("the host at {} did not confirm the withdrawal within {} (it may be cut off "
                                      "from its store, or have stopped answering)",
                                      r.addr, format_duration(client::leave_grace));
  std::string text = fmt::format("timed out after {} waiting at {}, {}: this participant may "
                                 "still be counted in the round, and the others released with it (exit {}, not "
                                 "{}). Treat its outcome as unknown: `tfbarrier status --name {}` shows whom the "
                                 "round counts",
                                 format_duration(r.timeout), where(r), why, exit_code_of(error_kind::unconfirmed),
                                 exit_code_of(error_kind::timed_out), r.name);
  if (r.last) text += "; the host's last status: " + arrived_text(*r.last);
  return text;
}

std::string decide_timed_out_text(const call_result& r) {
  std::string detail = r.last           ? ": " + arrived_text(*r.last)
                       : r.reconnecting ? fmt::format(" (reconnecting to the host at {})", r.addr)
                                        : std::string();
  return fmt::format("timed out after {} waiting for barrier {} (round {}) to release; the verdict {} "
                     "stands and is delivered when all have arrived{}",
                     format_duration(r.timeout), r.name, r.gen, proto::to_string(r.v), detail);
}

std::string interrupted_text(const call_result& r) {
  std::string_view sig = r.sig == client::interrupt_signal::sigterm ? "SIGTERM" : "SIGINT";
  switch (r.how) {
    case how::plain: break;
    case how::withdrew: return fmt::format("interrupted by {}; withdrew from barrier {} (round {})", sig, r.name, r.gen);
    case how::unconfirmed:
      return fmt::format("interrupted by {}; the host did not confirm the withdrawal from barrier {} (round {}) "
                         "within {}: this participant may still be counted in that round",
                         sig, r.name, r.gen, format_duration(client::interrupt_grace));
    case how::released_first:
      return fmt::format("interrupted by {}; barrier {} (round {}) had released (verdict {}) before the "
                         "host read the withdrawal",
                         sig, r.name, r.gen, proto::to_string(r.v));
    case how::verdict_stands:
      return fmt::format("interrupted by {}; the verdict {} stands for barrier {} round {}, and is delivered when "
                         "all have arrived",
                         sig, proto::to_string(r.v), r.name, r.gen);
  }
  return fmt::format("interrupted by {}", sig);
}

std::string abort_done_text(const call_result& r) {
  unsigned told = r.delivered.value_or(0);
  return fmt::format("aborted barrier {} round {}: {} waiting participant{} told{}", r.name, r.gen, told,
                     told == 1 ? "" : "s",
                     told != 0 ? ""
                               : "; nobody was waiting, so check the name (and --scope): later arrivals "
                                 "exit 3 until the host forgets the barrier (serve --forget-after, "
                                 "default 1h)");
}

std::string recorded_text(const client::recorded& r) {
  return fmt::format("verdict {} recorded for barrier {} round {} ({}/{} arrived)", proto::to_string(r.v), r.name,
                     r.gen, r.arrived, r.n ? std::to_string(*r.n) : "?");
}

/// A verdict (or a done decide or abort): not a failure, so not a cause's code.
outcome text(int code, std::string err) { return outcome{code, "", std::move(err), std::nullopt, {}, std::nullopt}; }

}  // namespace

std::string note_text(const client::recorded& r) {
  return recorded_text(r) + "; waiting for its delivery (interrupting leaves it standing)";
}

outcome outcome_of(const call_result& r) {
  switch (r.k) {
    case kind::released: {
      outcome o = text(r.v == proto::verdict::stop ? exit_code::released_stop : exit_code::released_continue, "");
      o.out = r.message;
      return o;
    }
    case kind::all_here: return text(exit_code::released_continue, "");
    case kind::aborted: return outcome::failed({error_kind::aborted, aborted_text(r)});
    case kind::timed_out: return outcome::failed({error_kind::timed_out, timed_out_text(r)});
    case kind::unconfirmed: return outcome::failed({error_kind::unconfirmed, unconfirmed_text(r)});
    case kind::decide_recorded: return text(exit_code::released_continue, recorded_text(r.rec));
    case kind::decide_delivered:
      return text(exit_code::released_continue,
                  fmt::format("verdict {} delivered to {} participant{} of barrier {} round {}", proto::to_string(r.v),
                              r.delivered.value_or(0), r.delivered.value_or(0) == 1 ? "" : "s", r.name, r.gen));
    case kind::decide_timed_out: return outcome::failed({error_kind::timed_out, decide_timed_out_text(r)});
    case kind::abort_done: return text(exit_code::released_continue, abort_done_text(r));
    case kind::interrupted:
      return outcome::failed({r.sig == client::interrupt_signal::sigterm ? error_kind::interrupted_term
                                                                          : error_kind::interrupted_int,
                              interrupted_text(r)});
    case kind::failed: return outcome::failed(r.failure);
  }
  return outcome::failed({error_kind::protocol, "internal error: a call ended with a result of no known kind"});
}

}  // namespace tfb::cmd
