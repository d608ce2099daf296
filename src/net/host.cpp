// The host's network layer: the acceptor, the sockets, the timers and the
// writes. One io_context, one thread; only MUNGE calls, which block in
// libmunge, run on threads of their own (munge_pool), and their results come
// back to that thread. The accept, prune and idle loops are
// coroutines; a connection is not: it is a session object, kept alive by the
// one handler it has pending (a wait for its socket to become readable, or
// writable when the kernel did not take a reply whole, or its timer), so a
// waiting participant costs that handler and the session, no coroutine frame
// and no buffer (docs/performance.md). What a line means for the connection
// (HELLO, the handshakes, sealing, keep-alives) is host_conn's (host_conn.h);
// the requests it lets through reach the barriers through the door (door.h),
// which journals what must survive a crash before the replies go out.
#include "host.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <asio.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "address.h"
#include "auth.h"
#include "secret_files.h"
#include "barrier.h"
#include "door.h"
#include "events_out.h"
#include "history_file.h"
#include "host_conn.h"
#include "munge_auth.h"
#include "exit_codes.h"
#include "peer_owner.h"
#include "journal.h"
#include "metrics.h"
#include "process_stats.h"
#include "private_files.h"
#include "follower.h"
#include "replica.h"
#include "store_link.h"
#include "text.h"
#include "version.h"

namespace tfb {

using asio::awaitable;
using asio::ip::tcp;
using asio::use_awaitable;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t max_outbox_bytes = 1 << 20;  // a client that leaves this much unread is dropped at its next reply
constexpr std::size_t max_held_bytes = 64 << 10;    // a write_batch holds no more than this for one connection
constexpr std::size_t max_client_text = 200;        // bytes of a bad client's quoted text that reach the log

/// A socket's end as an address (address.h): the one place that turns an
/// Asio endpoint into text's form, brackets and all (format_host).
address address_of(const tcp::endpoint& ep) { return address{ep.address().to_string(), ep.port()}; }

// The real world for host_conn: the kernel's random nonces, getuid().
class system_services final : public host_services {
 public:
  std::string nonce() override { return auth::make_nonce(); }
  uid_t uid() override { return ::getuid(); }
};

constexpr std::size_t munge_threads = 4;        // MUNGE calls in flight at once
constexpr std::size_t munge_queue_limit = 256;  // calls waiting for a thread; past it, ERR BUSY

// MUNGE calls, off the event loop. libmunge asks munged over a Unix socket
// and blocks until it answers: one slow or stopped munged, or a flood of
// HELLOs, would otherwise stall every client of the host. A few threads
// (made when the first call comes: a host without MUNGE has none) take the
// calls from a bounded queue and post each result back to the io_context's
// thread, where all connection state lives; a worker touches only its job.
// The 5 s limit per call is the session's timer (session::start_munge).
class munge_pool {
 public:
  struct job {
    munge_call call;
    std::atomic<bool> abandoned{false};      // timed out or its connection closed: skipped, its result dropped
    std::function<void(munge_result)> done;  // called on the io_context's thread, unless abandoned
  };

  explicit munge_pool(asio::io_context& io) : st_(std::make_shared<state>()) { st_->io = &io; }
  munge_pool(const munge_pool&) = delete;
  munge_pool& operator=(const munge_pool&) = delete;
  ~munge_pool() {
    {
      std::lock_guard lk(st_->m);
      st_->closed = true;
      st_->queue.clear();
    }
    st_->cv.notify_all();
    // A worker inside a call to a stopped munged cannot be joined: it ends
    // with the process, and once closed it posts nothing to the io_context.
    for (auto& t : threads_) t.detach();
  }
  /// Queues a call; false when munge_queue_limit calls wait already.
  bool submit(std::shared_ptr<job> j) {
    std::lock_guard lk(st_->m);
    if (st_->queue.size() >= munge_queue_limit) return false;
    st_->queue.push_back(std::move(j));
    if (st_->idle == 0 && threads_.size() < munge_threads) {
      // Made with every signal blocked: SIGINT and SIGTERM are the event loop's.
      sigset_t all, old;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, &old);
      threads_.emplace_back(work, st_);
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
    } else {
      st_->cv.notify_one();
    }
    return true;
  }

 private:
  struct state {
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::shared_ptr<job>> queue;
    std::size_t idle = 0;
    bool closed = false;
    asio::io_context* io = nullptr;
  };
  static munge_result run(const munge_call& c) {
    munge_result r;
    if (c.kind == munge_call::op::encode)
      r.cred = munge_auth::encode(c.data, ::getuid(), r.error);
    else
      r.decoded = munge_auth::decode(c.data, r.error);
    return r;
  }
  static void work(std::shared_ptr<state> st) {
    std::unique_lock lk(st->m);
    for (;;) {
      while (!st->closed && st->queue.empty()) {
        ++st->idle;
        st->cv.wait(lk);
        --st->idle;
      }
      if (st->closed) return;
      std::shared_ptr<job> j = std::move(st->queue.front());
      st->queue.pop_front();
      if (j->abandoned.load()) continue;
      lk.unlock();
      munge_result r = run(j->call);
      lk.lock();
      if (st->closed) return;
      asio::post(*st->io, [j = std::move(j), r = std::move(r)]() mutable {
        if (!j->abandoned.load()) j->done(std::move(r));
      });
    }
  }
  std::shared_ptr<state> st_;
  std::vector<std::thread> threads_;
};

class server;

// ---- Metrics (issue 21 item 4; docs/monitoring.md) ----
// GET /metrics on --metrics HOST:PORT, and --metrics-textfile, from this
// io_context. What a request means and the text are metrics.h's (pure); here
// are the sockets: at most max_http connections at once, each closed after
// one answer, or when it has not sent its request within request_deadline, or
// after http_deadline, whatever it sends (or does not). When full, a newcomer
// takes the place of the oldest that has not sent its request: idle
// connections cannot keep a scraper out.
class metrics_endpoint {
 public:
  metrics_endpoint(asio::io_context& io, const host_options& o) : io_(io), opts_(o), acceptor_(io), textfile_timer_(io) {}
  metrics::counters counters;
  /// The exposition, made at the moment it is asked for, with these labels on every series.
  std::function<std::string(std::string_view labels)> text;
  /// The textfile's labels (`host="ADDR"`): two hosts' textfiles on one node
  /// must not export the same series, or node_exporter drops them.
  std::string textfile_labels;

  bool open(std::string& error, std::function<void(std::string_view)> log);
  void start();
  void stop();
  const std::string& address() const { return address_; }

 private:
  static constexpr std::size_t max_http = 32;
  static constexpr auto request_deadline = std::chrono::seconds(2);
  static constexpr auto http_deadline = std::chrono::seconds(5);
  static constexpr auto textfile_every = std::chrono::seconds(5);
  struct http_conn {
    explicit http_conn(asio::io_context& io) : socket(io), timer(io) {}
    tcp::socket socket;
    asio::steady_timer timer;
    std::chrono::steady_clock::time_point accepted = std::chrono::steady_clock::now();
    bool requested = false;  ///< its whole request is in: it is being answered
  };
  bool make_room();
  static void close_at_deadline(const std::shared_ptr<http_conn>& c, std::chrono::steady_clock::duration after);
  awaitable<void> accept_loop();
  awaitable<void> answer(std::shared_ptr<http_conn> c);
  awaitable<void> textfile_loop();
  void write_textfile();

  asio::io_context& io_;
  const host_options& opts_;
  tcp::acceptor acceptor_;
  asio::steady_timer textfile_timer_;
  std::string address_;
  std::unordered_set<std::shared_ptr<http_conn>> conns_;
  std::optional<files::fd> textfile_dir_;
  std::string textfile_dir_path_, textfile_name_;
  std::function<void(std::string_view)> log_;
  bool stopped_ = false;
  bool textfile_failing_ = false;
};
// ---- end of metrics ----

