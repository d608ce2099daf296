// The host's network layer: it only carries bytes between sockets and the
// barrier_set. One io_context, one thread, one coroutine per connection.
#include "host.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fmt/format.h>
#include <memory>
#include <unordered_map>

#include "address.h"
#include "auth.h"
#include "barrier.h"
#include "munge_auth.h"
#include "exit_codes.h"
#include "journal.h"
#include "text.h"
#include "version.h"

namespace tfb {

using asio::awaitable;
using asio::ip::tcp;
using asio::use_awaitable;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t max_outbox_bytes = 1 << 20;  // a client that reads nothing is dropped past this
constexpr std::size_t max_held_bytes = 64 << 10;    // a write_batch holds no more than this for one connection

class server;

class session : public std::enable_shared_from_this<session> {
 public:
  session(server& srv, tcp::socket s, conn_id id, std::string peer_addr, std::string remote)
      : srv_(srv), socket_(std::move(s)), id_(id),
        handshake_timer_(socket_.get_executor()), remote_(std::move(remote)), peer_addr_(std::move(peer_addr)) {}
  void start();
  void send(std::string bytes, bool close_after);
  void flush();
  void flush_held() {  // the end of a write_batch that held this session's replies
    held_ = false;
    flush();
  }
  void stop();
  conn_id id() const { return id_; }
  const std::string& remote() const { return remote_; }
  const std::string& peer_addr() const { return peer_addr_; }

 private:
  void watch_liveness();
  void read_more();
  void on_readable(asio::error_code ec);
  void handle_line(const std::string& l);

  server& srv_;
  tcp::socket socket_;
  conn_id id_;
  asio::steady_timer handshake_timer_;
  std::string outbox_;         // bytes not yet taken by the kernel (almost always empty, and then freed)
  bool writing_ = false;       // waiting for the socket to take more
  bool held_ = false;          // in the server's list of writes held back (write_batch)
  bool close_after_flush_ = false;
  bool stopped_ = false;
  bool hello_ = false;
  bool arrived_ = false;
  peer_info peer_;
  std::string remote_;
  std::string peer_addr_;
  proto::line_splitter splitter_;
  std::uint32_t keepalive_ms_ = 0;
  bool awaiting_auth_ = false;
  // Only on a host that authenticates (most connections of a job on loopback
  // do not): the handshake's nonces, then the session key and the sequence
  // numbers of the MACs. A pointer, so that the others do not carry them.
  struct auth_state {
    std::string client_nonce, host_nonce, session_key;
    std::uint64_t in_seq = 0, out_seq = 0;
  };
  std::unique_ptr<auth_state> auth_;
  bool sealed() const { return auth_ && !auth_->session_key.empty(); }
  std::chrono::steady_clock::time_point last_heard_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_check_ = std::chrono::steady_clock::now();
};

class server {
 public:
  server(asio::io_context& io, const host_options& o)
      : io_(io), opts_(o), acceptor_(io), signals_(io, SIGINT, SIGTERM), prune_timer_(io), idle_timer_(io), shutdown_timer_(io),
        start_(std::chrono::steady_clock::now()) {}

  bool listen(std::string& error);
  bool open_journal(std::string& error);
  void run_loops();

