// tfb_loadgen: plays M participants of one barrier over M real TCP
// connections to a host on loopback, and measures and checks whole rounds.
//
// It speaks the project's own protocol code (proto::format_request,
// line_splitter, reply_reader) over plain epoll: no Asio, so the client side
// costs as little as it can and the figures are the host's. Connections are
// spread over many loopback source addresses (IP_BIND_ADDRESS_NO_PORT before
// bind, so no bind takes an ephemeral port of its own) and, past what one
// process may hold, over several worker processes that the parent drives
// through a round step by step:
//
//   START   every worker connects its share; each participant sends HELLO and
//           ARRIVE (as `tfbarrier wait` does, in one write). One participant
//           is held back: it connects and greets, but does not arrive.
//   READY   all but that one are acknowledged (WAITING). The parent waits for
//           the host to go idle and reads its memory: M-1 are waiting.
//   GO      the held-back participant arrives: the round completes. With a
//           chief, the chief gets ALLHERE and a pre-connected decider sends
//           DECIDE; everyone else must get RELEASE with the chief's verdict.
//   DONE    every participant released (or failed, or timed out).
//   FINISH  anything that arrived after a release is an error; all close.
//
// Raw mode (--raw) is for floor servers that know no protocol: each
// participant sends one line and waits for one line.
//
// Exit status: 0 when every round was correct, 1 when one was not, 2 on a
// usage error.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "protocol.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

namespace proto = tfb::proto;

namespace {

using u64 = std::uint64_t;
using u32 = std::uint32_t;

u64 now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<u64>(ts.tv_sec) * 1'000'000'000ULL + static_cast<u64>(ts.tv_nsec);
}
u64 wall_ns() {  // CLOCK_REALTIME: comparable across processes (and namespaces)
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<u64>(ts.tv_sec) * 1'000'000'000ULL + static_cast<u64>(ts.tv_nsec);
}
double ms(u64 ns) { return static_cast<double>(ns) / 1e6; }
double ms_between(u64 from, u64 to) { return to >= from ? ms(to - from) : -ms(from - to); }

[[noreturn]] __attribute__((format(printf, 1, 2))) void usage_error(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fputs("tfb_loadgen: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputs("\n(see tfb_loadgen --help)\n", stderr);
  va_end(ap);
  std::exit(2);
}

const char* const help_text =
    "usage: tfb_loadgen --addr 127.0.0.1:PORT --participants M [options]\n"
    "Plays M participants of one barrier over M TCP connections and checks each round.\n"
    "  --addr HOST:PORT     the host (in 127.0.0.0/8, or any IPv4 address with --source-base)\n"
    "  --participants M     participants per round\n"
    "  --rounds R           rounds to play (default 1)\n"
    "  --name NAME          barrier name (default load); --scope SCOPE (default loadgen)\n"
    "  --verdicts LIST      per round, cycled: none (no chief), continue or stop (a chief\n"
    "                       waits for ALLHERE, then a DECIDE gives the verdict); default none\n"
    "  --raw                floor mode: send one line, wait for one line (no protocol)\n"
    "  --raw-line TEXT      the line sent in raw mode (default ARRIVE)\n"
    "  --workers W          worker processes (default: one per 16000 connections)\n"
    "  --sources K          loopback source addresses 127.1.0.1 and up (default 64)\n"
    "  --source-base IP     the first source address instead of 127.1.0.1 (e.g. this network\n"
    "                       namespace's own address, with --sources 1)\n"
    "One round shared by several load generators (bench/store-40k.sh):\n"
    "  --n TOTAL            the barrier's n (default M): this one plays M of the TOTAL\n"
    "  --id-prefix P        prefix of the participants' ids (unique per load generator)\n"
    "  --no-hold            hold no participant back: all M arrive at once; another load\n"
    "                       generator holds back the last one\n"
    "  --go-file PATH       once M-1 wait, print READY and wait for PATH to exist before the\n"
    "                       held-back participant arrives\n"
    "  --release-times F    write F.W (W: worker) with one line per released participant:\n"
    "                       ID CLOCK_REALTIME_NS; the RESULT line gives the wall clock of the\n"
    "                       last ARRIVE (final_arrive_wall_ns)\n"
    "  --window W           connections per worker in flight at once (default 256)\n"
    "  --keepalive-ms K     announce and send PING every K ms like `tfbarrier wait` (default 5000; 0: none)\n"
    "  --host-pid PID       read the host's memory and CPU time from /proc/PID\n"
    "  --timeout S          give up on a round after S seconds (default 120)\n"
    "  --quiet              only the RESULT lines and the verdict line\n";

struct options {
  std::string addr;
  u32 host_ip = 0;  // host order
  std::uint16_t port = 0;
  u32 m = 0;
  int rounds = 1;
  std::string name = "load", scope = "loadgen";
  std::vector<proto::verdict> verdicts{proto::verdict::none};
  bool raw = false;
  std::string raw_line = "ARRIVE";
  int workers = 0;
  u32 per_worker = 16000;
  u32 sources = 64;
  u32 source_base = 0x7F010001;  // 127.1.0.1
  bool any_addr = false;         // --source-base given: the host may be at any address
  u32 n = 0;                     // the barrier's n (0: m)
  std::string id_prefix = "lg";
  bool no_hold = false;
  std::string go_file, release_times;
  u32 window = 256;
  u32 keepalive_ms = 5000;
  int host_pid = 0;
  double timeout_s = 120;
  bool quiet = false;
};

u64 parse_u64(const char* opt, const char* s, u64 lo, u64 hi) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    usage_error("%s %s: expected a number from %" PRIu64 " to %" PRIu64, opt, s, lo, hi);
  return v;
}