class session : public std::enable_shared_from_this<session> {
 public:
  session(server& srv, tcp::socket s, conn_id id, std::string peer_addr, std::string remote)
      : srv_(srv), socket_(std::move(s)), id_(id),
        handshake_timer_(socket_.get_executor()), remote_(std::move(remote)), peer_addr_(std::move(peer_addr)) {}
  void start();
  /// Sends replies to this connection (sealed when it is authenticated).
  /// The barriers refused this connection's request (an ERR came back): it may try another.
  void refused() { conn_.refused(); }
  void send(std::string bytes, bool close_after) {
    if (stopped_ || close_after_flush_) return;
    if (conn_.hello_done() && !conn_.authenticated()) {
      // Mid-handshake (AUTH not read yet), the client may hold the session
      // key already, and would take an unsealed line for a forgery (exit
      // 77: the fault harness saw it when a host that lost etcd closed its
      // connections). Nothing was asked here yet: close without a word.
      if (close_after) stop();
      return;
    }
    write(conn_.seal(std::move(bytes)), close_after);
  }
  /// The same line to many sessions (a release): an unsealed session with
  /// nothing waiting before it writes it at once, without a copy of its own.
  void send_shared(const std::string& line);
  void flush();
  void flush_held() {  // the end of a write_batch that held this session's replies
    held_ = false;
    flush();
  }
  /// Closes the connection and tells the barriers it went. peer_closed: the
  /// participant closed first (its FIN read, nothing left unread), so close()
  /// alone sends ours; otherwise shutdown() first, so that it gets a FIN.
  void stop(bool peer_closed = false);
  /// Closes a connection that has not authenticated, to make room: ERR BUSY
  /// if the kernel takes it at once (nothing waits for a slow reader).
  void evict(const std::string& text) {
    if (stopped_) return;
    std::string msg = proto::format_reply(proto::error_reply{proto::error_kind::busy, text});
    asio::error_code ec;
    socket_.write_some(asio::buffer(msg), ec);  // non-blocking since start()
    stop();
  }
  conn_id id() const { return id_; }
  const std::string& remote() const { return remote_; }
  /// Not the host's own uid, on a host that serves only its own (host_conn::stranger).
  void stranger() { conn_.stranger(); }
  const std::string& peer_addr() const { return peer_addr_; }

 private:
  void write(std::string wire_bytes, bool close_after);
  /// Writes what the socket takes now, with nothing waiting before it; the
  /// rest waits in the outbox for the socket (flush).
  void write_now(std::string_view bytes);
  void watch_liveness();
  void read_more();
  void on_readable(asio::error_code ec);
  void take_lines();
  void follow(host_step& s);
  void dispatch(proto::request& req);
  void start_munge(munge_call call);
  void munge_finished(const munge_pool::job* j, munge_result r);

  server& srv_;
  tcp::socket socket_;
  conn_id id_;
  asio::steady_timer handshake_timer_;  // the handshake deadline, then the keep-alive checks
  std::string outbox_;         // bytes not yet taken by the kernel (almost always empty, and then freed)
  bool writing_ = false;       // waiting for the socket to take more
  bool held_ = false;          // in the server's list of writes held back (write_batch)
  bool close_after_flush_ = false;
  bool stopped_ = false;
  bool authenticated_ = false;  // told the server (server::authenticated)
  host_conn conn_;             // the protocol's state of this connection
  // A MUNGE call this connection waits for, and its deadline; only while it does.
  struct munge_wait {
    std::shared_ptr<munge_pool::job> job;
    asio::steady_timer timer;
  };
  std::unique_ptr<munge_wait> munge_;
  std::string remote_;
  std::string peer_addr_;
  std::chrono::steady_clock::time_point last_heard_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_check_ = std::chrono::steady_clock::now();
};

class server {
 public:
  server(asio::io_context& io, const host_options& o)
      : io_(io), opts_(o), metrics_(io, opts_),
        observe_(metrics_.counters, o.quiet, [this](std::string_view t) { log(t); }), acceptor_(io),
        signals_(io, SIGINT, SIGTERM), prune_timer_(io), idle_timer_(io), shutdown_timer_(io),
        start_(std::chrono::steady_clock::now()) {
    conn_config_.secret = o.secret;
    conn_config_.munge = o.munge;
    conn_config_.owner_only = !o.secret && !o.munge && !o.insecure;
    conn_config_.server = fmt::format("tfbarrier/{}", tfb::version);
    conn_config_.services = &services_;
    // Nothing active within a participant's default --connect-timeout is
    // forgotten to make room: one reconnecting would meet a fresh round 1.
    state_.limit(o.max_barriers, std::chrono::milliseconds(std::chrono::seconds(60)).count());
    metrics_.text = [this](std::string_view labels) { return metrics_text(labels); };
  }

  /// Binds the address: false when another participant's host won the race
  /// for it (this one leaves, with success).
  tfb::result<bool> listen();
  /// On a host that serves its own uid only: whether the other end of the
  /// accepted connection fd is that uid, as the kernel says. A stranger, or
  /// an end the kernel cannot name, is logged (at most once a second).
  bool owner_is_me(int fd, const tcp::endpoint& peer, const std::string& remote);
  std::optional<tfb::error> open_journal();
  std::optional<tfb::error> open_metrics() {  // issue 21
    std::string error;
    if (!metrics_.open(error, [this](std::string_view t) { log(t); })) return tfb::error{error_kind::cannot_listen, error};
    return std::nullopt;
  }
  void run_loops();

