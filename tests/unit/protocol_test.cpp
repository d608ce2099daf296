// The wire protocol of docs/protocol.md (src/core/protocol.h). These tests are the spec:
// framing, every limit, every request and reply, and every example of the doc.
#include "protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace tfb::proto {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

// ---------------------------------------------------------------------------
// helpers

line parse_ok(std::string_view raw) {
  std::string error;
  auto l = parse_line(raw, error);
  EXPECT_TRUE(l.has_value()) << "'" << raw << "': " << error;
  return l.value_or(line{});
}

std::string parse_err(std::string_view raw) {
  std::string error;
  auto l = parse_line(raw, error);
  EXPECT_FALSE(l.has_value()) << "'" << raw << "' parsed";
  EXPECT_FALSE(error.empty()) << "'" << raw << "'";
  return error;
}

template <class T>
T req_ok(std::string_view raw) {
  auto r = parse_request(raw);
  if (auto* e = std::get_if<request_error>(&r)) {
    ADD_FAILURE() << "'" << raw << "': " << to_string(e->kind) << " " << e->text;
    return T{};
  }
  const auto& q = std::get<request>(r);
  if (!std::holds_alternative<T>(q)) {
    ADD_FAILURE() << "'" << raw << "' parsed as another request (index " << q.index() << ")";
    return T{};
  }
  return std::get<T>(q);
}

request_error req_err(std::string_view raw, error_kind want = error_kind::badrequest) {
  auto r = parse_request(raw);
  auto* e = std::get_if<request_error>(&r);
  if (!e) {
    ADD_FAILURE() << "'" << raw << "' parsed as a request";
    return {};
  }
  EXPECT_EQ(to_string(e->kind), to_string(want)) << raw << ": " << e->text;
  EXPECT_FALSE(e->text.empty()) << raw;
  return *e;
}

/// Feeds host bytes through a line_splitter and a reply_reader, like the client does.
std::vector<reply> read_replies(std::string_view bytes) {
  line_splitter s;
  reply_reader rd;
  s.feed(bytes);
  std::vector<reply> out;
  while (auto l = s.next()) {
    std::string error;
    auto r = rd.feed(*l, error);
    EXPECT_EQ(error, "") << "line '" << *l << "'";
    if (r) out.push_back(std::move(*r));
  }
  EXPECT_FALSE(s.overflow());
  EXPECT_EQ(s.buffered(), 0u) << "unfinished line in: " << bytes;
  return out;
}

reply read_one(std::string_view bytes) {
  auto all = read_replies(bytes);
  EXPECT_EQ(all.size(), 1u) << bytes;
  if (all.empty()) return shutdown{"<nothing>"};
  return all.front();
}

/// format_reply -> splitter -> reply_reader -> format_reply gives the same bytes.
template <class T>
T round_trip(const reply& r) {
  std::string bytes = format_reply(r);
  reply back = read_one(bytes);
  EXPECT_EQ(format_reply(back), bytes);
  if (!std::holds_alternative<T>(back)) {
    ADD_FAILURE() << "read back as another reply (index " << back.index() << "): " << bytes;
    return T{};
  }
  return std::get<T>(back);
}

/// format_request -> parse_request -> format_request gives the same line.
template <class T>
T request_round_trip(const request& r) {
  std::string l = format_request(r);
  EXPECT_TRUE(l.ends_with("\n"));
  EXPECT_EQ(std::count(l.begin(), l.end(), '\n'), 1) << l;
  T back = req_ok<T>(std::string_view(l).substr(0, l.size() - 1));
  EXPECT_EQ(format_request(back), l);
  return back;
}

std::vector<std::string> keys_of(std::string_view l) {
  std::vector<std::string> keys;
  std::istringstream in{std::string(l)};
  std::string tok;
  in >> tok;  // verb
  while (in >> tok) {
    if (tok.starts_with(":") || tok.starts_with("[") || tok.starts_with("(")) break;
    auto eq = tok.find('=');
    if (eq == std::string::npos) break;
    keys.push_back(tok.substr(0, eq));
  }
  return keys;
}

// ---------------------------------------------------------------------------
// parse_line / format_line

TEST(ParseLine, VerbOnly) {
  line l = parse_ok("LEAVE");
  EXPECT_EQ(l.verb, "LEAVE");
  EXPECT_TRUE(l.fields.empty());
  EXPECT_FALSE(l.text);
}

TEST(ParseLine, FieldsAndText) {
  line l = parse_ok("RELEASE name=epoch3 gen=2 verdict=stop :loss diverged at step 9000");
  EXPECT_EQ(l.verb, "RELEASE");
  ASSERT_EQ(l.fields.size(), 3u);
  EXPECT_EQ(l.fields[0], (std::pair<std::string, std::string>{"name", "epoch3"}));
  EXPECT_EQ(l.fields[1], (std::pair<std::string, std::string>{"gen", "2"}));
  EXPECT_EQ(l.fields[2], (std::pair<std::string, std::string>{"verdict", "stop"}));
  ASSERT_TRUE(l.text);
  EXPECT_EQ(*l.text, "loss diverged at step 9000");
  ASSERT_NE(l.get("gen"), nullptr);
  EXPECT_EQ(*l.get("gen"), "2");
  EXPECT_EQ(l.get("nope"), nullptr);
}

TEST(ParseLine, RefusesAKeyGivenTwice) {
  std::string error;
  EXPECT_FALSE(parse_line("ARRIVE name=a id=x name=b n=2", error));
  EXPECT_CONTAINS(error, "the key name is given twice");
  auto r = parse_request("ARRIVE name=a id=x n=2 n=5");
  ASSERT_TRUE(std::holds_alternative<request_error>(r));
  EXPECT_EQ(std::get<request_error>(r).kind, error_kind::badrequest);
  EXPECT_CONTAINS(std::get<request_error>(r).text, "the key n is given twice");
}

TEST(ParseLine, TextOnly) {
  line l = parse_ok("SHUTDOWN :the host is going away");
  EXPECT_TRUE(l.fields.empty());
  EXPECT_EQ(l.text.value_or("?"), "the host is going away");
}

TEST(ParseLine, TextMayHoldColonsEqualsAndSpaces) {
  line l = parse_ok("ABORT scope=s name=n :a=b  c :d ::");
  EXPECT_EQ(l.fields.size(), 2u);
  EXPECT_EQ(l.text.value_or("?"), "a=b  c :d ::");
}

TEST(ParseLine, EmptyText) {
  line l = parse_ok("SHUTDOWN :");
  ASSERT_TRUE(l.text);
  EXPECT_EQ(*l.text, "");
}

TEST(ParseLine, DashValueIsKept) {
  // "-" means empty, but parse_line keeps it; the typed readers interpret it.
  line l = parse_ok("ARRIVE n=- rank=-");
  EXPECT_EQ(*l.get("n"), "-");
}

TEST(ParseLine, ValueMayHoldColonsAndPunctuation) {
  line l = parse_ok("X name=slurm-123.0:a_b k=!\"#$%&'()*+,-./:;<>?@[\\]^_`{|}~");
  EXPECT_EQ(*l.get("name"), "slurm-123.0:a_b");
  EXPECT_EQ(*l.get("k"), "!\"#$%&'()*+,-./:;<>?@[\\]^_`{|}~");
}

TEST(ParseLine, UnderscoreKeys) {
  line l = parse_ok("BARRIER age_ms=5 _=1 __a=2");
  EXPECT_EQ(*l.get("age_ms"), "5");
  EXPECT_EQ(*l.get("_"), "1");
}

TEST(ParseLine, EmptyLine) {
  EXPECT_CONTAINS(parse_err(""), "empty");
  parse_err(" ");
  parse_err(" LEAVE");
}

TEST(ParseLine, LowercaseOrMixedVerb) {
  EXPECT_CONTAINS(parse_err("arrive name=a"), "upper-case");
  parse_err("Arrive name=a");
  parse_err("ARRIVe");
  parse_err("ARRIVE2");
  parse_err("AR-RIVE");
  parse_err(":text");
}

TEST(ParseLine, BadSpacing) {
  parse_err("LEAVE ");             // trailing space
  parse_err("ARRIVE  name=a");     // double space
  parse_err("ARRIVE name=a  n=1");
  parse_err("ARRIVE\tname=a");
  parse_err("ARRIVE name=a ");
}

TEST(ParseLine, BadKeys) {
  parse_err("X Name=a");
  parse_err("X na-me=a");
  parse_err("X n1=a");
  parse_err("X =a");
  parse_err("X name");
  parse_err("X na.me=a");
  parse_err("X \xc3\xa9=a");
  EXPECT_CONTAINS(parse_err("X NAME=a"), "bad key");
  EXPECT_CONTAINS(parse_err("X name"), "key=value");
}

TEST(ParseLine, BadValues) {
  parse_err("X name=");      // empty: write "-"
  parse_err("X name==a");    // '=' in the value
  parse_err("X name=a=b");
  parse_err("X name=a\x01");
  parse_err("X name=a\x7f");
  parse_err("X name=\xc3\xa9");  // printable ASCII only
  parse_err("X name=a\rb");
}

TEST(ParseLine, ValueLimit) {
  std::string v256(max_value, 'v');
  EXPECT_EQ(*parse_ok("X k=" + v256).get("k"), v256);
  EXPECT_CONTAINS(parse_err("X k=" + v256 + "v"), "bad value");
}

TEST(ParseLine, TextLimit) {
  std::string t1024(max_text, 't');
  EXPECT_EQ(parse_ok("X :" + t1024).text.value_or(""), t1024);
  EXPECT_CONTAINS(parse_err("X :" + t1024 + "t"), "1024");
}

TEST(ParseLine, TextControlBytes) {
  parse_err("X :a\tb");
  parse_err("X :a\x01");
  parse_err("X :a\x1f");
  parse_err("X :a\x7f");
  parse_err("X :a\rb");
  parse_err(std::string("X :a\0b", 6));
  // UTF-8 is fine.
  EXPECT_EQ(parse_ok("X :caf\xc3\xa9 \xe2\x86\x92 ok").text.value_or(""), "caf\xc3\xa9 \xe2\x86\x92 ok");
}

TEST(ParseLine, NulInVerbOrValue) {
  parse_err(std::string("LE\0AVE", 6));
  parse_err(std::string("X k=a\0b", 7));
}

TEST(ParseLine, LineLimit) {
  // 4096 bytes including the newline: a line of 4095 bytes is the longest.
  std::string l = "X";
  for (char k = 'a'; l.size() + 1 + 2 + max_value <= max_line - 1; ++k)  // keys differ: none may repeat
    l += std::string(" ") + k + "=" + std::string(max_value, 'v');
  l += " :";
  l += std::string(max_line - 1 - l.size(), 't');
  ASSERT_EQ(l.size(), max_line - 1);
  ASSERT_LE(l.size() - l.find(" :") - 2, max_text);
  parse_ok(l);
  EXPECT_CONTAINS(parse_err(l + "t"), "4096");
  EXPECT_CONTAINS(parse_err(std::string(10000, 'X')), "longer");
}

TEST(FormatLine, Basic) {
  line l;
  l.verb = "WAITING";
  l.fields = {{"name", "e1"}, {"gen", "1"}};
  EXPECT_EQ(format_line(l), "WAITING name=e1 gen=1\n");
  l.text = "hello there";
  EXPECT_EQ(format_line(l), "WAITING name=e1 gen=1 :hello there\n");
}

TEST(FormatLine, EmptyValueBecomesDash) {
  line l;
  l.verb = "X";
  l.fields = {{"a", ""}};
  EXPECT_EQ(format_line(l), "X a=-\n");
}

TEST(FormatLine, EmptyTextIsLeftOut) {
  line l;
  l.verb = "END";
  l.text = "";
  EXPECT_EQ(format_line(l), "END\n");
}