options parse_args(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(help_text, stdout);
      std::exit(0);
    }
    if (a == "--raw") {
      o.raw = true;
      continue;
    }
    if (a == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (a == "--no-hold") {
      o.no_hold = true;
      continue;
    }
    if (i + 1 >= argc) usage_error("%s needs a value", a.c_str());
    const char* v = argv[++i];
    if (a == "--addr") o.addr = v;
    else if (a == "--participants" || a == "-m") o.m = static_cast<u32>(parse_u64(a.c_str(), v, 1, proto::max_n));
    else if (a == "--rounds") o.rounds = static_cast<int>(parse_u64(a.c_str(), v, 1, 1'000'000));
    else if (a == "--name") o.name = v;
    else if (a == "--scope") o.scope = v;
    else if (a == "--raw-line") o.raw_line = v;
    else if (a == "--n") o.n = static_cast<u32>(parse_u64(a.c_str(), v, 1, proto::max_n));
    else if (a == "--id-prefix") o.id_prefix = v;
    else if (a == "--go-file") o.go_file = v;
    else if (a == "--release-times") o.release_times = v;
    else if (a == "--source-base") {
      in_addr sb{};
      if (inet_pton(AF_INET, v, &sb) != 1) usage_error("--source-base %s: expected an IPv4 address", v);
      o.source_base = ntohl(sb.s_addr);
      o.any_addr = true;
    }
    else if (a == "--workers") o.workers = static_cast<int>(parse_u64(a.c_str(), v, 1, 256));
    else if (a == "--sources") o.sources = static_cast<u32>(parse_u64(a.c_str(), v, 1, 60000));
    else if (a == "--window") o.window = static_cast<u32>(parse_u64(a.c_str(), v, 1, 1'000'000));
    else if (a == "--keepalive-ms") o.keepalive_ms = static_cast<u32>(parse_u64(a.c_str(), v, 0, 3'600'000));
    else if (a == "--host-pid") o.host_pid = static_cast<int>(parse_u64(a.c_str(), v, 1, 1U << 30));
    else if (a == "--timeout") o.timeout_s = static_cast<double>(parse_u64(a.c_str(), v, 1, 86400));
    else if (a == "--verdicts") {
      o.verdicts.clear();
      std::string list = v;
      std::size_t pos = 0;
      while (pos <= list.size()) {
        std::size_t comma = list.find(',', pos);
        std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (item == "none") o.verdicts.push_back(proto::verdict::none);
        else if (auto pv = proto::parse_verdict(item)) o.verdicts.push_back(*pv);
        else usage_error("--verdicts: '%s' is not none, continue or stop", item.c_str());
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else {
      usage_error("unknown option %s", a.c_str());
    }
  }
  if (o.addr.empty() || o.m == 0) usage_error("--addr and --participants are required");
  auto colon = o.addr.rfind(':');
  if (colon == std::string::npos) usage_error("--addr %s: expected HOST:PORT", o.addr.c_str());
  in_addr ia{};
  if (inet_pton(AF_INET, o.addr.substr(0, colon).c_str(), &ia) != 1)
    usage_error("--addr %s: the host must be an IPv4 address", o.addr.c_str());
  o.host_ip = ntohl(ia.s_addr);
  if (!o.any_addr && (o.host_ip >> 24) != 127) usage_error("--addr %s: only loopback (127.0.0.0/8) is allowed", o.addr.c_str());
  o.port = static_cast<std::uint16_t>(parse_u64("--addr", o.addr.c_str() + colon + 1, 1, 65535));
  if (!proto::valid_name(o.name) || !proto::valid_name(o.scope)) usage_error("bad --name or --scope");
  if (o.n == 0) o.n = o.m;
  if (o.n < o.m) usage_error("--n %u is less than --participants %u", o.n, o.m);
  bool chief_any = std::any_of(o.verdicts.begin(), o.verdicts.end(), [](auto v) { return v != proto::verdict::none; });
  if (o.n != o.m && (chief_any || o.raw)) usage_error("--n other than M is for protocol rounds without a chief");
  if (o.no_hold && (chief_any || o.raw)) usage_error("--no-hold is for protocol rounds without a chief");
  if (o.raw && std::any_of(o.verdicts.begin(), o.verdicts.end(), [](auto v) { return v != proto::verdict::none; }))
    usage_error("--raw has no chief: use --verdicts none");
  return o;
}

// ---- host figures from /proc ----

struct host_sample {
  bool ok = false;
  long rss_kb = 0, hwm_kb = 0;
  double cpu_ms = 0;    // utime + stime, /proc/PID/stat (clock ticks)
  u64 sched_ns = 0;     // time on a CPU, /proc/PID/schedstat (nanoseconds)
};

host_sample sample_host(int pid) {
  host_sample s;
  if (pid <= 0) return s;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/status", pid);
  if (std::FILE* f = std::fopen(path, "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "VmRSS:", 6) == 0) s.rss_kb = std::atol(line + 6);
      if (std::strncmp(line, "VmHWM:", 6) == 0) s.hwm_kb = std::atol(line + 6);
    }
    std::fclose(f);
  } else {
    return s;
  }
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  if (std::FILE* f = std::fopen(path, "r")) {
    char buf[2048];
    std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    std::fclose(f);
    // Fields after the command name (which may hold spaces) start after the last ')'.
    if (char* p = std::strrchr(buf, ')')) {
      unsigned long long utime = 0, stime = 0;
      // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
      if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) == 2)
        s.cpu_ms = static_cast<double>(utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::snprintf(path, sizeof path, "/proc/%d/schedstat", pid);
  if (std::FILE* f = std::fopen(path, "r")) {
    unsigned long long t = 0;
    if (std::fscanf(f, "%llu", &t) == 1) s.sched_ns = t;
    std::fclose(f);
  }
  s.ok = true;
  return s;
}

/// Waits until the host has used (almost) no CPU for two 5 ms periods: it has
/// read everything sent so far. Without a host pid, waits 50 ms.
void settle(int pid) {
  if (pid <= 0) {
    usleep(50'000);
    return;
  }
  u64 give_up = now_ns() + 3'000'000'000ULL;
  int quiet_periods = 0;
  u64 last = sample_host(pid).sched_ns;
  while (quiet_periods < 2 && now_ns() < give_up) {
    usleep(5000);
    u64 t = sample_host(pid).sched_ns;
    quiet_periods = (t - last < 100'000) ? quiet_periods + 1 : 0;
    last = t;
  }
}

std::string loadavg() {
  std::string s;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    char buf[128] = {};
    if (std::fgets(buf, sizeof buf, f)) s = buf;
    std::fclose(f);
  }
  auto sp = s.find(' ');
  if (sp != std::string::npos) sp = s.find(' ', sp + 1);
  if (sp != std::string::npos) sp = s.find(' ', sp + 1);
  return sp == std::string::npos ? s : s.substr(0, sp);
}

// ---- parent <-> worker messages (SOCK_SEQPACKET: one struct per message) ----

enum msg_kind : std::int32_t { m_start = 1, m_go, m_finish, m_quit, m_ready, m_done, m_closed };

struct command {
  std::int32_t kind = 0;
  std::int32_t round = 0;
};

struct report {
  std::int32_t kind = 0;
  std::int32_t worker = 0;
  u32 participants = 0;    // this worker's share
  u32 released = 0;        // RELEASE received by plain participants
  u32 allhere = 0;         // ALLHERE received by the chief
  u32 errors = 0;
  u32 slow_connects = 0;   // connects that took over 500 ms (a dropped SYN is retried after 1 s)
  u32 delivered = 0;       // the decider's RELEASE delivered=K
  u32 decider_released = 0;
  std::uint64_t gen_min = UINT64_MAX, gen_max = 0;
  u64 t_last_arrive = 0;   // last ARRIVE (raw: line) sent before READY
  u64 t_ready = 0;
  u64 t_final_arrive = 0;  // the held-back participant's ARRIVE (worker 0)
  u64 t_final_arrive_wall = 0;  // the same, CLOCK_REALTIME
  u64 t_allhere = 0, t_decide = 0, t_decider_release = 0;
  u64 t_first_release = UINT64_MAX, t_last_release = 0;
  u64 max_connect_ns = 0;
  char error[480] = {};
};

bool send_msg(int fd, const void* p, std::size_t n) {
  for (;;) {
    ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r == static_cast<ssize_t>(n)) return true;
    if (r < 0 && errno == EINTR) continue;
    return false;
  }
}
bool recv_msg(int fd, void* p, std::size_t n) {
  for (;;) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r == static_cast<ssize_t>(n)) return true;
    if (r < 0 && errno == EINTR) continue;
    return false;
  }
}