  millis now() const {
    // With a store, the time goes into the shared log and is compared with
    // other hosts' times: the wall clock (it only feeds what is displayed).
    if (link_)
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch()).count();
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
    // Every line escaped (text.h, one line an entry): some quote what a client sent.
    tfb::print(opts_.log, "{}.{:03d} tfbarrier[{}]: {}\n", buf, static_cast<int>(ms), getpid(), printable(text));
    std::fflush(opts_.log);
  }
  /// One event of the host's own (a client's), to the log and the counters.
  void observe(const ev::event& e) { observe_(e); }
  /// Passes one input through the door to the barriers, and logs what it
  /// did; out then holds the replies, for send_all().
  void submit(const door_input& in, output& out) {
    std::string error;
    bool recorded = door_->submit(in, out, error);
    observe_.events(out.events);
    if (!out.rounds.empty()) note_rounds(out);  // history (#21)
    if (!recorded) {
      // Acknowledging now would promise what a crash could take back. Stop
      // as a crash would, before any reply of this step: participants
      // reconnect, and a restarted host (with room to write) takes their
      // requests again. Nothing acknowledged is lost. (Replies to earlier
      // lines of the same input, held back for one write, go too, as in a
      // crash: what they told is in the journal, and told again after it.)
      log(fmt::format("error: cannot write the journal in {}: {}; stopping before acknowledging what it could "
                      "not record. Free space (or fix {}) and start the host again: waiting participants "
                      "reconnect until their --connect-timeout",
                      *opts_.state_dir, error, *opts_.state_dir));
      std::_Exit(exit_code_of(error_kind::internal));
    }
  }
  /// Sends the replies of one step (and logs its events); the host was active.
  static bool same_line(const proto::release& a, const proto::release& b) {
    return a.gen == b.gen && a.v == b.v && a.delivered == b.delivered && a.name == b.name && a.message == b.message;
  }
  void send_all(output& out) {
    for (auto& d : out.deadlines) arm_decide_deadline(std::move(d));
    out.deadlines.clear();
    count_ended(out);  // metrics (issue 21)
    observe_.events(out.events);
    // A release tells every member the same line: formatted once.
    const proto::release* formatted = nullptr;
    std::string line;
    for (auto& e : out.sends) {
      auto it = sessions_.find(e.to);
      if (it == sessions_.end()) continue;
      bool close = false;
      if (auto* er = std::get_if<proto::error_reply>(&e.msg)) close = proto::closes_connection(er->kind);
      auto* rel = std::get_if<proto::release>(&e.msg);
      if (!rel) {
        it->second->send(proto::format_reply(e.msg), close);
        continue;
      }
      if (!formatted || !same_line(*formatted, *rel)) line = proto::format_reply(e.msg);
      formatted = rel;
      auto keep = it->second;  // a failed write stops the session, which leaves sessions_
      keep->send_shared(line);
    }
    out.sends.clear();
    last_active_ = now();
    if (holding_ == 0) observe_release();
  }
  /// A round waits for its chief's verdict for d.within (wait
  /// --decide-within, --decide-timeout), from when this host applied its
  /// gathering, measured on this host's own monotonic clock: no host's wall
  /// clock decides it (docs/store.md). When it passes and the round still
  /// waits, the host submits an expire input naming the round; with a store
  /// it goes through the log, and the first applied aborts the round on
  /// every host alike (the others' find it gone: nothing).
  void arm_decide_deadline(decide_deadline d) {
    if (stopping_) return;
    auto at = std::chrono::steady_clock::now() + std::chrono::milliseconds(d.within);
    decide_due_.emplace(at, std::move(d));
    arm_decide_timer();
  }
  void arm_decide_timer() {
    if (stopping_ || decide_due_.empty()) return;
    auto at = decide_due_.begin()->first;
    if (decide_at_ && *decide_at_ <= at) return;  // armed for an earlier one
    decide_at_ = at;
    decide_timer_.expires_at(at);  // an earlier wait, if any, ends with operation_aborted
    decide_timer_.async_wait([this](asio::error_code ec) {
      if (ec || stopping_) return;
      decide_at_.reset();
      auto now_steady = std::chrono::steady_clock::now();
      std::vector<decide_deadline> due;
      while (!decide_due_.empty() && decide_due_.begin()->first <= now_steady) {
        due.push_back(std::move(decide_due_.begin()->second));
        decide_due_.erase(decide_due_.begin());
      }
      for (auto& d : due) {
        output out;
        submit(input::expire{std::move(d), now()}, out);
        send_all(out);
      }
      arm_decide_timer();
    });
  }
  /// After a catch-up (or a start over): the rounds of the state that wait
  /// for a verdict with a deadline get it again, in full, from now.
  void arm_pending_deadlines() {
    for (auto& d : state_.pending_deadlines()) arm_decide_deadline(std::move(d));
  }
  // ---- metrics (issue 21; issue #32 item 7) ----
  metrics_endpoint& metrics() { return metrics_; }
  std::string metrics_text(std::string_view labels) {
    metrics::gauges g;
    g.waiting = state_.waiting();
    g.connections = sessions_.size();
    g.barriers = state_.open_count();
    g.barriers_held = state_.barrier_count();
    if (auto oldest = state_.oldest_open()) {
      millis t = now();
      g.oldest_open_seconds = t > *oldest ? static_cast<double>(t - *oldest) / 1000.0 : 0.0;
    }
    g.process = read_process_stats();
    if (link_) {
      g.store = true;
      auto& c = metrics_.counters;
      c.store_write_errors = link_->write_errors();
      c.store_watch_restarts = link_->watch_restarts();
      std::int64_t received = link_->received_revision(), applied = follower_ ? follower_->applied() : 0;
      g.store_apply_lag = received > applied ? static_cast<std::uint64_t>(received - applied) : 0;
      g.store_backlog_bytes = link_->backlog();
    }
    return metrics::format(metrics_.counters, g, tfb::version, labels);
  }
  /// An input was read now: a release it makes is timed from here.
  void input_read() { step_start_ = std::chrono::steady_clock::now(); }
  /// The step's tally and ended rounds, counted (events_out.h); a release is timed.
  void count_ended(output& out) {
    if (observe_.measures(out) != 0 && !release_from_)
      release_from_ = step_start_.value_or(std::chrono::steady_clock::now());
  }
  /// The replies of a release are with the kernel: observe its latency.
  void observe_release() {
    step_start_.reset();
    if (!release_from_) return;
    std::chrono::duration<double> d = std::chrono::steady_clock::now() - *release_from_;
    metrics_.counters.latency.observe(d.count());
    release_from_.reset();
  }
  // ---- end of metrics ----
  // ---- arrival history (issue #21): kept in memory, written to the history
  // file after the step's replies went out (a posted handler runs after the
  // write_batch that sends them), never before a RELEASE.
  std::optional<tfb::error> open_history();
  // The records are kept as they are, and added (formatted, indexed) and
  // written by a posted handler: after the write_batch that hands the
  // step's replies to the kernel, so that a release of 10,000 participants
  // waits for none of it (issue #32, "keeping the history costs the release
  // nothing").
  void note_rounds(output& out) {
    if (!history_) {
      out.rounds.clear();
      return;
    }
    auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
    observe_.history.take(out.rounds, wall, now());
    if (!history_flush_posted_) {
      history_flush_posted_ = true;
      asio::post(io_, [this] { flush_history(); });
    }
  }
  void record_unrecorded() {
    observe_.history.drain([this](const round_record& r, std::int64_t wall_first) {
      if (history_) history_->add(r, wall_first);
    });
  }
  void flush_history() {
    history_flush_posted_ = false;
    if (!history_) return;
    record_unrecorded();
    std::string error;
    if (!history_->flush(error)) log("warning: " + error);
  }
  proto::history_page history_page(const proto::history_req& q) {
    if (!history_) return {};
    record_unrecorded();  // a round that ended in this very turn of the loop is in the page
    return history_->page(q, 256 << 10);  // a page: about 256 KiB, and at least one round
  }
  /// STATUS; with last=1 (status --watch) each barrier's last released round
  /// and the nodes of its missing ranks come from the history (none without one).
  proto::status_reply status(const proto::status_req& q, millis now) const {
    proto::status_reply st = state().status(q, now);
    if (!q.last || !history_) return st;
    auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
    for (auto& b : st.barriers) history_->data().fill_last(b, wall);
    return st;
  }
  /// The hook for a participant that gave up at its --timeout (LEAVE why=timeout).
  void on_timeout_leave() { ++timeout_leaves_; }
  // ---- end of the arrival history

  const barrier_set& state() const { return state_; }
  const host_options& opts() const { return opts_; }
  const host_conn_config& conn_config() const { return conn_config_; }
  munge_pool& munge() { return munge_pool_; }

  void remove(conn_id id, const std::string& peer) {
    unauthenticated_.erase(id);
    if (sessions_.erase(id) != 0) {
      auto it = per_address_.find(peer);
      if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
    }
    if (stopping_ && sessions_.empty()) finish();
  }
  bool stopping() const { return stopping_; }
  const std::string& address() const { return address_; }
  /// The connection has authenticated (or greeted, where the host does not
  /// authenticate): it is no longer the first to go when the host is full.
  void authenticated(conn_id id) { unauthenticated_.erase(id); }

  // Replies made while one client's input is handled are held back and
  // written once at the end, each session's in one write: a participant's
  // HELLO reply, WAITING and RELEASE go out together when its HELLO and
  // ARRIVE came together (one system call and one wake-up of the participant
  // instead of three).
  class write_batch {
   public:
    /// own: the session whose input this is. Only its replies are held (it
    /// may get several: its HELLO reply, WAITING, RELEASE); every other
    /// session's go at once, so that a release's fan-out starts with the
    /// first member. Null: every session's replies are held (the store's
    /// inputs, which may tell one session several things).
    explicit write_batch(server& s, const session* own = nullptr) : s_(s) {
      if (s_.holding_++ == 0) s_.hold_only_ = own;
    }
    write_batch(const write_batch&) = delete;
    write_batch& operator=(const write_batch&) = delete;
    ~write_batch() {
      if (--s_.holding_ > 0) return;
      auto held = std::move(s_.held_);
      s_.held_.clear();
      for (auto& sess : held) sess->flush_held();  // may stop a session, whose replies to others then go at once
      s_.observe_release();  // metrics (issue 21)
    }

   private:
    server& s_;
  };
  /// An output whose sends take the buffer of an earlier step, and recycle()
  /// to give it back: a release to 19,000 makes 4 MiB of replies, and fresh
  /// pages cost the release a page fault each (bench/fanout.sh).
  output fresh_output() {
    output o;
    o.sends.swap(spare_sends_);
    return o;
  }
  void recycle(output& o) {
    o.sends.clear();
    if (o.sends.capacity() > spare_sends_.capacity() && o.sends.capacity() <= max_spare_sends) spare_sends_.swap(o.sends);
  }
  /// Whether a write_batch holds this session's replies back.
  bool holds(const session* s) const { return holding_ > 0 && (!hold_only_ || hold_only_ == s); }
  // Whether send() is to hold its bytes back; if so, the session is queued.
  bool hold(const std::shared_ptr<session>& s) {
    if (!holds(s.get())) return false;
    held_.push_back(s);
    return true;
  }

 private:
  awaitable<void> accept_loop();
  awaitable<void> prune_loop();
  awaitable<void> idle_loop();
  void begin_shutdown(std::string_view why);
  void finish() {
    metrics_.stop();  // metrics (issue 21): the textfile's last values, then close
    shutdown_timer_.cancel();
    prune_timer_.cancel();
    idle_timer_.cancel();
    decide_timer_.cancel();
    signals_.cancel();
    renew_timer_.cancel();
  }

  asio::io_context& io_;
  host_options opts_;
  metrics_endpoint metrics_;  // issue 21
  observe::observer observe_;  // the log, the counters and the history of each step's events (events_out.h)
  std::optional<std::chrono::steady_clock::time_point> step_start_, release_from_;
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer prune_timer_, idle_timer_, shutdown_timer_;
  asio::steady_timer decide_timer_{io_};
  std::optional<std::chrono::steady_clock::time_point> decide_at_;  ///< when decide_timer_ fires
  std::multimap<std::chrono::steady_clock::time_point, decide_deadline> decide_due_;  ///< arm_decide_deadline's
  std::chrono::steady_clock::time_point start_;
  barrier_set state_;
  system_services services_;
  host_conn_config conn_config_;
  std::unique_ptr<journal> journal_;
  local_door local_door_{state_};
  door* door_ = &local_door_;
  // ---- a store shared by many hosts (issue #20, docs/store.md) ----
 public:
  std::optional<tfb::error> open_store();
  /// What the store's link reports, brought to this host's event loop.
  store::link::callbacks store_callbacks();
  void on_store_events(const std::vector<store::event>& evs);
  void on_fenced(const std::string& why);
  /// Every renew_check_every: has the lease gone unrenewed past the renew deadline?
  void watch_renewals();
  void on_renew_overdue();
  void on_catch_up(store::link::catch_up cu);
  void act(std::vector<store::action> acts);
  void check_caught_up();
  /// Once this host has applied the store's log up to its own presence: accept.
  std::function<void()> on_caught_up;
  /// Why the host stopped, if not as asked (a signal, idle): the store
  /// failed. Its text is empty: the log has said why.
  const std::optional<tfb::error>& failure() const { return failure_; }
  void leave_store() {
    if (link_) link_->stop();
  }

 private:
  /// Replies of inputs applied from the store: to this host's own connections.
  void deliver(output& out);
  std::unique_ptr<store::link> link_;
  std::unique_ptr<store::link_door> link_door_;
  std::unique_ptr<store::replica> replica_;
  std::unique_ptr<store::follower> follower_;  ///< the store's log, interpreted (pure)
  std::optional<std::string> store_secret_;
  store::layout keys_;
  std::string self_key_;
  std::int64_t registering_ = 0;  ///< the incarnation registered, until its presence is applied
  /// Two thirds of --store-lease: a host that could not renew its lease for
  /// that long stops acting for the store (on_renew_overdue), before etcd
  /// may expire the lease (docs/store.md, "Honest outcomes").
  duration renew_deadline_ = opts_.store_lease * 2 / 3;
  asio::steady_timer renew_timer_{io_};
  std::optional<store::renew_watch> renew_watch_;  // the renew deadline's rule (follower.h)
  bool caught_up_ = false, refencing_ = false;
  bool snapshot_pending_ = false;
  duration forget_after_ = opts_.forget_after;  ///< with a store, the store's (its origin record)
  std::optional<tfb::error> failure_;
  // ---- end of the store
  std::unordered_map<conn_id, std::shared_ptr<session>> sessions_;
  // Connections that have not authenticated yet, oldest (smallest id) first:
  // when the host is full, the first to go, so that idle sockets cannot
  // crowd out participants. Authenticated ones are not in it, so it costs a
  // waiting participant nothing.
  std::set<conn_id> unauthenticated_;
  bool evict_oldest_unauthenticated(const std::string& newcomer);
  conn_id next_id_ = 1;
  bool stopping_ = false;
  millis last_active_ = 0;
  int reserve_fd_ = -1;
  files::fd sock_diag_;  // owner_only: peer_owner's questions go through it
  tcp::endpoint local_;  // where it listens: a connection's own end (owner_only hosts listen on loopback)
  // owner_only: strangers refused, logged at most once a second (the rest counted)
  std::chrono::steady_clock::time_point stranger_logged_{};
  std::size_t strangers_unlogged_ = 0;
  std::size_t max_connections_ = 0;
  std::unordered_map<std::string, std::size_t> per_address_;
  std::string address_;
  std::unique_ptr<hist::store> history_;  // arrival records (#21); null with serve --history 0
  std::string run_;                        // this start's run (hist::new_run)
  bool history_flush_posted_ = false;
  std::uint64_t timeout_leaves_ = 0;  // LEAVE why=timeout seen (on_timeout_leave)
  int holding_ = 0;  // open write_batch scopes
  const session* hold_only_ = nullptr;  // the outermost write_batch's own session, if any
  static constexpr std::size_t max_spare_sends = 200'000;  // kept for the next big step: about 43 MB at most
  std::vector<effect> spare_sends_;  // empty, with the capacity of the biggest step so far (fresh_output)
  std::vector<std::shared_ptr<session>> held_;
  munge_pool munge_pool_{io_};
};

