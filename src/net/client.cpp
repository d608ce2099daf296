// The TCP backend of the participant's side. One io_context per call, one
// connection, a timer for every deadline, a signal_set for SIGINT/SIGTERM.
// wait, decide and abort are driven by their machine (core/client_call.h):
// this file does what it asks and feeds it what happens; its result goes to
// the CLI as data (cli/outcome_text.h says it in words).
#include "client.h"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <asio.hpp>
#include <chrono>
#include <deque>
#include <fmt/format.h>
#include <algorithm>
#include <random>

#include "address.h"
#include "auth.h"
#include "secret_files.h"
#include "client_conn.h"
#include "decide_cmd.h"
#include "peer_owner.h"
#include "exit_codes.h"
#include "munge_auth.h"
#include "no_new_imports.h"
#include "text.h"
#include "version.h"

namespace tfb {
namespace {

using asio::awaitable;
using asio::ip::tcp;
using asio::use_awaitable;
using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

/// The real randomness and MUNGE, for client::client_conn.
class system_env final : public client::client_env {
 public:
  std::string nonce() override { return auth::make_nonce(); }
  std::optional<munge_auth::decoded> munge_decode(std::string_view cred, std::string& error) override {
    return munge_auth::decode(cred, error);
  }
  std::optional<std::string> munge_encode(std::string_view payload, uid_t uid, std::string& error) override {
    return munge_auth::encode(payload, uid, error);
  }
  uid_t uid() override { return ::getuid(); }
};

/// How one connection ended, when the call is not over with it.
struct conn_end {
  enum class kind {
    over,               ///< the call has its outcome
    lost,               ///< the connection was lost: `why`
    retry_with_secret,  ///< the host authenticates: connect again, the request after the handshake
    busy,               ///< the host is full: connect again after a back-off (`why`: its words)
  } k = kind::over;
  std::string why;
};

/// What a request does with each reply; returns an outcome when the call is over.
using reply_handler = std::function<std::optional<outcome>(const proto::reply&)>;
/// What a call (client::client_call) asks done after an event.
using step_handler = std::function<void(client::call_step)>;

class engine {
 public:
  explicit engine(const connect_options& o)
      : o_(o), socket_(io_), signals_(io_, SIGINT, SIGTERM), deadline_(io_), progress_(io_), keepalive_(io_),
        reply_deadline_(io_) {}

  /// A call that survives a lost connection: reconnect, send the same request
  /// again (same id), and keep the host's liveness in check with PINGs.
  void set_resumable(duration keepalive) {
    resumable_ = true;
    keepalive_every_ = keepalive;
  }
  /// A request written now will reach the host after this connection's own
  /// request: it was greeted, or the request went out with HELLO (then the host
  /// may have counted it, and a LEAVE must follow it).
  bool connected() const { return connected_ && (greeted_ || pipelined_); }
  /// The request went out on some connection: the host may have counted it.
  bool request_sent() const { return sent_; }
  client::link_state link() const { return client::link_state{connected(), request_sent()}; }
  /// The time since the engine was made, for a call's progress.
  duration elapsed() const { return std::chrono::duration_cast<duration>(clock::now() - start_); }
  /// wait, decide, abort: the call's machine decides what replies, signals and
  /// lost connections mean, and what the call ends with; `apply` does what it asks.
  void drive(client::client_call* call, step_handler apply) {
    call_ = call;
    apply_ = std::move(apply);
  }

  /// Connects, sends HELLO and `request`, and feeds every reply to `handler`.
  outcome run(const std::string& request, reply_handler handler) {
    handler_ = std::move(handler);
    await_signal();
    asio::co_spawn(io_, main(request), asio::detached);
    io_.run();
    return result_.value_or(outcome::failed({error_kind::protocol, "internal error: the call ended without an outcome"}));
  }

  void write(std::string bytes) { write_sealed(conn_ ? conn_->seal(std::move(bytes)) : std::move(bytes)); }
  /// The connection's own end (unreachable, a protocol error, ...): a call
  /// says what it ends with; another request ends with the error.
  void fail(error e) {
    if (result_) return;
    if (call_) {
      auto step = call_->fail(e);
      if (step.result) return apply_(std::move(step));
    }
    finish(outcome::failed(std::move(e)));
  }
  void finish(outcome o) {
    if (result_) return;
    if (on_finish_) on_finish_();
    result_ = std::move(o);
    asio::error_code ec;
    socket_.close(ec);
    signals_.cancel();
    deadline_.cancel();
    progress_.cancel();
    keepalive_.cancel();
    reply_deadline_.cancel();
    if (keys_) keys_->cancel(ec);
  }
  bool done() const { return result_.has_value(); }
  asio::io_context& io() { return io_; }
  /// Called once when the call ends, before its timers are cancelled: a
  /// --decide-by command still running is stopped there.
  void on_finish(std::function<void()> f) { on_finish_ = std::move(f); }

