// The etcd v3 client of `serve --store` (src/store/store_client.h): etcd's JSON
// gateway (POST /v3/kv/range, /v3/kv/txn, /v3/lease/*, /v3/watch) through
// libcurl's easy interface and nlohmann-json. Built into the module
// tfbarrier-etcd.so, which only a host with a store loads, so that `wait`
// never maps libcurl. Nothing here throws out of the module: JSON errors and
// HTTP errors become sentences naming the endpoint.
//
// Facts of the gateway (etcd 3.4) this relies on: keys and values are
// base64; int64 fields are JSON strings; fields at their default (false, 0,
// PUT) are left out; an error is a JSON object with "error"/"message" and an
// HTTP status other than 200; /v3/watch answers with one JSON object per
// line, {"result": {...}}, for as long as the request lasts. With etcd's
// authentication on, POST /v3/auth/authenticate {"name", "password"} gives a
// token that every request carries in its Authorization header (issue #31
// item 9).
#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <charconv>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store_client.h"

namespace tfb::store {
namespace {

using json = nlohmann::json;

const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string b64(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                 static_cast<unsigned char>(in[i + 2]);
    out += b64chars[(v >> 18) & 63];
    out += b64chars[(v >> 12) & 63];
    out += b64chars[(v >> 6) & 63];
    out += b64chars[v & 63];
  }
  if (i + 1 == in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += b64chars[(v >> 18) & 63];
    out += b64chars[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += b64chars[(v >> 18) & 63];
    out += b64chars[(v >> 12) & 63];
    out += b64chars[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

bool unb64(std::string_view in, std::string& out) {
  out.clear();
  unsigned v = 0;
  int bits = 0;
  for (char ch : in) {
    if (ch == '=') break;
    const char* p = std::char_traits<char>::find(b64chars, 64, ch);
    if (!p) return false;
    v = (v << 6) | static_cast<unsigned>(p - b64chars);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xff);
    }
  }
  return true;
}

/// An int64 field: a JSON string (or number), absent meaning 0.
std::int64_t i64(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) return 0;
  const std::string& s = it->get_ref<const std::string&>();
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

bool to_kv(const json& j, kv& out) {
  out = kv{};
  if (!j.is_object()) return false;
  if (auto it = j.find("key"); it != j.end() && !unb64(it->get<std::string>(), out.key)) return false;
  if (auto it = j.find("value"); it != j.end() && !unb64(it->get<std::string>(), out.value)) return false;
  out.create_revision = i64(j, "create_revision");
  out.mod_revision = i64(j, "mod_revision");
  out.version = i64(j, "version");
  out.lease = i64(j, "lease");
  return true;
}

const char* target_name(compare::target t) {
  switch (t) {
    case compare::target::version: return "VERSION";
    case compare::target::create_revision: return "CREATE";
    case compare::target::mod_revision: return "MOD";
    case compare::target::value: return "VALUE";
  }
  return "VERSION";
}
const char* op_name(compare::op o) {
  switch (o) {
    case compare::op::equal: return "EQUAL";
    case compare::op::greater: return "GREATER";
    case compare::op::less: return "LESS";
    case compare::op::not_equal: return "NOT_EQUAL";
  }
  return "EQUAL";
}

json to_json(const compare& c) {
  json j{{"target", target_name(c.what)}, {"result", op_name(c.how)}, {"key", b64(c.key)}};
  switch (c.what) {
    case compare::target::version: j["version"] = std::to_string(c.number); break;
    case compare::target::create_revision: j["create_revision"] = std::to_string(c.number); break;
    case compare::target::mod_revision: j["mod_revision"] = std::to_string(c.number); break;
    case compare::target::value: j["value"] = b64(c.value); break;
  }
  return j;
}

json to_json(const op& o) {
  json r{{"key", b64(o.key)}};
  if (!o.range_end.empty()) r["range_end"] = b64(o.range_end);
  switch (o.what) {
    case op::type::put:
      r["value"] = b64(o.value);
      if (o.lease) r["lease"] = std::to_string(o.lease);
      return json{{"request_put", r}};
    case op::type::del: return json{{"request_delete_range", r}};
    case op::type::range: return json{{"request_range", r}};
  }
  return json{};
}

std::once_flag curl_once;

/// The endpoints a call tried, each with what went wrong there, and what to
/// do about it (each hint once), for the error of a call that no endpoint
/// answered.
class attempts {
 public:
  void add(const std::string& ep, const std::string& what, const std::string& hint, bool tls) {
    tried_ += (tried_.empty() ? "" : "; ") + ep + ": " + what;
    if (!hint.empty() && hints_.find(hint) == std::string::npos) hints_ += "; " + hint;
    ++count_;
    tls_ += tls ? 1 : 0;
  }
  std::string text(const std::string& head) const { return head + " (" + tried_ + ")" + hints_; }
  /// Every endpoint failed for a reason of TLS (not of reach).
  bool all_tls() const { return count_ > 0 && tls_ == count_; }

 private:
  std::string tried_, hints_;
  std::size_t count_ = 0, tls_ = 0;
};

class etcd_client final : public client {
 public:
  explicit etcd_client(client_config c) : c_(std::move(c)), current_(c_.first % c_.endpoints.size()) {}
  ~etcd_client() override {
    if (m_) {
      if (probing_) curl_multi_remove_handle(m_, probe_);
      curl_multi_cleanup(m_);
    }
    if (probe_) curl_easy_cleanup(probe_);
    if (h_) curl_easy_cleanup(h_);
    curl_slist_free_all(headers_);
  }
  bool ok(std::string& error) {
    set_token({});
    h_ = curl_easy_init();
    if (!h_) error = "cannot make a libcurl handle";
    return h_ != nullptr;
  }

  bool grant(std::int64_t ttl, std::int64_t& id, tfb::error& error) override {
    json r;
    if (!call("/v3/lease/grant", json{{"TTL", std::to_string(ttl)}}, r, error)) return false;
    id = i64(r, "ID");
    if (id == 0) return fail(fmt_error("the lease grant gave no ID", r), error);
    return true;
  }
  bool keepalive(std::int64_t id, std::int64_t& ttl, tfb::error& error) override {
    json r;
    if (!call("/v3/lease/keepalive", json{{"ID", std::to_string(id)}}, r, error)) return false;
    // The gateway streams one {"result": ...} for the one request sent.
    const json& res = r.contains("result") ? r["result"] : r;
    ttl = i64(res, "TTL");
    return true;
  }
  bool revoke(std::int64_t id, tfb::error& error) override {
    json r;
    return call("/v3/lease/revoke", json{{"ID", std::to_string(id)}}, r, error);
  }

  bool alarms(std::vector<std::string>& out, tfb::error& error) override {
    json r;
    if (!call("/v3/maintenance/alarm", json{{"action", "GET"}}, r, error)) return false;
    out.clear();
    if (r.contains("alarms") && r["alarms"].is_array())
      for (const auto& a : r["alarms"])
        out.push_back(a.contains("alarm") && a["alarm"].is_string() ? a["alarm"].get<std::string>() : "NOSPACE");
    return true;
  }
  bool txn(const std::vector<compare>& cmp, const std::vector<op>& success, const std::vector<op>& failure,
           txn_result& result, tfb::error& error) override {
    json body{{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
    for (const auto& c : cmp) body["compare"].push_back(to_json(c));
    for (const auto& o : success) body["success"].push_back(to_json(o));
    for (const auto& o : failure) body["failure"].push_back(to_json(o));
    json r;
    if (!call("/v3/kv/txn", body, r, error)) return false;
    result = txn_result{};
    result.succeeded = r.value("succeeded", false);
    if (r.contains("header")) result.revision = i64(r["header"], "revision");
    if (auto it = r.find("responses"); it != r.end() && it->is_array()) {
      for (const auto& resp : *it) {
        std::vector<kv> keys;
        if (auto rr = resp.find("response_range"); rr != resp.end())
          if (auto kvs = rr->find("kvs"); kvs != rr->end() && kvs->is_array())
            for (const auto& k : *kvs) {
              kv one;
              if (to_kv(k, one)) keys.push_back(std::move(one));
            }
        result.ranges.push_back(std::move(keys));
      }
    }
    return true;
  }
  bool range(const std::string& key, const std::string& range_end, std::vector<kv>& out, std::int64_t& revision,
             tfb::error& error, std::int64_t at_revision, bool keys_only) override {
    json body{{"key", b64(key)}};
    if (keys_only) body["keys_only"] = true;
    if (!range_end.empty()) body["range_end"] = b64(range_end);
    if (at_revision) body["revision"] = std::to_string(at_revision);
    json r;
    if (!call("/v3/kv/range", body, r, error)) return false;
    out.clear();
    if (r.contains("header")) revision = i64(r["header"], "revision");
    if (auto kvs = r.find("kvs"); kvs != r.end() && kvs->is_array())
      for (const auto& k : *kvs) {
        kv one;
        if (to_kv(k, one)) out.push_back(std::move(one));
      }
    return true;
  }

  watch_end watch(const std::string& key, const std::string& range_end, std::int64_t start_revision,
                  const std::function<bool(const std::vector<event>&)>& on_events, tfb::error& error,
                  const std::function<void(std::int64_t)>& on_progress) override {
    if (!logged_in(error)) return watch_end::failed;
    json req{{"key", b64(key)}, {"prev_kv", true}, {"progress_notify", true}};
    if (!range_end.empty()) req["range_end"] = b64(range_end);
    if (start_revision) req["start_revision"] = std::to_string(start_revision);
    std::string body = json{{"create_request", req}}.dump();
    // The probe: one key, counted, from the member's own state (no leader
    // round trip), so that it answers at once unless the member is stuck.
    std::string probe_body = json{{"key", b64(key)}, {"count_only", true}, {"serializable", true}}.dump();
    watch_state w{on_events, on_progress};
    attempts tried;
    for (std::size_t attempt = 0; attempt < c_.endpoints.size(); ++attempt) {
      if (cancelled_) return watch_end::cancelled;
      if (interrupted_.exchange(false)) return interrupted(error);
      const std::string& ep = endpoint();
      w.buffer.clear();
      w.got_any = false;
      watching_ = true;
      std::string stuck;
      CURLcode rc = perform_watch(ep, body, probe_body, w, stuck);
      watching_ = false;
      if (cancelled_ || w.stop) return watch_end::cancelled;
      if (interrupted_.exchange(false)) return interrupted(error);
      if (!stuck.empty()) {  // the member stopped answering: the caller resumes elsewhere
        if (token_refused(stuck)) {  // the probe's token expired: log in again, same member
          set_token({});
          error = {error_kind::store_unreachable, "etcd at " + ep + ": " + stuck};
          return watch_end::failed;
        }
        next_endpoint();
        error = {error_kind::store_unreachable,
                 "etcd at " + ep + ": " + stuck + "; watching through the next endpoint"};
        return watch_end::failed;
      }
      if (w.compacted) {
        error = {error_kind::store_unreachable,
                 fmt("etcd at " + ep + ": revision " + std::to_string(start_revision) + " was compacted")};
        return watch_end::compacted;
      }
      if (!w.error.empty()) {
        error = {error_kind::store_unreachable, "etcd at " + ep + ": " + w.error};
        if (token_refused(w.error)) set_token({});  // the next watch logs in again
        return watch_end::failed;
      }
      if (w.got_any) {  // it worked here, then broke: the caller resumes from its revision
        error = {error_kind::store_unreachable, "etcd at " + ep + ": the watch ended: " + describe(rc)};
        return watch_end::failed;
      }
      note(tried, ep, rc);
      next_endpoint();
    }
    error = {tried.all_tls() ? error_kind::store_access : error_kind::store_unreachable,
             tried.text("no etcd endpoint answered the watch")};
    return watch_end::failed;
  }

  void cancel() override { cancelled_ = true; }
  void interrupt() override { interrupted_ = true; }

 private:
  static watch_end interrupted(tfb::error& error) {
    error = {error_kind::store_unreachable, "interrupted"};
    return watch_end::interrupted;
  }
  struct watch_state {
    const std::function<bool(const std::vector<event>&)>& on_events;
    const std::function<void(std::int64_t)>& on_progress;
    std::string buffer;
    bool got_any = false, stop = false, compacted = false;
    std::string error;
  };

  static std::string fmt(std::string s) { return s; }
  static bool fail(std::string text, tfb::error& error, error_kind k = error_kind::store_unreachable) {
    error = {k, std::move(text)};
    return false;
  }
  static std::string fmt_error(const std::string& what, const json& r) { return what + ": " + r.dump(); }
  static std::string describe(CURLcode rc) { return curl_easy_strerror(rc); }
  /// libcurl's own words for the last failure (they name the TLS problem), else describe(rc).
  std::string detail(CURLcode rc) const { return errbuf_[0] ? std::string(errbuf_) : describe(rc); }

  /// Adds endpoint ep's failure rc to tried: what it was, what to do about
  /// it, and whether it was TLS's refusal. The TLS options are named with
  /// their environment names, which is all a self-started host has.
  void note(attempts& tried, const std::string& ep, CURLcode rc) const {
    const bool https = ep.starts_with("https://");
    const std::string ca = c_.ca.empty() ? "" : " " + c_.ca;
    const std::string tls_off =
        "etcd at that address does not speak TLS: leave out --store-ca, --store-cert and --store-key "
        "(TFBARRIER_STORE_CA, _CERT, _KEY)";
    const std::string cert_hint =
        c_.cert.empty()
            ? "etcd closed the TLS connection: it probably wants a client certificate (etcd --client-cert-auth): "
              "give --store-cert FILE and --store-key FILE (TFBARRIER_STORE_CERT, TFBARRIER_STORE_KEY)"
            : "etcd closed the TLS connection: it probably refused the client certificate " + c_.cert +
                  ": it must be signed by a CA that etcd trusts (etcd --trusted-ca-file) and be meant for "
                  "clients (extendedKeyUsage clientAuth)";
    switch (rc) {
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_OPERATION_TIMEDOUT: {
        std::string all;
        for (const auto& e : c_.endpoints) all += (all.empty() ? "" : ",") + e;
        const bool plain = c_.ca.empty() && c_.cert.empty();
        tried.add(ep, describe(rc),
                  "nothing answers there: check that etcd runs (`etcdctl --endpoints=" + all +
                      " endpoint health`) and that --store (or TFBARRIER_STORE) names its client addresses "
                      "(etcd --advertise-client-urls)" +
                      (plain ? "; a TLS etcd also needs --store-ca, --store-cert and --store-key "
                               "(TFBARRIER_STORE_CA, _CERT, _KEY)"
                             : ""),
                  false);
        return;
      }
      case CURLE_PEER_FAILED_VERIFICATION:
        tried.add(ep, detail(rc),
                  c_.ca.empty() ? "etcd's certificate is not signed by a CA this system trusts: give the CA that "
                                  "signed it with --store-ca FILE (TFBARRIER_STORE_CA)"
                                : "etcd's certificate is not signed by the CA in --store-ca" + ca +
                                      ", or does not name that address: give the CA that signed etcd's "
                                      "certificate (--store-ca, TFBARRIER_STORE_CA) and an address its "
                                      "certificate names",
                  true);
        return;
      case CURLE_SSL_CACERT_BADFILE:
        tried.add(ep, detail(rc), "cannot use --store-ca" + ca + ": give a CA certificate in PEM", true);
        return;
      case CURLE_SSL_CERTPROBLEM:
        tried.add(ep, detail(rc),
                  "cannot use the client certificate --store-cert " + c_.cert + " with --store-key " + c_.key +
                      ": both must be PEM, and the key the certificate's",
                  true);
        return;
      case CURLE_SSL_CONNECT_ERROR: {
        std::string d = detail(rc);
        if (d.find("wrong version number") != std::string::npos) return tried.add(ep, d, tls_off, false);
        tried.add(ep, d,
                  d.find("alert") != std::string::npos ? cert_hint
                                                       : "the TLS handshake failed: check --store-ca, --store-cert "
                                                         "and --store-key (TFBARRIER_STORE_CA, _CERT, _KEY)",
                  true);
        return;
      }
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING:
        // A TLS 1.3 server checks the client's certificate after the
        // handshake, and closes the connection without a word that reaches
        // libcurl: the one sign of a missing or refused certificate.
        if (https) return tried.add(ep, describe(rc), cert_hint, true);
        return tried.add(ep, describe(rc),
                         "etcd at that address may want TLS: give --store-ca FILE (TFBARRIER_STORE_CA), and "
                         "--store-cert and --store-key if it wants a client certificate",
                         false);
      default: tried.add(ep, describe(rc), "", false);
    }
  }
  /// etcd's refusals when auth is enabled: no token, a bad one, a user
  /// without the permission, a wrong name or password.
  static bool auth_refusal(const std::string& msg) {
    for (const char* s : {"user name is empty", "invalid auth token", "permission denied", "authentication failed",
                          "auth token", "user name not found"})
      if (msg.find(s) != std::string::npos) return true;
    return false;
  }
  /// etcd no longer takes the token sent (it expired: simple tokens last
  /// --auth-token-ttl; or etcd restarted): logging in again may help.
  static bool token_refused(const std::string& msg) {
    return msg.find("invalid auth token") != std::string::npos || msg.find("auth token is expired") != std::string::npos;
  }
  /// What to do about etcd's refusal msg. The password is never named.
  std::string refusal_hint(const std::string& msg) const {
    const std::string give =
        "--store-user NAME and --store-password-file FILE (TFBARRIER_STORE_USER, TFBARRIER_STORE_PASSWORD_FILE)";
    if (c_.user.empty())
      return "etcd has authentication on (etcdctl auth enable), and no etcd user was given: give the user whose "
             "role may read and write the job's prefix, with " +
             give + " (docs/store.md, \"Authorization\")";
    if (msg.find("permission denied") != std::string::npos)
      return "etcd user " + c_.user + " may not do that: its role must have readwrite on the prefix of --store " +
             "(etcdctl role grant-permission --prefix=true ROLE readwrite /PREFIX/, and user grant-role " + c_.user +
             " ROLE), or give a prefix that its role covers (docs/store.md, \"Authorization\")";
    if (msg.find("authentication failed") != std::string::npos || msg.find("user name not found") != std::string::npos)
      return "etcd refused the user name " + c_.user +
             " and the password of --store-password-file: check both (etcdctl user get " + c_.user +
             "; etcdctl user passwd " + c_.user + ")";
    return "etcd refused the login of user " + c_.user + ": check " + give;
  }
  /// Logs in when a user is given and there is no token yet: sets the token
  /// that perform() sends.
  bool logged_in(tfb::error& error) {
    if (c_.user.empty() || logged_in_) return true;
    json r;
    // etcd checks the password with bcrypt: slow on a busy machine, so a
    // login gets at least 5 s, whatever the requests' timeout.
    // (Its first try at each endpoint too: a login cut at attempt_timeout
    // would only be tried again, and cost etcd another bcrypt.)
    const auto per_request = c_.timeout, per_attempt = c_.attempt_timeout;
    c_.timeout = std::max(c_.timeout, std::chrono::milliseconds(5000));
    c_.attempt_timeout = c_.timeout;
    bool answered = call_once("/v3/auth/authenticate", json{{"name", c_.user}, {"password", c_.password}}, r, error);
    c_.timeout = per_request;
    c_.attempt_timeout = per_attempt;
    if (!answered) {
      // An etcd without auth takes every request without a token.
      if (error.text.find("authentication is not enabled") == std::string::npos) return false;
      error = {};
    } else if (auto t = r.find("token"); t != r.end() && t->is_string()) {
      set_token(t->get<std::string>());
    }
    logged_in_ = true;
    return true;
  }
  /// The headers of every request: with token, its Authorization header.
  void set_token(std::string token) {
    token_ = std::move(token);
    logged_in_ = !token_.empty();
    curl_slist_free_all(headers_);
    // etcd's "require leader": a member cut off from the others ends the
    // watch (and refuses requests) instead of answering from a stale state.
    headers_ = curl_slist_append(nullptr, "Grpc-Metadata-Hasleader: true");
    headers_ = curl_slist_append(headers_, "Content-Type: application/json");
    if (!token_.empty()) headers_ = curl_slist_append(headers_, ("Authorization: " + token_).c_str());
  }
  /// etcd's words: {"error": "...", "message": "..."} from a call, or
  /// {"error": {"message": "...", ...}} from a stream (keepalive, watch).
  static std::string error_text(const json& j) {
    if (auto m = j.find("message"); m != j.end() && m->is_string()) return m->get<std::string>();
    auto e = j.find("error");
    if (e == j.end()) return {};
    if (e->is_string()) return e->get<std::string>();
    if (auto m = e->find("message"); e->is_object() && m != e->end() && m->is_string()) return m->get<std::string>();
    return e->dump();
  }

  const std::string& endpoint() const { return c_.endpoints[current_ % c_.endpoints.size()]; }
  void next_endpoint() { current_ = (current_ + 1) % c_.endpoints.size(); }

  static size_t on_body(char* data, size_t size, size_t n, void* user) {
    static_cast<std::string*>(user)->append(data, size * n);
    return size * n;
  }
  static size_t on_stream(char* data, size_t size, size_t n, void* user) {
    try {
      return take_stream(data, size, n, user);
    } catch (const std::exception& e) {  // never through libcurl's C frames
      static_cast<watch_state*>(user)->error = std::string("the watch sent what I cannot read: ") + e.what();
      return 0;
    }
  }
  static size_t take_stream(char* data, size_t size, size_t n, void* user) {
    auto* w = static_cast<watch_state*>(user);
    w->buffer.append(data, size * n);
    // One JSON object per line; a line may come in pieces, or several at once.
    std::size_t nl;
    while ((nl = w->buffer.find('\n')) != std::string::npos) {
      std::string line = w->buffer.substr(0, nl);
      w->buffer.erase(0, nl + 1);
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded()) {
        w->error = "the watch sent what is not JSON: " + line.substr(0, 200);
        return 0;
      }
      if (j.contains("error")) {
        w->error = error_text(j);
        return 0;
      }
      const json& res = j.contains("result") ? j["result"] : j;
      if (i64(res, "compact_revision") != 0) {
        w->compacted = true;
        return 0;
      }
      if (res.value("canceled", false)) {
        w->error = "etcd cancelled the watch: " + res.value("cancel_reason", std::string("no reason given"));
        return 0;
      }
      w->got_any = true;
      auto evs = res.find("events");
      if (evs == res.end() || !evs->is_array() || evs->empty()) {
        // No events: the answer to the create request (its revision is not
        // a promise: events before it may follow), or a progress
        // notification (every event up to its revision has been sent).
        if (!res.value("created", false) && w->on_progress && res.contains("header"))
          if (std::int64_t rev = i64(res["header"], "revision"); rev > 0) w->on_progress(rev);
        continue;
      }
      std::vector<event> out;
      for (const auto& e : *evs) {
        event ev;
        ev.what = e.value("type", std::string("PUT")) == "DELETE" ? event::type::del : event::type::put;
        if (e.contains("kv")) to_kv(e["kv"], ev.now);
        if (e.contains("prev_kv")) to_kv(e["prev_kv"], ev.prev);
        out.push_back(std::move(ev));
      }
      if (!w->on_events(out)) {
        w->stop = true;
        return 0;
      }
    }
    return size * n;
  }
  static int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* self = static_cast<etcd_client*>(user);  // interrupt() ends only a watch
    return self->cancelled_ || (self->watching_ && self->interrupted_) ? 1 : 0;
  }

  CURLcode perform(const std::string& url, const std::string& body, bool stream, void* sink,
                   std::chrono::milliseconds timeout = {}) {
    setup(h_, url, body, stream, sink, timeout);
    return curl_easy_perform(h_);
  }

  /// The watch at endpoint ep, with the member asked probe_body every
  /// probe_every on a second handle (one thread, curl's multi interface).
  /// stuck gets why, when the member left a probe unanswered.
  CURLcode perform_watch(const std::string& ep, const std::string& body, const std::string& probe_body,
                         watch_state& w, std::string& stuck) {
    if (c_.probe_every.count() == 0) return perform(ep + "/v3/watch", body, /*stream=*/true, &w);
    if (!m_) m_ = curl_multi_init();
    if (!probe_) probe_ = curl_easy_init();
    if (!m_ || !probe_) return perform(ep + "/v3/watch", body, /*stream=*/true, &w);
    using clock = std::chrono::steady_clock;
    setup(h_, ep + "/v3/watch", body, true, &w, {});
    curl_multi_add_handle(m_, h_);
    std::string probe_reply;
    const std::string probe_url = ep + "/v3/kv/range";
    auto next_probe = clock::now() + c_.probe_every;
    CURLcode result = CURLE_OK;
    for (bool done = false; !done;) {
      int running = 0;
      curl_multi_perform(m_, &running);
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(m_, &queued)) {
        if (msg->msg != CURLMSG_DONE) continue;
        if (msg->easy_handle == h_) {
          result = msg->data.result;
          done = true;
        } else if (msg->easy_handle == probe_) {
          curl_multi_remove_handle(m_, probe_);
          probing_ = false;
          long status = 0;
          curl_easy_getinfo(probe_, CURLINFO_RESPONSE_CODE, &status);
          if (msg->data.result != CURLE_OK || status != 200) {
            stuck = msg->data.result == CURLE_OPERATION_TIMEDOUT
                        ? "the member did not answer a probe within " + std::to_string(c_.attempt_timeout.count()) +
                              " ms (frozen, or cut off)"
                        : "a probe of the member failed: " +
                              (msg->data.result != CURLE_OK ? describe(msg->data.result)
                                                            : "HTTP " + std::to_string(status) + " " +
                                                                  probe_reply.substr(0, 200));
            done = true;
          }
          next_probe = clock::now() + c_.probe_every;
        }
      }
      if (done) break;
      if (cancelled_ || interrupted_) {
        result = CURLE_ABORTED_BY_CALLBACK;
        break;
      }
      if (!probing_ && clock::now() >= next_probe) {
        probe_reply.clear();
        setup(probe_, probe_url, probe_body, false, &probe_reply, c_.attempt_timeout);
        curl_easy_setopt(probe_, CURLOPT_ERRORBUFFER, probe_err_);  // errbuf_ is the watch's
        curl_multi_add_handle(m_, probe_);
        probing_ = true;
      }
      curl_multi_poll(m_, nullptr, 0, 100, nullptr);
    }
    if (probing_) curl_multi_remove_handle(m_, probe_);
    probing_ = false;
    curl_multi_remove_handle(m_, h_);
    return result;
  }

  /// Sets handle h up for one request (a watch when stream).
  void setup(CURL* h, const std::string& url, const std::string& body, bool stream, void* sink,
             std::chrono::milliseconds timeout) {
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(c_.attempt_timeout.count()));
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, this);
    if (!c_.ca.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, c_.ca.c_str());
    // The client certificate and key as read (and the key checked) at start, else their files.
    if (!c_.cert_pem.empty()) {
      curl_blob b{const_cast<char*>(c_.cert_pem.data()), c_.cert_pem.size(), CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
    } else if (!c_.cert.empty()) {
      curl_easy_setopt(h, CURLOPT_SSLCERT, c_.cert.c_str());
    }
    if (!c_.key_pem.empty()) {
      curl_blob b{const_cast<char*>(c_.key_pem.data()), c_.key_pem.size(), CURL_BLOB_COPY};
      curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
    } else if (!c_.key.empty()) {
      curl_easy_setopt(h, CURLOPT_SSLKEY, c_.key.c_str());
    }
    errbuf_[0] = '\0';
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf_);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers_);
    if (stream) {
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_stream);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, sink);
      // A watch lasts; the keep-alive probes find a dead member's connection.
      curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
      curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 5L);
      curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 2L);
    } else {
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, sink);
      curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>((timeout.count() ? timeout : c_.timeout).count()));
    }
  }

  /// One request: tried at each endpoint in turn until one answers.
  bool call(const std::string& path, const json& body, json& reply, tfb::error& error) {
    try {
      if (!logged_in(error)) return false;
      if (call_once(path, body, reply, error)) return true;
      // A token etcd no longer takes (expired, or etcd restarted): log in again, once.
      if (c_.user.empty() || !token_refused(error.text)) return false;
      set_token({});
      return logged_in(error) && call_once(path, body, reply, error);
    } catch (const std::exception& e) {
      return fail("etcd answered " + path + " with what I cannot read: " + e.what(), error);
    }
  }
  bool call_once(const std::string& path, const json& body, json& reply, tfb::error& error) {
    std::string text = body.dump();
    attempts tried;
    // First each endpoint with attempt_timeout; then, if every one timed
    // out, each again with the whole timeout (a slow cluster).
    const std::size_t n = c_.endpoints.size();
    std::size_t timed_out = 0;
    for (std::size_t attempt = 0; attempt < 2 * n; ++attempt) {
      if (attempt == n && timed_out < n) break;
      if (cancelled_) return fail("cancelled", error);
      const std::string& ep = endpoint();
      std::string got;
      CURLcode rc = perform(ep + path, text, false, &got, attempt < n ? c_.attempt_timeout : c_.timeout);
      if (rc != CURLE_OK) {
        if (attempt < n) note(tried, ep, rc);
        timed_out += rc == CURLE_OPERATION_TIMEDOUT ? 1 : 0;
        next_endpoint();
        continue;
      }
      long status = 0;
      curl_easy_getinfo(h_, CURLINFO_RESPONSE_CODE, &status);
      reply = json::parse(got, nullptr, false);
      if (reply.is_discarded() || !reply.is_object())
        return fail("etcd at " + ep + path + " answered HTTP " + std::to_string(status) + " with what is not JSON: " +
                        got.substr(0, 200),
                    error);
      if (status != 200 || reply.contains("error")) {
        std::string msg = error_text(reply);
        // A member without a leader (an election under way) is worth trying elsewhere.
        if (status == 503 || msg.find("no leader") != std::string::npos) {
          tried.add(ep, msg, "", false);
          next_endpoint();
          continue;
        }
        if (auth_refusal(msg))
          return fail("etcd at " + ep + ": " + msg + "; " + refusal_hint(msg), error, error_kind::store_access);
        return fail("etcd at " + ep + ": " + (msg.empty() ? "HTTP " + std::to_string(status) : msg), error);
      }
      return true;
    }
    return fail(tried.text("no etcd endpoint answered"), error,
                tried.all_tls() ? error_kind::store_access : error_kind::store_unreachable);
  }

  client_config c_;
  CURL* h_ = nullptr;
  CURLM* m_ = nullptr;      ///< the watch's: the stream and its probes
  CURL* probe_ = nullptr;
  bool probing_ = false;    ///< probe_ is in m_
  curl_slist* headers_ = nullptr;
  std::string token_;  ///< from /v3/auth/authenticate, when a user is given
  bool logged_in_ = false;  ///< token_ is etcd's answer (none: etcd has no auth)
  std::size_t current_ = 0;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> interrupted_{false};
  bool watching_ = false;  ///< the calling thread's: a watch is under way
  char errbuf_[CURL_ERROR_SIZE] = {};
  char probe_err_[CURL_ERROR_SIZE] = {};
};

}  // namespace
}  // namespace tfb::store

extern "C" __attribute__((visibility("default"))) tfb::store::client* tfb_etcd_client_new(
    const tfb::store::client_config* config, std::string* error) {
  try {
    std::call_once(tfb::store::curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    if (config->endpoints.empty()) {
      *error = "no etcd endpoint given";
      return nullptr;
    }
    auto c = std::make_unique<tfb::store::etcd_client>(*config);
    if (!c->ok(*error)) return nullptr;
    return c.release();
  } catch (const std::exception& e) {
    *error = std::string("cannot make the etcd client: ") + e.what();
    return nullptr;
  }
}