void session::start() {
  // TCP_NODELAY and the keep-alive settings come from the listening socket
  // (server::listen): Linux copies them into every accepted one.
  auto self = shared_from_this();
  handshake_timer_.expires_after(srv_.opts().handshake_timeout);
  handshake_timer_.async_wait([self](asio::error_code e) {
    if (e || self->stopped_) return;
    if (auto s = self->conn_.handshake_expired()) self->follow(*s);
  });
  asio::error_code nb;
  socket_.non_blocking(true, nb);
  read_more();
}

void session::write(std::string bytes, bool close_after) {
  if (stopped_ || close_after_flush_) return;
  // A client is dropped for what it left unread, not for the size of the
  // reply it just asked for: a STATUS of 20,000 barriers is several MiB, and
  // is queued whole (its size is bounded by --max-barriers).
  if (outbox_.size() > max_outbox_bytes) {
    srv_.observe(ev::bad_client{remote_, {}});
    stop();
    return;
  }
  if (close_after) close_after_flush_ = true;
  if (outbox_.empty() && !writing_ && !held_ && !srv_.holds(this)) {
    write_now(bytes);
    return;
  }
  outbox_ += bytes;
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

void session::send_shared(const std::string& line) {
  if (conn_.sealed() || !outbox_.empty() || writing_ || held_ || srv_.holds(this)) {
    send(line, false);
    return;
  }
  if (stopped_ || close_after_flush_ || (conn_.hello_done() && !conn_.authenticated())) return;
  write_now(line);
}

void session::write_now(std::string_view bytes) {
  while (!bytes.empty()) {
    asio::error_code ec;
    std::size_t n = socket_.write_some(asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) break;
    if (ec) {
      stop();
      return;
    }
    bytes.remove_prefix(n);
  }
  if (bytes.empty()) {
    if (close_after_flush_) stop();
    return;
  }
  outbox_.assign(bytes);
  flush();  // waits for the socket to take the rest
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

void session::stop(bool peer_closed) {
  if (stopped_) return;
  stopped_ = true;
  asio::error_code ec;
  // After a release every participant closes at once: one system call less
  // each, while the last of them still read their RELEASE (bench/fanout.sh).
  if (!peer_closed) socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  handshake_timer_.cancel();
  if (munge_) {  // its result, late or not, is dropped (munge_finished)
    munge_->job->abandoned = true;
    munge_->timer.cancel();
  }
  output out;
  srv_.submit(input::leave{id_, departure::disconnected, srv_.now()}, out);
  srv_.send_all(out);
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
  // One buffer for every connection (one thread): filled and given to this
  // connection's host_conn at once, never held across a wait.
  static char buf[4096];
  std::size_t n = 0;
  if (!ec) n = socket_.read_some(asio::buffer(buf), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return read_more();
  if (ec) {
    // EOF, reset, or closed by stop(): the participant is gone.
    if (!close_after_flush_) stop(ec == asio::error::eof);
    return;
  }
  last_heard_ = std::chrono::steady_clock::now();
  server::write_batch batch(srv_, this);  // this input's replies to this session go out at its end
  srv_.input_read();                // metrics (issue 21): a release is timed from here
  conn_.take(std::string_view(buf, n));
  take_lines();
  // After a reply that closes, stop reading; flush() closes after the last
  // reply. While a MUNGE call runs, read nothing: munge_finished reads on.
  if (stopped_ || close_after_flush_ || conn_.munge_pending()) return;
  read_more();
}

// The lines taken so far, each to host_conn and its step followed, until one
// closes or asks for a MUNGE call (the lines after it wait for its result).
void session::take_lines() {
  while (!stopped_ && !close_after_flush_ && !conn_.munge_pending()) {
    // The line lives until its step is done, as its request's input does
    // (dispatch): what the barriers keep for a participant is then not put
    // in the places of these short-lived strings, which the next line's take
    // again. A waiting participant's memory is what docs/performance.md counts.
    auto l = conn_.line();
    if (!l) {
      if (auto s = conn_.overflow()) follow(*s);
      break;
    }
    host_step s = conn_.feed(srv_.conn_config(), *l);
    follow(s);
  }
}

// host_conn asked for a MUNGE call: to the pool, with a deadline. The
// connection reads nothing until the result (or the deadline) comes.
void session::start_munge(munge_call call) {
  auto j = std::make_shared<munge_pool::job>();
  j->call = std::move(call);
  // The result finds the session only if it still exists (a weak pointer):
  // a connection that closed while munged worked is not kept for it.
  j->done = [weak = std::weak_ptr<session>(shared_from_this()), raw = j.get()](munge_result r) {
    if (auto self = weak.lock()) self->munge_finished(raw, std::move(r));
  };
  if (!srv_.munge().submit(j)) {
    munge_result r;
    r.how = munge_result::status::queue_full;
    host_step s = conn_.munge_done(srv_.conn_config(), std::move(r));
    follow(s);
    return;
  }
  munge_ = std::make_unique<munge_wait>(munge_wait{j, asio::steady_timer(socket_.get_executor())});
  munge_->timer.expires_after(munge_timeout);
  munge_->timer.async_wait([self = shared_from_this(), raw = j.get()](asio::error_code ec) {
    if (ec) return;
    munge_result r;
    r.how = munge_result::status::timed_out;
    self->munge_finished(raw, std::move(r));
  });
}

// The result of this session's MUNGE call, or its deadline, on the io
// thread: whichever comes first counts, the other finds nothing to do.
void session::munge_finished(const munge_pool::job* j, munge_result r) {
  if (stopped_ || !munge_ || munge_->job.get() != j) return;
  auto done = std::move(munge_);  // lives to the end of this call (its timer may be the caller)
  done->job->abandoned = true;
  done->timer.cancel();
  server::write_batch batch(srv_, this);
  host_step s = conn_.munge_done(srv_.conn_config(), std::move(r));
  follow(s);
  take_lines();  // what came with the line that asked for the call (AUTH and the request)
  if (stopped_ || close_after_flush_ || conn_.munge_pending()) return;
  read_more();
}

// Does what host_conn said after a line (or the handshake deadline).
void session::follow(host_step& s) {
  // What a client sent is quoted in bad_client, before any authentication
  // (a malformed HELLO's fields): cut short, as well as escaped by log().
  if (!s.bad_client.empty())
    srv_.observe(ev::bad_client{remote_, printable(s.bad_client, false, max_client_text)});
  if (s.auth_failed) srv_.observe(ev::auth_failed{});  // metrics (issue 21)
  if (!s.warning.empty()) srv_.log(s.warning);
  if (!authenticated_ && conn_.authenticated()) {
    authenticated_ = true;
    srv_.authenticated(id_);
  }
  if (s.timer == host_step::deadline::handshake_over) {
    handshake_timer_.cancel();
    if (conn_.keepalive_ms() > 0) watch_liveness();
  }
  if (!s.bytes.empty() || s.close) write(std::move(s.bytes), s.close);
  if (s.munge) {
    start_munge(std::move(*s.munge));
  } else if (s.deliver) {
    dispatch(*s.deliver);
  } else if (s.request) {
    output none;
    srv_.send_all(none);  // a refused request still counts as activity
  }
}

// A request host_conn let through: to the barriers through the door, or
// answered here (STATUS and PING change nothing).
void session::dispatch(proto::request& req) {
  output out = srv_.fresh_output();
  millis now = srv_.now();
  // The input lives until its replies are sent (see on_readable).
  std::optional<door_input> in;
  std::visit(
      [&](auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, proto::arrive> || std::is_same_v<T, proto::decide>) {
          if constexpr (std::is_same_v<T, proto::arrive>)
            in.emplace(input::arrive{id_, std::move(m), conn_.peer(), now});
          else
            in.emplace(input::decide{id_, std::move(m), conn_.peer(), now});
          srv_.submit(*in, out);
          // A request that was refused leaves the connection free for another try.
          for (auto& e : out.sends)
            if (e.to == id_ && std::holds_alternative<proto::error_reply>(e.msg)) conn_.refused();
        } else if constexpr (std::is_same_v<T, proto::abort_req>) {
          in.emplace(input::abort{id_, std::move(m), now});
          srv_.submit(*in, out);
        } else if constexpr (std::is_same_v<T, proto::status_req>) {
          out.sends.push_back({id_, srv_.status(m, now)});
        } else if constexpr (std::is_same_v<T, proto::leave>) {
          bool timed_out = m.why == "timeout";
          if (timed_out) {
            srv_.on_timeout_leave();                 // #21: counted per round by the barriers, and here
            srv_.observe(ev::timeout_leave{});  // metrics (issue 21)
          }
          in.emplace(input::leave{id_, departure::left, now, timed_out});
          srv_.submit(*in, out);
        } else if constexpr (std::is_same_v<T, proto::history_req>) {
          out.sends.push_back({id_, srv_.history_page(m)});  // #21: read-only, like STATUS
        } else if constexpr (std::is_same_v<T, proto::ping>) {
          out.sends.push_back({id_, proto::pong{}});
        }  // HELLO and AUTH: host_conn answered them
      },
      req);
  srv_.send_all(out);
  srv_.recycle(out);
}

// A client that promised keep-alives and went silent (stopped, or behind a
// dead link) is withdrawn as unresponsive: it is not counted as present.
void session::watch_liveness() {
  auto self = shared_from_this();
  last_check_ = std::chrono::steady_clock::now();
  handshake_timer_.expires_after(std::chrono::milliseconds(conn_.keepalive_ms()));
  handshake_timer_.async_wait([self](asio::error_code ec) {
    if (ec || self->stopped_) return;
    auto now = std::chrono::steady_clock::now();
    switch (self->conn_.check_liveness(now - self->last_check_, now - self->last_heard_)) {
      case liveness::alive:
        break;
      case liveness::host_was_late:  // the client's PINGs wait unread: look again later
        self->last_heard_ = now;
        break;
      case liveness::silent: {
        auto silent = now - self->last_heard_;
        output out;
        self->srv_.submit(input::leave{self->id_, departure::unresponsive, self->srv_.now()}, out);
        self->srv_.send_all(out);
        self->srv_.observe(
            ev::client_silent{self->remote_, format_duration(std::chrono::duration_cast<duration>(silent))});
        self->stop();
        return;
      }
    }
    self->watch_liveness();
  });
}

std::optional<tfb::error> server::open_journal() {
  if (!opts_.state_dir) return std::nullopt;
  std::string error;
  auto j = std::make_unique<journal>(*opts_.state_dir);
  std::size_t restored = 0;
  bool ok = j->read(
      [&](const journal_entry& e) {
        state_.restore(e, now());
        ++restored;
      },
      // A torn last line (a crash while writing) is expected; anything else is worth a warning.
      [&](std::size_t line, const std::string& why) {
        log(fmt::format("warning: journal {} line {} skipped: {}", j->path(), line, why));
      },
      error);
  // Compact: write what the state needs now, flush, and swap it in.
  if (!ok || !j->compact(state_.snapshot(), error)) return tfb::error{error_kind::file, error};
  log(fmt::format("journal {}: restored {} entries", j->path(), restored));
  journal_ = std::move(j);
  local_door_.set_journal(journal_.get());
  arm_pending_deadlines();  // a round restored waiting for its chief's verdict keeps its deadline
  return std::nullopt;
}


std::optional<tfb::error> server::open_history() {
  if (opts_.history == 0) return std::nullopt;
  history_ = std::make_unique<hist::store>(opts_.history);
  // Each start is a run of its own (issue #32 item 2): a file that several
  // runs share keeps them apart.
  run_ = hist::new_run(std::getenv("SLURM_JOB_ID"),
                       std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                           .count(),
                       static_cast<long>(::getpid()));
  history_->data().set_run(run_);
  if (!opts_.history_file) return std::nullopt;
  std::string warning, error;
  if (!history_->open(*opts_.history_file, warning, error)) {
    if (!opts_.history_file_default) return tfb::error{error_kind::file, error};
    // The default file is a convenience: a host whose private directory
    // cannot be made (HOME=/, a read-only home) serves all the same.
    log(fmt::format("warning: the arrival history is kept in memory only: {}; pass --history-file FILE, or "
                    "--history-file - to silence this",
                    error));
    return std::nullopt;
  }
  if (!warning.empty()) log(warning);
  log(fmt::format("history {}: {} rounds kept; this host's rounds are run {} (tfbarrier report shows the newest "
                  "run; --all-runs for every one)",
                  history_->path(), history_->data().rounds(), run_));
  return std::nullopt;
}

// ---- A store shared by many hosts (issue #20, docs/store.md) ----
// Registers this host (blocking, before anything is accepted) and starts the
// link's threads. What they report comes back on the event loop.
std::optional<tfb::error> server::open_store() {
  if (!opts_.store) return std::nullopt;
  const store::store_location& at = *opts_.store;  // parsed by serve
  conn_config_.store = at.prefix;  // named in HELLO: a client given another store refuses this host
  store::link::settings ls;
  ls.client.endpoints = at.urls();
  ls.client.ca = opts_.store_ca;
  ls.client.cert = opts_.store_cert;
  ls.client.key = opts_.store_key;
  ls.client.cert_pem = opts_.store_cert_pem;
  ls.client.key_pem = opts_.store_key_pem;
  ls.client.user = opts_.store_user;
  ls.client.password = opts_.store_password;
  ls.keys.prefix = at.prefix;
  keys_ = ls.keys;
  self_key_ = store::host_key(opts_.node, std::to_string(local_.port()));
  ls.self = self_key_;
  ls.me = store::presence{store::state_machine_version, opts_.node, address_, static_cast<std::uint32_t>(getpid())};
  ls.lease = std::chrono::duration_cast<std::chrono::seconds>(opts_.store_lease);
  renew_deadline_ = std::chrono::duration_cast<duration>(ls.lease) * 2 / 3;  // of the lease etcd is asked for
  // A request that hangs (a member that lost its leader) must not outlast the lease: try the next member.
  ls.client.timeout = std::clamp<std::chrono::milliseconds>(std::chrono::milliseconds(ls.lease) / 3, std::chrono::seconds(1), std::chrono::seconds(5));
  store_secret_ = opts_.secret;
  ls.secret = store_secret_ ? &*store_secret_ : nullptr;
  ls.munge_key = opts_.store_munge;
  ls.snapshot_every = opts_.store_snapshot_every;
  ls.shared = store::shared_settings{opts_.max_barriers,
                                     std::chrono::duration_cast<std::chrono::milliseconds>(opts_.forget_after).count()};
  ls.max_barriers_given = opts_.max_barriers_given;
  ls.forget_after_given = opts_.forget_after_given;
  replica_ = std::make_unique<store::replica>(self_key_, state_);
  follower_ = std::make_unique<store::follower>(ls.keys, self_key_, *replica_);
  follower_->set_digest_every(opts_.store_snapshot_every);
  link_ = std::make_unique<store::link>(std::move(ls), store_callbacks());
  if (auto e = link_->start()) {
    e->text = fmt::format("cannot use the store {}: {}", opts_.store->given, e->text);
    link_.reset();
    return e;
  }
  // Every host of the store runs by the store's settings (its origin record),
  // and forgets nothing to make room: what is recent would be a clock's say.
  state_.limit(link_->shared().max_barriers, barrier_set::never_forget);
  forget_after_ = std::chrono::milliseconds(link_->shared().forget_after);
  // The key MUNGE gave (PREFIX/key), before any event of the watch is applied on this loop.
  if (!store_secret_ && link_->secret()) store_secret_ = *link_->secret();
  follower_->set_secret(store_secret_ ? &*store_secret_ : nullptr);
  log(fmt::format("store: {}, inputs {}", opts_.store->given,
                  !store_secret_ ? "without a MAC (--insecure)"
                  : opts_.store_munge ? "MACed with the job's key from MUNGE"
                                      : "MACed with the shared secret"));
  link_door_ = std::make_unique<store::link_door>(*link_);
  door_ = link_door_.get();
  link_door_->on_applied([this](output& out) { deliver(out); });
  watch_renewals();
  return std::nullopt;
}

store::link::callbacks server::store_callbacks() {
  store::link::callbacks cb;
  cb.post = [this](std::function<void()> f) { asio::post(io_, std::move(f)); };
  cb.events = [this](std::vector<store::event> evs) { on_store_events(evs); };
  cb.caught_up = [this](store::link::catch_up cu) { on_catch_up(std::move(cu)); };
  cb.snapshot_written = [this](std::int64_t rev, bool ok) {
    snapshot_pending_ = false;
    if (ok) log(fmt::format("store: wrote a snapshot at revision {}", rev));
  };
  cb.registered = [this](std::int64_t inc) {
    registering_ = inc;
    replica_->set_incarnation(inc);
    refencing_ = false;
    log(fmt::format("store: registered as {} (incarnation {})", self_key_, inc));
  };
  cb.fenced = [this](const std::string& why) { on_fenced(why); };
  cb.failed = [this](const std::string& why) {
    log("error: " + why);
    failure_ = tfb::error{error_kind::store_unreachable, {}};  // logged: nothing more to say
    begin_shutdown("the store failed");
  };
  cb.log = [this](const std::string& text) { log(text); };
  return cb;
}

void server::watch_renewals() {
  auto every = std::max<duration>(renew_deadline_ / 20, 50ms);
  auto ns = [](auto d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
  if (!renew_watch_) renew_watch_.emplace(ns(renew_deadline_), ns(every));
  renew_timer_.expires_after(every);
  renew_timer_.async_wait([this, ns](asio::error_code ec) {
    if (ec || stopping_ || !link_) return;
    bool overdue = renew_watch_->check(ns(std::chrono::steady_clock::now().time_since_epoch()), link_->renewals_now());
    if (!refencing_ && overdue) on_renew_overdue();
    watch_renewals();
  });
}

// This host could not renew its lease for its renew deadline (etcd out of
// reach from here: a cut link, a member gone): etcd may expire the lease at
// any moment, and the others then withdraw its participants as lost. It
// stops acting for the store: its participants are told why and closed
// (they exit 69, "lost while waiting", not 124: their arrivals may still
// count until the lease expires at etcd, or until this host registers
// again, which ends the old presence), what it had not written is dropped,
// and it registers again once etcd answers. Arrivals meanwhile wait for that.
void server::on_renew_overdue() {
  if (refencing_ || stopping_) return;
  refencing_ = true;
  replica_->set_incarnation(0);  // no reply of the old incarnation goes out now
  duration lease = std::chrono::duration_cast<std::chrono::seconds>(opts_.store_lease);
  std::string text = fmt::format(
      "the host at {} lost etcd: it could not renew its store lease within its renew deadline ({}, two thirds of "
      "--store-lease {}), so it stopped serving this participant; its arrival may still be counted until that lease "
      "expires at etcd (within {}), and is then withdrawn as lost. Check the host's link to etcd, and run the "
      "participant again (through this host once it has registered again, or another)",
      address_, format_duration(renew_deadline_), format_duration(lease), format_duration(lease));
  log(fmt::format("warning: store: could not renew the store lease within the renew deadline ({}, two thirds of "
                  "--store-lease {}): stopping to act for the store, closing {} connections (their participants "
                  "may be counted until the lease expires at etcd), and registering again once etcd answers",
                  format_duration(renew_deadline_), format_duration(lease), sessions_.size()));
  // A send may close its session, and take it out of sessions_, at once.
  std::vector<std::shared_ptr<session>> all;
  for (auto& [id, s] : sessions_) {
    link_door_->settled(id);  // its departure is the old incarnation's end, not a batch of its own
    all.push_back(s);
  }
  std::vector<std::weak_ptr<session>> told(all.begin(), all.end());
  for (auto& s : all) s->send(proto::format_reply(proto::shutdown{text}), true);
  all.clear();
  link_->reregister();
  // Bound the flush: a client that reads nothing must not stay.
  auto t = std::make_shared<asio::steady_timer>(io_, 2s);
  t->async_wait([t, told](asio::error_code ec) {
    if (ec) return;
    for (auto& w : told)
      if (auto s = w.lock()) s->stop();
  });
}

void server::on_store_events(const std::vector<store::event>& evs) {
  act(follower_->on_events(evs));
  check_caught_up();
}

// Carries out what the follower made of the log, in its order.
void server::act(std::vector<store::action> acts) {
  write_batch batch(*this);
  using kind = store::action::kind;
  for (auto& a : acts) {
    if (a.what != kind::deliver) observe_.events(a.out.events);  // a host lost, a divergence: counted
    switch (a.what) {
      case kind::deliver:
        link_door_->applied(a.out, [this](conn_id c) { return replica_->waiting_here(c); });
        break;
      case kind::mark_gone:
        link_->mark_gone(a.host, a.inc, std::move(a.text));
        break;
      case kind::fenced: on_fenced(a.text); break;
      case kind::close_all: {
        log(a.text);
        std::vector<std::shared_ptr<session>> all;
        for (auto& [id, s] : sessions_) all.push_back(s);
        for (auto& s : all) s->stop();
        break;
      }
      case kind::fail:
        log("error: store: " + a.text);
        failure_ = tfb::error{error_kind::store_unreachable, {}};  // logged: nothing more to say
        begin_shutdown("the store's snapshot is unusable");
        return;
      case kind::warn: log(a.text); break;
      case kind::note: log(a.text); break;
      case kind::digest: {
        // Every k batches: this host's digest, and from the time keeper a
        // snapshot of the same state (the revision the digests compare).
        auto key = keys_.digest(a.inc, self_key_);
        link_->write_digest(a.inc, store::seal_digest(key, a.text, store_secret_ ? &*store_secret_ : nullptr));
        if (follower_->keeper() && !snapshot_pending_) {
          snapshot_pending_ = true;
          link_->write_snapshot(a.inc, std::move(a.state));
        }
        break;
      }
      case kind::diverged:
        log(a.text);
        if (a.inc) link_->start_over();
        break;
    }
  }
}

void server::check_caught_up() {
  if (caught_up_ || registering_ == 0 || replica_->incarnation_of(self_key_) != registering_) return;
  caught_up_ = true;
  if (on_caught_up) on_caught_up();
  asio::co_spawn(io_, accept_loop(), asio::detached);
}


// The state to start from: the newest snapshot and what followed it. After a
// compacted revision this host may have missed replies for its own
// participants, so it closes their connections first (the follower says so):
// they connect again and arrive again, and each is told its round's outcome.
void server::on_catch_up(store::link::catch_up cu) {
  act(follower_->on_catch_up(std::move(cu)));
  arm_pending_deadlines();
  check_caught_up();
}

// A step of the log, handed back by the store's door (link_door::applied).
void server::deliver(output& out) {
  observe_.events(out.events);
  if (!out.rounds.empty()) note_rounds(out);
  for (const auto& e : out.sends) {
    if (!std::holds_alternative<proto::error_reply>(e.msg)) continue;
    auto it = sessions_.find(e.to);
    if (it != sessions_.end()) it->second->refused();
  }
  send_all(out);
}

// This host lost its presence (stopped or cut off past its lease): the
// others have withdrawn its participants. Close their connections, so that
// they connect again and arrive again, and register a new incarnation.
void server::on_fenced(const std::string& why) {
  if (refencing_ || stopping_) return;
  refencing_ = true;
  replica_->set_incarnation(0);  // no reply of the old incarnation goes out now
  log(fmt::format("warning: store: {}; registering again and closing {} connections, whose participants connect "
                  "and arrive again",
                  why, sessions_.size()));
  std::vector<std::shared_ptr<session>> all;
  for (auto& [id, s] : sessions_) all.push_back(s);
  for (auto& s : all) s->stop();
  link_->reregister();
}
// ---- end of the store

tfb::result<bool> server::listen() {
  const tfb::address& listen_at = opts_.listen.at;  // parsed by serve
  const std::string& given = opts_.listen.given;
  const std::string& host = listen_at.host;
  std::string port = std::to_string(listen_at.port);
  std::string error;
  asio::error_code ec;
  tcp::endpoint ep;
  if (host.empty()) {
    ep = tcp::endpoint(tcp::v4(), listen_at.port);
  } else {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(host, port, tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      error = fmt::format("cannot listen on {}: cannot resolve '{}': {}", given, host, ec.message());
      return tfb::error{error_kind::cannot_listen, error};
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
      log(fmt::format("another participant started the host on {} first; leaving", given));
      return false;  // not an error: that host serves the job
    }
    error = fmt::format("cannot listen on {}: {}", given, ec.message());
    if (ec == asio::error::address_in_use)
      error += "; another host (or program) has that port: pick another with --listen HOST:PORT (port 0 picks a "
               "free one), or in a job set TFBARRIER_PORT";
    return tfb::error{error_kind::cannot_listen, error};
  }
  auto local = acceptor_.local_endpoint(ec);
  local_ = local;
  address_ = address_of(local).text();
  // Keep one descriptor in reserve so a newcomer past the limit can be told why.
  reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Who owns each connection's other end is asked through one socket, kept.
  if (conn_config_.owner_only) sock_diag_ = files::fd(open_sock_diag());
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
  metrics_.textfile_labels = fmt::format("host=\"{}\"", metrics::label_value(address_));
  metrics_.start();  // issue 21
  // With a store, connections wait in the backlog until the host has caught
  // up: a STATUS or ARRIVE answered from a state not yet loaded would be wrong.
  if (!link_) asio::co_spawn(io_, accept_loop(), asio::detached);
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
    if (sessions_.size() >= max_connections_ && per_address_[peer] < opts_.max_per_address)
      evict_oldest_unauthenticated(peer);
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
    int fd = s.native_handle();
    auto sess = std::make_shared<session>(*this, std::move(s), id, peer,
                                          aec ? std::string("?") : format_address(peer, ep.port()));
    sessions_.emplace(id, sess);
    unauthenticated_.insert(id);
    // Before a byte is read: a host without a secret serves its own uid only.
    if (conn_config_.owner_only && (aec || !owner_is_me(fd, ep, sess->remote()))) sess->stranger();
    sess->start();
  }
}

bool server::owner_is_me(int fd, const tcp::endpoint& peer, const std::string& remote) {
  std::string error;
  std::optional<uid_t> uid;
  if (local_.address().is_unspecified()) {  // not expected (such a host has a secret): ask the socket
    uid = peer_owner(fd, error, nullptr, sock_diag_.get());
  } else {  // both ends known: the one question to the kernel
    sockaddr_storage ends[2]{};
    std::memcpy(&ends[0], local_.data(), local_.size());
    std::memcpy(&ends[1], peer.data(), peer.size());
    uid = peer_owner_of(ends[0], ends[1], error, nullptr, sock_diag_.get());
  }
  if (uid && *uid == ::getuid()) return true;
  ++strangers_unlogged_;
  auto t = std::chrono::steady_clock::now();
  if (t - stranger_logged_ < 1s) return false;
  std::string who = uid ? fmt::format("it is run by uid {}", *uid)
                        : fmt::format("the kernel cannot say who runs it ({})", error);
  std::string more =
      strangers_unlogged_ > 1 ? fmt::format(" (and {} more since the last such line)", strangers_unlogged_ - 1) : "";
  log(fmt::format("warning: refused a connection from {}: {}, and this host serves its own user (uid {}) only; "
                  "to share it, give the host and its participants the same --secret-file{}",
                  remote, who, ::getuid(), more));
  stranger_logged_ = t;
  strangers_unlogged_ = 0;
  return false;
}

// The host is full and a newcomer knocks: the connection that has waited
// longest without authenticating goes, not the newcomer. False when every
// connection has authenticated (then the newcomer is refused).
bool server::evict_oldest_unauthenticated(const std::string& newcomer) {
  if (unauthenticated_.empty()) return false;
  conn_id oldest = *unauthenticated_.begin();
  auto it = sessions_.find(oldest);
  if (it == sessions_.end()) {  // not expected: remove() keeps both in step
    unauthenticated_.erase(unauthenticated_.begin());
    return false;
  }
  std::shared_ptr<session> s = it->second;
  observe(ev::connection_evicted{sessions_.size(), max_connections_, s->remote(), newcomer});
  s->evict("the host is full and this connection had not authenticated: closed to make room; try again");
  return true;
}

awaitable<void> server::prune_loop() {
  while (!stopping_) {
    asio::error_code ec;
    // Checked four times per --forget-after (at most once a minute): a barrier
    // is forgotten within a quarter of it after it has been idle for it.
    prune_timer_.expires_after(std::clamp<duration>(forget_after_ / 4, 100ms, std::chrono::minutes(1)));
    co_await prune_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || stopping_) break;
    output none;
    std::string error;
    if (!link_) {
      door_->submit(input::prune{now(), opts_.forget_after.count()}, none, error);
      continue;
    }
    // With a store, one host keeps time (follower::tick, on its own monotonic
    // clock) and writes each forget as an input: no host's wall clock decides.
    auto mono = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start_);
    for (auto& f : follower_->tick(mono.count(), forget_after_.count())) door_->submit(f, none, error);
  }
}