// ---- a worker: its share of the participants ----

enum class role : std::uint8_t { member, chief, held, decider };
enum class state : std::uint8_t {
  idle,
  connecting,   // connect() in progress
  greeting,     // HELLO (and ARRIVE) sent, waiting for the host's HELLO
  acking,       // ARRIVE sent, waiting for WAITING
  parked,       // waiting for the release
  held_ready,   // the held-back one: greeted, not arrived
  decider_ready,
  decide_sent,  // DECIDE sent, waiting for DECIDED
  decided,      // waiting for the decider's RELEASE delivered=K
  done,         // released (terminal)
  closed,       // the chief after ALLHERE, or failed (terminal)
};

const char* state_name(state s) {
  switch (s) {
    case state::idle: return "not started";
    case state::connecting: return "connecting";
    case state::greeting: return "waiting for the host's HELLO";
    case state::acking: return "waiting for WAITING";
    case state::parked: return "waiting for the release";
    case state::held_ready: return "held back";
    case state::decider_ready: return "decider ready";
    case state::decide_sent: return "waiting for DECIDED";
    case state::decided: return "waiting for the decider's RELEASE";
    case state::done: return "released";
    case state::closed: return "closed";
  }
  return "?";
}

struct conn {
  int fd = -1;
  role r = role::member;
  state s = state::idle;
  bool in_flight = false;  // counts against the window
  bool greeted = false;
  std::uint64_t gen = 0;
  u32 g = 0;  // global index: picks the source address and the id
  u64 t0 = 0;
  u64 released_wall = 0;  // CLOCK_REALTIME of its RELEASE (--release-times)
  proto::line_splitter sp;
  proto::reply_reader rr;
};

class worker {
 public:
  worker(const options& o, int index, u32 first, u32 count, int ctl)
      : o_(o), index_(index), first_(first), count_(count), ctl_(ctl) {}