  ~engine() {
    // The terminal's descriptor is the caller's: never closed here.
    if (keys_) {
      asio::error_code ec;
      keys_->cancel(ec);
      (void)keys_->release();
    }
  }
  /// status --watch: keys (one that quits ends the call with 0) and resizes.
  void watch_terminal(const watch_hooks& h) {
    if (h.resized) {
      resized_ = h.resized;
      signals_.add(SIGWINCH);
    }
    if (h.keys_fd >= 0 && h.quit_key) {
      quit_key_ = h.quit_key;
      asio::error_code ec;
      keys_.emplace(io_);
      keys_->assign(h.keys_fd, ec);
      if (ec) {
        keys_.reset();
        return;
      }
      read_keys();
    }
  }
  /// Waits d without connecting; nullopt after d, or the outcome of a signal
  /// or a quitting key that came first.
  std::optional<outcome> idle(duration d) {
    await_signal();
    progress_.expires_after(d);
    progress_.async_wait([this](asio::error_code ec) {
      if (ec || done()) return;
      signals_.cancel();
      asio::error_code ignored;
      if (keys_) keys_->cancel(ignored);
    });
    io_.run();
    return result_;
  }
  asio::steady_timer& progress_timer() { return progress_; }

 private:
  /// Queues bytes the connection has already sealed (or that need no seal).
  void write_sealed(std::string bytes) {
    out_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void read_keys() {
    keys_->async_read_some(asio::buffer(key_buf_), [this](asio::error_code ec, std::size_t n) {
      if (ec || done()) return;  // the terminal went (EOF): no more keys, the rest goes on
      for (std::size_t i = 0; i < n; ++i)
        if (quit_key_(key_buf_[i])) {
          finish(outcome{exit_code::ok, "", ""});
          return;
        }
      read_keys();
    });
  }

  void await_signal() {
    signals_.async_wait([this](asio::error_code ec, int sig) {
      if (ec || done()) return;
      if (sig == SIGWINCH) {
        if (resized_) resized_();
        await_signal();
        return;
      }
      bool term = sig == SIGTERM;
      if (!call_) {  // status, report: nothing to withdraw
        fail({term ? error_kind::interrupted_term : error_kind::interrupted_int,
              term ? "interrupted by SIGTERM" : "interrupted by SIGINT"});
        return;
      }
      apply_(call_->signal(term ? client::interrupt_signal::sigterm : client::interrupt_signal::sigint, link()));
      if (!done()) await_signal();
    });
  }

  void write_next() {
    writing_ = true;
    asio::async_write(socket_, asio::buffer(out_.front()), [this, gen = conn_gen_](asio::error_code ec, std::size_t) {
      if (gen != conn_gen_) return;  // a write of a connection that is gone: the queue is the new one's
      out_.pop_front();
      if (ec || out_.empty()) {
        writing_ = false;
        return;
      }
      write_next();
    });
  }

  awaitable<bool> connect() {
    // One budget from the start, or from the loss of a connection on which the
    // host had answered the request, until the host answers it (again): the
    // same deadline bounds the handshake and the request's first reply, so a
    // frozen host, or one that greets and then closes or falls silent time
    // after time, is "unreachable" within --connect-timeout, not for ever.
    if (acknowledged_) {
      acknowledged_ = false;
      budget_from_ = clock::now();
    }
    auto give_up_at = budget_from_ + o_.connect_timeout;
    deadline_.expires_at(give_up_at);
    deadline_.async_wait([this](asio::error_code ec) {
      if (ec) return;
      timed_out_connecting_ = true;
      asio::error_code ignored;
      socket_.close(ignored);
    });
    const std::string& host = o_.at.host;  // parsed once, where it was given (settings.cpp)
    std::string port = std::to_string(o_.at.port);
    tcp::resolver resolver(io_);
    std::uint32_t seed;
    auth::fill_random(&seed, sizeof seed);
    std::mt19937 rng(seed);
    client::backoff tries(50ms, 1s);
    bool first = true;
    std::string last_error = "no attempt";
    while (!done()) {
      asio::error_code ec;
      // A numeric address needs no name service: resolve it here, without the
      // thread that async_resolve starts (a clone and a join in every `wait`).
      auto results = resolver.resolve(host, port, tcp::resolver::numeric_host | tcp::resolver::numeric_service, ec);
      if (ec) {
        ec.clear();
        results = co_await resolver.async_resolve(host, port, asio::redirect_error(use_awaitable, ec));
      }
      if (!ec) {
        auto peer = co_await asio::async_connect(socket_, results, asio::redirect_error(use_awaitable, ec));
        if (!ec) {
          peer_loopback_ = is_loopback(peer.data());
          asio::error_code ignored;
          socket_.set_option(tcp::no_delay(true), ignored);
          co_return true;
        }
      } else {
        last_error = fmt::format("cannot resolve '{}': {}", host, ec.message());
      }
      if (ec && ec != asio::error::operation_aborted && !ec.message().empty() && results.size() > 0)
        last_error = ec.message();
      if (done()) co_return false;
      if (first && o_.on_first_failure) o_.on_first_failure();
      if (!first && o_.why_no_host) {
        if (std::string stop = o_.why_no_host(); !stop.empty()) {
          fail({error_kind::unreachable, stop});
          co_return false;
        }
      }
      first = false;
      auto left = std::chrono::duration_cast<duration>(give_up_at - clock::now());
      auto wait = tries.next(std::uniform_real_distribution<double>(0.5, 1.5)(rng), left);
      if (timed_out_connecting_ || !wait) {
        fail(unreachable(last_error));
        co_return false;
      }
      asio::steady_timer t(io_, *wait);
      co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    co_return false;
  }

  error unreachable(std::string why) {
    if (!busy_.empty())  // the host was there, but full: say so, and what would make room
      return {error_kind::unreachable,
                     fmt::format("{}the host at {} stayed busy for {} (ERR BUSY: {}{}): raise its limits (serve "
                                 "--max-connections, --max-per-address, ulimit -n), check its munged, or try later",
                                 lost_.empty() ? std::string() : lost_ + ", and then ", o_.addr,
                                 format_duration(o_.connect_timeout), busy_, why.empty() ? "" : "; then " + why)};
    return {error_kind::unreachable,
                   fmt::format("{}cannot reach the host at {} within {} ({}); is `tfbarrier serve` running there? "
                               "Check --addr, TFBARRIER_ADDR or TFBARRIER_HOST and TFBARRIER_PORT (`tfbarrier config` says which set it), "
                               "or raise --connect-timeout",
                               lost_.empty() ? std::string() : lost_ + ", and then ", o_.addr, format_duration(o_.connect_timeout), why)};
  }

  void ping_loop() {
    keepalive_.expires_after(keepalive_every_);
    keepalive_.async_wait([this](asio::error_code ec) {
      if (ec || done() || !connected_ || !conn_) return;
      auto silent = clock::now() - last_heard_;
      auto ping = conn_->keepalive(std::chrono::ceil<duration>(silent));  // ceil: "more than" stays exact
      if (!ping) {
        // The host stopped answering (frozen, or a dead link): treat as lost.
        silent_ = true;
        silent_for_ = std::chrono::duration_cast<duration>(silent);
        asio::error_code ignored;
        socket_.close(ignored);
        return;
      }
      write_sealed(std::move(*ping));
      ping_loop();
    });
  }

  awaitable<void> main(std::string request) {
    for (;;) {
      conn_end end = co_await session(request);
      if (done()) co_return;
      if (call_) {  // an interrupted call whose withdrawal was on its way ends here
        apply_(call_->lost());
        if (done()) co_return;
      }
      if (end.k == conn_end::kind::busy && !co_await back_off_busy(end.why)) co_return;
      bool lost = end.k == conn_end::kind::lost;
      if (!resumable_ && lost) {
        fail({error_kind::host_lost, end.why});
        co_return;
      }
      // Reconnect with backoff and send the same request again: the host knows our id.
      if (lost) {
        lost_ = end.why;
        if (!o_.quiet_reconnect) tfb::print(stderr, "tfbarrier: {}; reconnecting\n", printable(end.why));
      }
      socket_ = tcp::socket(io_);
      ++conn_gen_;
      out_.clear();
      writing_ = false;
      timed_out_connecting_ = false;
    }
  }

  /// The host said BUSY before greeting (full of connections, or of MUNGE
  /// calls): wait a while, with jitter so that a crowd does not come back at
  /// once, and connect again, within the connect budget. False once the call
  /// is over (the budget is spent, or it was interrupted).
  awaitable<bool> back_off_busy(const std::string& why) {
    if (busy_.empty() && !o_.quiet_reconnect)  // its words come before it proved who it is: shown, not obeyed
      tfb::print(stderr, "tfbarrier: the host at {} is busy ({}); trying again for up to {}\n", o_.addr, printable(why),
                 format_duration(o_.connect_timeout));
    busy_ = why;
    auto left = std::chrono::duration_cast<duration>(budget_from_ + o_.connect_timeout - clock::now());
    std::uint32_t seed;
    auth::fill_random(&seed, sizeof seed);
    std::mt19937 rng(seed);
    auto wait = busy_backoff_.next(std::uniform_real_distribution<double>(0.5, 1.5)(rng), left);
    if (!wait) {
      fail(unreachable(""));
      co_return false;
    }
    asio::steady_timer t(io_, *wait);
    asio::error_code ec;
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    co_return !done();
  }

  /// One connection: how it ended (over when the call finished).
  awaitable<conn_end> session(const std::string& request) {
    if (!co_await connect()) co_return conn_end{};
    // Without a secret, nothing proves who the host is: on this machine it
    // must be our own user's (or root's), since anyone may bind a port first.
    // The kernel says whose it is before a byte goes out, so a stranger's
    // host learns not even the barrier's name.
    if (peer_loopback_ && !o_.secret) {
      bool not_yet = false;
      if (auto refused = stranger_host(not_yet)) {
        // A host that has not accepted yet (busy, or catching up with its
        // store), or that went since connect (a restart), is asked again
        // after a back-off, within --connect-timeout: nothing was sent.
        if (not_yet) co_return conn_end{conn_end::kind::busy, std::move(*refused)};
        fail({error_kind::auth, std::move(*refused)});
        co_return conn_end{};
      }
    }
    connected_ = true;
    greeted_ = false;
    silent_ = false;
    last_heard_ = clock::now();
    // Without a secret the request rides with HELLO; with one it waits for the host's proof.
    // Beyond loopback a host authenticates (MUNGE or a secret), so there is nothing to gain.
    // Nor when the host must be shown to be of the store given, before the request goes.
    pipelined_ = peer_loopback_ && !o_.secret && !no_pipeline_ && o_.store.empty();
    sent_ = sent_ || pipelined_;
    client::conn_config cfg{o_.addr, o_.client_host, o_.pid, resumable_ ? keepalive_every_ : duration(0),
                            o_.secret ? &*o_.secret : nullptr, pipelined_, !peer_loopback_ && !o_.insecure,
                            o_.store};
    conn_.emplace(cfg, env_, request);
    reply_deadline_.cancel();  // a reply of the last connection is not awaited any more
    reply_begun_ = false;
    write_sealed(conn_->start(auth::make_nonce()));
    conn_end end = co_await read_replies();
    connected_ = false;
    greeted_ = false;
    keepalive_.cancel();
    co_return end;
  }

  /// Why the host at the other end of this loopback connection is not to be
  /// trusted without a secret, or nullopt when it runs as us (or root).
  std::optional<std::string> stranger_host(bool& not_yet) {
    std::string why;
    auto uid = peer_owner(socket_.native_handle(), why, &not_yet);
    if (!uid && not_yet) return why;
    if (!uid)
      return fmt::format("cannot tell which user runs the host at {}: {}; give both sides a shared secret "
                         "(tfbarrier secret, then --secret-file)",
                         o_.addr, why);
    if (*uid == ::getuid() || *uid == 0) return std::nullopt;
    std::string name = fmt::format("uid {}", *uid);
    passwd pw{};
    passwd* found = nullptr;
    char buf[4096];
    if (::getpwuid_r(*uid, &pw, buf, sizeof buf, &found) == 0 && found) name += fmt::format(" ({})", pw.pw_name);
    return fmt::format("the host at {} is run by {}, not by you: another user's host could forge the verdict. "
                       "Use a port of your own (TFBARRIER_PORT or --addr), or a shared secret on both sides "
                       "(tfbarrier secret, then --secret-file)",
                       o_.addr, name);
  }

  /// Acts on what the connection made of one line; true when the connection is over.
  bool act(client::conn_output& out, conn_end& end) {
    if (!out.bytes.empty()) write_sealed(std::move(out.bytes));
    switch (out.event) {
      case client::conn_event::none: return false;
      case client::conn_event::greeted:
        greeted_ = true;
        sent_ = true;
        // Keep-alives start once the host has answered: before that the connect deadline rules.
        if (resumable_) ping_loop();
        return false;
      case client::conn_event::reply:
        if (!acknowledged_) {
          // The host has answered the request: the connect budget is spent no more.
          acknowledged_ = true;
          deadline_.cancel();
        }
        if (call_) {
          apply_(call_->reply(*out.reply, link(), elapsed()));
          return done();
        }
        if (auto o = handler_(*out.reply)) {
          finish(std::move(*o));
          return true;
        }
        return false;
      case client::conn_event::failed: fail(std::move(out.failure)); return true;
      case client::conn_event::retry_with_secret:
        no_pipeline_ = true;
        if (out.wants_secret && !o_.secret && !o_.secret_path.empty()) {
          std::string ignored;
          o_.secret = auth::load_secret(o_.secret_path, ignored);
        }
        end.k = conn_end::kind::retry_with_secret;
        return true;
      case client::conn_event::busy:
        end.k = conn_end::kind::busy;
        end.why = std::move(out.failure.text);
        return true;
    }
    return false;
  }

  awaitable<conn_end> read_replies() {
    char buf[4096];
    proto::line_splitter splitter;
    conn_end end;
    try {
      while (!done()) {
        std::size_t n = co_await socket_.async_read_some(asio::buffer(buf), use_awaitable);
        last_heard_ = clock::now();
        splitter.feed(std::string_view(buf, n));
        while (!done()) {
          auto l = splitter.next();
          if (!l) break;
          auto out = conn_->feed(std::move(*l));
          if (act(out, end)) co_return end;
        }
        if (!done()) bound_reply_time();
        if (splitter.overflow()) {
          fail({error_kind::protocol, fmt::format("the host at {} sent an over-long line", o_.addr)});
          co_return end;
        }
      }
    } catch (const std::system_error& e) {
      if (!done()) end = lost(e.code());
    }
    co_return end;
  }

  /// A multi-line reply (STATUS, HISTORY) that has begun must end within
  /// --connect-timeout of its first line: a host that trickles one for ever
  /// holds no call for ever (its size is bounded too: proto::max_reply_bytes).
  void bound_reply_time() {
    std::string_view kind = conn_->partial_reply();
    if (kind.empty() || reply_begun_) {
      if (kind.empty() && reply_begun_) {
        reply_begun_ = false;
        reply_deadline_.cancel();
      }
      return;
    }
    reply_begun_ = true;
    if (!acknowledged_) {  // the host has begun to answer: from here on this deadline rules
      acknowledged_ = true;
      deadline_.cancel();
    }
    reply_deadline_.expires_after(o_.connect_timeout);
    reply_deadline_.async_wait([this, gen = conn_gen_, kind = std::string(kind)](asio::error_code ec) {
      if (ec || done() || gen != conn_gen_) return;
      fail({error_kind::protocol,
                     fmt::format("the host at {} began a {} reply and did not end it within {} (--connect-timeout): "
                                 "it is not a tfbarrier host, or a faulty one",
                                 o_.addr, kind, format_duration(o_.connect_timeout))});
    });
  }

  /// Why a connection was lost, or the call's end when the connect budget is spent.
  conn_end lost(const std::error_code& ec) {
    if (timed_out_connecting_) {
      fail(unreachable(conn_->greeted() ? "the host greeted, but did not answer the request: is it overloaded?"
                                          : "connected, but the host did not answer: is it stopped or overloaded?"));
      return conn_end{};
    }
    conn_end end{conn_end::kind::lost, {}};
    if (silent_)
      end.why = fmt::format("the host at {} stopped answering (no reply for {})", o_.addr, format_duration(silent_for_));
    else if (ec == asio::error::eof || ec == asio::error::connection_reset)
      end.why = fmt::format("lost the connection to the host at {}: it closed the connection", o_.addr);
    else
      end.why = fmt::format("lost the connection to the host at {}: {}", o_.addr, ec.message());
    return end;
  }
  connect_options o_;
  asio::io_context io_{1};
  tcp::socket socket_;
  asio::signal_set signals_;
  asio::steady_timer deadline_, progress_, keepalive_;
  asio::steady_timer reply_deadline_;  ///< for the end of a multi-line reply that has begun
  std::optional<asio::posix::stream_descriptor> keys_;  ///< status --watch: the terminal's keys
  std::array<char, 64> key_buf_{};
  std::function<bool(char)> quit_key_;
  std::function<void()> resized_;
  bool reply_begun_ = false;
  reply_handler handler_;
  system_env env_;
  std::optional<client::client_conn> conn_;  ///< the current (or last) connection's state
  bool resumable_ = false;
  bool pipelined_ = false, no_pipeline_ = false;
  bool peer_loopback_ = false;
  std::string busy_;  // the host's words when it last answered BUSY ("": never)
  client::backoff busy_backoff_{std::chrono::milliseconds(100), std::chrono::seconds(1)};  // the address connected to is this machine's (address.h)
  std::uint64_t conn_gen_ = 0;  ///< which connection the write queue belongs to
  std::string lost_;            ///< why the last connection was lost, for the final message
  bool connected_ = false;
  bool greeted_ = false;  // this connection's HELLO was answered
  bool sent_ = false;     // the request went out, on this connection or an earlier one
  duration silent_for_{0};  // how long the host had been silent when we gave up on it
  bool silent_ = false;
  duration keepalive_every_ = std::chrono::seconds(5);
  clock::time_point last_heard_ = clock::now();
  std::optional<outcome> result_;
  std::deque<std::string> out_;
  bool writing_ = false;
  bool timed_out_connecting_ = false;
  bool acknowledged_ = false;                  // the host answered the request on this connection
  clock::time_point budget_from_ = clock::now();  // when the --connect-timeout budget started
  std::function<void()> on_finish_;
  client::client_call* call_ = nullptr;  ///< wait, decide, abort: the call's machine (call_driver's)
  step_handler apply_;
  clock::time_point start_ = clock::now();
};

/// The chief's --decide-by command on the call's io_context: its stdout read
/// as it comes, its end seen through SIGCHLD. done(status) is called once,
/// when it ends; stop() kills its process group if it still runs.
class decider {
 public:
  explicit decider(engine& e) : e_(e) {}
  decider(const decider&) = delete;
  decider& operator=(const decider&) = delete;
  ~decider() { stop(); }

  bool started() const { return started_; }
  const decide_cmd::last_line& output() const { return line_; }

  bool start(const std::string& cmd, std::function<void(int)> done, std::string& error) {
    started_ = true;
    done_ = std::move(done);
    sigchld_.emplace(e_.io(), SIGCHLD);  // before the fork: its end is never missed
    child_ = decide_cmd::spawn(cmd, error);
    if (!child_) {
      sigchld_.reset();
      return false;
    }
    running_ = true;
    pipe_.emplace(e_.io(), child_->out_fd);
    read_more();
    await_end();
    return true;
  }

  /// Kills the command's process group if it still runs, and stops watching it.
  void stop() {
    if (running_) {
      decide_cmd::kill_group(*child_);
      int status = 0;
      decide_cmd::reap(child_->pid, status, true);
      running_ = false;
    }
    close();
  }

 private:
  void close() {
    asio::error_code ec;
    if (pipe_) pipe_->close(ec);
    if (sigchld_) sigchld_->cancel(ec);
  }
  void read_more() {
    pipe_->async_read_some(asio::buffer(buf_), [this](asio::error_code ec, std::size_t n) {
      if (ec) return;  // its end, or closed: what counts is the process's end
      line_.feed(std::string_view(buf_, n));
      read_more();
    });
  }
  void await_end() {
    sigchld_->async_wait([this](asio::error_code ec, int) {
      if (ec || !running_) return;
      int status = 0;
      pid_t r = decide_cmd::reap(child_->pid, status, false);
      if (r != child_->pid) {
        await_end();
        return;
      }
      running_ = false;
      // What it wrote last may still be in the pipe (a background process of
      // its own may hold the pipe open for ever): take what is there now.
      asio::error_code rec;
      pipe_->non_blocking(true, rec);
      for (;;) {
        std::size_t n = pipe_->read_some(asio::buffer(buf_), rec);
        if (rec || n == 0) break;
        line_.feed(std::string_view(buf_, n));
      }
      close();
      done_(status);
    });
  }

  engine& e_;
  std::optional<decide_cmd::child> child_;
  std::optional<asio::posix::stream_descriptor> pipe_;
  std::optional<asio::signal_set> sigchld_;
  decide_cmd::last_line line_;
  std::function<void(int)> done_;
  bool started_ = false, running_ = false;
  char buf_[4096];
};

/// The most `report` holds of a host's history, all pages together (as
/// proto::reply_reader::cost counts): 512 MiB, some 20 times a history of
/// the default 1,000,000 arrivals (serve --history; an arrival is about 20
/// bytes of an ARR line).
constexpr std::size_t max_history_bytes = 8 * proto::max_reply_bytes;

/// Drives a client::client_call (wait, decide, abort) on an engine: its
/// timers on the call's io_context, its replies, signals and lost
/// connections in, what it asks done. What the call means is the machine's.
class call_driver {
 public:
  call_driver(engine& e, client::call_config c, const wait_options* wo)
      : e_(e), call_(std::move(c)), wo_(wo),
        timers_{asio::steady_timer(e.io()), asio::steady_timer(e.io()), asio::steady_timer(e.io()),
                asio::steady_timer(e.io())} {}
  call_driver(const call_driver&) = delete;
  call_driver& operator=(const call_driver&) = delete;

  /// Called once when the call ends, before its timers are cancelled.
  void on_finish(std::function<void()> f) { on_finish_ = std::move(f); }
  /// wait --decide-by: run the chief's command (once).
  void on_decide_by(std::function<void(const proto::all_here&)> f) { decide_by_ = std::move(f); }

  outcome run(const std::string& request) {
    e_.on_finish([this] {
      if (on_finish_) on_finish_();
      for (auto& t : timers_) t.cancel();
    });
    e_.drive(&call_, [this](client::call_step s) { apply(std::move(s)); });
    apply(call_.start());
    return e_.run(request, nullptr);
  }

  void apply(client::call_step s) {
    if (!s.send.empty()) e_.write(std::move(s.send));
    for (auto [t, after] : s.arm) arm(t, after);
    if (s.report && wo_ && wo_->on_progress) wo_->on_progress(*s.report);
    if (s.note && wo_ && wo_->on_note) wo_->on_note(*s.note);
    if (s.run_decide_by && decide_by_) decide_by_(*s.run_decide_by);
    if (s.result) {
      outcome o;
      o.result = std::move(s.result);
      e_.finish(std::move(o));
    }
  }
  client::client_call& call() { return call_; }

 private:
  void arm(client::call_timer which, duration after) {
    auto& t = timers_[static_cast<std::size_t>(which)];
    t.expires_after(after);
    t.async_wait([this, which](asio::error_code ec) {
      if (ec || e_.done()) return;
      apply(call_.timer(which, e_.link(), e_.elapsed()));
    });
  }

  engine& e_;
  client::client_call call_;
  const wait_options* wo_;
  std::array<asio::steady_timer, client::call_timers> timers_;
  std::function<void()> on_finish_;
  std::function<void(const proto::all_here&)> decide_by_;
};
// SIGINT, SIGTERM and SIGWINCH held blocked while closed; on destruction
// the ones that came meanwhile are taken (they were meant for the call that
// ended) and the mask is as before.
class signal_gate {
 public:
  signal_gate() {
    no_import::sig_empty(set_);
    for (int s : {SIGINT, SIGTERM, SIGWINCH}) no_import::sig_add(set_, s);
    pthread_sigmask(SIG_BLOCK, &set_, &before_);
  }
  ~signal_gate() {
    sigset_t pending;
    no_import::sig_pending(pending);
    for (int s : {SIGINT, SIGTERM, SIGWINCH})
      if (no_import::sig_has(pending, s) && !no_import::sig_has(before_, s)) {
        sigset_t one;
        no_import::sig_empty(one);
        no_import::sig_add(one, s);
        no_import::sig_take(one);
      }
    pthread_sigmask(SIG_SETMASK, &before_, nullptr);
  }
  signal_gate(const signal_gate&) = delete;
  signal_gate& operator=(const signal_gate&) = delete;
  void open() { pthread_sigmask(SIG_UNBLOCK, &set_, nullptr); }
  void close() { pthread_sigmask(SIG_BLOCK, &set_, nullptr); }

 private:
  sigset_t set_, before_;
};

class tcp_coordinator final : public coordinator {
 public:
  explicit tcp_coordinator(connect_options o) : o_(std::move(o)) {}

  /// What every call of the machine starts from: its kind, the host, the barrier.
  client::call_config config(client::call_kind k, const std::string& scope, const std::string& name) const {
    client::call_config c;
    c.k = k;
    c.addr = o_.addr;
    c.scope = scope;
    c.name = name;
    return c;
  }

  outcome wait(const proto::arrive& a, const wait_options& wo) override {
    engine e(o_);
    e.set_resumable(o_.keepalive);
    client::call_config c = config(client::call_kind::wait, a.scope, a.name);
    c.timeout = wo.timeout;
    if (wo.on_progress) c.progress_every = wo.progress_every;
    c.decide_by = a.decide;
    call_driver d(e, std::move(c), &wo);
    std::optional<decider> cmd;  // the chief of --decide-by
    if (a.decide) {
      cmd.emplace(e);
      d.on_finish([&cmd] { cmd->stop(); });
      d.on_decide_by([&](const proto::all_here& ah) { run_decide_by(a, wo, ah, *cmd, d); });
    }
    return d.run(proto::format_request(a));
  }

  /// The chief's --decide-by command, once all are here: its exit status
  /// makes the DECIDE (or the ABORT) that the call sends.
  void run_decide_by(const proto::arrive& a, const wait_options& wo, const proto::all_here& ah, decider& cmd,
                     call_driver& d) {
    std::string who = a.rank ? fmt::format("rank {} on {}", *a.rank, o_.client_host)
                             : fmt::format("{} pid {}", o_.client_host, o_.pid);
    std::string error;
    bool ok = cmd.start(
        wo.decide_by,
        [&a, &cmd, &d, who, ah](int status) {
          std::string why;
          if (auto v = decide_cmd::verdict_of(status, why)) {
            proto::decide dd;
            dd.name = ah.name;
            dd.scope = a.scope;
            dd.id = a.id;
            dd.v = *v;
            dd.message = cmd.output().message();
            d.apply(d.call().verdict_ready(proto::format_request(dd)));
          } else {
            d.apply(d.call().verdict_ready(proto::format_request(proto::abort_req{
                a.scope, a.name, printable(fmt::format("the chief's --decide-by command ({}) {}", who, why))})));
          }
        },
        error);
    if (!ok)
      d.apply(d.call().verdict_ready(proto::format_request(proto::abort_req{
          a.scope, a.name,
          printable(fmt::format("the chief ({}) could not run its --decide-by command: {}", who, error))})));
  }

  outcome decide(const proto::decide& dr, const wait_options& wo) override {
    engine e(o_);
    e.set_resumable(o_.keepalive);
    client::call_config c = config(client::call_kind::decide, dr.scope, dr.name);
    c.timeout = wo.timeout;
    c.v = dr.v;
    c.wait = dr.wait;
    c.note = static_cast<bool>(wo.on_note);
    call_driver d(e, std::move(c), &wo);
    return d.run(proto::format_request(dr));
  }

  outcome abort(const proto::abort_req& a) override {
    engine e(o_);
    call_driver d(e, config(client::call_kind::abort, a.scope, a.name), nullptr);
    return d.run(proto::format_request(a));
  }
  outcome status(const proto::status_req& s) override {
    engine e(o_);
    return e.run(proto::format_request(s), [&](const proto::reply& r) -> std::optional<outcome> {
      if (auto* st = std::get_if<proto::status_reply>(&r)) {
        outcome o;
        o.status = *st;
        return o;
      }
      return std::nullopt;
    });
  }

  outcome watch(const proto::status_req& s, duration every, const watch_hooks& h) override {
    std::string request = proto::format_request(s);
    // Between one connection's engine and the next, a signal waits (blocked)
    // for the next one's handler rather than meet the default action, which
    // would leave the terminal in the alternate screen.
    signal_gate gate;
    bool seen = false;  // the host answered once: a loss from now on is tried again
    unsigned failed = 0;
    auto next_try = std::chrono::milliseconds(500);
    for (;;) {
      connect_options o = o_;
      if (seen) {
        o.quiet_reconnect = true;  // the view says it, not stderr under it
        o.connect_timeout = std::min<duration>(o.connect_timeout, std::chrono::seconds(2));  // one try
      }
      outcome out;
      {
        engine e(o);
        e.watch_terminal(h);
        gate.open();
        out = e.run(request, [&](const proto::reply& r) -> std::optional<outcome> {
          auto* st = std::get_if<proto::status_reply>(&r);
          if (!st) return std::nullopt;
          seen = true;
          failed = 0;
          next_try = std::chrono::milliseconds(500);
          h.reply(*st);
          e.progress_timer().expires_after(every);
          e.progress_timer().async_wait([&e, &request](asio::error_code ec) {
            if (!ec && !e.done()) e.write(request);
          });
          return std::nullopt;
        });
        gate.close();
      }
      bool lost = out.cause == error_kind::unreachable || out.cause == error_kind::host_lost;
      if (!lost || !h.reconnect || !seen) return out;
      if (h.lost) h.lost(out.err, failed++, next_try);
      engine pause(o);
      pause.watch_terminal(h);
      gate.open();
      auto ended = pause.idle(next_try);
      gate.close();
      if (ended) return *ended;
      next_try = std::min<std::chrono::milliseconds>(next_try * 2, std::chrono::seconds(5));
    }
  }

  // HISTORY in pages of about 256 KiB: one connection each, until the host
  // says there is no next page. Each page is bounded (proto::max_reply_bytes),
  // and so is the whole: a host that sends page after page for ever, or
  // empty pages that say there is more, gets exit 70.
  outcome history(const proto::history_req& h) override {
    proto::history_req req = h;
    std::vector<std::string> lines;
    std::size_t held = 0;
    for (;;) {
      engine e(o_);
      std::optional<std::uint64_t> next;
      bool empty = false;
      outcome got = e.run(proto::format_request(req), [&](const proto::reply& r) -> std::optional<outcome> {
        if (auto* p = std::get_if<proto::history_page>(&r)) {
          for (const auto& l : p->lines) held += proto::reply_reader::cost(l);
          lines.insert(lines.end(), p->lines.begin(), p->lines.end());
          next = p->next;
          empty = p->lines.empty();
          return outcome{};
        }
        return std::nullopt;
      });
      if (got.cause) return got;
      if (next && (empty || held > max_history_bytes))
        return outcome::failed({error_kind::protocol,
                       empty ? fmt::format("the host at {} sent an empty page of its history that says there is "
                                           "more: it is not a tfbarrier host, or a faulty one",
                                           o_.addr)
                             : fmt::format("the host at {} sent a history over {} MiB, and said there was more: "
                                           "read its history file instead (report --file), or ask for less "
                                           "(--last, --name)",
                                           o_.addr, max_history_bytes >> 20)});
      if (!next || *next <= req.from) break;
      req.from = *next;
      req.last = 0;  // the rounds from `next` on: the caller keeps the last K again
    }
    outcome o;
    o.history = std::move(lines);
    return o;
  }

 private:
  connect_options o_;
};

}  // namespace

std::unique_ptr<coordinator> make_tcp_coordinator(connect_options o) {
  return std::make_unique<tcp_coordinator>(std::move(o));
}

}  // namespace tfb