awaitable<void> server::idle_loop() {
  last_active_ = now();
  while (!stopping_) {
    asio::error_code ec;
    idle_timer_.expires_after(std::max<duration>(*opts_.idle_exit / 10, 100ms));
    co_await idle_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || stopping_) break;
    // With a store the barriers are everyone's: this host is idle when none
    // of its own connections is open (a login node's door leaves, though the job goes on).
    if (link_ ? !sessions_.empty() : state_.active()) {
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
  std::string error;
  std::string text = fmt::format("the host at {} is shutting down ({})", address_, why);
  if (link_) {  // one host of a store leaves: its own participants are told; the barriers stay in the store
    for (auto& [id, s] : sessions_) out.sends.push_back({id, proto::shutdown{text}});
  } else {
    door_->submit(input::shutdown{text}, out, error);  // journals nothing
  }
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

// ---- Metrics (issue 21 item 4) ----
bool metrics_endpoint::open(std::string& error, std::function<void(std::string_view)> log) {
  log_ = std::move(log);
  if (opts_.metrics_textfile) {
    const std::string& path = *opts_.metrics_textfile;
    files::split_path(path, textfile_dir_path_, textfile_name_);
    std::string why;
    if (textfile_name_.empty() || !(textfile_dir_ = files::open_dir(textfile_dir_path_, false, false, why))) {
      error = fmt::format("cannot write the metrics textfile {}: {}", path,
                          why.empty() ? "it names a directory, not a file" : why);
      return false;
    }
  }
  if (!opts_.metrics_listen) return true;
  const tfb::address& at = opts_.metrics_listen->at;  // parsed by serve
  const std::string& given = opts_.metrics_listen->given;
  asio::error_code ec;
  tcp::endpoint ep(tcp::v4(), at.port);
  if (!at.host.empty()) {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(at.host, std::to_string(at.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      error = fmt::format("cannot serve metrics on {}: cannot resolve '{}': {}", given, at.host,
                          ec.message());
      return false;
    }
    ep = results.begin()->endpoint();
  }
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(64, ec);
  if (ec) {
    error = fmt::format("cannot serve metrics on {}: {}{}", given, ec.message(),
                        ec == asio::error::address_in_use ? "; pick another port for --metrics" : "");
    return false;
  }
  address_ = address_of(acceptor_.local_endpoint(ec)).text();
  return true;
}

void metrics_endpoint::start() {
  if (acceptor_.is_open()) {
    log_(fmt::format("metrics on http://{}/metrics{}", address_, opts_.metrics_token ? " (bearer token required)" : ""));
    asio::co_spawn(io_, accept_loop(), asio::detached);
  }
  if (textfile_dir_) asio::co_spawn(io_, textfile_loop(), asio::detached);
}

void metrics_endpoint::stop() {
  if (stopped_) return;
  stopped_ = true;
  asio::error_code ec;
  acceptor_.close(ec);
  textfile_timer_.cancel();
  for (const auto& c : conns_) {
    c->socket.close(ec);
    c->timer.cancel();
  }
  // A host that ends takes its textfile with it: node_exporter would go on
  // exporting its last values as if it still ran.
  if (textfile_dir_ && ::unlinkat(textfile_dir_->get(), textfile_name_.c_str(), 0) != 0 && errno != ENOENT)
    log_(fmt::format("warning: cannot remove the metrics textfile {}: {}", *opts_.metrics_textfile,
                     std::strerror(errno)));
}

awaitable<void> metrics_endpoint::accept_loop() {
  while (!stopped_) {
    asio::error_code ec;
    tcp::socket s = co_await acceptor_.async_accept(asio::redirect_error(use_awaitable, ec));
    if (stopped_ || ec == asio::error::operation_aborted) break;
    if (ec) {  // out of descriptors, say: the barriers matter more; try again a little later
      asio::steady_timer t(io_, 100ms);
      co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    if (conns_.size() >= max_http && !make_room()) {
      std::string busy = metrics::response(503, "too many metrics requests at once\n");
      s.non_blocking(true, ec);
      s.write_some(asio::buffer(busy), ec);  // what the kernel takes now; no waiting for it
      s.close(ec);
      continue;
    }
    auto c = std::make_shared<http_conn>(io_);
    c->socket = std::move(s);
    conns_.insert(c);
    asio::co_spawn(io_, answer(c), asio::detached);
  }
}

/// Closes the oldest connection that has not sent its request, to take a
/// newcomer; false when every one is being answered.
bool metrics_endpoint::make_room() {
  std::shared_ptr<http_conn> oldest;
  for (const auto& c : conns_)
    if (!c->requested && (!oldest || c->accepted < oldest->accepted)) oldest = c;
  if (!oldest) return false;
  asio::error_code ec;
  oldest->timer.cancel();
  oldest->socket.close(ec);  // its read fails; answer() ends it
  conns_.erase(oldest);
  return true;
}

/// Closes c's socket when its timer expires: a slow client's read or write fails then.
void metrics_endpoint::close_at_deadline(const std::shared_ptr<http_conn>& c, std::chrono::steady_clock::duration after) {
  c->timer.expires_after(after);
  c->timer.async_wait([c](asio::error_code ec) {
    if (ec) return;
    asio::error_code ignored;
    c->socket.close(ignored);
  });
}

// One request within request_deadline, one answer, then close; the whole
// exchange within http_deadline.
awaitable<void> metrics_endpoint::answer(std::shared_ptr<http_conn> c) {
  close_at_deadline(c, request_deadline);
  std::string received, reply;
  char buf[2048];
  asio::error_code ec;
  for (;;) {
    std::size_t n = co_await c->socket.async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
    if (ec) break;
    received.append(buf, n);
    auto p = metrics::parse_request(received);
    if (p.st == metrics::http_parse::state::incomplete) continue;
    c->requested = true;  // from now on only http_deadline bounds it
    close_at_deadline(c, http_deadline - (std::chrono::steady_clock::now() - c->accepted));
    reply = p.st == metrics::http_parse::state::complete ? metrics::respond(p.req, opts_.metrics_token, [this] { return text({}); })
                                                         : metrics::refusal(p.st);
    break;
  }
  if (!reply.empty() && c->socket.is_open()) {
    co_await asio::async_write(c->socket, asio::buffer(reply), asio::redirect_error(use_awaitable, ec));
    c->socket.shutdown(tcp::socket::shutdown_send, ec);
  }
  c->timer.cancel();
  c->socket.close(ec);
  conns_.erase(c);
}

awaitable<void> metrics_endpoint::textfile_loop() {
  while (!stopped_) {
    write_textfile();
    asio::error_code ec;
    textfile_timer_.expires_after(textfile_every);
    co_await textfile_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec) break;
  }
}

void metrics_endpoint::write_textfile() {
  std::string error;
  bool ok = files::replace_in(textfile_dir_->get(), textfile_name_, text(textfile_labels), textfile_dir_path_, error,
                              0644);
  if (!ok && !textfile_failing_)  // once per streak of failures, not every 5 s
    log_(fmt::format("warning: cannot write the metrics textfile {}: {}", *opts_.metrics_textfile, error));
  textfile_failing_ = !ok;
}
// ---- end of metrics ----

void raise_fd_limit() {
  struct rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

std::optional<error> run_host(const host_options& o) {
  raise_fd_limit();
  asio::io_context io(1);
  server srv(io, o);
  if (auto e = srv.open_journal()) return e;
  auto listening = srv.listen();
  if (!listening) return listening.err();
  if (!*listening) return std::nullopt;  // another participant's host has the port, and serves the job
  if (auto e = srv.open_metrics()) return e;  // metrics (issue 21)
  if (auto e = srv.open_history()) return e;  // after listen: a host that lost the race for the port leaves it alone
  if (o.on_bound)
    if (auto e = o.on_bound()) return e;
  if (auto e = srv.open_store()) return e;
  auto ready = [&] {
    srv.log(fmt::format("tfbarrier {} listening on {} (protocol {}, authentication: {}{})", tfb::version,
                        srv.address(), protocol_version,
                        o.secret  ? "shared secret"
                        : o.munge ? "MUNGE, uid " + std::to_string(::getuid())
                        : o.insecure ? std::string("none, anyone who can connect (--insecure)")
                                     : "none, its own uid " + std::to_string(::getuid()) + " only",
                        o.store ? ", store " + o.store->given : ""));
    if (o.on_listening) o.on_listening(srv.address());
    if (o.on_metrics_listening && o.metrics_listen) o.on_metrics_listening(srv.metrics().address());
  };
  if (o.store)
    srv.on_caught_up = ready;  // once the store's log is applied up to this host's own presence
  else
    ready();
  srv.run_loops();
  io.run();
  srv.leave_store();
  srv.flush_history();
  srv.log("stopped");
  return srv.failure();
}

}  // namespace tfb