  int run() {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) return 1;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = ctl_key;
    epoll_ctl(ep_, EPOLL_CTL_ADD, ctl_, &ev);
    for (;;) {
      command c;
      if (!recv_msg(ctl_, &c, sizeof c)) return 1;
      if (c.kind == m_quit) return 0;
      if (c.kind == m_start) play(c.round);
    }
  }

 private:
  static constexpr u64 ctl_key = UINT64_MAX;

  void error(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    ++rep_.errors;
    if (rep_.error[0] != '\0') return;
    std::va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(rep_.error, sizeof rep_.error, fmt, ap);
    va_end(ap);
  }

  sockaddr_in host_addr() const {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(o_.port);
    a.sin_addr.s_addr = htonl(o_.host_ip);
    return a;
  }

  std::string id_of(const conn& c) const {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%sr%dp%u", o_.id_prefix.c_str(), round_, c.g);
    return buf;
  }

  void play(int r) {
    round_ = r;
    v_ = o_.verdicts[static_cast<std::size_t>(r - 1) % o_.verdicts.size()];
    chief_round_ = v_ != proto::verdict::none;
    message_ = chief_round_ ? "loadgen round " + std::to_string(r) : std::string();
    rep_ = report{};
    rep_.worker = index_;
    rep_.participants = count_;
    conns_.clear();
    conns_.resize(count_ + (index_ == 0 && chief_round_ ? 1 : 0));
    for (u32 i = 0; i < conns_.size(); ++i) {
      conn& c = conns_[i];
      c.g = i < count_ ? first_ + i : o_.m;
      if (i == count_) c.r = role::decider;
      else if (index_ == 0 && i == count_ - 1 && !o_.no_hold) c.r = role::held;
      else if (index_ == 0 && chief_round_ && i == 0) c.r = role::chief;
    }
    next_ = 0;
    in_flight_ = 0;
    pending_ = static_cast<u32>(conns_.size());
    bool ready_sent = false, done_sent = false;
    u64 deadline = now_ns() + static_cast<u64>(o_.timeout_s * 1e9);
    u64 next_ping = o_.keepalive_ms ? now_ns() + u64{o_.keepalive_ms} * 1'000'000ULL : UINT64_MAX;
    std::vector<epoll_event> evs(1024);
    for (;;) {
      while (next_ < conns_.size() && in_flight_ < o_.window) start(next_++);
      if (!ready_sent && next_ == conns_.size() && in_flight_ == 0) {
        rep_.kind = m_ready;
        rep_.t_ready = now_ns();
        send_msg(ctl_, &rep_, sizeof rep_);
        ready_sent = true;
      }
      if (!done_sent && pending_ == 0) {
        rep_.kind = m_done;
        send_msg(ctl_, &rep_, sizeof rep_);
        done_sent = true;
      }
      u64 t = now_ns();
      if (!done_sent && t >= deadline) {
        give_up();
        continue;
      }
      if (!o_.raw && t >= next_ping) {
        ping_all();
        next_ping = t + u64{o_.keepalive_ms} * 1'000'000ULL;
      }
      u64 wake = std::min(done_sent ? UINT64_MAX : deadline, next_ping);
      int timeout_ms = wake == UINT64_MAX ? -1 : static_cast<int>(std::min<u64>((wake - t) / 1'000'000 + 1, 60'000));
      int n = epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), timeout_ms);
      if (n < 0 && errno != EINTR) {
        error("epoll_wait: %s", std::strerror(errno));
        return;
      }
      for (int k = 0; k < n; ++k) {
        if (evs[k].data.u64 == ctl_key) {
          command c;
          if (!recv_msg(ctl_, &c, sizeof c)) std::_Exit(1);  // the parent is gone
          if (c.kind == m_go) go();
          else if (c.kind == m_finish) {
            finish();
            return;
          } else if (c.kind == m_quit) {
            std::_Exit(0);
          }
          continue;
        }
        auto i = static_cast<u32>(evs[k].data.u64);
        conn& cn = conns_[i];
        if (cn.fd < 0) continue;
        if (cn.s == state::connecting) {
          if (evs[k].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) connected(i);
          continue;
        }
        if (evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) readable(i);
      }
    }
  }

  void set_terminal(conn& c, state s) {
    if (c.s == state::done || c.s == state::closed) return;
    c.s = s;
    --pending_;
    leave_flight(c);
  }
  void leave_flight(conn& c) {
    if (c.in_flight) {
      c.in_flight = false;
      --in_flight_;
    }
  }
  void close_fd(conn& c) {
    if (c.fd >= 0) {
      ::close(c.fd);  // also leaves the epoll set
      c.fd = -1;
    }
  }
  void fail(conn& c, const char* what, const char* detail = "") {
    error("participant %u (%s): %s%s%s", c.g, state_name(c.s), what, *detail ? ": " : "", detail);
    close_fd(c);
    set_terminal(c, state::closed);
  }

  void start(u32 i) {
    conn& c = conns_[i];
    c.t0 = now_ns();
    c.in_flight = true;
    ++in_flight_;
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) return fail(c, "socket", std::strerror(errno));
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl(o_.source_base + c.g % o_.sources);
    if (::bind(c.fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return fail(c, "bind", std::strerror(errno));
    sockaddr_in dst = host_addr();
    int rc = ::connect(c.fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst);
    if (rc != 0 && errno != EINPROGRESS) return fail(c, "connect", std::strerror(errno));
    epoll_event ev{};
    ev.events = rc == 0 ? EPOLLIN : EPOLLOUT;
    ev.data.u64 = i;
    epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev);
    c.s = state::connecting;
    if (rc == 0) connected(i);
  }

  bool write_line(conn& c, const std::string& bytes) {
    ssize_t n = ::send(c.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(bytes.size())) return true;
    fail(c, "write", n < 0 ? std::strerror(errno) : "short write");
    return false;
  }

  std::string arrive_line(const conn& c) const {
    proto::arrive a;
    a.name = o_.name;
    a.scope = o_.scope;
    a.id = id_of(c);
    a.n = o_.n;
    a.chief = c.r == role::chief;
    return proto::format_request(a);
  }

  void connected(u32 i) {
    conn& c = conns_[i];
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
      return fail(c, "connect", std::strerror(err ? err : errno));
    u64 took = now_ns() - c.t0;
    rep_.max_connect_ns = std::max(rep_.max_connect_ns, took);
    if (took > 500'000'000ULL) ++rep_.slow_connects;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
    if (o_.raw) {
      if (c.r == role::held) {
        c.s = state::held_ready;
        leave_flight(c);
        return;
      }
      rep_.t_last_arrive = std::max(rep_.t_last_arrive, now_ns());
      if (!write_line(c, o_.raw_line + "\n")) return;
      c.s = state::parked;
      leave_flight(c);
      return;
    }
    std::string bytes = proto::format_request(proto::hello{static_cast<u32>(proto::protocol_version), "loadgen",
                                                          static_cast<u32>(getpid()), o_.keepalive_ms});
    bool arrives = c.r == role::member || c.r == role::chief;
    if (arrives) {
      bytes += arrive_line(c);
      rep_.t_last_arrive = std::max(rep_.t_last_arrive, now_ns());
    }
    if (!write_line(c, bytes)) return;
    c.s = state::greeting;
  }

  void readable(u32 i) {
    conn& c = conns_[i];
    char buf[8192];
    for (;;) {
      ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.sp.feed(std::string_view(buf, static_cast<std::size_t>(n)));
        while (c.fd >= 0) {
          auto line = c.sp.next();
          if (!line) break;
          if (o_.raw) raw_line(c, *line);
          else protocol_line(i, *line);
        }
        if (c.fd >= 0 && c.sp.overflow()) fail(c, "the host sent an over-long line");
        if (c.fd < 0 || static_cast<std::size_t>(n) < sizeof buf) return;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (c.s == state::done) {
        close_fd(c);  // the host closed after the release: allowed
        return;
      }
      return fail(c, "the host closed the connection", n < 0 ? std::strerror(errno) : "EOF");
    }
  }

  void released(conn& c) {
    u64 t = now_ns();
    if (!o_.release_times.empty()) c.released_wall = wall_ns();
    rep_.t_first_release = std::min(rep_.t_first_release, t);
    rep_.t_last_release = std::max(rep_.t_last_release, t);
    ++rep_.released;
    set_terminal(c, state::done);
  }

  void raw_line(conn& c, const std::string& line) {
    if (c.s == state::parked) return released(c);
    if (c.s == state::done) return fail(c, "a second line after the release", line.c_str());
    fail(c, "a line before it arrived", line.c_str());
  }

  void note_gen(std::uint64_t g) {
    rep_.gen_min = std::min(rep_.gen_min, g);
    rep_.gen_max = std::max(rep_.gen_max, g);
  }

  void protocol_line(u32 i, const std::string& line) {
    conn& c = conns_[i];
    std::string err;
    auto rep = c.rr.feed(line, err);
    if (!err.empty()) return fail(c, "unparsable line", (line + " (" + err + ")").c_str());
    if (!rep) return;
    if (std::holds_alternative<proto::pong>(*rep)) return;
    if (std::holds_alternative<proto::error_reply>(*rep) || std::holds_alternative<proto::shutdown>(*rep) ||
        std::holds_alternative<proto::aborted>(*rep))
      return fail(c, "the host said", line.c_str());
    auto unexpected = [&] { fail(c, "unexpected line", line.c_str()); };
    switch (c.s) {
      case state::greeting: {
        auto* hr = std::get_if<proto::hello_reply>(&*rep);
        if (!hr) return unexpected();
        if (hr->auth != "none")
          return fail(c, "the host wants authentication, which this load generator does not speak; start it with "
                         "no secret (a HOME without .tfbarrier/secret, no --secret-file or TFBARRIER_SECRET_FILE)",
                      line.c_str());
        c.greeted = true;
        if (c.r == role::held) {
          c.s = state::held_ready;
          leave_flight(c);
        } else if (c.r == role::decider) {
          c.s = state::decider_ready;
          leave_flight(c);
        } else {
          c.s = state::acking;
        }
        return;
      }
      case state::acking: {
        auto* w = std::get_if<proto::waiting>(&*rep);
        if (!w || w->name != o_.name || w->n != std::optional<u32>(o_.n)) return unexpected();
        c.gen = w->gen;
        note_gen(w->gen);
        c.s = state::parked;
        leave_flight(c);
        return;
      }
      case state::parked: {
        if (c.r == role::chief) {
          auto* ah = std::get_if<proto::all_here>(&*rep);
          if (!ah || ah->gen != c.gen || ah->n != o_.m || ah->arrived != o_.m) return unexpected();
          rep_.t_allhere = now_ns();
          ++rep_.allhere;
          // The chief's `wait --chief` ends here; `tfbarrier decide` gives the verdict.
          conn& d = conns_[count_];
          if (d.s != state::decider_ready) {
            fail(d, "the decider was not ready when ALLHERE came");
          } else {
            proto::decide dc;
            dc.name = o_.name;
            dc.scope = o_.scope;
            dc.id = id_of(d);
            dc.v = v_;
            dc.n = o_.m;
            dc.wait = true;
            dc.message = message_;
            std::string bytes = proto::format_request(dc);
            rep_.t_decide = now_ns();
            if (write_line(d, bytes)) d.s = state::decide_sent;
          }
          close_fd(c);
          set_terminal(c, state::closed);
          return;
        }
        auto* rel = std::get_if<proto::release>(&*rep);
        proto::verdict want = chief_round_ ? v_ : proto::verdict::continue_;
        if (!rel || rel->gen != c.gen || rel->name != o_.name || rel->v != want || rel->message != message_ ||
            rel->delivered)
          return unexpected();
        return released(c);
      }
      case state::decide_sent: {
        auto* d = std::get_if<proto::decided>(&*rep);
        if (!d || d->v != v_ || d->name != o_.name) return unexpected();
        c.gen = d->gen;
        note_gen(d->gen);
        c.s = state::decided;
        return;
      }
      case state::decided: {
        auto* rel = std::get_if<proto::release>(&*rep);
        if (!rel || rel->gen != c.gen || rel->v != v_ || rel->message != message_ || !rel->delivered)
          return unexpected();
        rep_.t_decider_release = now_ns();
        rep_.delivered = *rel->delivered;
        ++rep_.decider_released;
        set_terminal(c, state::done);
        return;
      }
      case state::done: return fail(c, "a line after the release", line.c_str());
      default: return unexpected();
    }
  }

  void go() {
    if (index_ != 0) return;
    conn& c = conns_[count_ - 1];
    if (c.s != state::held_ready) return;  // it failed already; reported
    rep_.t_final_arrive_wall = wall_ns();
    rep_.t_final_arrive = now_ns();
    if (o_.raw) {
      if (write_line(c, o_.raw_line + "\n")) c.s = state::parked;
      return;
    }
    if (write_line(c, arrive_line(c))) c.s = state::acking;
  }

  void ping_all() {
    static const std::string ping = proto::format_request(proto::ping{});
    for (conn& c : conns_)
      if (c.fd >= 0 && c.greeted && c.s != state::done && c.s != state::closed)
        ::send(c.fd, ping.data(), ping.size(), MSG_NOSIGNAL);
  }

  void give_up() {
    u32 counts[16] = {};
    for (conn& c : conns_)
      if (c.s != state::done && c.s != state::closed) ++counts[static_cast<int>(c.s)];
    std::string what;
    for (int s = 0; s < 16; ++s)
      if (counts[s]) what += (what.empty() ? "" : ", ") + std::to_string(counts[s]) + " " + state_name(static_cast<state>(s));
    error("timed out after %.0f s: %s", o_.timeout_s, what.c_str());
    for (conn& c : conns_)
      if (c.s != state::done && c.s != state::closed) {
        close_fd(c);
        set_terminal(c, state::closed);
        ++rep_.errors;
      }
  }

  void finish() {
    // Whatever came after a release (a second RELEASE, say) is an error.
    std::vector<epoll_event> evs(1024);
    for (;;) {
      int n = epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), 0);
      if (n <= 0) break;
      bool any = false;
      for (int k = 0; k < n; ++k) {
        if (evs[k].data.u64 == ctl_key) continue;
        auto i = static_cast<u32>(evs[k].data.u64);
        if (conns_[i].fd >= 0) {
          readable(i);
          any = true;
        }
      }
      if (!any) break;
    }
    for (conn& c : conns_) close_fd(c);
    if (!o_.release_times.empty()) write_release_times();
    rep_.kind = m_closed;
    send_msg(ctl_, &rep_, sizeof rep_);
  }

  void write_release_times() {
    std::string path = o_.release_times + "." + std::to_string(index_);
    std::FILE* f = std::fopen(path.c_str(), "a");
    if (!f) return error("%s: %s", path.c_str(), std::strerror(errno));
    for (const conn& c : conns_)
      if (c.s == state::done && c.released_wall && c.r != role::decider)
        std::fprintf(f, "%s %" PRIu64 "\n", id_of(c).c_str(), c.released_wall);
    if (std::fclose(f) != 0) error("%s: %s", path.c_str(), std::strerror(errno));
  }

  const options& o_;
  int index_;
  u32 first_, count_;
  int ctl_;
  int ep_ = -1;
  int round_ = 0;
  proto::verdict v_ = proto::verdict::none;
  bool chief_round_ = false;
  std::string message_;
  std::vector<conn> conns_;
  u32 next_ = 0, in_flight_ = 0, pending_ = 0;
  report rep_;
};