  millis now() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start_).count();
  }
  void log(std::string_view text) {
    auto t = std::chrono::system_clock::now();
    std::time_t tt = std::chrono::system_clock::to_time_t(t);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
    std::tm tm{};
    localtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    tfb::print(opts_.log, "{}.{:03d} tfbarrier[{}]: {}\n", buf, static_cast<int>(ms), getpid(), text);
    std::fflush(opts_.log);
  }
  void event(std::string_view text) {
    if (!opts_.quiet) log(text);
  }
  void apply(output& out) {
    for (auto& line : out.log) event(line);
    if (!out.journal.empty() && journal_fd_ >= 0) {
      // Written and flushed before any reply of this step goes out.
      std::string bytes;
      for (auto& j : out.journal) bytes += to_journal_line(j);
      if (!write_all(journal_fd_, bytes) || ::fdatasync(journal_fd_) != 0) {
        // Acknowledging now would promise what a crash could take back. Stop
        // as a crash would, before any reply of this step: participants
        // reconnect, and a restarted host (with room to write) takes their
        // requests again. Nothing acknowledged is lost. (Replies to earlier
        // lines of the same input, held back for one write, go too, as in a
        // crash: what they told is in the journal, and told again after it.)
        log(fmt::format("error: cannot write the journal in {}: {}; stopping before acknowledging what it could "
                        "not record. Free space (or fix {}) and start the host again: waiting participants "
                        "reconnect until their --connect-timeout",
                        *opts_.state_dir, std::strerror(errno), *opts_.state_dir));
        std::_Exit(exit_code::protocol);
      }
    }
    for (auto& e : out.sends) {
      auto it = sessions_.find(e.to);
      if (it == sessions_.end()) continue;
      bool close = false;
      if (auto* er = std::get_if<proto::error_reply>(&e.msg)) close = proto::closes_connection(er->kind);
      it->second->send(proto::format_reply(e.msg), close);
    }
    out.sends.clear();
    out.log.clear();
    last_active_ = now();
  }
  barrier_set& state() { return state_; }
  const host_options& opts() const { return opts_; }
  void remove(conn_id id, const std::string& peer) {
    if (sessions_.erase(id) != 0) {
      auto it = per_address_.find(peer);
      if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
    }
    if (stopping_ && sessions_.empty()) finish();
  }
  bool stopping() const { return stopping_; }
  const std::string& address() const { return address_; }

  // Replies made while one client's input is handled are held back and
  // written once at the end, each session's in one write: a participant's
  // HELLO reply, WAITING and RELEASE go out together when its HELLO and
  // ARRIVE came together (one system call and one wake-up of the participant
  // instead of three).
  class write_batch {
   public:
    explicit write_batch(server& s) : s_(s) { ++s_.holding_; }
    write_batch(const write_batch&) = delete;
    write_batch& operator=(const write_batch&) = delete;
    ~write_batch() {
      if (--s_.holding_ > 0) return;
      auto held = std::move(s_.held_);
      s_.held_.clear();
      for (auto& sess : held) sess->flush_held();  // may stop a session, whose replies to others then go at once
    }

   private:
    server& s_;
  };
  // Whether send() is to hold its bytes back; if so, the session is queued.
  bool hold(const std::shared_ptr<session>& s) {
    if (holding_ == 0) return false;
    held_.push_back(s);
    return true;
  }

 private:
  awaitable<void> accept_loop();
  awaitable<void> prune_loop();
  awaitable<void> idle_loop();
  void begin_shutdown(std::string_view why);
  void finish() {
    shutdown_timer_.cancel();
    prune_timer_.cancel();
    idle_timer_.cancel();
    signals_.cancel();
  }

  asio::io_context& io_;
  host_options opts_;
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer prune_timer_, idle_timer_, shutdown_timer_;
  std::chrono::steady_clock::time_point start_;
  barrier_set state_;
  std::unordered_map<conn_id, std::shared_ptr<session>> sessions_;
  conn_id next_id_ = 1;
  bool stopping_ = false;
  millis last_active_ = 0;
  int reserve_fd_ = -1;
  int journal_fd_ = -1;
  std::size_t max_connections_ = 0;
  std::unordered_map<std::string, std::size_t> per_address_;
  std::string address_;
  int holding_ = 0;  // open write_batch scopes
  std::vector<std::shared_ptr<session>> held_;

  static bool write_all(int fd, const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    return true;
  }
};

void session::start() {
  // TCP_NODELAY and the keep-alive settings come from the listening socket
  // (server::listen): Linux copies them into every accepted one.
  auto self = shared_from_this();
  handshake_timer_.expires_after(srv_.opts().handshake_timeout);
  handshake_timer_.async_wait([self](asio::error_code e) {
    if (e || (self->hello_ && !self->awaiting_auth_) || self->stopped_) return;
    self->srv_.event(fmt::format("bad client {}: no {} within the handshake timeout", self->remote_,
                                 self->hello_ ? "AUTH" : "HELLO"));
    self->send(proto::format_reply(proto::error_reply{proto::error_kind::timeout,
                                                      self->hello_ ? "no AUTH in time" : "no HELLO in time"}), true);
  });
  asio::error_code nb;
  socket_.non_blocking(true, nb);
  read_more();
}

