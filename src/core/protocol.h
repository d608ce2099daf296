#pragma once
// The wire protocol of docs/protocol.md: framing, parsing and formatting.
// Pure: no sockets. Every function here is unit-tested and fuzzed.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tfb::proto {

/// The version of this protocol: a client's HELLO v= and the host's reply carry
/// it, and a host refuses a HELLO that asks for a version it does not speak.
/// Raised with any change that an older peer would misread (docs/protocol.md).
inline constexpr int protocol_version = 2;

inline constexpr std::size_t max_line = 4096;     ///< bytes, including the newline
inline constexpr std::size_t max_value = 1024;    ///< bytes of one field value (a MUNGE credential fits)
inline constexpr std::size_t max_text = 1024;     ///< bytes of trailing text
inline constexpr std::size_t max_name = 128;      ///< barrier names and scopes
inline constexpr std::size_t max_id = 64;
inline constexpr std::uint32_t max_n = 1'000'000;
inline constexpr std::size_t max_member_lines = 1000;
inline constexpr std::size_t max_missing_ranges = 64;
/// STATUS last=1: the most missing ranks a MISSING line names the node of (nodes=).
inline constexpr std::size_t max_missing_nodes = 16;

/// One line, split: VERB key=value ... [:text]
struct line {
  std::string verb;
  std::vector<std::pair<std::string, std::string>> fields;
  std::optional<std::string> text;

  const std::string* get(std::string_view key) const;
};

/// Splits one line (without its newline). nullopt + error when malformed.
std::optional<line> parse_line(std::string_view raw, std::string& error);
/// Formats a line, with the newline. Values are written as given ("" becomes "-").
std::string format_line(const line& l);

bool valid_name(std::string_view s);   ///< 1-128 of [A-Za-z0-9._:-]
bool valid_id(std::string_view s);     ///< 1-64 of [A-Za-z0-9]
bool valid_text(std::string_view s);   ///< at most max_text bytes of UTF-8, no control characters
/// Why s is not valid text ("holds a control character ..."), or empty when it is.
std::string text_problem(std::string_view s);
bool valid_value(std::string_view s);  ///< 1-1024 printable, no space or '='

enum class verdict { none, continue_, stop };
std::string_view to_string(verdict v);
std::optional<verdict> parse_verdict(std::string_view s);  ///< "continue" | "stop"

/// A round in a STATUS reply: taking arrivals, all present and waiting for the
/// chief's verdict, or its barrier aborted.
enum class round_state { open, gathered, aborted };
std::string_view to_string(round_state s);
std::optional<round_state> parse_round_state(std::string_view s);  ///< "open" | "gathered" | "aborted"

/// How a participant left a round before its release: LEAVE, a closed
/// connection, or silence past its keep-alive; lost: its host (of a store, docs/store.md) went.
enum class departure { left, disconnected, unresponsive, lost };
std::string_view to_string(departure d);
std::optional<departure> parse_departure(std::string_view s);  ///< "left" | "disconnected" | "unresponsive" | "lost"

// ---- requests (client -> host) ----
struct hello {
  std::uint32_t version = 0;
  std::string host;
  std::uint32_t pid = 0;
  std::uint32_t keepalive_ms = 0;  ///< the client sends PING this often; 0 = it does not
  std::string nonce;               ///< the client's fresh nonce (for authentication)
};
struct arrive {
  std::string name, scope, id;
  std::optional<std::uint32_t> n, rank;
  bool chief = false;
  /// decide=1 (with chief=1): the chief decides on this connection once all
  /// are here (wait --decide-by); its connection closing first aborts the round.
  bool decide = false;
  /// within=MS (with chief=1): the round is aborted when no verdict comes
  /// within MS of all arriving (wait --decide-within, --decide-timeout).
  std::optional<std::uint32_t> within_ms;
};
/// The largest within= (ms): 24 days.
inline constexpr std::uint32_t max_within_ms = 2'073'600'000;
struct decide {
  std::string name;  ///< "" = let the host pick
  std::string scope, id;
  verdict v = verdict::none;
  std::optional<std::uint32_t> n, rank;
  bool wait = true;
  std::string message;
};
struct abort_req {
  std::string scope, name, reason;
};
struct status_req {
  std::string scope;  ///< "*" = all scopes
  std::string name;   ///< "" = all barriers
  bool detail = false;
  /// last=1 (status --watch): every barrier, between rounds too, with its last
  /// released round and the nodes its missing ranks were last seen on.
  bool last = false;
};
/// why: "timeout" when the participant gives up at its --timeout (the host
/// counts those per round); "" otherwise. Other values are kept as "".
struct leave {
  std::string why;
};
/// HISTORY: the arrival records of finished rounds (history.h), paged.
struct history_req {
  std::string scope = "*";  ///< "*": every scope
  std::string name;         ///< a glob ('*', '?'); "": every name
  std::uint64_t last = 0;   ///< only the last K matching rounds; 0: all
  std::uint64_t from = 0;   ///< only rounds with seq >= from (the next page)
};
struct ping {};
struct auth_req {
  std::string proof;  ///< auth=hmac: proof that the client knows the secret (docs/security.md)
  std::string cred;   ///< auth=munge: the client's MUNGE credential
};
using request = std::variant<hello, arrive, decide, abort_req, status_req, leave, ping, auth_req, history_req>;