TEST(FormatLine, RoundTrips) {
  const char* lines[] = {
      "LEAVE",
      "LEAVE why=timeout",
      "HISTORY scope=S name=epoch* last=20",
      "END",
      "HELLO v=1 host=node1 pid=4242",
      "ARRIVE name=e1 scope=default id=a n=3 rank=0 chief=0",
      "RELEASE name=epoch3 gen=2 verdict=stop :loss diverged at step 9000",
      "SHUTDOWN :bye",
      "X a=- b=: c=!~ :  spaces  kept  ",
      "X :caf\xc3\xa9",
  };
  for (std::string_view raw : lines) {
    line l = parse_ok(raw);
    std::string out = format_line(l);
    EXPECT_EQ(out, std::string(raw) + "\n");
    line again = parse_ok(std::string_view(out).substr(0, out.size() - 1));
    EXPECT_EQ(again.verb, l.verb);
    EXPECT_EQ(again.fields, l.fields);
    EXPECT_EQ(again.text, l.text);
  }
}

TEST(FormatLine, RoundTripsAtTheLimits) {
  line l;
  l.verb = "X";
  l.fields = {{"k", std::string(max_value, '~')}, {"long_key_name", "-"}};
  l.text = std::string(max_text, 'x');
  std::string out = format_line(l);
  line back = parse_ok(std::string_view(out).substr(0, out.size() - 1));
  EXPECT_EQ(back.fields, l.fields);
  EXPECT_EQ(back.text, l.text);
}

// ---------------------------------------------------------------------------
// small validators

TEST(Validators, Name) {
  EXPECT_TRUE(valid_name("epoch3"));
  EXPECT_TRUE(valid_name("slurm-123.0"));
  EXPECT_TRUE(valid_name("A-Z_a.z:0-9"));
  EXPECT_TRUE(valid_name(std::string(max_name, 'a')));
  EXPECT_FALSE(valid_name(std::string(max_name + 1, 'a')));
  EXPECT_FALSE(valid_name(""));
  EXPECT_FALSE(valid_name("a b"));
  EXPECT_FALSE(valid_name("a/b"));
  EXPECT_FALSE(valid_name("a=b"));
  EXPECT_FALSE(valid_name("*"));
  EXPECT_FALSE(valid_name("caf\xc3\xa9"));
}

TEST(Validators, Id) {
  EXPECT_TRUE(valid_id("a"));
  EXPECT_TRUE(valid_id("Zz09"));
  EXPECT_TRUE(valid_id(std::string(max_id, 'x')));
  EXPECT_FALSE(valid_id(std::string(max_id + 1, 'x')));
  EXPECT_FALSE(valid_id(""));
  EXPECT_FALSE(valid_id("a-b"));
  EXPECT_FALSE(valid_id("a_b"));
  EXPECT_FALSE(valid_id("a.b"));
}

TEST(Validators, Text) {
  EXPECT_TRUE(valid_text(""));
  EXPECT_TRUE(valid_text(" any text: with = and ~ "));
  EXPECT_TRUE(valid_text(std::string(max_text, 'x')));
  EXPECT_FALSE(valid_text(std::string(max_text + 1, 'x')));
  EXPECT_FALSE(valid_text("a\nb"));
  EXPECT_FALSE(valid_text("a\x7f"));
  EXPECT_TRUE(valid_text("\xe2\x86\x92"));
}

TEST(Validators, Value) {
  EXPECT_TRUE(valid_value("-"));
  EXPECT_TRUE(valid_value("!"));
  EXPECT_TRUE(valid_value("~"));
  EXPECT_TRUE(valid_value(std::string(max_value, 'v')));
  EXPECT_FALSE(valid_value(std::string(max_value + 1, 'v')));
  EXPECT_FALSE(valid_value(""));
  EXPECT_FALSE(valid_value("a b"));
  EXPECT_FALSE(valid_value("a=b"));
  EXPECT_FALSE(valid_value("\x80"));
}

TEST(Verdicts, ParseAndName) {
  EXPECT_EQ(parse_verdict("continue"), verdict::continue_);
  EXPECT_EQ(parse_verdict("stop"), verdict::stop);
  EXPECT_FALSE(parse_verdict("none"));
  EXPECT_FALSE(parse_verdict("STOP"));
  EXPECT_FALSE(parse_verdict(""));
  EXPECT_EQ(to_string(verdict::continue_), "continue");
  EXPECT_EQ(to_string(verdict::stop), "stop");
  EXPECT_EQ(to_string(verdict::none), "none");
}

TEST(ErrorKinds, NamesRoundTrip) {
  const std::pair<error_kind, const char*> all[] = {
      {error_kind::version, "VERSION"},     {error_kind::handshake, "HANDSHAKE"},
      {error_kind::toolong, "TOOLONG"},     {error_kind::badrequest, "BADREQUEST"},
      {error_kind::timeout, "TIMEOUT"},     {error_kind::conflict, "CONFLICT"},
      {error_kind::needn, "NEEDN"},         {error_kind::ambiguous, "AMBIGUOUS"},
      {error_kind::aborted, "ABORTED"},     {error_kind::busy, "BUSY"},
      {error_kind::auth, "AUTH"},
  };
  for (auto [k, name] : all) {
    EXPECT_EQ(to_string(k), name);
    EXPECT_EQ(parse_error_kind(name), k);
  }
  EXPECT_FALSE(parse_error_kind("conflict"));
  EXPECT_FALSE(parse_error_kind("NOPE"));
  EXPECT_FALSE(parse_error_kind(""));
}

TEST(ErrorKinds, WhichCloseTheConnection) {
  // docs/protocol.md, "Errors": the host closes after these ...
  EXPECT_TRUE(closes_connection(error_kind::version));
  EXPECT_TRUE(closes_connection(error_kind::handshake));
  EXPECT_TRUE(closes_connection(error_kind::toolong));
  EXPECT_TRUE(closes_connection(error_kind::badrequest));
  EXPECT_TRUE(closes_connection(error_kind::timeout));
  EXPECT_TRUE(closes_connection(error_kind::busy));  // out of descriptors: nothing more to say
  EXPECT_TRUE(closes_connection(error_kind::auth));
  // ... and these answer one request and keep the connection.
  EXPECT_FALSE(closes_connection(error_kind::conflict));
  EXPECT_FALSE(closes_connection(error_kind::needn));
  EXPECT_FALSE(closes_connection(error_kind::ambiguous));
  EXPECT_FALSE(closes_connection(error_kind::aborted));
}

// ---------------------------------------------------------------------------
// parse_request: HELLO

TEST(ParseHello, Good) {
  auto h = req_ok<hello>("HELLO v=1 host=node1 pid=4242");
  EXPECT_EQ(h.version, 1u);
  EXPECT_EQ(h.host, "node1");
  EXPECT_EQ(h.pid, 4242u);
}

TEST(ParseHello, UnknownVersionStillParses) {
  // The host, not the parser, refuses versions it does not speak (ERR VERSION).
  EXPECT_EQ(req_ok<hello>("HELLO v=7 host=node1 pid=4242").version, 7u);
  EXPECT_EQ(req_ok<hello>("HELLO v=0").version, 0u);
}

TEST(ParseHello, OptionalFields) {
  auto h = req_ok<hello>("HELLO v=1");
  EXPECT_EQ(h.host, "?");
  EXPECT_EQ(h.pid, 0u);
  h = req_ok<hello>("HELLO v=1 host=- pid=-");
  EXPECT_EQ(h.host, "?");
  EXPECT_EQ(h.pid, 0u);
  EXPECT_EQ(req_ok<hello>("HELLO v=1 pid=2147483647").pid, 2147483647u);
}

TEST(ParseHello, UnknownKeysAreIgnored) {
  auto h = req_ok<hello>("HELLO v=1 host=a pid=2 auth=token future_key=x :and text");
  EXPECT_EQ(h.host, "a");
  EXPECT_EQ(h.pid, 2u);
}

TEST(ParseHello, KeepaliveAndNonce) {
  auto h = req_ok<hello>("HELLO v=1 host=n1 pid=7 keepalive=5000 nonce=00112233445566778899aabbccddeeff");
  EXPECT_EQ(h.keepalive_ms, 5000u);
  EXPECT_EQ(h.nonce, "00112233445566778899aabbccddeeff");
  h = req_ok<hello>("HELLO v=1 host=n1 pid=7");
  EXPECT_EQ(h.keepalive_ms, 0u);
  EXPECT_EQ(h.nonce, "");
  EXPECT_EQ(req_ok<hello>("HELLO v=1 keepalive=3600000").keepalive_ms, 3'600'000u);
  req_err("HELLO v=1 keepalive=3600001");
  req_err("HELLO v=1 keepalive=x");
}

TEST(ParseHello, Malformed) {
  EXPECT_CONTAINS(req_err("HELLO").text, "v=");
  EXPECT_CONTAINS(req_err("HELLO host=a pid=1").text, "v=");
  req_err("HELLO v=x");
  req_err("HELLO v=-");
  req_err("HELLO v=-1");
  req_err("HELLO v=1.0");
  req_err("HELLO v=99999999999");  // over 32 bits
  req_err("HELLO v=1 pid=x");
  req_err("HELLO v=1 pid=2147483648");
  req_err("HELLO v=1 pid=-5");
  req_err("hello v=1");
}

// ---------------------------------------------------------------------------
// parse_request: ARRIVE

TEST(ParseArrive, Good) {
  auto a = req_ok<arrive>("ARRIVE name=e1 scope=default id=a n=3 rank=0 chief=0");
  EXPECT_EQ(a.name, "e1");
  EXPECT_EQ(a.scope, "default");
  EXPECT_EQ(a.id, "a");
  EXPECT_EQ(a.n, 3u);
  EXPECT_EQ(a.rank, 0u);
  EXPECT_FALSE(a.chief);
  a = req_ok<arrive>("ARRIVE name=e2 scope=slurm-123.0 id=Zz9 n=2 rank=1 chief=1");
  EXPECT_TRUE(a.chief);
  EXPECT_EQ(a.scope, "slurm-123.0");
}

TEST(ParseArrive, UnknownNAndRank) {
  auto a = req_ok<arrive>("ARRIVE name=e1 scope=default id=a n=- rank=- chief=-");
  EXPECT_FALSE(a.n);
  EXPECT_FALSE(a.rank);
  EXPECT_FALSE(a.chief);
  a = req_ok<arrive>("ARRIVE name=e1 scope=default id=a");
  EXPECT_FALSE(a.n);
  EXPECT_FALSE(a.rank);
  EXPECT_FALSE(a.chief);
  a = req_ok<arrive>("ARRIVE name=e1 scope=default id=a rank=999999");  // rank without n
  EXPECT_EQ(a.rank, 999999u);
}

TEST(ParseArrive, TheChiefThatDecidesOnItsConnectionAndItsDeadline) {
  auto a = req_ok<arrive>("ARRIVE name=e scope=s id=a n=3 rank=0 chief=1 decide=1 within=600000");
  EXPECT_TRUE(a.decide);
  EXPECT_EQ(a.within_ms, 600000u);
  EXPECT_EQ(format_request(a), "ARRIVE name=e scope=s id=a n=3 rank=0 chief=1 decide=1 within=600000\n");
  // Written only when set: a plain arrival's line is as before.
  auto plain = req_ok<arrive>("ARRIVE name=e scope=s id=a n=3 rank=1 chief=0");
  EXPECT_FALSE(plain.decide);
  EXPECT_EQ(plain.within_ms, std::nullopt);
  EXPECT_EQ(format_request(plain), "ARRIVE name=e scope=s id=a n=3 rank=1 chief=0\n");
  EXPECT_CONTAINS(req_err("ARRIVE name=e scope=s id=a n=3 rank=1 chief=0 decide=1").text, "needs chief=1");
  EXPECT_CONTAINS(req_err("ARRIVE name=e scope=s id=a n=3 rank=1 within=5").text, "needs chief=1");
  req_err("ARRIVE name=e scope=s id=a chief=1 within=0");
  req_err("ARRIVE name=e scope=s id=a chief=1 within=2073600001");
}