void session::send(std::string bytes, bool close_after) {
  if (stopped_ || close_after_flush_) return;
  if (sealed() && !bytes.empty()) {
    // Authenticated connection: every line carries a MAC and a sequence number.
    std::string lines;
    std::size_t pos = 0;
    while (pos < bytes.size()) {
      std::size_t nl = bytes.find('\n', pos);
      if (nl == std::string::npos) nl = bytes.size();
      lines += auth::seal(std::string_view(bytes).substr(pos, nl - pos), auth_->session_key,
                          auth::direction::to_client, auth_->out_seq++);
      lines += '\n';
      pos = nl + 1;
    }
    bytes = std::move(lines);
  }
  outbox_ += bytes;
  if (close_after) close_after_flush_ = true;
  if (outbox_.size() > max_outbox_bytes) {
    srv_.event(fmt::format("bad client {}: it does not read its replies; closing", remote_));
    stop();
    return;
  }
  // Held back while the server gathers this input's replies, but only up to
  // max_held_bytes: a client that pipelines many STATUS requests (and reads
  // the replies) must not meet max_outbox_bytes for what the kernel would take.
  if (outbox_.size() < max_held_bytes) {
    if (held_) return;
    if (srv_.hold(shared_from_this())) {
      held_ = true;
      return;
    }
  }
  flush();
}

// Writes now, without a coroutine or a timer: a reply is a line or two and the
// socket almost always takes it whole. Only what it does not take waits for
// the socket to become writable.
void session::flush() {
  if (writing_ || stopped_) return;
  while (!outbox_.empty()) {
    asio::error_code ec;
    std::size_t n = socket_.write_some(asio::buffer(outbox_), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) break;
    if (ec) {
      stop();
      return;
    }
    outbox_.erase(0, n);
  }
  if (outbox_.empty()) {
    std::string().swap(outbox_);  // a waiting participant holds no buffer (docs/performance.md)
    if (close_after_flush_) stop();
    return;
  }
  writing_ = true;
  socket_.async_wait(tcp::socket::wait_write, [self = shared_from_this()](asio::error_code ec) {
    self->writing_ = false;
    if (ec) {
      self->stop();
      return;
    }
    self->flush();
  });
}

void session::stop() {
  if (stopped_) return;
  stopped_ = true;
  asio::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  handshake_timer_.cancel();
  output out;
  srv_.state().leave(id_, false, srv_.now(), out);
  srv_.apply(out);
  srv_.remove(id_, peer_addr_);  // may destroy *this once the coroutines finish; they hold shared_ptrs
}

// Reading without a coroutine: a waiting participant costs one pending
// async_wait (a handler holding a shared_ptr), not a coroutine frame and an
// awaitable thread.
void session::read_more() {
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](asio::error_code ec) { self->on_readable(ec); });
}