/// Error kinds of ERR lines (docs/protocol.md, "Errors").
enum class error_kind { version, handshake, toolong, badrequest, timeout, conflict, needn, ambiguous, aborted, busy, auth };
std::string_view to_string(error_kind k);
std::optional<error_kind> parse_error_kind(std::string_view s);
/// Whether the host closes the connection after sending this error.
bool closes_connection(error_kind k);

struct request_error {
  error_kind kind;
  std::string text;
};
/// Parses and validates one request line. On failure returns the ERR to send.
std::variant<request, request_error> parse_request(std::string_view raw);
std::string format_request(const request& r);

// ---- replies (host -> client) ----
struct hello_reply {
  std::uint32_t version = 0;
  std::string server;
  std::string auth = "none";  ///< "none" | "hmac"
  std::string nonce;          ///< auth=hmac: the host's fresh nonce
  std::string proof;          ///< auth=hmac: the host's proof that it knows the secret
  std::string cred;           ///< auth=munge: the host's MUNGE credential (with '=' written as '_')
  std::string store;          ///< a host with a store: its prefix (store_name.h); empty without
};
struct waiting {
  std::string name;
  std::uint64_t gen = 0;
  std::uint32_t arrived = 0;
  std::optional<std::uint32_t> n;
};
struct release {
  std::string name;
  std::uint64_t gen = 0;
  verdict v = verdict::continue_;
  std::optional<std::uint32_t> delivered;  ///< only in the reply to DECIDE
  std::string message;
};
struct all_here {
  std::string name;
  std::uint64_t gen = 0;
  std::uint32_t arrived = 0, n = 0;
};
struct aborted {
  std::string name;
  std::uint64_t gen = 0;
  std::optional<std::uint32_t> notified;  ///< only in the reply to ABORT
  std::string reason;
};
struct decided {
  std::string name;
  std::uint64_t gen = 0;
  verdict v = verdict::none;
  std::uint32_t arrived = 0;
  std::optional<std::uint32_t> n;
};
struct left {
  std::string name;
  std::uint64_t gen = 0;
};
struct shutdown {
  std::string text;
};
struct pong {};
struct error_reply {
  error_kind kind;
  std::string text;
};
struct barrier_info {
  std::string scope, name;
  std::uint64_t gen = 0;
  round_state state = round_state::open;
  std::optional<std::uint32_t> n;
  std::uint32_t arrived = 0;
  bool chief = false;
  verdict v = verdict::none;
  std::int64_t age_ms = 0;
  struct member {
    std::optional<std::uint32_t> rank;
    std::string host;
    std::uint32_t pid = 0;
    bool chief = false;
    std::int64_t age_ms = 0;
    std::string via;  ///< with a store: the host it came through (MEMBER via=)
  };
  std::vector<member> members;        ///< detail only
  struct gone_member {
    std::optional<std::uint32_t> rank;
    std::string host;
    std::uint32_t pid = 0;
    departure how = departure::disconnected;
    std::int64_t ago_ms = 0;
  };
  std::vector<gone_member> gone;      ///< detail only: who left this round before release
  std::optional<std::string> missing; ///< rank ranges, when computable
  std::string reason;                 ///< abort reason
  /// STATUS last=1: the barrier's last released round, as the host's history has it.
  struct last_round {
    std::uint64_t gen = 0;
    verdict v = verdict::continue_;
    std::int64_t ago_ms = 0;   ///< since its release
    std::int64_t took_ms = 0;  ///< its first arrival to its release
    std::optional<std::uint32_t> rank;  ///< the last to arrive
    std::string node;                   ///< its node
  };
  /// Shared, never changed once made: a barrier_info stays small (reply_reader::cost).
  std::shared_ptr<const last_round> last;
  /// STATUS last=1: the first missing ranks (at most max_missing_nodes) and
  /// the node each was last seen on ("": not known), from MISSING nodes=.
  struct rank_node {
    std::uint32_t rank = 0;
    std::string node;
  };
  std::vector<rank_node> missing_nodes;
};
struct status_reply {
  std::vector<barrier_info> barriers;
};
/// One page of a HISTORY reply: ROUND and ARR lines (history.h), then
/// HEND, with next=SEQ when more rounds follow (ask again with from=SEQ).
struct history_page {
  std::vector<std::string> lines;  ///< without newlines
  std::optional<std::uint64_t> next;
};
using reply = std::variant<hello_reply, waiting, release, all_here, aborted, decided, left, shutdown,
                           error_reply, status_reply, pong, history_page>;