TEST(ParseArrive, Limits) {
  EXPECT_EQ(req_ok<arrive>("ARRIVE name=e scope=s id=a n=1000000 rank=999999").n, max_n);
  EXPECT_EQ(req_ok<arrive>("ARRIVE name=e scope=s id=a n=1 rank=0").n, 1u);
  EXPECT_EQ(req_ok<arrive>("ARRIVE name=" + std::string(max_name, 'n') + " scope=" + std::string(max_name, 's') +
                           " id=" + std::string(max_id, 'i'))
                .name.size(),
            max_name);
}

TEST(ParseArrive, MissingRequiredFields) {
  EXPECT_CONTAINS(req_err("ARRIVE scope=s id=a n=1").text, "name=");
  EXPECT_CONTAINS(req_err("ARRIVE name=e id=a n=1").text, "scope=");
  EXPECT_CONTAINS(req_err("ARRIVE name=e scope=s n=1").text, "id=");
  req_err("ARRIVE");
}

TEST(ParseArrive, BadNamesAndIds) {
  req_err("ARRIVE name=a/b scope=s id=a");
  req_err("ARRIVE name=e scope=a/b id=a");
  req_err("ARRIVE name=" + std::string(max_name + 1, 'n') + " scope=s id=a");
  req_err("ARRIVE name=e scope=" + std::string(max_name + 1, 's') + " id=a");
  req_err("ARRIVE name=e scope=s id=" + std::string(max_id + 1, 'i'));
  req_err("ARRIVE name=e scope=s id=a-b");
  req_err("ARRIVE name=e scope=s id=a_b");
  req_err("ARRIVE name=e scope=s id=-");
  req_err("ARRIVE name=e* scope=s id=a");
}

TEST(ParseArrive, BadNumbers) {
  // The range in the text is the one that holds: n=0 is refused too.
  EXPECT_EQ(req_err("ARRIVE name=e scope=s id=a n=0").text, "n=0 is not a number from 1 to 1000000");
  EXPECT_EQ(req_err("ARRIVE name=e scope=s id=a n=1000001").text, "n=1000001 is not a number from 1 to 1000000");
  EXPECT_EQ(req_err("ARRIVE name=e scope=s id=a rank=1000000").text, "rank=1000000 is not a number from 0 to 999999");
  req_err("ARRIVE name=e scope=s id=a n=-1");
  req_err("ARRIVE name=e scope=s id=a n=x");
  req_err("ARRIVE name=e scope=s id=a n=3x");
  req_err("ARRIVE name=e scope=s id=a n=0x10");
  req_err("ARRIVE name=e scope=s id=a n=99999999999999999999999");
  req_err("ARRIVE name=e scope=s id=a rank=1000000");
  req_err("ARRIVE name=e scope=s id=a rank=-1");
  req_err("ARRIVE name=e scope=s id=a chief=2");
  req_err("ARRIVE name=e scope=s id=a chief=yes");
}

TEST(ParseArrive, RankMustBeBelowN) {
  EXPECT_CONTAINS(req_err("ARRIVE name=e scope=s id=a n=3 rank=3").text, "rank=3");
  req_err("ARRIVE name=e scope=s id=a n=1 rank=1");
  req_err("ARRIVE name=e scope=s id=a n=3 rank=100");
  req_ok<arrive>("ARRIVE name=e scope=s id=a n=3 rank=2");
}

TEST(ParseArrive, UnknownKeysAndTextAreIgnored) {
  auto a = req_ok<arrive>("ARRIVE name=e scope=s id=a n=2 priority=high :some text");
  EXPECT_EQ(a.n, 2u);
}

// ---------------------------------------------------------------------------
// parse_request: DECIDE

TEST(ParseDecide, Good) {
  auto d = req_ok<decide>("DECIDE scope=default id=d verdict=stop name=e2 n=2 rank=0 wait=1 :loss diverged");
  EXPECT_EQ(d.scope, "default");
  EXPECT_EQ(d.id, "d");
  EXPECT_EQ(d.v, verdict::stop);
  EXPECT_EQ(d.name, "e2");
  EXPECT_EQ(d.n, 2u);
  EXPECT_EQ(d.rank, 0u);
  EXPECT_TRUE(d.wait);
  EXPECT_EQ(d.message, "loss diverged");
}

TEST(ParseDecide, Defaults) {
  auto d = req_ok<decide>("DECIDE scope=s id=d verdict=continue name=-");
  EXPECT_EQ(d.name, "");
  EXPECT_EQ(d.v, verdict::continue_);
  EXPECT_FALSE(d.n);
  EXPECT_FALSE(d.rank);
  EXPECT_TRUE(d.wait);
  EXPECT_EQ(d.message, "");
  d = req_ok<decide>("DECIDE scope=s id=d verdict=stop name=- n=- rank=- wait=0");
  EXPECT_FALSE(d.wait);
  d = req_ok<decide>("DECIDE scope=s id=d verdict=stop name=- wait=-");
  EXPECT_TRUE(d.wait);
}

TEST(ParseDecide, MissingRequiredFields) {
  EXPECT_CONTAINS(req_err("DECIDE scope=s id=d verdict=stop").text, "name=");
  EXPECT_CONTAINS(req_err("DECIDE id=d verdict=stop name=-").text, "scope=");
  EXPECT_CONTAINS(req_err("DECIDE scope=s verdict=stop name=-").text, "id=");
  EXPECT_CONTAINS(req_err("DECIDE scope=s id=d name=-").text, "verdict=");
}

TEST(ParseDecide, BadFields) {
  EXPECT_CONTAINS(req_err("DECIDE scope=s id=d verdict=none name=-").text, "continue or stop");
  req_err("DECIDE scope=s id=d verdict=maybe name=-");
  req_err("DECIDE scope=s id=d verdict=- name=-");
  req_err("DECIDE scope=s id=d verdict=STOP name=-");
  req_err("DECIDE scope=s id=d verdict=stop name=a/b");
  req_err("DECIDE scope=s id=d! verdict=stop name=-");
  req_err("DECIDE scope=s id=d verdict=stop name=- n=0");
  req_err("DECIDE scope=s id=d verdict=stop name=- n=1000001");
  req_err("DECIDE scope=s id=d verdict=stop name=- n=2 rank=2");
  req_err("DECIDE scope=s id=d verdict=stop name=- rank=1000000");
  req_err("DECIDE scope=s id=d verdict=stop name=- wait=2");
  req_err("DECIDE scope=s id=d verdict=stop name=- :bad\x01text");
}

TEST(ParseDecide, LongMessage) {
  std::string msg(max_text, 'm');
  EXPECT_EQ(req_ok<decide>("DECIDE scope=s id=d verdict=stop name=- :" + msg).message, msg);
  req_err("DECIDE scope=s id=d verdict=stop name=- :" + msg + "m");
}

// ---------------------------------------------------------------------------
// parse_request: ABORT, STATUS, LEAVE, unknown

TEST(ParseAbort, Good) {
  auto a = req_ok<abort_req>("ABORT scope=default name=e1 :node3 died");
  EXPECT_EQ(a.scope, "default");
  EXPECT_EQ(a.name, "e1");
  EXPECT_EQ(a.reason, "node3 died");
  EXPECT_EQ(req_ok<abort_req>("ABORT scope=s name=e").reason, "");
}

TEST(ParseAbort, Malformed) {
  EXPECT_CONTAINS(req_err("ABORT scope=s").text, "name=");
  EXPECT_CONTAINS(req_err("ABORT name=e").text, "scope=");
  req_err("ABORT scope=s name=a/b");
  req_err("ABORT scope=* name=e");
  req_err("ABORT scope=s name=e :\x1b[2J");
}

TEST(ParseStatus, Good) {
  auto s = req_ok<status_req>("STATUS scope=default name=e1 detail=1");
  EXPECT_EQ(s.scope, "default");
  EXPECT_EQ(s.name, "e1");
  EXPECT_TRUE(s.detail);
  s = req_ok<status_req>("STATUS scope=* name=- detail=0");
  EXPECT_EQ(s.scope, "*");
  EXPECT_EQ(s.name, "");
  EXPECT_FALSE(s.detail);
}

TEST(ParseStatus, Defaults) {
  auto s = req_ok<status_req>("STATUS");
  EXPECT_EQ(s.scope, "*");
  EXPECT_EQ(s.name, "");
  EXPECT_FALSE(s.detail);
  EXPECT_EQ(req_ok<status_req>("STATUS scope=-").scope, "*");
}

TEST(ParseStatus, Malformed) {
  req_err("STATUS scope=a/b");
  req_err("STATUS scope=**");
  req_err("STATUS name=*");
  req_err("STATUS name=a/b");
  req_err("STATUS detail=yes");
  req_err("STATUS scope=" + std::string(max_name + 1, 's'));
}

TEST(ParseLeave, Good) {
  req_ok<leave>("LEAVE");
  req_ok<leave>("LEAVE reason=x :ignored");
}

TEST(ParsePing, Good) {
  req_ok<ping>("PING");
  req_ok<ping>("PING seq=4 :ignored");
  req_err("PING ");
}

TEST(ParseAuth, Good) {
  EXPECT_EQ(req_ok<auth_req>("AUTH proof=CP").proof, "CP");
  auto a = req_ok<auth_req>("AUTH cred=MUNGE:AwQDAAB_abc:");
  EXPECT_EQ(a.cred, "MUNGE:AwQDAAB_abc:");
  EXPECT_EQ(a.proof, "");
  std::string big(max_value, 'c');  // a MUNGE credential fits in one value
  EXPECT_EQ(req_ok<auth_req>("AUTH cred=" + big).cred, big);
}

TEST(ParseAuth, Malformed) {
  EXPECT_CONTAINS(req_err("AUTH").text, "proof= or cred=");
  req_err("AUTH proof=-");
  req_err("AUTH proof=a=b");
  req_err("AUTH cred=" + std::string(max_value + 1, 'c'));
}

TEST(ParseRequest, UnknownVerb) {
  EXPECT_CONTAINS(req_err("FROB name=x").text, "unknown request 'FROB'");
  req_err("RELEASE name=e gen=1 verdict=stop");  // a reply verb is not a request
  req_err("ERR CONFLICT");
  req_err("END");
  EXPECT_LE(req_err(std::string(3000, 'Z')).text.size(), 100u);  // the verb is cut in the error
}

TEST(ParseRequest, Malformed) {
  req_err("");
  req_err("arrive name=e scope=s id=a");
  req_err("ARRIVE name=e scope=s id=a ");
  req_err("ARRIVE name=e\tscope=s id=a");
}

TEST(ParseRequest, TooLong) {
  // The longest valid line: 4095 bytes (4096 with its newline).
  std::string l = "LEAVE";
  for (char k = 'a'; l.size() + 3 + 200 < max_line - 1; ++k)  // a..s: keys differ, none is y
    l += std::string(" ") + k + "=" + std::string(200, 'v');
  l += " y=" + std::string(max_line - 1 - l.size() - 3, 'v');
  ASSERT_EQ(l.size(), max_line - 1);
  req_ok<leave>(l);
  EXPECT_CONTAINS(req_err(l + "v", error_kind::toolong).text, "4096");
  req_err(std::string(5000, 'A'), error_kind::toolong);
  req_err(std::string(max_line, ' '), error_kind::toolong);
}

// ---------------------------------------------------------------------------
// format_request round trips

TEST(FormatRequest, Hello) {
  hello h{1, "node1", 4242};
  EXPECT_EQ(format_request(h), "HELLO v=1 host=node1 pid=4242\n");
  auto back = request_round_trip<hello>(h);
  EXPECT_EQ(back.host, "node1");
  EXPECT_EQ(back.pid, 4242u);
}