void session::on_readable(asio::error_code ec) {
  if (stopped_) return;
  // One buffer for every connection (one thread): filled and fed to this
  // connection's splitter at once, never held across a wait.
  static char buf[4096];
  std::size_t n = 0;
  if (!ec) n = socket_.read_some(asio::buffer(buf), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return read_more();
  if (ec) {
    // EOF, reset, or closed by stop(): the participant is gone.
    if (!close_after_flush_) stop();
    return;
  }
  last_heard_ = std::chrono::steady_clock::now();
  server::write_batch batch(srv_);  // this input's replies, to everyone, go out at its end
  splitter_.feed(std::string_view(buf, n));
  while (!stopped_ && !close_after_flush_) {
    auto l = splitter_.next();
    if (!l) break;
    handle_line(*l);
  }
  if (splitter_.overflow() && !close_after_flush_ && !stopped_) {
    srv_.event(fmt::format("bad client {}: line longer than {} bytes", remote_, proto::max_line));
    send(proto::format_reply(proto::error_reply{
             proto::error_kind::toolong, fmt::format("line longer than {} bytes", proto::max_line)}),
         true);
  }
  // After a reply that closes, stop reading; flush() closes after the last reply.
  if (stopped_ || close_after_flush_) return;
  read_more();
}

void session::handle_line(const std::string& line) {
  auto refuse_auth = [&](std::string text) {
    srv_.event(fmt::format("bad client {}: authentication failed: {}", remote_, text));
    send(proto::format_reply(proto::error_reply{proto::error_kind::auth, std::move(text)}), true);
  };
  std::string raw = line;
  if (sealed() && !auth::unseal(raw, auth_->session_key, auth::direction::to_host, auth_->in_seq++)) {
    refuse_auth("a line without a valid MAC");
    return;
  }
  // Any first line but a HELLO, well-formed or not, is not a tfbarrier client
  // (docs/protocol.md): refused before it is parsed.
  if (!hello_ && std::string_view(raw).substr(0, raw.find(' ')) != "HELLO") {
    srv_.event(fmt::format("bad client {}: first line was not HELLO", remote_));
    send(proto::format_reply(proto::error_reply{proto::error_kind::handshake,
                                                "the first line must be HELLO v=1 (see docs/protocol.md)"}),
         true);
    return;
  }
  auto parsed = proto::parse_request(raw);
  if (auto* err = std::get_if<proto::request_error>(&parsed)) {
    srv_.event(fmt::format("bad client {}: {}: {}", remote_, proto::to_string(err->kind), err->text));
    send(proto::format_reply(proto::error_reply{err->kind, err->text}), proto::closes_connection(err->kind));
    return;
  }
  auto& req = std::get<proto::request>(parsed);
  output out;
  millis now = srv_.now();
  if (!hello_) {
    auto* h = std::get_if<proto::hello>(&req);  // a HELLO: other first lines were refused above
    if (h->version < 1 || h->version > protocol_version) {
      std::string text = fmt::format(
          "this host speaks protocol version {}, the client asked for {}; use matching tfbarrier versions",
          protocol_version, h->version);
      srv_.event(fmt::format("bad client {}: {}", remote_, text));
      send(proto::format_reply(proto::error_reply{proto::error_kind::version, text}), true);
      return;
    }
    const auto& secret = srv_.opts().secret;
    bool munge = srv_.opts().munge && !secret;
    if ((secret || munge) && h->nonce.size() != 2 * auth::nonce_bytes) {
      refuse_auth("this host requires authentication; give the participant the same secret file as the host "
                  "(--secret-file or TFBARRIER_SECRET_FILE)");
      return;
    }
    hello_ = true;
    peer_ = {h->host, h->pid};
    if (h->keepalive_ms > 0) keepalive_ms_ = std::max<std::uint32_t>(h->keepalive_ms, 100);
    proto::hello_reply hr{protocol_version, fmt::format("tfbarrier/{}", tfb::version), "none"};
    if (secret) {
      auth_ = std::make_unique<auth_state>(auth_state{h->nonce, auth::make_nonce()});
      hr.auth = "hmac";
      hr.nonce = auth_->host_nonce;
      hr.proof = auth::host_proof(*secret, auth_->client_nonce, auth_->host_nonce);
      awaiting_auth_ = true;  // the handshake timer still runs until AUTH
    } else if (munge) {
      auth_ = std::make_unique<auth_state>(auth_state{h->nonce, auth::make_nonce()});
      std::string err;
      auto cred = munge_auth::encode(
          fmt::format("tfbarrier-host-munge\n{}\n{}", auth_->client_nonce, auth_->host_nonce), ::getuid(), err);
      if (!cred) {
        srv_.log(fmt::format("warning: cannot make a MUNGE credential: {}", err));
        send(proto::format_reply(proto::error_reply{proto::error_kind::busy,
                                                    "the host cannot reach munged right now: " + err}),
             true);
        return;
      }
      hr.auth = "munge";
      hr.nonce = auth_->host_nonce;
      hr.cred = munge_auth::to_wire(*cred);
      awaiting_auth_ = true;
    } else {
      handshake_timer_.cancel();
      if (keepalive_ms_ > 0) watch_liveness();
    }
    send(proto::format_reply(hr), false);
    return;
  }
  if (awaiting_auth_ && !srv_.opts().secret) {
    auto* a = std::get_if<proto::auth_req>(&req);
    if (!a || a->cred.empty()) {
      refuse_auth(a ? "expected AUTH cred=... (this host authenticates with MUNGE)"
                    : "a request came before AUTH; this host authenticates with MUNGE (clients reconnect and "
                      "authenticate first)");
      return;
    }
    std::string err;
    auto d = munge_auth::decode(munge_auth::from_wire(a->cred), err);
    if (!d) {
      refuse_auth(fmt::format("the MUNGE credential was refused: {}", err));
      return;
    }
    if (d->uid != ::getuid()) {
      refuse_auth(fmt::format("uid {} may not use this host: only the job owner (uid {}) may", d->uid, ::getuid()));
      return;
    }
    std::string prefix = fmt::format("tfbarrier-client-munge\n{}\n{}\n", auth_->client_nonce, auth_->host_nonce);
    if (!d->payload.starts_with(prefix) || d->payload.size() != prefix.size() + 64) {
      refuse_auth("the MUNGE credential is not for this connection (a replay?)");
      return;
    }
    awaiting_auth_ = false;
    handshake_timer_.cancel();
    auth_->session_key = d->payload.substr(prefix.size());
    if (keepalive_ms_ > 0) watch_liveness();
    return;
  }
  if (awaiting_auth_) {
    auto* a = std::get_if<proto::auth_req>(&req);
    const auto& secret = *srv_.opts().secret;
    if (!a || !auth::equal(a->proof, auth::client_proof(secret, auth_->client_nonce, auth_->host_nonce))) {
      refuse_auth(a ? "wrong proof: the participant's secret differs from the host's (or it replayed an old handshake)"
                    : "expected AUTH after HELLO");
      return;
    }
    awaiting_auth_ = false;
    handshake_timer_.cancel();
    auth_->session_key = auth::session_key(secret, auth_->client_nonce, auth_->host_nonce);
    if (keepalive_ms_ > 0) watch_liveness();
    return;
  }
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, proto::hello>) {
          send(proto::format_reply(proto::error_reply{proto::error_kind::badrequest, "HELLO was already sent"}), true);
        } else if constexpr (std::is_same_v<T, proto::arrive> || std::is_same_v<T, proto::decide>) {
          if (arrived_) {
            send(proto::format_reply(proto::error_reply{proto::error_kind::badrequest,
                                                        "one ARRIVE or DECIDE per connection"}),
                 true);
            return;
          }
          arrived_ = true;
          if constexpr (std::is_same_v<T, proto::arrive>)
            srv_.state().arrive(id_, m, peer_, now, out);
          else
            srv_.state().decide(id_, m, peer_, now, out);
          // A request that was refused leaves the connection free for another try.
          for (auto& e : out.sends)
            if (e.to == id_ && std::holds_alternative<proto::error_reply>(e.msg)) arrived_ = false;
        } else if constexpr (std::is_same_v<T, proto::abort_req>) {
          srv_.state().abort(id_, m, now, out);
        } else if constexpr (std::is_same_v<T, proto::status_req>) {
          out.sends.push_back({id_, srv_.state().status(m, now)});
        } else if constexpr (std::is_same_v<T, proto::leave>) {
          srv_.state().leave(id_, true, now, out);
        } else if constexpr (std::is_same_v<T, proto::ping>) {
          out.sends.push_back({id_, proto::pong{}});
        } else if constexpr (std::is_same_v<T, proto::auth_req>) {
          send(proto::format_reply(proto::error_reply{
                   proto::error_kind::badrequest,
                   !sealed() ? "this host does not authenticate: send no AUTH" : "AUTH was already done"}),
               true);
        }
      },
      req);
  srv_.apply(out);
}