/// Formats a reply as one or more lines (STATUS: several, ending in END).
std::string format_reply(const reply& r);

/// Incremental reply reader for clients: feed lines; STATUS blocks are
/// assembled until END. Returns a reply when one is complete.
/// The most a client holds of one multi-line reply (a STATUS, a HISTORY page)
/// before its end, counted as reply_reader::cost does: a host's STATUS of
/// 100,000 participants costs 62 MiB at most (36 MB on the wire; measured by
/// reply_reader_test), a HISTORY page about 256 KiB. A host that streams on,
/// never ending the reply, would grow the client without bound.
inline constexpr std::size_t max_reply_bytes = std::size_t{256} << 20;

class reply_reader {
 public:
  explicit reply_reader(std::size_t max_bytes = max_reply_bytes) : max_bytes_(max_bytes) {}
  /// nullopt: need more lines (inside a STATUS block). Sets error on a bad
  /// line, or on a reply past max_bytes without its end (then too_long()).
  std::optional<reply> feed(std::string_view raw, std::string& error);
  /// "status" or "history" while a multi-line reply has begun and not ended, else "".
  std::string_view partial() const { return status_ ? "status" : history_ ? "history" : ""; }
  /// A reply went past max_bytes without its end: the stream is unusable.
  bool too_long() const { return too_long_; }
  /// What one line of a multi-line reply costs the client that holds it: its
  /// bytes and the record it becomes (a short BARRIER line makes a large one).
  static std::size_t cost(std::string_view raw);

 private:
  std::optional<reply> read(std::string_view raw, std::string& error);

  std::optional<status_reply> status_;
  std::optional<history_page> history_;
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;  ///< of the partial reply so far, newlines included
  bool too_long_ = false;
};

/// Compresses sorted ranks into "0-3,7,9-10", at most max_ranges ranges, then "+".
std::string format_ranges(const std::vector<std::uint32_t>& sorted, std::size_t max_ranges);
/// The ranks of format_ranges' text ("0-3,7" is 0 1 2 3 7); `cut` says
/// whether the text ends in "+" (cut at max_ranges). At most 1,000,000 ranks
/// (ranks run to 999,999); what is not a number is skipped.
std::vector<std::uint32_t> expand_ranges(std::string_view text, bool& cut);

/// Splits a byte stream into lines of at most max_line bytes.
class line_splitter {
 public:
  /// Appends bytes. Complete lines become available via next().
  void feed(std::string_view bytes);
  /// The next complete line, without "\n" or "\r\n". nullopt if none yet.
  std::optional<std::string> next();
  /// True once a line longer than max_line was seen; the stream is then unusable.
  bool overflow() const { return overflow_; }
  std::size_t buffered() const { return buf_.size() - pos_; }
  /// Its buffer's capacity: that of an empty string (no memory of its own)
  /// once every line was taken and next() said nullopt.
  std::size_t capacity() const { return buf_.capacity(); }

 private:
  std::string buf_;
  std::size_t pos_ = 0;
  bool overflow_ = false;
};

}  // namespace tfb::proto

namespace tfb {
using proto::protocol_version;
}  // namespace tfb