TEST(FormatRequest, Arrive) {
  arrive a{"e1", "default", "a", 3u, 0u, false};
  EXPECT_EQ(format_request(a), "ARRIVE name=e1 scope=default id=a n=3 rank=0 chief=0\n");
  auto back = request_round_trip<arrive>(a);
  EXPECT_EQ(back.n, 3u);
  EXPECT_EQ(back.rank, 0u);
  arrive u{"e1", "s", "x", std::nullopt, std::nullopt, true};
  EXPECT_EQ(format_request(u), "ARRIVE name=e1 scope=s id=x n=- rank=- chief=1\n");
  auto ub = request_round_trip<arrive>(u);
  EXPECT_FALSE(ub.n);
  EXPECT_FALSE(ub.rank);
  EXPECT_TRUE(ub.chief);
}

TEST(FormatRequest, Decide) {
  decide d;
  d.scope = "default";
  d.id = "d";
  d.v = verdict::stop;
  d.message = "loss diverged";
  EXPECT_EQ(format_request(d), "DECIDE scope=default id=d verdict=stop name=- n=- rank=- wait=1 :loss diverged\n");
  auto back = request_round_trip<decide>(d);
  EXPECT_EQ(back.name, "");
  EXPECT_EQ(back.message, "loss diverged");
  d.name = "e2";
  d.n = 6;
  d.rank = 5;
  d.wait = false;
  d.v = verdict::continue_;
  d.message = "";
  EXPECT_EQ(format_request(d), "DECIDE scope=default id=d verdict=continue name=e2 n=6 rank=5 wait=0\n");
  back = request_round_trip<decide>(d);
  EXPECT_FALSE(back.wait);
  EXPECT_EQ(back.rank, 5u);
}

TEST(FormatRequest, AbortStatusLeave) {
  abort_req a{"default", "e1", "node3 died"};
  EXPECT_EQ(format_request(a), "ABORT scope=default name=e1 :node3 died\n");
  EXPECT_EQ(request_round_trip<abort_req>(a).reason, "node3 died");
  abort_req quiet{"s", "e", ""};
  EXPECT_EQ(format_request(quiet), "ABORT scope=s name=e\n");
  request_round_trip<abort_req>(quiet);

  status_req s{"*", "", true};
  EXPECT_EQ(format_request(s), "STATUS scope=* name=- detail=1\n");
  auto sb = request_round_trip<status_req>(s);
  EXPECT_EQ(sb.scope, "*");
  EXPECT_EQ(sb.name, "");
  EXPECT_TRUE(sb.detail);
  status_req one{"job.1", "e1", false};
  EXPECT_EQ(format_request(one), "STATUS scope=job.1 name=e1 detail=0\n");
  request_round_trip<status_req>(one);

  EXPECT_EQ(format_request(leave{}), "LEAVE\n");
  request_round_trip<leave>(leave{});
}

TEST(FormatRequest, HelloWithKeepaliveAndNonce) {
  hello h{1, "n1", 7, 5000, "CN"};
  EXPECT_EQ(format_request(h), "HELLO v=1 host=n1 pid=7 keepalive=5000 nonce=CN\n");
  auto back = request_round_trip<hello>(h);
  EXPECT_EQ(back.keepalive_ms, 5000u);
  EXPECT_EQ(back.nonce, "CN");
}

TEST(FormatRequest, PingAndAuth) {
  EXPECT_EQ(format_request(ping{}), "PING\n");
  request_round_trip<ping>(ping{});
  EXPECT_EQ(format_request(auth_req{"CP", ""}), "AUTH proof=CP\n");
  EXPECT_EQ(request_round_trip<auth_req>(auth_req{"CP", ""}).proof, "CP");
  EXPECT_EQ(format_request(auth_req{"", "C2"}), "AUTH cred=C2\n");
  EXPECT_EQ(request_round_trip<auth_req>(auth_req{"", "C2"}).cred, "C2");
}

TEST(FormatRequest, AtTheLimits) {
  decide d;
  d.name = std::string(max_name, 'n');
  d.scope = std::string(max_name, 's');
  d.id = std::string(max_id, 'i');
  d.v = verdict::stop;
  d.n = max_n;
  d.rank = max_n - 1;
  d.message = std::string(max_text, 'm');
  std::string l = format_request(d);
  EXPECT_LE(l.size(), max_line);
  auto back = request_round_trip<decide>(d);
  EXPECT_EQ(back.message.size(), max_text);
}

// ---------------------------------------------------------------------------
// format_reply + reply_reader round trips

TEST(Replies, Hello) {
  reply r = hello_reply{1, "tfbarrier/0.1.0", "none"};
  EXPECT_EQ(format_reply(r), "HELLO v=1 server=tfbarrier/0.1.0 auth=none\n");
  auto h = round_trip<hello_reply>(r);
  EXPECT_EQ(h.version, 1u);
  EXPECT_EQ(h.server, "tfbarrier/0.1.0");
  EXPECT_EQ(h.auth, "none");
}

TEST(Replies, HelloWithAuthentication) {
  hello_reply h{1, "tfbarrier/0.1.0", "hmac", "HN", "HP", ""};
  EXPECT_EQ(format_reply(h), "HELLO v=1 server=tfbarrier/0.1.0 auth=hmac nonce=HN proof=HP\n");
  auto back = round_trip<hello_reply>(h);
  EXPECT_EQ(back.auth, "hmac");
  EXPECT_EQ(back.nonce, "HN");
  EXPECT_EQ(back.proof, "HP");
  EXPECT_EQ(back.cred, "");
  hello_reply m{1, "tfbarrier/0.1.0", "munge", "HN", "", "MUNGE:xyz_:"};
  EXPECT_EQ(format_reply(m), "HELLO v=1 server=tfbarrier/0.1.0 auth=munge nonce=HN cred=MUNGE:xyz_:\n");
  EXPECT_EQ(round_trip<hello_reply>(m).cred, "MUNGE:xyz_:");
}

TEST(Replies, Pong) {
  EXPECT_EQ(format_reply(pong{}), "PONG\n");
  round_trip<pong>(pong{});
}

TEST(Replies, Waiting) {
  reply r = waiting{"e1", 2, 1, 3u};
  EXPECT_EQ(format_reply(r), "WAITING name=e1 gen=2 arrived=1 n=3\n");
  auto w = round_trip<waiting>(r);
  EXPECT_EQ(w.name, "e1");
  EXPECT_EQ(w.gen, 2u);
  EXPECT_EQ(w.arrived, 1u);
  EXPECT_EQ(w.n, 3u);
  reply u = waiting{"e1", 1, 1, std::nullopt};
  EXPECT_EQ(format_reply(u), "WAITING name=e1 gen=1 arrived=1 n=-\n");
  EXPECT_FALSE(round_trip<waiting>(u).n);
}

TEST(Replies, Release) {
  reply r = release{"e1", 1, verdict::continue_, std::nullopt, ""};
  EXPECT_EQ(format_reply(r), "RELEASE name=e1 gen=1 verdict=continue\n");
  auto rel = round_trip<release>(r);
  EXPECT_EQ(rel.v, verdict::continue_);
  EXPECT_FALSE(rel.delivered);
  EXPECT_EQ(rel.message, "");

  reply s = release{"e2", 18446744073709551615ull, verdict::stop, 5u, "loss diverged"};
  EXPECT_EQ(format_reply(s), "RELEASE name=e2 gen=18446744073709551615 verdict=stop delivered=5 :loss diverged\n");
  rel = round_trip<release>(s);
  EXPECT_EQ(rel.gen, 18446744073709551615ull);
  EXPECT_EQ(rel.v, verdict::stop);
  EXPECT_EQ(rel.delivered, 5u);
  EXPECT_EQ(rel.message, "loss diverged");
}

TEST(Replies, AllHere) {
  reply r = all_here{"e2", 1, 2, 2};
  EXPECT_EQ(format_reply(r), "ALLHERE name=e2 gen=1 arrived=2 n=2\n");
  auto a = round_trip<all_here>(r);
  EXPECT_EQ(a.arrived, 2u);
  EXPECT_EQ(a.n, 2u);
}

TEST(Replies, Aborted) {
  reply r = aborted{"e1", 3, std::nullopt, "node3 died"};
  EXPECT_EQ(format_reply(r), "ABORTED name=e1 gen=3 :node3 died\n");
  auto a = round_trip<aborted>(r);
  EXPECT_EQ(a.gen, 3u);
  EXPECT_FALSE(a.notified);
  EXPECT_EQ(a.reason, "node3 died");
  reply n = aborted{"e1", 3, 0u, ""};
  EXPECT_EQ(format_reply(n), "ABORTED name=e1 gen=3 notified=0\n");
  EXPECT_EQ(round_trip<aborted>(n).notified, 0u);
}

TEST(Replies, Decided) {
  reply r = decided{"e2", 1, verdict::stop, 2, 2u};
  EXPECT_EQ(format_reply(r), "DECIDED name=e2 gen=1 verdict=stop arrived=2 n=2\n");
  auto d = round_trip<decided>(r);
  EXPECT_EQ(d.v, verdict::stop);
  EXPECT_EQ(d.arrived, 2u);
  EXPECT_EQ(d.n, 2u);
  reply u = decided{"e2", 1, verdict::continue_, 1, std::nullopt};
  EXPECT_EQ(format_reply(u), "DECIDED name=e2 gen=1 verdict=continue arrived=1 n=-\n");
  EXPECT_FALSE(round_trip<decided>(u).n);
}

TEST(Replies, Left) {
  reply r = left{"e1", 4};
  EXPECT_EQ(format_reply(r), "LEFT name=e1 gen=4\n");
  auto l = round_trip<left>(r);
  EXPECT_EQ(l.name, "e1");
  EXPECT_EQ(l.gen, 4u);
  // LEAVE from a connection that waits for nothing.
  reply none = left{"", 0};
  EXPECT_EQ(format_reply(none), "LEFT name=- gen=0\n");
  EXPECT_EQ(round_trip<left>(none).name, "");
}

TEST(Replies, Shutdown) {
  EXPECT_EQ(format_reply(shutdown{""}), "SHUTDOWN\n");
  EXPECT_EQ(round_trip<shutdown>(shutdown{""}).text, "");
  reply r = shutdown{"the host at :7727 is shutting down (SIGTERM)"};
  EXPECT_EQ(format_reply(r), "SHUTDOWN :the host at :7727 is shutting down (SIGTERM)\n");
  EXPECT_EQ(round_trip<shutdown>(r).text, "the host at :7727 is shutting down (SIGTERM)");
}

TEST(Replies, ErrorsOfEveryKind) {
  for (error_kind k : {error_kind::version, error_kind::handshake, error_kind::toolong, error_kind::badrequest,
                       error_kind::timeout, error_kind::conflict, error_kind::needn, error_kind::ambiguous,
                       error_kind::aborted, error_kind::busy, error_kind::auth}) {
    reply r = error_reply{k, "some text: with = signs and :colons"};
    EXPECT_EQ(format_reply(r), "ERR " + std::string(to_string(k)) + " :some text: with = signs and :colons\n");
    auto e = round_trip<error_reply>(r);
    EXPECT_EQ(e.kind, k);
    EXPECT_EQ(e.text, "some text: with = signs and :colons");
  }
}

TEST(Replies, ErrorWithoutText) {
  EXPECT_EQ(format_reply(error_reply{error_kind::busy, ""}), "ERR BUSY\n");
  std::string error;
  reply_reader rd;
  auto r = rd.feed("ERR BUSY", error);
  ASSERT_TRUE(r);
  auto& e = std::get<error_reply>(*r);
  EXPECT_EQ(e.kind, error_kind::busy);
  // With no text, the reader keeps the rest of the line, so a client has something to show.
  EXPECT_EQ(e.text, "BUSY");
}