// ---- the parent ----

struct child {
  pid_t pid = -1;
  int ctl = -1;
  u32 first = 0, count = 0;
};

std::vector<child> children;

void kill_children() {
  for (auto& c : children)
    if (c.pid > 0) ::kill(c.pid, SIGKILL);
  for (auto& c : children)
    if (c.pid > 0) ::waitpid(c.pid, nullptr, 0);
}

/// Collects one report of `kind` from every worker, within `seconds`.
bool collect(std::int32_t kind, std::vector<report>& out, double seconds) {
  out.assign(children.size(), report{});
  std::vector<bool> got(children.size(), false);
  std::size_t have = 0;
  u64 deadline = now_ns() + static_cast<u64>(seconds * 1e9);
  while (have < children.size()) {
    std::vector<pollfd> pf;
    std::vector<std::size_t> idx;
    for (std::size_t w = 0; w < children.size(); ++w)
      if (!got[w]) {
        pf.push_back(pollfd{children[w].ctl, POLLIN, 0});
        idx.push_back(w);
      }
    u64 t = now_ns();
    if (t >= deadline) return false;
    int n = ::poll(pf.data(), pf.size(), static_cast<int>((deadline - t) / 1'000'000 + 1));
    if (n < 0 && errno != EINTR) return false;
    for (std::size_t k = 0; k < pf.size(); ++k) {
      if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      report r;
      if (!recv_msg(pf[k].fd, &r, sizeof r)) {
        std::fprintf(stderr, "tfb_loadgen: worker %zu died\n", idx[k]);
        return false;
      }
      if (r.kind != kind) continue;  // e.g. a DONE that overtook nothing: cannot happen, but be safe
      out[idx[k]] = r;
      got[idx[k]] = true;
      ++have;
    }
  }
  return true;
}