// A client that promised keep-alives and went silent (stopped, or behind a
// dead link) is withdrawn as unresponsive: it is not counted as present.
void session::watch_liveness() {
  auto self = shared_from_this();
  last_check_ = std::chrono::steady_clock::now();
  handshake_timer_.expires_after(std::chrono::milliseconds(keepalive_ms_));
  handshake_timer_.async_wait([self](asio::error_code ec) {
    if (ec || self->stopped_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - self->last_check_ > std::chrono::milliseconds(2 * self->keepalive_ms_ + 500)) {
      // The timer fired late: the host itself was not running (stopped, or starved), and the
      // client's PINGs wait unread in the socket. Not the client's silence: look again later.
      self->last_heard_ = now;
    }
    auto silent = now - self->last_heard_;
    if (silent > std::chrono::milliseconds(3 * self->keepalive_ms_ + 500)) {
      output out;
      self->srv_.state().leave(self->id_, departure::unresponsive, self->srv_.now(), out);
      self->srv_.apply(out);
      self->srv_.event(fmt::format("client {} sent nothing for {}; closing", self->remote_,
                                   format_duration(std::chrono::duration_cast<duration>(silent))));
      self->stop();
      return;
    }
    self->watch_liveness();
  });
}

bool server::open_journal(std::string& error) {
  if (!opts_.state_dir) return true;
  const std::string& dir = *opts_.state_dir;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    error = fmt::format("cannot create the state directory {}: {}", dir, std::strerror(errno));
    return false;
  }
  std::string path = dir + "/journal", tmp = dir + "/journal.tmp";
  std::size_t restored = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    char* buf = nullptr;
    std::size_t cap = 0;
    ssize_t len;
    std::size_t lineno = 0;
    while ((len = ::getline(&buf, &cap, f)) > 0) {
      std::string_view line(buf, static_cast<std::size_t>(len));
      if (line.ends_with('\n')) line.remove_suffix(1);
      ++lineno;
      std::string err;
      if (lineno == 1) {
        if (!check_journal_header(line, err)) {
          error = fmt::format("cannot use the journal {}: {}; move it away to start afresh", path, err);
          std::free(buf);
          std::fclose(f);
          return false;
        }
        continue;
      }
      auto e = from_journal_line(line, err);
      if (!e) {
        // A torn last line (a crash while writing) is expected; anything else is worth a warning.
        log(fmt::format("warning: journal {} line {} skipped: {}", path, lineno, err));
        continue;
      }
      state_.restore(*e, now());
      ++restored;
    }
    std::free(buf);
    std::fclose(f);
  }
  // Compact: write what the state needs now, flush, and swap it in.
  std::string bytes = journal_header();
  for (const auto& e : state_.snapshot()) bytes += to_journal_line(e);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || !write_all(fd, bytes) || ::fsync(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    error = fmt::format("cannot write the journal in {}: {}", dir, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  journal_fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (journal_fd_ < 0) {
    error = fmt::format("cannot open the journal {}: {}", path, std::strerror(errno));
    return false;
  }
  log(fmt::format("journal {}: restored {} entries", path, restored));
  return true;
}

bool server::listen(std::string& error) {
  std::string why;
  auto listen_at = parse_address(opts_.listen, address_use::listen, why);
  if (!listen_at) {
    error = fmt::format("cannot listen on '{}': expected HOST:PORT, :PORT or [IPv6]:PORT", opts_.listen);
    return false;
  }
  const std::string& host = listen_at->host;
  std::string port = std::to_string(listen_at->port);
  asio::error_code ec;
  tcp::endpoint ep;
  if (host.empty()) {
    ep = tcp::endpoint(tcp::v4(), listen_at->port);
  } else {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(host, port, tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      error = fmt::format("cannot listen on {}: cannot resolve '{}': {}", opts_.listen, host, ec.message());
      return false;
    }
    ep = results.begin()->endpoint();
  }
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) {
    // Set once here, inherited by every accepted socket (Linux copies them),
    // instead of five setsockopt calls per participant. No delay for the
    // one-line replies; and let the kernel find a dead peer (a link that went
    // down) within about 25 s. tests/bats/sockets.bats checks an accepted socket.
    asio::error_code opt;
    acceptor_.set_option(tcp::no_delay(true), opt);
    acceptor_.set_option(asio::socket_base::keep_alive(true), opt);
    int fd = acceptor_.native_handle(), idle = 10, intvl = 5, cnt = 3;
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    acceptor_.bind(ep, ec);
  }
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    if (ec == asio::error::address_in_use && opts_.self_started) {
      // Several participants raced to start the host; another one won.
      log(fmt::format("another participant started the host on {} first; leaving", opts_.listen));
      return false;
    }
    error = fmt::format("cannot listen on {}: {}", opts_.listen, ec.message());
    if (ec == asio::error::address_in_use)
      error += "; another host (or program) has that port: pick another with --listen HOST:PORT (port 0 picks a "
               "free one), or in a job set TFBARRIER_PORT";
    return false;
  }
  auto local = acceptor_.local_endpoint(ec);
  std::string a = local.address().to_string();
  if (local.address().is_v6()) a = "[" + a + "]";
  address_ = fmt::format("{}:{}", a, local.port());
  // Keep one descriptor in reserve so a newcomer past the limit can be told why.
  reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  struct rlimit rl{};
  std::size_t fd_room = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 64)
    fd_room = static_cast<std::size_t>(rl.rlim_cur) - 32;
  else if (rl.rlim_cur == RLIM_INFINITY)
    fd_room = 1 << 20;
  max_connections_ = opts_.max_connections ? std::min(opts_.max_connections, fd_room) : fd_room;
  return true;
}