TEST(Replies, ErrorOfUnknownKind) {
  std::string error;
  reply_reader rd;
  auto r = rd.feed("ERR FUTURE :a newer host", error);
  ASSERT_TRUE(r);
  EXPECT_EQ(std::get<error_reply>(*r).kind, error_kind::badrequest);
  EXPECT_EQ(std::get<error_reply>(*r).text, "a newer host");
  r = rd.feed("ERR", error);
  ASSERT_TRUE(r);
  EXPECT_EQ(std::get<error_reply>(*r).kind, error_kind::badrequest);
  EXPECT_EQ(error, "");
}

TEST(Replies, ErrorTextIsCutToTheLimit) {
  std::string bytes = format_reply(error_reply{error_kind::conflict, std::string(5000, 'x')});
  EXPECT_LE(bytes.size(), max_line);
  EXPECT_EQ(std::get<error_reply>(read_one(bytes)).text, std::string(max_text, 'x'));
}

TEST(Replies, ErrorTextNeverCarriesControlBytes) {
  // Parse errors quote what the client sent; the ERR line must still be a valid
  // protocol line (no control bytes in trailing text), whatever the client sent.
  for (std::string raw : {std::string("ARRIVE \x1b[2J"), std::string("ARRIVE na\x01me=x"),
                          std::string("X a\rb"), std::string("ARRIVE k=v \x7f")}) {
    auto r = parse_request(raw);
    auto* e = std::get_if<request_error>(&r);
    ASSERT_NE(e, nullptr) << raw;
    std::string bytes = format_reply(error_reply{e->kind, e->text});
    ASSERT_TRUE(bytes.ends_with("\n"));
    std::string_view l(bytes.data(), bytes.size() - 1);
    EXPECT_EQ(l.find('\n'), std::string_view::npos);
    auto colon = l.find(" :");
    ASSERT_NE(colon, std::string_view::npos) << bytes;
    EXPECT_TRUE(valid_text(l.substr(colon + 2))) << bytes;
  }
}

barrier_info sample_barrier() {
  barrier_info b;
  b.scope = "default";
  b.name = "e1";
  b.gen = 3;
  b.state = round_state::open;
  b.n = 6u;
  b.arrived = 2;
  b.chief = true;
  b.v = verdict::none;
  b.age_ms = 1234;
  b.members = {{0u, "node1", 42, true, 800}, {3u, "node2", 43, false, 12}};
  b.missing = "1-2,4-5";
  return b;
}

// status --watch asks with last=1 (issue #32 item 6); an older host ignores
// the key (unknown keys are), and an older client never sends it.
TEST(FormatRequest, StatusLast) {
  status_req s{"job", "", false, true};
  EXPECT_EQ(format_request(s), "STATUS scope=job name=- detail=0 last=1\n");
  EXPECT_TRUE(request_round_trip<status_req>(s).last);
  EXPECT_FALSE(req_ok<status_req>("STATUS scope=job").last);
}

// The last round rides on the BARRIER line and the nodes of missing ranks on
// MISSING, as keys that an older client ignores.
TEST(Replies, StatusWithTheLastRoundAndTheNodesOfMissingRanks) {
  status_reply s;
  barrier_info b = sample_barrier();
  b.members.clear();
  b.last = std::make_shared<const barrier_info::last_round>(
      barrier_info::last_round{2, verdict::stop, 4200, 1300, 7u, "node2"});
  b.missing_nodes = {{1, "node3"}, {2, ""}, {4, "node,9"}, {5, "node4"}};
  s.barriers.push_back(b);
  std::string bytes = format_reply(s);
  EXPECT_EQ(bytes,
            "BARRIER scope=default name=e1 gen=3 state=open n=6 arrived=2 chief=1 verdict=none age_ms=1234 "
            "last_gen=2 last_verdict=stop last_ago_ms=4200 last_ms=1300 last_rank=7 last_node=node2\n"
            "MISSING ranks=1-2,4-5 nodes=1@node3,5@node4\n"
            "END\n");
  auto back = round_trip<status_reply>(s);
  const auto& got = back.barriers.at(0);
  ASSERT_TRUE(got.last);
  EXPECT_EQ(got.last->gen, 2u);
  EXPECT_EQ(got.last->v, verdict::stop);
  EXPECT_EQ(got.last->ago_ms, 4200);
  EXPECT_EQ(got.last->took_ms, 1300);
  EXPECT_EQ(got.last->rank, 7u);
  EXPECT_EQ(got.last->node, "node2");
  ASSERT_EQ(got.missing_nodes.size(), 2u);
  EXPECT_EQ(got.missing_nodes[1].rank, 5u);
  EXPECT_EQ(got.missing_nodes[1].node, "node4");
  // Without a last round: no last_ keys; a last round without a rank says '-'.
  b.last = std::make_shared<const barrier_info::last_round>(barrier_info::last_round{2, verdict::continue_, 0, 0, {}, "n"});
  b.missing_nodes.clear();
  EXPECT_CONTAINS(format_reply(status_reply{{b}}), " last_rank=- last_node=n\nMISSING ranks=1-2,4-5\n");
  EXPECT_FALSE(round_trip<status_reply>(status_reply{{b}}).barriers[0].last->rank);
  // A reader skips what is not RANK@NODE, and keeps at most 16.
  reply_reader r;
  std::string error;
  ASSERT_FALSE(r.feed("BARRIER scope=s name=e gen=1 state=open n=40 arrived=0 chief=0 verdict=none age_ms=0", error));
  std::string many = "MISSING ranks=0-39 nodes=x@a,3@,@b,7@c";
  for (int i = 10; i < 40; ++i) many += "," + std::to_string(i) + "@n" + std::to_string(i);
  ASSERT_FALSE(r.feed(many, error)) << error;
  auto end = r.feed("END", error);
  ASSERT_TRUE(end) << error;
  const auto& nodes = std::get<status_reply>(*end).barriers[0].missing_nodes;
  ASSERT_EQ(nodes.size(), max_missing_nodes);
  EXPECT_EQ(nodes[0].rank, 7u);
  EXPECT_EQ(nodes[0].node, "c");
  // A node list stops before its value would pass max_value.
  barrier_info wide = sample_barrier();
  wide.members.clear();
  for (std::uint32_t i = 0; i < 16; ++i) wide.missing_nodes.push_back({i, std::string(255, 'n')});
  std::string line = format_reply(status_reply{{wide}});
  auto at = line.find("nodes=");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LE(line.find('\n', at) - at - 6, max_value);
  EXPECT_EQ(round_trip<status_reply>(status_reply{{wide}}).barriers[0].missing_nodes.size(), 3u);  // 3 of 257 bytes fit
}

TEST(Replies, StatusEmpty) {
  EXPECT_EQ(format_reply(status_reply{}), "END\n");
  EXPECT_TRUE(round_trip<status_reply>(status_reply{}).barriers.empty());
}

TEST(Replies, StatusOneBarrierWithDetail) {
  status_reply s;
  s.barriers.push_back(sample_barrier());
  std::string bytes = format_reply(s);
  EXPECT_EQ(bytes,
            "BARRIER scope=default name=e1 gen=3 state=open n=6 arrived=2 chief=1 verdict=none age_ms=1234\n"
            "MEMBER rank=0 host=node1 pid=42 chief=1 age_ms=800\n"
            "MEMBER rank=3 host=node2 pid=43 chief=0 age_ms=12\n"
            "MISSING ranks=1-2,4-5\n"
            "END\n");
  auto back = round_trip<status_reply>(s);
  ASSERT_EQ(back.barriers.size(), 1u);
  const auto& b = back.barriers[0];
  EXPECT_EQ(b.scope, "default");
  EXPECT_EQ(b.name, "e1");
  EXPECT_EQ(b.gen, 3u);
  EXPECT_EQ(b.state, round_state::open);
  EXPECT_EQ(b.n, 6u);
  EXPECT_EQ(b.arrived, 2u);
  EXPECT_TRUE(b.chief);
  EXPECT_EQ(b.v, verdict::none);
  EXPECT_EQ(b.age_ms, 1234);
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0].rank, 0u);
  EXPECT_EQ(b.members[0].host, "node1");
  EXPECT_EQ(b.members[0].pid, 42u);
  EXPECT_TRUE(b.members[0].chief);
  EXPECT_EQ(b.members[0].age_ms, 800);
  EXPECT_EQ(b.members[1].rank, 3u);
  EXPECT_FALSE(b.members[1].chief);
  EXPECT_EQ(b.missing, "1-2,4-5");
}

TEST(Replies, StatusSeveralBarriers) {
  status_reply s;
  s.barriers.push_back(sample_barrier());
  barrier_info g;
  g.scope = "job.7";
  g.name = "e2";
  g.gen = 1;
  g.state = round_state::gathered;
  g.n = 2u;
  g.arrived = 2;
  g.chief = true;
  g.v = verdict::none;
  g.missing = "";  // all present: MISSING ranks=-
  s.barriers.push_back(g);
  barrier_info a;
  a.scope = "job.7";
  a.name = "e3";
  a.gen = 4;
  a.state = round_state::aborted;
  a.reason = "node3 died";
  a.age_ms = 5;
  s.barriers.push_back(a);
  barrier_info u;  // unknown n, members without rank, a verdict given in advance
  u.scope = "x";
  u.name = "e4";
  u.gen = 2;
  u.state = round_state::open;
  u.arrived = 1;
  u.v = verdict::stop;
  u.members = {{std::nullopt, "h", 1, false, 0}};
  s.barriers.push_back(u);

  std::string bytes = format_reply(s);
  EXPECT_EQ(bytes,
            "BARRIER scope=default name=e1 gen=3 state=open n=6 arrived=2 chief=1 verdict=none age_ms=1234\n"
            "MEMBER rank=0 host=node1 pid=42 chief=1 age_ms=800\n"
            "MEMBER rank=3 host=node2 pid=43 chief=0 age_ms=12\n"
            "MISSING ranks=1-2,4-5\n"
            "BARRIER scope=job.7 name=e2 gen=1 state=gathered n=2 arrived=2 chief=1 verdict=none age_ms=0\n"
            "MISSING ranks=-\n"
            "BARRIER scope=job.7 name=e3 gen=4 state=aborted n=- arrived=0 chief=0 verdict=none age_ms=5 "
            ":node3 died\n"
            "BARRIER scope=x name=e4 gen=2 state=open n=- arrived=1 chief=0 verdict=stop age_ms=0\n"
            "MEMBER rank=- host=h pid=1 chief=0 age_ms=0\n"
            "END\n");
  auto back = round_trip<status_reply>(s);
  ASSERT_EQ(back.barriers.size(), 4u);
  EXPECT_EQ(back.barriers[0].members.size(), 2u);
  EXPECT_EQ(back.barriers[1].state, round_state::gathered);
  EXPECT_EQ(back.barriers[1].missing, "");
  EXPECT_TRUE(back.barriers[1].members.empty());
  EXPECT_EQ(back.barriers[2].state, round_state::aborted);
  EXPECT_EQ(back.barriers[2].reason, "node3 died");
  EXPECT_FALSE(back.barriers[2].n);
  EXPECT_FALSE(back.barriers[2].missing);
  EXPECT_EQ(back.barriers[3].v, verdict::stop);
  ASSERT_EQ(back.barriers[3].members.size(), 1u);
  EXPECT_FALSE(back.barriers[3].members[0].rank);
  EXPECT_FALSE(back.barriers[3].missing);
}