void broadcast(std::int32_t kind, int round) {
  command c{kind, round};
  for (auto& ch : children) send_msg(ch.ctl, &c, sizeof c);
}

struct round_result {
  bool ok = true;
  std::string why;
  void fail(const std::string& s) {
    if (ok) why = s;
    ok = false;
  }
};

}  // namespace

int main(int argc, char** argv) {
  options o = parse_args(argc, argv);
  std::signal(SIGPIPE, SIG_IGN);

  // Raise our own descriptor limit to the hard limit.
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  getrlimit(RLIMIT_NOFILE, &rl);

  bool any_chief = std::any_of(o.verdicts.begin(), o.verdicts.end(), [](auto v) { return v != proto::verdict::none; });
  int w = o.workers ? o.workers : static_cast<int>((o.m + o.per_worker - 1) / o.per_worker);
  w = std::max(1, std::min<int>(w, static_cast<int>(o.m)));
  u32 base = o.m / static_cast<u32>(w), extra = o.m % static_cast<u32>(w);
  u32 first = 0;
  for (int k = 0; k < w; ++k) {
    child c;
    c.first = first;
    c.count = base + (static_cast<u32>(k) < extra ? 1 : 0);
    first += c.count;
    children.push_back(c);
  }
  if (any_chief && children[0].count < 2) usage_error("a chief round needs at least 2 participants in worker 0");
  u32 biggest = children[0].count + 1;
  if (rl.rlim_cur != RLIM_INFINITY && biggest + 16 > rl.rlim_cur)
    usage_error("%u connections per worker do not fit the descriptor limit %llu: use more --workers", biggest,
                static_cast<unsigned long long>(rl.rlim_cur));

  for (int k = 0; k < w; ++k) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      std::perror("tfb_loadgen: socketpair");
      kill_children();
      return 1;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("tfb_loadgen: fork");
      kill_children();
      return 1;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(sv[0]);
      for (int j = 0; j < k; ++j) ::close(children[static_cast<std::size_t>(j)].ctl);
      worker wk(o, k, children[static_cast<std::size_t>(k)].first, children[static_cast<std::size_t>(k)].count, sv[1]);
      std::_Exit(wk.run());
    }
    ::close(sv[1]);
    children[static_cast<std::size_t>(k)].pid = pid;
    children[static_cast<std::size_t>(k)].ctl = sv[0];
  }

  if (!o.quiet)
    std::printf("tfb_loadgen: %u participants of %s/%s at %s, %d round(s), %d worker process(es), %u source addresses%s\n",
                o.m, o.scope.c_str(), o.name.c_str(), o.addr.c_str(), o.rounds, w, o.sources,
                o.raw ? ", raw mode" : "");
  std::fflush(stdout);

  int bad_rounds = 0;
  std::uint64_t prev_gen = 0;
  double collect_s = o.timeout_s + 30;
  for (int r = 1; r <= o.rounds; ++r) {
    proto::verdict v = o.verdicts[static_cast<std::size_t>(r - 1) % o.verdicts.size()];
    bool chief = v != proto::verdict::none;
    // Let the host finish with the previous round (closing its connections)
    // first: a host busy with that would drop new SYNs (its backlog is full).
    settle(o.host_pid);
    std::string load = loadavg();
    host_sample s0 = sample_host(o.host_pid);
    u64 t_start = now_ns();
    broadcast(m_start, r);
    std::vector<report> ready, done, closed;
    if (!collect(m_ready, ready, collect_s)) {
      std::fprintf(stderr, "tfb_loadgen: round %d: the workers did not get ready\n", r);
      kill_children();
      return 1;
    }
    settle(o.host_pid);
    host_sample s1 = sample_host(o.host_pid);
    if (!o.go_file.empty()) {
      // Another process decides when the last participant arrives: say so, then wait for its file.
      std::printf("READY round=%d\n", r);
      std::fflush(stdout);
      while (::access(o.go_file.c_str(), F_OK) != 0) ::usleep(200);
    }
    broadcast(m_go, r);
    if (!collect(m_done, done, collect_s)) {
      std::fprintf(stderr, "tfb_loadgen: round %d: the workers did not finish\n", r);
      kill_children();
      return 1;
    }
    host_sample s2 = sample_host(o.host_pid);
    broadcast(m_finish, r);
    if (!collect(m_closed, closed, 30)) {
      std::fprintf(stderr, "tfb_loadgen: round %d: the workers did not close\n", r);
      kill_children();
      return 1;
    }

    // Figures and checks.
    round_result res;
    u64 last_arrive = 0, first_release = UINT64_MAX, last_release = 0, max_connect = 0;
    u32 released = 0, allhere = 0, errors = 0, slow = 0;
    std::uint64_t gmin = UINT64_MAX, gmax = 0;
    std::string first_error;
    for (const report& rp : closed) {
      last_arrive = std::max(last_arrive, rp.t_last_arrive);
      first_release = std::min(first_release, rp.t_first_release);
      last_release = std::max(last_release, rp.t_last_release);
      max_connect = std::max(max_connect, rp.max_connect_ns);
      released += rp.released;
      allhere += rp.allhere;
      errors += rp.errors;
      slow += rp.slow_connects;
      gmin = std::min(gmin, rp.gen_min);
      gmax = std::max(gmax, rp.gen_max);
      if (first_error.empty() && rp.error[0]) first_error = rp.error;
    }
    const report& w0 = closed[0];
    u64 final_arrive = w0.t_final_arrive;
    u32 want_released = o.m - (chief ? 1 : 0);
    if (errors) res.fail(std::to_string(errors) + " error(s); first: " + first_error);
    if (released != want_released)
      res.fail("released " + std::to_string(released) + " of " + std::to_string(want_released));
    if (final_arrive == 0 && !o.no_hold) res.fail("the last participant never arrived");
    if (first_release != UINT64_MAX && first_release < final_arrive)
      res.fail("a RELEASE came " + std::to_string(ms_between(first_release, final_arrive)) +
               " ms before the last ARRIVE was sent");
    if (chief) {
      if (allhere != 1) res.fail("the chief got ALLHERE " + std::to_string(allhere) + " times");
      if (w0.t_allhere && w0.t_allhere < final_arrive) res.fail("ALLHERE came before the last ARRIVE was sent");
      if (first_release != UINT64_MAX && first_release < w0.t_decide)
        res.fail("a RELEASE came before the chief's DECIDE was sent");
      if (w0.decider_released != 1) res.fail("the decider got no RELEASE");
      else if (w0.delivered != o.m - 1)
        res.fail("the decider's RELEASE says delivered=" + std::to_string(w0.delivered) + ", expected " +
                 std::to_string(o.m - 1));
    }
    if (!o.raw) {
      if (gmin != gmax) res.fail("participants saw different rounds (gen " + std::to_string(gmin) + " to " +
                                 std::to_string(gmax) + ")");
      else if (prev_gen && gmin != prev_gen + 1)
        res.fail("round gen " + std::to_string(gmin) + " does not follow " + std::to_string(prev_gen));
      if (gmin == gmax) prev_gen = gmin;
    }

    double connect_ms = ms_between(t_start, last_arrive);
    double fanout_ms = ms_between(chief ? w0.t_decide : final_arrive, last_release);
    double tail_ms = ms_between(final_arrive, last_release);
    double per_waiting = 0, per_peak = 0;
    if (s0.ok && s1.ok && o.m > 1) per_waiting = static_cast<double>(s1.rss_kb - s0.rss_kb) * 1024.0 / (o.m - 1);
    if (s0.ok && s2.ok) per_peak = static_cast<double>(s2.hwm_kb - s0.rss_kb) * 1024.0 / o.m;
    double cpu_round = s2.ok && s0.ok ? s2.cpu_ms - s0.cpu_ms : 0;
    double sched_round = s2.ok && s0.ok ? ms(s2.sched_ns - s0.sched_ns) : 0;
    double sched_fanout = s2.ok && s1.ok ? ms(s2.sched_ns - s1.sched_ns) : 0;

    std::string load_tag = load.empty() ? "?" : load;
    std::replace(load_tag.begin(), load_tag.end(), ' ', '/');
    if (!o.quiet) {
      std::printf("round %d (%s): connect+arrive %.1f ms, fan-out %.2f ms%s", r,
                  chief ? (v == proto::verdict::stop ? "chief, stop" : "chief, continue") : "no chief", connect_ms,
                  fanout_ms, chief ? " (from the DECIDE)" : " (from the last ARRIVE)");
      if (chief) std::printf(", last ARRIVE to last RELEASE %.2f ms", tail_ms);
      if (s0.ok)
        std::printf("; host: RSS %.1f -> %.1f MiB with %u waiting (%.0f B each), peak %.1f MiB; CPU %.0f ms for the round "
                    "(%.2f ms for the fan-out)",
                    static_cast<double>(s0.rss_kb) / 1024, static_cast<double>(s1.rss_kb) / 1024, o.m - 1, per_waiting,
                    static_cast<double>(s2.hwm_kb) / 1024, sched_round, sched_fanout);
      if (slow) std::printf("; %u slow connects (max %.0f ms)", slow, ms(max_connect));
      std::printf("; load %s: %s\n", load.c_str(), res.ok ? "correct" : ("WRONG: " + res.why).c_str());
    }
    std::printf("RESULT round=%d m=%u mode=%s verdict=%s workers=%d connect_ms=%.3f fanout_ms=%.3f tail_ms=%.3f "
                "rss_base_kb=%ld rss_wait_kb=%ld hwm_before_kb=%ld hwm_kb=%ld bytes_per_waiting=%.1f "
                "peak_bytes_per_participant=%.1f host_cpu_ms=%.1f host_sched_ms=%.3f host_sched_fanout_ms=%.3f "
                "max_connect_ms=%.1f slow_connects=%u released=%u errors=%u final_arrive_wall_ns=%" PRIu64 " load=%s ok=%d\n",
                r, o.m, o.raw ? "raw" : "protocol", chief ? std::string(proto::to_string(v)).c_str() : "none", w,
                connect_ms, fanout_ms, tail_ms, s0.rss_kb, s1.rss_kb, s0.hwm_kb, s2.hwm_kb, per_waiting, per_peak,
                cpu_round, sched_round, sched_fanout, ms(max_connect), slow, released, errors,
                w0.t_final_arrive_wall, load_tag.c_str(),
                res.ok ? 1 : 0);
    if (!res.ok) {
      ++bad_rounds;
      std::fflush(stdout);
      std::fprintf(stderr, "tfb_loadgen: round %d WRONG: %s\n", r, res.why.c_str());
    }
    std::fflush(stdout);
  }
  broadcast(m_quit, 0);
  for (auto& c : children) ::waitpid(c.pid, nullptr, 0);
  if (bad_rounds) {
    std::printf("tfb_loadgen: %d of %d rounds WRONG\n", bad_rounds, o.rounds);
    return 1;
  }
  std::printf("tfb_loadgen: %d round(s) of %u participants correct: each released exactly once with the right "
              "verdict, none before the last arrival\n",
              o.rounds, o.m);
  return 0;
}