void server::run_loops() {
  asio::co_spawn(io_, accept_loop(), asio::detached);
  asio::co_spawn(io_, prune_loop(), asio::detached);
  if (opts_.idle_exit) asio::co_spawn(io_, idle_loop(), asio::detached);
  signals_.async_wait([this](asio::error_code ec, int sig) {
    if (ec) return;
    begin_shutdown(sig == SIGINT ? "SIGINT" : "SIGTERM");
  });
}

awaitable<void> server::accept_loop() {
  while (!stopping_) {
    asio::error_code ec;
    tcp::socket s = co_await acceptor_.async_accept(asio::redirect_error(use_awaitable, ec));
    if (stopping_) break;
    if (ec) {
      if (ec == asio::error::no_descriptors || ec.value() == ENFILE) {
        // Out of descriptors: use the reserve to tell the newcomer, then go on.
        if (reserve_fd_ >= 0) {
          ::close(reserve_fd_);
          reserve_fd_ = -1;
          asio::error_code ec2;
          tcp::socket late = acceptor_.accept(ec2);
          if (!ec2) {
            std::string msg = proto::format_reply(proto::error_reply{
                proto::error_kind::busy,
                "the host is out of file descriptors; raise its limit (ulimit -n) or use fewer participants per host"});
            asio::write(late, asio::buffer(msg), ec2);
            late.close(ec2);
          }
          reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        struct rlimit rl{};
        getrlimit(RLIMIT_NOFILE, &rl);
        log(fmt::format("warning: out of file descriptors ({} open, limit {}): refusing a newcomer",
                        sessions_.size(), rl.rlim_cur));
        asio::steady_timer t(io_, 50ms);
        co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
        continue;
      }
      if (ec == asio::error::operation_aborted) break;
      log(fmt::format("warning: accept failed: {}", ec.message()));
      continue;
    }
    asio::error_code aec;
    auto ep = s.remote_endpoint(aec);
    std::string peer = aec ? std::string("?") : ep.address().to_string();
    std::size_t& from_peer = per_address_[peer];
    if (sessions_.size() >= max_connections_ || from_peer >= opts_.max_per_address) {
      bool total = sessions_.size() >= max_connections_;
      if (from_peer == 0) per_address_.erase(peer);
      log(fmt::format("warning: refusing a connection from {}: {} connections {} (limit {})", peer,
                      total ? sessions_.size() : from_peer, total ? "open" : "from that address",
                      total ? max_connections_ : opts_.max_per_address));
      std::string msg = proto::format_reply(proto::error_reply{
          proto::error_kind::busy, total ? "the host has too many connections; try again later or use another host"
                                         : "too many connections from your address"});
      asio::write(s, asio::buffer(msg), aec);
      s.close(aec);
      continue;
    }
    ++from_peer;
    conn_id id = next_id_++;
    auto sess = std::make_shared<session>(*this, std::move(s), id, peer,
                                          aec ? std::string("?") : fmt::format("{}:{}", peer, ep.port()));
    sessions_.emplace(id, sess);
    sess->start();
  }
}

awaitable<void> server::prune_loop() {
  while (!stopping_) {
    asio::error_code ec;
    // Checked four times per --forget-after (at most once a minute): a barrier
    // is forgotten within a quarter of it after it has been idle for it.
    prune_timer_.expires_after(std::clamp<duration>(opts_.forget_after / 4, 100ms, std::chrono::minutes(1)));
    co_await prune_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || stopping_) break;
    state_.prune(now(), opts_.forget_after.count());
  }
}