TEST(Replies, StatusWithGoneMembers) {
  status_reply s;
  barrier_info b = sample_barrier();
  b.gone = {{4u, "node2", 77, departure::disconnected, 5000}, {std::nullopt, "node3", 78, departure::unresponsive, 1},
            {1u, "node4", 79, departure::left, 0}};
  s.barriers.push_back(b);
  std::string bytes = format_reply(s);
  EXPECT_CONTAINS(bytes,
                  "MEMBER rank=3 host=node2 pid=43 chief=0 age_ms=12\n"
                  "GONE rank=4 host=node2 pid=77 how=disconnected ago_ms=5000\n"
                  "GONE rank=- host=node3 pid=78 how=unresponsive ago_ms=1\n"
                  "GONE rank=1 host=node4 pid=79 how=left ago_ms=0\n"
                  "MISSING ranks=1-2,4-5\n");
  auto back = round_trip<status_reply>(s);
  ASSERT_EQ(back.barriers.at(0).gone.size(), 3u);
  EXPECT_EQ(back.barriers[0].gone[0].rank, 4u);
  EXPECT_EQ(back.barriers[0].gone[0].how, departure::disconnected);
  EXPECT_EQ(back.barriers[0].gone[0].ago_ms, 5000);
  EXPECT_FALSE(back.barriers[0].gone[1].rank);
  EXPECT_EQ(back.barriers[0].gone[2].host, "node4");
}

TEST(Replies, RoundStatesAndDeparturesAreTheirWireWords) {
  for (auto st : {round_state::open, round_state::gathered, round_state::aborted})
    EXPECT_EQ(parse_round_state(to_string(st)), st);
  EXPECT_EQ(to_string(round_state::gathered), "gathered");
  EXPECT_FALSE(parse_round_state("closed"));
  EXPECT_FALSE(parse_round_state(""));
  for (auto d : {departure::left, departure::disconnected, departure::unresponsive})
    EXPECT_EQ(parse_departure(to_string(d)), d);
  EXPECT_EQ(to_string(departure::unresponsive), "unresponsive");
  EXPECT_FALSE(parse_departure("vanished"));
  EXPECT_FALSE(parse_departure(""));
}

TEST(Replies, StatusWithAnUnknownStateOrHowIsMalformed) {
  for (std::string_view bad :
       {"BARRIER scope=default name=e gen=1 state=closed n=- arrived=0 chief=0 verdict=none age_ms=0",
        "BARRIER scope=default name=e gen=1 n=- arrived=0 chief=0 verdict=none age_ms=0"}) {
    reply_reader rd;
    std::string error;
    EXPECT_FALSE(rd.feed(bad, error));
    EXPECT_EQ(error, "BARRIER without a valid state") << bad;
  }
  reply_reader rd;
  std::string error;
  EXPECT_FALSE(
      rd.feed("BARRIER scope=default name=e gen=1 state=open n=- arrived=0 chief=0 verdict=none age_ms=0", error));
  EXPECT_EQ(error, "");
  EXPECT_FALSE(rd.feed("GONE rank=4 host=node2 pid=77 how=vanished ago_ms=5000", error));
  EXPECT_EQ(error, "GONE without a valid how");
}

TEST(Replies, StatusMemberLinesAreCapped) {
  status_reply s;
  barrier_info b = sample_barrier();
  b.members.clear();
  for (std::uint32_t i = 0; i < max_member_lines + 50; ++i) b.members.push_back({i, "h", i, false, 0});
  s.barriers.push_back(b);
  std::string bytes = format_reply(s);
  EXPECT_EQ(static_cast<std::size_t>(std::count(bytes.begin(), bytes.end(), '\n')), 1 + max_member_lines + 1 + 1);
  auto back = std::get<status_reply>(read_one(bytes));
  EXPECT_EQ(back.barriers.at(0).members.size(), max_member_lines);
}

TEST(Replies, StatusWithTheLongestMissingList) {
  // n=1000000 with every other rank present: the MISSING line must still be one
  // valid value (at most max_value bytes) that a client can read.
  std::vector<std::uint32_t> missing;
  for (std::uint32_t i = 999'000; i < max_n; i += 2) missing.push_back(i);
  status_reply s;
  barrier_info b = sample_barrier();
  b.members.clear();
  b.n = max_n;
  b.missing = format_ranges(missing, max_missing_ranges);
  s.barriers.push_back(b);
  auto back = round_trip<status_reply>(s);
  ASSERT_EQ(back.barriers.size(), 1u);
  EXPECT_EQ(back.barriers[0].missing, b.missing);
}

TEST(Replies, StatusBlockInPieces) {
  // A reader sees nothing until END; then one reply.
  status_reply s;
  s.barriers.push_back(sample_barrier());
  std::string bytes = format_reply(s);
  line_splitter sp;
  sp.feed(bytes);
  reply_reader rd;
  std::vector<std::string> lines;
  while (auto l = sp.next()) lines.push_back(*l);
  ASSERT_EQ(lines.size(), 5u);
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    std::string error;
    EXPECT_FALSE(rd.feed(lines[i], error)) << lines[i];
    EXPECT_EQ(error, "");
  }
  std::string error;
  auto r = rd.feed(lines.back(), error);
  ASSERT_TRUE(r);
  EXPECT_EQ(std::get<status_reply>(*r).barriers.size(), 1u);
  // The reader is ready for the next reply.
  r = rd.feed("LEFT name=e1 gen=3", error);
  ASSERT_TRUE(r);
  EXPECT_TRUE(std::holds_alternative<left>(*r));
}

TEST(Replies, SeveralInOneStream) {
  std::string bytes = format_reply(hello_reply{1, "tfbarrier/0.1.0", "none"}) +
                      format_reply(waiting{"e", 1, 1, 2u}) + format_reply(status_reply{}) +
                      format_reply(release{"e", 1, verdict::continue_, std::nullopt, ""});
  auto all = read_replies(bytes);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<hello_reply>(all[0]));
  EXPECT_TRUE(std::holds_alternative<waiting>(all[1]));
  EXPECT_TRUE(std::holds_alternative<status_reply>(all[2]));
  EXPECT_TRUE(std::holds_alternative<release>(all[3]));
}

TEST(ReplyReader, BadLines) {
  auto bad = [](std::string_view raw) {
    reply_reader rd;
    std::string error;
    auto r = rd.feed(raw, error);
    EXPECT_FALSE(r) << raw;
    EXPECT_FALSE(error.empty()) << raw;
    return error;
  };
  EXPECT_CONTAINS(bad("FROB a=1"), "unknown reply");
  EXPECT_CONTAINS(bad("RELEASE name=e gen=1"), "verdict");
  bad("RELEASE name=e gen=1 verdict=none");
  bad("WAITING name=e arrived=1");  // gen is required
  bad("WAITING name=e gen=x");
  bad("waiting name=e gen=1");
  bad("");
  bad("WAITING name=e gen=1 arrived=-1");
  bad("MEMBER rank=1 host=h pid=1 chief=0 age_ms=0");  // outside a STATUS block
  bad("GONE rank=1 host=h pid=1 how=left ago_ms=0");
  bad("MISSING ranks=1");
}

TEST(ReplyReader, UnexpectedLineInsideStatus) {
  reply_reader rd;
  std::string error;
  EXPECT_FALSE(rd.feed("BARRIER scope=s name=e gen=1 state=open n=2 arrived=1 chief=0 verdict=none age_ms=0", error));
  EXPECT_EQ(error, "");
  EXPECT_FALSE(rd.feed("RELEASE name=e gen=1 verdict=stop", error));
  EXPECT_CONTAINS(error, "inside a STATUS");
}

TEST(ReplyReader, UnknownKeysAreIgnored) {
  reply_reader rd;
  std::string error;
  auto r = rd.feed("WAITING name=e gen=1 arrived=1 n=2 eta_ms=5 :future text", error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(std::get<waiting>(*r).n, 2u);
}

// ---------------------------------------------------------------------------
// expand_ranges: format_ranges' text back into ranks
TEST(Protocol, ExpandRangesUndoesFormatRanges) {
  bool cut = true;
  EXPECT_EQ(expand_ranges("", cut), std::vector<std::uint32_t>{});
  EXPECT_FALSE(cut);
  EXPECT_EQ(expand_ranges("0-3,7", cut), (std::vector<std::uint32_t>{0, 1, 2, 3, 7}));
  EXPECT_FALSE(cut);
  std::vector<std::uint32_t> odd;
  for (std::uint32_t r = 1; r < 200; r += 2) odd.push_back(r);
  std::string text = format_ranges(odd, max_missing_ranges);  // 100 ranges: cut at 64
  ASSERT_TRUE(text.ends_with("+"));
  auto back = expand_ranges(text, cut);
  EXPECT_TRUE(cut);
  EXPECT_EQ(back, std::vector<std::uint32_t>(odd.begin(), odd.begin() + max_missing_ranges));
  EXPECT_EQ(expand_ranges("5,x,9-8,999999-1000001", cut).size(), 4u);  // garbage skipped; 9-8 is empty
  EXPECT_EQ(expand_ranges("0-4294967295", cut).size(), 1'000'000u);  // bounded
}

// format_ranges

TEST(FormatRanges, Basics) {
  EXPECT_EQ(format_ranges({}, 64), "");
  EXPECT_EQ(format_ranges({7}, 64), "7");
  EXPECT_EQ(format_ranges({0, 1, 2, 3}, 64), "0-3");
  EXPECT_EQ(format_ranges({0, 1, 2, 3, 7}, 64), "0-3,7");
  EXPECT_EQ(format_ranges({0, 1, 2, 3, 7, 9, 10}, 64), "0-3,7,9-10");
  EXPECT_EQ(format_ranges({2, 5}, 64), "2,5");
  EXPECT_EQ(format_ranges({4294967294u, 4294967295u}, 64), "4294967294-4294967295");
}

TEST(FormatRanges, CutAtMaxRanges) {
  EXPECT_EQ(format_ranges({1, 3, 5}, 2), "1,3+");
  EXPECT_EQ(format_ranges({1, 3}, 2), "1,3");
  EXPECT_EQ(format_ranges({1, 2, 3}, 1), "1-3");
  EXPECT_EQ(format_ranges({1, 3}, 0), "+");
  std::vector<std::uint32_t> odd;
  for (std::uint32_t i = 1; i < 200; i += 2) odd.push_back(i);
  std::string s = format_ranges(odd, max_missing_ranges);
  EXPECT_TRUE(s.ends_with("+"));
  EXPECT_EQ(std::count(s.begin(), s.end(), ','), static_cast<long>(max_missing_ranges) - 1);
}

TEST(FormatRanges, FitsInOneValue) {
  // The result goes into MISSING ranks=...: at most max_value bytes, or no client can read it.
  for (std::uint32_t base : {1000u, 100'000u, 999'000u}) {
    std::vector<std::uint32_t> v;
    for (std::uint32_t i = 0; i < 400; ++i) v.push_back(base + 3 * i);
    std::string s = format_ranges(v, max_missing_ranges);
    EXPECT_LE(s.size(), max_value) << s;
    EXPECT_TRUE(valid_value(s)) << s;
    EXPECT_TRUE(s.ends_with("+")) << s;
    // Ranges too: "999000-999001,999003-999004,..."
    std::vector<std::uint32_t> pairs;
    for (std::uint32_t i = 0; i < 200; ++i) {
      pairs.push_back(base + 3 * i);
      pairs.push_back(base + 3 * i + 1);
    }
    s = format_ranges(pairs, max_missing_ranges);
    EXPECT_LE(s.size(), max_value) << s;
    EXPECT_TRUE(s.ends_with("+")) << s;
    EXPECT_TRUE(s.starts_with(std::to_string(base) + "-" + std::to_string(base + 1) + ","));
  }
  // 64 ranges are not cut; a 65th is cut with "+".
  std::vector<std::uint32_t> v;
  std::string expect;
  for (std::uint32_t i = 0; i < 64; ++i) {
    v.push_back(100 + 2 * i);
    expect += (i ? "," : "") + std::to_string(100 + 2 * i);
  }
  ASSERT_EQ(expect.size(), 255u);
  EXPECT_EQ(format_ranges(v, max_missing_ranges), expect);
  v.push_back(300);
  EXPECT_EQ(format_ranges(v, max_missing_ranges), expect + "+");
}

// ---------------------------------------------------------------------------
// line_splitter

std::vector<std::string> drain(line_splitter& s) {
  std::vector<std::string> out;
  while (auto l = s.next()) out.push_back(*l);
  return out;
}

TEST(LineSplitter, OneLine) {
  line_splitter s;
  EXPECT_FALSE(s.next());
  s.feed("LEAVE\n");
  EXPECT_EQ(s.next(), "LEAVE");
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.buffered(), 0u);
  EXPECT_FALSE(s.overflow());
}

// A waiting participant's connection holds no buffer once its lines were
// taken (a host holds thousands of them: docs/performance.md).
TEST(LineSplitter, GivesItsMemoryBackOnceEveryLineWasTaken) {
  line_splitter s;
  s.feed("HELLO v=1 host=node1 pid=4242 keepalive=5000 nonce=0123456789abcdef0123456789abcdef\n"
         "ARRIVE name=epoch3 scope=slurm-123.0 id=abcdefghijklmnop n=6 rank=3 chief=0\n");
  const std::size_t none = std::string().capacity();  // what an empty string holds in itself
  EXPECT_GT(s.capacity(), none);
  EXPECT_EQ(drain(s).size(), 2u);
  EXPECT_EQ(s.capacity(), none);
  // An unfinished line is kept, and so is its memory.
  s.feed("PING\nLEA");
  EXPECT_EQ(drain(s), std::vector<std::string>{"PING"});
  EXPECT_EQ(s.buffered(), 3u);
  s.feed("VE\n");
  EXPECT_EQ(drain(s), std::vector<std::string>{"LEAVE"});
  EXPECT_EQ(s.capacity(), none);
}

TEST(LineSplitter, SplitAcrossFeeds) {
  line_splitter s;
  s.feed("ARR");
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.buffered(), 3u);
  s.feed("IVE name=e");
  EXPECT_FALSE(s.next());
  s.feed(" n=1\nLEA");
  EXPECT_EQ(s.next(), "ARRIVE name=e n=1");
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.buffered(), 3u);
  s.feed("VE\n");
  EXPECT_EQ(s.next(), "LEAVE");
  EXPECT_FALSE(s.next());
}

TEST(LineSplitter, ByteByByte) {
  std::string text = "HELLO v=1 host=a pid=1\r\nARRIVE name=e scope=s id=a n=2\nLEAVE\n";
  line_splitter s;
  std::vector<std::string> got;
  for (char c : text) {
    s.feed(std::string_view(&c, 1));
    for (auto& l : drain(s)) got.push_back(l);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"HELLO v=1 host=a pid=1", "ARRIVE name=e scope=s id=a n=2", "LEAVE"}));
  EXPECT_EQ(s.buffered(), 0u);
}

TEST(LineSplitter, CrLf) {
  line_splitter s;
  s.feed("LEAVE\r\nSTATUS\r");
  EXPECT_EQ(s.next(), "LEAVE");
  EXPECT_FALSE(s.next());
  s.feed("\n\r\n\n");
  EXPECT_EQ(s.next(), "STATUS");
  EXPECT_EQ(s.next(), "");  // "\r\n": an empty line
  EXPECT_EQ(s.next(), "");
  EXPECT_FALSE(s.next());
  // Only one \r before the \n is dropped; a \r elsewhere stays.
  s.feed("A\rB\r\r\n");
  EXPECT_EQ(s.next(), "A\rB\r");
}

TEST(LineSplitter, ManyLinesInOneFeed) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "LINE n=" + std::to_string(i) + "\n";
  text += "TAIL";
  line_splitter s;
  s.feed(text);
  auto got = drain(s);
  ASSERT_EQ(got.size(), 1000u);
  EXPECT_EQ(got[0], "LINE n=0");
  EXPECT_EQ(got[999], "LINE n=999");
  EXPECT_EQ(s.buffered(), 4u);
  EXPECT_FALSE(s.overflow());
}

TEST(LineSplitter, LongestLine) {
  std::string body(max_line - 1, 'x');  // 4095 + "\n" = 4096: allowed
  line_splitter s;
  s.feed(body);
  EXPECT_FALSE(s.overflow());
  EXPECT_FALSE(s.next());
  s.feed("\n");
  EXPECT_EQ(s.next(), body);
  EXPECT_FALSE(s.overflow());
  // With \r\n the \r counts as one of the 4096 bytes.
  line_splitter c;
  c.feed(std::string(max_line - 2, 'y') + "\r\n");
  EXPECT_EQ(c.next(), std::string(max_line - 2, 'y'));
  EXPECT_FALSE(c.overflow());
}

TEST(LineSplitter, OverflowWithoutNewline) {
  line_splitter s;
  s.feed(std::string(max_line - 1, 'x'));
  EXPECT_FALSE(s.overflow());
  s.feed("x");  // 4096 bytes and still no newline: the line is over the limit
  EXPECT_TRUE(s.overflow());
  EXPECT_FALSE(s.next());
  s.feed("\nLEAVE\n");  // the stream is unusable from here
  EXPECT_FALSE(s.next());
  EXPECT_TRUE(s.overflow());
}