awaitable<void> server::idle_loop() {
  last_active_ = now();
  while (!stopping_) {
    asio::error_code ec;
    idle_timer_.expires_after(std::max<duration>(*opts_.idle_exit / 10, 100ms));
    co_await idle_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || stopping_) break;
    if (state_.active()) {
      last_active_ = now();
      continue;
    }
    if (now() - last_active_ >= opts_.idle_exit->count()) {
      begin_shutdown(fmt::format("idle for {}", format_duration(*opts_.idle_exit)));
      break;
    }
  }
}

void server::begin_shutdown(std::string_view why) {
  if (stopping_) return;
  stopping_ = true;
  log(fmt::format("shutting down ({}); {} connections open", why, sessions_.size()));
  asio::error_code ec;
  acceptor_.close(ec);
  output out;
  state_.shutdown(fmt::format("the host at {} is shutting down ({})", address_, why), out);
  for (auto& e : out.sends) {
    auto it = sessions_.find(e.to);
    if (it != sessions_.end()) it->second->send(proto::format_reply(e.msg), true);
  }
  // Connections that wait for nothing are closed now; the others after their SHUTDOWN line.
  std::vector<std::shared_ptr<session>> all;
  for (auto& [id, s] : sessions_) all.push_back(s);
  for (auto& s : all) s->send(std::string(), true);
  // Bound the flush: a client that reads nothing must not hold the host.
  shutdown_timer_.expires_after(2s);
  shutdown_timer_.async_wait([this](asio::error_code timer_ec) {
    if (timer_ec) return;
    std::vector<std::shared_ptr<session>> left;
    for (auto& [id, s] : sessions_) left.push_back(s);
    for (auto& s : left) s->stop();
    finish();
  });
  if (sessions_.empty()) finish();
}

void raise_fd_limit() {
  struct rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

int run_host(const host_options& o, std::string& error) {
  raise_fd_limit();
  asio::io_context io(1);
  server srv(io, o);
  if (!srv.open_journal(error)) return 2;
  if (!srv.listen(error)) return error.empty() ? 0 : 69;
  if (o.on_bound)
    if (int rc = o.on_bound(error); rc != 0) return rc;
  srv.log(fmt::format("tfbarrier {} listening on {} (protocol {}, authentication: {})", tfb::version, srv.address(),
                      protocol_version, o.secret ? "shared secret" : o.munge ? "MUNGE, uid " + std::to_string(::getuid()) : "none"));
  if (o.on_listening) o.on_listening(srv.address());
  srv.run_loops();
  io.run();
  srv.log("stopped");
  return 0;
}

}  // namespace tfb