TEST(LineSplitter, OverflowInOneBigFeed) {
  line_splitter s;
  s.feed(std::string(100'000, 'x'));
  EXPECT_TRUE(s.overflow());
  EXPECT_FALSE(s.next());
}

TEST(LineSplitter, OverflowOfACompleteLongLine) {
  // The long line is complete in one feed, followed by a short tail.
  line_splitter s;
  s.feed("LEAVE\n" + std::string(max_line, 'x') + "\nLEAVE\nLE");
  EXPECT_EQ(s.next(), "LEAVE");  // lines before the long one are still delivered
  EXPECT_FALSE(s.next());
  EXPECT_TRUE(s.overflow());
  EXPECT_FALSE(s.next());
}

TEST(LineSplitter, LongTailAfterCompleteLines) {
  line_splitter s;
  s.feed("LEAVE\nLEAVE\n" + std::string(max_line, 'x'));
  EXPECT_TRUE(s.overflow());
}

TEST(LineSplitter, BufferIsReusedAfterDraining) {
  line_splitter s;
  for (int round = 0; round < 10'000; ++round) {
    s.feed("LEAVE\nSTA");
    EXPECT_EQ(s.next(), "LEAVE");
    EXPECT_FALSE(s.next());
    s.feed("TUS\n");
    EXPECT_EQ(s.next(), "STATUS");
    EXPECT_FALSE(s.next());
  }
  EXPECT_EQ(s.buffered(), 0u);
  EXPECT_FALSE(s.overflow());
}

// ---------------------------------------------------------------------------
// docs/protocol.md: every example line is here and is what the code reads and writes.

// Lines a client sends (C:, A:, B:, ... in the doc; also the request forms of "Requests").
const char* const doc_client_lines[] = {
    "HELLO v=2 host=node1 pid=4242",
    "HELLO v=7 host=node1 pid=4242",
    "HELLO v=2 host=n1 pid=7 nonce=CN",
    "HELLO v=2 host=n1 pid=7 keepalive=5000 nonce=00112233445566778899aabbccddeeff",
    "AUTH proof=CP",
    "LEAVE",
    "LEAVE why=timeout",
    "HISTORY scope=S name=epoch* last=20",
    "ARRIVE name=N scope=S id=ID n=6 rank=3 chief=0",
    "DECIDE scope=S id=ID verdict=stop name=N n=6 rank=0 wait=1 :message text",
    "ABORT scope=S name=N :reason text",
    "STATUS scope=S name=N detail=1",
    "HELLO v=2 host=n1 pid=1",
    "ARRIVE name=e1 scope=default id=a n=3 rank=0 chief=0",
    "ARRIVE name=e1 scope=default id=b n=3 rank=1 chief=0",
    "ARRIVE name=e1 scope=default id=c n=3 rank=2 chief=0",
    "ARRIVE name=e2 scope=default id=w n=2 rank=1 chief=0",
    "ARRIVE name=e2 scope=default id=k n=2 rank=0 chief=1",
    "DECIDE scope=default id=d verdict=stop name=- n=- rank=- wait=1 :loss diverged",
    "ARRIVE name=e3 scope=default id=w n=2 rank=1 chief=0",
    "ARRIVE name=e3 scope=default id=k n=2 rank=0 chief=1 decide=1 within=60000",
    "DECIDE scope=default id=k verdict=stop name=e3 n=- rank=- wait=1 :loss 0.5",
    "STATUS scope=job name=- detail=0 last=1",
};

/// Multi-line replies of the doc ("S: " line after "S: " line, to END): the
/// lines, and the reply that produces them.
std::vector<std::pair<std::vector<std::string>, reply>> doc_host_blocks() {
  barrier_info b;
  b.scope = "job";
  b.name = "ep";
  b.gen = 3;
  b.n = 3u;
  b.arrived = 2;
  b.age_ms = 800;
  b.missing = "1";
  b.missing_nodes = {{1, "nodeB"}};
  b.last = std::make_shared<const barrier_info::last_round>(
      barrier_info::last_round{2, verdict::continue_, 4200, 1300, 2u, "nodeC"});
  return {{{"BARRIER scope=job name=ep gen=3 state=open n=3 arrived=2 chief=0 verdict=none age_ms=800 last_gen=2 "
            "last_verdict=continue last_ago_ms=4200 last_ms=1300 last_rank=2 last_node=nodeC",
            "MISSING ranks=1 nodes=1@nodeB", "END"},
           status_reply{{b}}}};
}

struct host_example {
  std::string doc;    ///< the line as the doc shows it
  reply msg;          ///< the reply that produces it
  std::string gen_g;  ///< if set: the doc writes "gen=G" for this gen
};

std::vector<host_example> doc_host_lines() {
  return {
      {"HELLO v=2 server=tfbarrier/0.1.0 auth=none", hello_reply{2, "tfbarrier/0.1.0", "none"}, ""},
      {"HELLO v=2 server=tfbarrier/0.1.0 auth=none store=/job42",
       hello_reply{2, "tfbarrier/0.1.0", "none", "", "", "", "/job42"}, ""},
      {"ERR VERSION :this host (tfbarrier/0.1.0) speaks protocol version 2, and the client asked for version 7: run "
       "the same version of tfbarrier on the host and in the job",
       error_reply{error_kind::version,
                   "this host (tfbarrier/0.1.0) speaks protocol version 2, and the client asked for version 7: run the "
                   "same version of tfbarrier on the host and in the job"},
       ""},
      {"ERR AUTH :this host serves its own user only; start a host of your own, or give the host and its "
       "participants the same --secret-file",
       error_reply{error_kind::auth,
                   "this host serves its own user only; start a host of your own, or give the host and its "
                   "participants the same --secret-file"},
       ""},
      {"HELLO v=2 server=tfbarrier/0.1.0 auth=hmac nonce=HN proof=HP",
       hello_reply{2, "tfbarrier/0.1.0", "hmac", "HN", "HP", ""}, ""},
      {"HELLO v=2 server=tfbarrier/0.1.0 auth=hmac nonce=ffeeddccbbaa99887766554433221100 proof=HP",
       hello_reply{2, "tfbarrier/0.1.0", "hmac", "ffeeddccbbaa99887766554433221100", "HP", ""}, ""},
      {"RELEASE name=epoch3 gen=2 verdict=stop :loss diverged at step 9000",
       release{"epoch3", 2, verdict::stop, std::nullopt, "loss diverged at step 9000"}, ""},
      {"LEFT name=N gen=G", left{"N", 5}, "5"},
      {"WAITING name=e1 gen=1 arrived=1 n=3", waiting{"e1", 1, 1, 3u}, ""},
      {"WAITING name=e1 gen=1 arrived=2 n=3", waiting{"e1", 1, 2, 3u}, ""},
      {"WAITING name=e1 gen=1 arrived=3 n=3", waiting{"e1", 1, 3, 3u}, ""},
      {"RELEASE name=e1 gen=1 verdict=continue", release{"e1", 1, verdict::continue_, std::nullopt, ""}, ""},
      {"WAITING name=e2 gen=1 arrived=1 n=2", waiting{"e2", 1, 1, 2u}, ""},
      {"WAITING name=e2 gen=1 arrived=2 n=2", waiting{"e2", 1, 2, 2u}, ""},
      {"ALLHERE name=e2 gen=1 arrived=2 n=2", all_here{"e2", 1, 2, 2}, ""},
      {"DECIDED name=e2 gen=1 verdict=stop arrived=2 n=2", decided{"e2", 1, verdict::stop, 2, 2u}, ""},
      {"RELEASE name=e2 gen=1 verdict=stop :loss diverged",
       release{"e2", 1, verdict::stop, std::nullopt, "loss diverged"}, ""},
      {"RELEASE name=e2 gen=1 verdict=stop delivered=1 :loss diverged",
       release{"e2", 1, verdict::stop, 1u, "loss diverged"}, ""},
      {"WAITING name=e3 gen=1 arrived=1 n=2", waiting{"e3", 1, 1, 2u}, ""},
      {"WAITING name=e3 gen=1 arrived=2 n=2", waiting{"e3", 1, 2, 2u}, ""},
      {"ALLHERE name=e3 gen=1 arrived=2 n=2", all_here{"e3", 1, 2, 2}, ""},
      {"DECIDED name=e3 gen=1 verdict=stop arrived=2 n=2", decided{"e3", 1, verdict::stop, 2, 2u}, ""},
      {"RELEASE name=e3 gen=1 verdict=stop :loss 0.5", release{"e3", 1, verdict::stop, std::nullopt, "loss 0.5"}, ""},
      {"RELEASE name=e3 gen=1 verdict=stop delivered=1 :loss 0.5", release{"e3", 1, verdict::stop, 1u, "loss 0.5"},
       ""},
      {"ABORTED name=e3 gen=1 :the chief (rank 0 on n1) died while deciding",
       aborted{"e3", 1, std::nullopt, "the chief (rank 0 on n1) died while deciding"}, ""},
  };
}

/// Schematic reply forms of the doc, and a reply of that kind: the keys must be the same, in order.
std::vector<std::pair<std::string, reply>> doc_reply_forms() {
  status_reply s;
  s.barriers.push_back(sample_barrier());
  return {
      {"WAITING name=N gen=G arrived=K n=6", waiting{"N", 1, 1, 6u}},
      {"RELEASE name=N gen=G verdict=continue|stop[ :message]", release{"N", 1, verdict::stop, std::nullopt, "m"}},
      {"ALLHERE name=N gen=G arrived=6 n=6", all_here{"N", 1, 6, 6}},
      {"ABORTED name=N gen=G[ :reason]", aborted{"N", 1, std::nullopt, "r"}},
      {"DECIDED name=N gen=G verdict=V arrived=K n=6", decided{"N", 1, verdict::stop, 1, 6u}},
      {"RELEASE name=N gen=G verdict=V delivered=K", release{"N", 1, verdict::stop, 3u, ""}},
      {"ABORTED name=N gen=G notified=K", aborted{"N", 1, 2u, ""}},
      {"BARRIER scope=S name=N gen=G state=open|gathered|aborted n=6 arrived=4 chief=0|1 "
       "verdict=none|continue|stop age_ms=1234",
       s},
  };
}

std::optional<std::string> read_doc() {
  namespace fs = std::filesystem;
  for (fs::path p : {fs::path(__FILE__).parent_path() / "../../docs/protocol.md", fs::path("docs/protocol.md"),
                     fs::path("../docs/protocol.md"), fs::path("../../docs/protocol.md")}) {
    std::ifstream in(p);
    if (!in) continue;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  return std::nullopt;
}

TEST(DocExamples, ClientLinesParseAndFormatByteExact) {
  for (std::string_view l : doc_client_lines) {
    auto r = parse_request(l);
    ASSERT_TRUE(std::holds_alternative<request>(r))
        << l << ": " << std::get<request_error>(r).text;
    EXPECT_EQ(format_request(std::get<request>(r)), std::string(l) + "\n");
  }
}

TEST(DocExamples, HostLinesAreProducedByteExact) {
  for (const auto& ex : doc_host_lines()) {
    std::string expect = ex.doc;
    if (!ex.gen_g.empty()) expect.replace(expect.find("gen=G"), 5, "gen=" + ex.gen_g);
    EXPECT_EQ(format_reply(ex.msg), expect + "\n");
    // and a client reads it back to the same reply
    EXPECT_EQ(format_reply(read_one(expect + "\n")), expect + "\n");
  }
}

TEST(DocExamples, HostBlocksAreProducedByteExact) {
  for (const auto& [lines, msg] : doc_host_blocks()) {
    std::string expect;
    for (const auto& l : lines) expect += l + "\n";
    EXPECT_EQ(format_reply(msg), expect);
    reply_reader r;
    std::string error;
    std::optional<reply> back;
    for (const auto& l : lines) back = r.feed(l, error);
    ASSERT_TRUE(back) << error;
    EXPECT_EQ(format_reply(*back), expect);
  }
}

TEST(DocExamples, ReplyFormsHaveTheKeysOfTheCode) {
  for (const auto& [form, msg] : doc_reply_forms()) {
    std::string first = format_reply(msg);
    first = first.substr(0, first.find('\n'));
    EXPECT_EQ(keys_of(form), keys_of(first)) << form << "\nvs\n" << first;
    EXPECT_EQ(form.substr(0, form.find(' ')), first.substr(0, first.find(' ')));
  }
  // STATUS detail and MISSING lines.
  status_reply s;
  s.barriers.push_back(sample_barrier());
  std::string bytes = format_reply(s);
  auto member_at = bytes.find("\nMEMBER ");
  ASSERT_NE(member_at, std::string::npos) << bytes;
  std::string member = bytes.substr(member_at + 1, bytes.find('\n', member_at + 1) - member_at - 1);
  EXPECT_EQ(member, "MEMBER rank=0 host=node1 pid=42 chief=1 age_ms=800");
  EXPECT_EQ(keys_of("MEMBER rank=3 host=node1 pid=42 chief=0 age_ms=800"), keys_of(member));
  EXPECT_CONTAINS(bytes, "\nMISSING ranks=1-2,4-5\nEND\n");
  // The doc's GONE line, byte-exact.
  status_reply g;
  barrier_info gb = sample_barrier();
  gb.members.clear();
  gb.gone = {{4u, "node2", 77, departure::disconnected, 5000}};
  g.barriers.push_back(gb);
  EXPECT_CONTAINS(format_reply(g), "\nGONE rank=4 host=node2 pid=77 how=disconnected ago_ms=5000\n");
}

TEST(DocExamples, EveryExampleLineOfTheDocIsTested) {
  auto doc = read_doc();
  if (!doc) GTEST_SKIP() << "docs/protocol.md not found from " << __FILE__;
  std::set<std::string> client(std::begin(doc_client_lines), std::end(doc_client_lines));
  std::set<std::string> host;
  for (const auto& ex : doc_host_lines()) host.insert(ex.doc);
  for (const auto& [lines, msg] : doc_host_blocks()) host.insert(lines.begin(), lines.end());

  // Every line of ours is in the doc, verbatim.
  for (const auto& l : client) EXPECT_CONTAINS(*doc, l);
  for (const auto& l : host) EXPECT_CONTAINS(*doc, l);
  for (const auto& [form, msg] : doc_reply_forms()) EXPECT_CONTAINS(*doc, form);
  EXPECT_CONTAINS(*doc, "MEMBER rank=3 host=node1 pid=42 chief=0 age_ms=800");
  EXPECT_CONTAINS(*doc, "MISSING ranks=2,5");
  EXPECT_CONTAINS(*doc, "GONE rank=4 host=node2 pid=77 how=disconnected ago_ms=5000");

  // Every exchange line of the doc ("    C: ...", "    S→A,B: ...") is one of ours.
  const std::string arrow = "S\xe2\x86\x92";  // "S→"
  std::istringstream in(*doc);
  std::string raw;
  int seen = 0;
  while (std::getline(in, raw)) {
    if (!raw.starts_with("    ") || raw.starts_with("     ")) continue;
    std::string rest = raw.substr(4);
    // "A: HELLO ...           S→A: HELLO ...": two messages on one doc line.
    std::vector<std::string> parts;
    auto two = rest.find("  " + arrow);
    if (two != std::string::npos) {
      parts.push_back(rest.substr(0, two));
      std::string second = rest.substr(two);
      parts.push_back(second.substr(second.find_first_not_of(' ')));
    } else {
      parts.push_back(rest);
    }
    for (auto p : parts) {
      while (!p.empty() && p.back() == ' ') p.pop_back();
      auto colon = p.find(": ");
      if (colon == std::string::npos) continue;
      std::string who = p.substr(0, colon), msg = p.substr(colon + 2);
      bool is_client = who.size() == 1 && who[0] >= 'A' && who[0] <= 'Z' && who != "S";
      bool is_host = who == "S" || who.starts_with(arrow);
      if (!is_client && !is_host) continue;
      ++seen;
      if (is_client)
        EXPECT_TRUE(client.count(msg)) << "doc client line not tested: " << msg;
      else
        EXPECT_TRUE(host.count(msg)) << "doc host line not tested: " << msg;
    }
  }
  EXPECT_GE(seen, 20) << "the doc's examples were not found";
}

}  // namespace
}  // namespace tfb::proto

// "-" stands for "none" on the wire, so it cannot be a barrier name.
TEST(ValidName, RejectsTheBareDashThatMeansNone) {
  EXPECT_FALSE(tfb::proto::valid_name("-"));
  EXPECT_TRUE(tfb::proto::valid_name("-a"));
  EXPECT_TRUE(tfb::proto::valid_name("a-"));
}

TEST(ValidText, IsUtf8WithoutC0OrC1Controls) {
  using tfb::proto::text_problem;
  using tfb::proto::valid_text;
  EXPECT_TRUE(valid_text("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x8e\x89"));  // é ✓ 🎉
  EXPECT_TRUE(valid_text("\xf4\x8f\xbf\xbf"));                            // U+10FFFF
  EXPECT_EQ(text_problem("\xff"), "is not valid UTF-8 (byte \\xff at 0)");
  EXPECT_EQ(text_problem("ab\xc3"), "is not valid UTF-8 (byte \\xc3 at 2)");  // cut short
  EXPECT_FALSE(valid_text("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(valid_text("\xe0\x80\xaf"));      // overlong, 3 bytes
  EXPECT_FALSE(valid_text("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(valid_text("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(valid_text("\x80"));              // a lone continuation byte
  EXPECT_EQ(text_problem("\xc2\x9b" "2J"), "holds a control character (U+009B at byte 0); use one line of printable text");
  EXPECT_EQ(text_problem("a\tb"), "holds a control character (\\x09 at byte 1); use one line of printable text");
  EXPECT_EQ(text_problem(std::string(1025, 'x')), "is 1025 bytes, more than the limit of 1024");
}

TEST(ParseRequest, AnErrorQuotesBadBytesAsEscapesSoItsOwnTextStaysValid) {
  // Found by fuzz_protocol once text had to be UTF-8: the ERR quoted the raw
  // bytes of a bad key, and a client could not read the host's own reply.
  auto text_of = [](std::string_view raw) {
    auto r = tfb::proto::parse_request(raw);
    auto* e = std::get_if<tfb::proto::request_error>(&r);
    return e ? e->text : std::string("(parsed)");
  };
  std::string t = text_of("ARRIVE name=e2 scope=default id=w n=2 rank=1 ch\x97\x97ief=0");
  EXPECT_EQ(t, "bad key 'ch\\x97\\x97ief'");
  EXPECT_TRUE(tfb::proto::valid_text(t));
  EXPECT_EQ(text_of("ARRIVE name=e2 \xc3x"), "expected key=value, got '\\xc3x'");
}
