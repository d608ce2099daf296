#include "store_link.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "auth.h"
#include "secret_files.h"
#include "exit_codes.h"
#include "munge_auth.h"
#include "private_files.h"
#include "store_name.h"

#ifndef TFB_MODULE_DIR  // relative to the binary's directory (CMakeLists.txt)
#define TFB_MODULE_DIR "../lib/tfbarrier/modules"
#endif

namespace tfb::store {

namespace {

constexpr std::size_t max_batch_bytes = 1 << 20;  // under etcd's 1.5 MiB request limit, base64 included
constexpr auto retry_every = std::chrono::milliseconds(200);
constexpr std::size_t snapshot_chunk_bytes = 1 << 20;  // one put per chunk, as a batch
constexpr std::size_t ops_per_txn = 100;               // etcd allows 128
constexpr auto alarm_every = std::chrono::seconds(5);

/// Starts a thread with every signal blocked: SIGINT and SIGTERM are the event loop's.
template <typename F>
std::thread quiet_thread(F f) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  std::thread t(std::move(f));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return t;
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The directory of this binary, "" when /proc does not say.
std::string binary_dir() {
  char buf[4096];
  ssize_t len = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (len <= 0) return {};
  std::string exe(buf, static_cast<std::size_t>(len));
  auto slash = exe.rfind('/');
  return slash == std::string::npos ? std::string() : exe.substr(0, slash);
}

/// Up to size bytes of fd (fewer if it ends first).
std::string read_size(int fd, std::size_t size) {
  std::string out(size, '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

/// Reads a TLS file of at most 1 MiB into out. With secret, the file must
/// also be safe to hold a private key (read_tls_files). Or why not.
std::optional<tfb::error> read_tls_file(const std::string& path, const char* option, bool secret, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (secret ? O_NOFOLLOW : 0));
  if (fd < 0) {
    int e = errno;
    if (secret && e == ELOOP) {
      return tfb::error{
          error_kind::auth,
          fmt::format("the store's client key {} ({}) is a symbolic link; tfbarrier does not follow one there, "
                      "as for the secret file: point {} (or TFBARRIER_STORE_KEY) at the file itself",
                      path, option, option)};
    }
    return tfb::error{error_kind::usage, fmt::format("cannot read {} {}: {}; give a PEM file that you can read", option,
                                                     path, std::strerror(e))};
  }
  files::fd f(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return tfb::error{error_kind::usage, fmt::format("{} {} is not a regular file; give a PEM file", option, path)};
  }
  if (secret && st.st_uid != ::getuid()) {
    return tfb::error{
        error_kind::auth,
        fmt::format("the store's client key {} belongs to uid {}, not to you (uid {}); use a key file of your "
                    "own, mode 600",
                    path, st.st_uid, ::getuid())};
  }
  if (secret && (st.st_mode & 077) != 0) {
    return tfb::error{
        error_kind::auth,
        fmt::format("the store's client key {} can be read or changed by others (mode {:04o}), and with it "
                    "anyone could write to the store as this host; run `chmod 600 {}`",
                    path, st.st_mode & 07777, path)};
  }
  constexpr std::size_t most = 1 << 20;
  if (st.st_size > static_cast<off_t>(most)) {
    return tfb::error{error_kind::usage, fmt::format("{} {} is larger than 1 MiB; give a PEM file", option, path)};
  }
  out = read_size(fd, static_cast<std::size_t>(st.st_size));
  if (out.find("-----BEGIN ") == std::string::npos) {
    return tfb::error{error_kind::usage,
                      fmt::format("{} {} holds no PEM block (-----BEGIN ...); give the file in PEM", option, path)};
  }
  return std::nullopt;
}

}  // namespace

std::optional<tfb::error> read_tls_files(client_config& c) {
  std::string ignored;
  if (!c.ca.empty())
    if (auto e = read_tls_file(c.ca, "--store-ca", false, ignored)) return e;
  if (!c.cert.empty())
    if (auto e = read_tls_file(c.cert, "--store-cert", false, c.cert_pem)) return e;
  if (!c.key.empty())
    if (auto e = read_tls_file(c.key, "--store-key", true, c.key_pem)) return e;
  return std::nullopt;
}

std::optional<tfb::error> read_password_file(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ELOOP) {
      return tfb::error{
          error_kind::auth,
          fmt::format("--store-password-file {} is a symbolic link; tfbarrier does not follow one there, as "
                      "for the secret file: point --store-password-file (or TFBARRIER_STORE_PASSWORD_FILE) at "
                      "the file itself",
                      path)};
    }
    return tfb::error{
        error_kind::usage,
        fmt::format("cannot read --store-password-file {}: {}; give a file that you can read, mode 600, that "
                    "holds the etcd user's password",
                    path, std::strerror(e))};
  }
  files::fd f(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return tfb::error{
        error_kind::usage,
        fmt::format("--store-password-file {} is not a regular file; give a file, mode 600, that holds the etcd "
                    "user's password",
                    path)};
  }
  if (st.st_uid != ::getuid()) {
    return tfb::error{
        error_kind::auth,
        fmt::format("--store-password-file {} belongs to uid {}, not to you (uid {}); use a file of your own, "
                    "mode 600",
                    path, st.st_uid, ::getuid())};
  }
  if ((st.st_mode & 077) != 0) {
    return tfb::error{
        error_kind::auth,
        fmt::format("--store-password-file {} can be read or changed by others (mode {:04o}), and with the "
                    "password in it anyone could write to the job's prefix in etcd; run `chmod 600 {}`",
                    path, st.st_mode & 07777, path)};
  }
  if (st.st_size > 4096) {
    return tfb::error{
        error_kind::usage,
        fmt::format("--store-password-file {} is larger than 4 KiB; give a file that holds the password alone", path)};
  }
  out = read_size(fd, static_cast<std::size_t>(st.st_size));
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (out.empty()) {
    return tfb::error{error_kind::usage,
                      fmt::format("--store-password-file {} is empty; put the etcd user's password in it", path)};
  }
  return std::nullopt;
}

std::unique_ptr<client> load_client(const client_config& c, std::string& error) {
  using factory = client* (*)(const client_config*, std::string*);
  static factory make = nullptr;
  if (!make) {
    std::string tried;
    // Beside the binary (a build tree), else where the package puts it.
    std::string dir = binary_dir();
    if (dir.empty()) dir = ".";
    for (const std::string& path : {dir + "/tfbarrier-etcd.so", dir + "/" TFB_MODULE_DIR "/tfbarrier-etcd.so"}) {
      void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char* e = ::dlerror();
        tried += fmt::format("{}{}", tried.empty() ? "" : "; ", e ? e : path);
        continue;
      }
      make = reinterpret_cast<factory>(::dlsym(h, "tfb_etcd_client_new"));
      if (make) break;
    }
    if (!make) {
      error = fmt::format("cannot load the etcd module tfbarrier-etcd.so ({}); it is part of the tfbarrier "
                          "package: reinstall it, or install libcurl4",
                          tried);
      return nullptr;
    }
  }
  std::string why;
  std::unique_ptr<client> out(make(&c, &why));
  if (!out) error = why;
  return out;
}

bool link::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock lk(m_);
  stop_cv_.wait_for(lk, d, [&] { return stopping_; });
  return !stopping_;
}

/// PREFIX/origin and PREFIX/key, which says which key MACs the prefix's
/// inputs. The first host writes both; every other host must use the same
/// key, or the hosts would each refuse the others' inputs and their states
/// would part. With munge_key the
/// first host makes a random key and seals it with MUNGE for its own uid:
/// the job's hosts, the same user on the cluster's nodes, open it; munged
/// gives nobody else its payload (docs/store.md, "Authorization").
std::optional<tfb::error> link::ensure_origin(client& c) {
  std::string fresh, error;
  key_record mine;
  if (s_.munge_key && !s_.secret) {
    fresh = auth::fresh_secret();
    auto sealed = munge_auth::seal(fresh, ::getuid(), error);
    if (!sealed)
      return tfb::error{error_kind::store_unreachable,
                        fmt::format("cannot seal the store's key with MUNGE: {}", error)};
    mine = key_record{key_id(&fresh), *sealed};
  } else {
    mine = key_record{key_id(s_.secret), {}};
  }
  // The origin and the key record are made together, by the first host, or
  // not at all: a prefix with state but no record (deleted by someone) is
  // refused, rather than given a new key that the running hosts do not have.
  compare no_origin{compare::target::version, compare::op::equal, s_.keys.origin(), 0, {}};
  compare no_key{compare::target::version, compare::op::equal, s_.keys.key(), 0, {}};
  op put_origin{op::type::put, s_.keys.origin(), format_origin(s_.shared), {}, 0};
  op put_key{op::type::put, s_.keys.key(), mine.format(), {}, 0};
  op read_origin{op::type::range, s_.keys.origin(), {}, {}, 0};
  op read_key{op::type::range, s_.keys.key(), {}, {}, 0};
  txn_result r;
  tfb::error failed;
  if (!c.txn({no_origin, no_key}, {put_origin, put_key}, {read_origin, read_key}, r, failed)) return failed;
  if (r.succeeded) {
    origin_rev_ = r.revision;
    if (!fresh.empty()) {
      munge_secret_ = fresh;
      s_.secret = &munge_secret_;
    }
    return std::nullopt;
  }
  if (r.ranges.size() != 2)
    return tfb::error{error_kind::store_unreachable,
                      "etcd answered the store's first transaction with what tfbarrier did not ask for"};
  if (!r.ranges[0].empty()) {
    origin_rev_ = r.ranges[0][0].create_revision;
    if (auto e = take_settings(r.ranges[0][0].value)) return e;
  }
  key_record there;
  if (r.ranges[1].empty()) {
    return tfb::error{
        error_kind::store_access,
        fmt::format("the store's prefix {} holds barriers but no key record ({}): someone deleted it, or an "
                    "older tfbarrier made the prefix; give this job another prefix",
                    s_.keys.prefix, s_.keys.key())};
  }
  if (!key_record::parse(r.ranges[1][0].value, there))
    return tfb::error{error_kind::store_access,
                      fmt::format("{} does not hold a key record of tfbarrier; this prefix is not tfbarrier's, or was "
                                  "damaged: use another prefix for this job",
                                  s_.keys.key())};
  if (!fresh.empty() && !there.munge.empty()) return take_sealed_key(there);
  if (there.id != mine.id) {
    return tfb::error{
        error_kind::store_access,
        fmt::format("the hosts of this store's prefix {} use {}, and this host {}: every host of a job must "
                    "use the same key (the same --secret-file, or MUNGE on every node); or give this job "
                    "another prefix",
                    s_.keys.prefix, there.source(),
                    fresh.empty() ? mine.source() : std::string("a key shared through MUNGE"))};
  }
  return std::nullopt;
}

/// The settings that change transitions are the store's (issue #31 item 1):
/// a host that was given other values must not run by them (it would refuse
/// a barrier that the others release), nor by the store's when its user asked
/// for others; one that was not given them takes the store's.
std::optional<tfb::error> link::take_settings(std::string_view origin) {
  int sm = 0;
  shared_settings there;
  if (!parse_origin(origin, sm, there)) {
    return tfb::error{
        error_kind::settings_differ,
        fmt::format("{} does not hold an origin record of tfbarrier ('{}'): this prefix is not tfbarrier's, or "
                    "was damaged: use another prefix for this job",
                    s_.keys.origin(), origin.substr(0, 80))};
  }
  if (sm != state_machine_version) {
    return tfb::error{
        error_kind::settings_differ,
        fmt::format("the store's prefix {} was made by a tfbarrier of state-machine version {}, and this one "
                    "runs version {}: give this job another prefix",
                    s_.keys.prefix, sm, state_machine_version)};
  }
  std::vector<std::string> differ;
  if (s_.max_barriers_given && s_.shared.max_barriers != there.max_barriers)
    differ.push_back(fmt::format("--max-barriers {} (this host) and {} (the store)", s_.shared.max_barriers,
                                 there.max_barriers));
  if (s_.forget_after_given && s_.shared.forget_after != there.forget_after)
    differ.push_back(fmt::format("--forget-after {}ms (this host) and {}ms (the store)", s_.shared.forget_after,
                                 there.forget_after));
  if (!differ.empty()) {
    return tfb::error{
        error_kind::settings_differ,
        fmt::format("this host's settings differ from those of the store's prefix {}, which its first host "
                    "set and every host runs by: {}. Start it without them (it takes the store's), or give "
                    "the job a new prefix to change them",
                    s_.keys.prefix, fmt::join(differ, "; "))};
  }
  s_.shared = there;
  return std::nullopt;
}

/// The key that the first host sealed: authentic (munged checked it), of
/// this user (the uid that sealed it is ours), and the one the record names.
std::optional<tfb::error> link::take_sealed_key(const key_record& there) {
  bool refused = false;
  std::string why;
  auto d = munge_auth::unseal(there.munge, refused, why);
  if (!d) {
    return tfb::error{
        refused ? error_kind::store_access : error_kind::store_unreachable,
        fmt::format("cannot open the store's key {} with MUNGE: {}{}", s_.keys.key(), why,
                    refused ? "; it was made for another user, or on a cluster with another MUNGE key: give "
                              "this job a prefix of its own"
                            : "")};
  }
  if (d->uid != ::getuid() || key_id(&d->payload) != there.id) {
    return tfb::error{
        error_kind::store_access,
        fmt::format("the store's key {} was made by uid {}, not by this user (uid {}): someone else wrote it "
                    "there; give this job a prefix of its own",
                    s_.keys.key(), d->uid, ::getuid())};
  }
  munge_secret_ = std::move(d->payload);
  s_.secret = &munge_secret_;
  return std::nullopt;
}

bool link::check_versions(client& c, tfb::error& error) {
  std::vector<kv> hosts;
  std::int64_t rev = 0;
  if (!c.range(s_.keys.hosts(), prefix_end(s_.keys.hosts()), hosts, rev, error)) return false;
  for (const auto& k : hosts) {
    presence p;
    if (!presence::parse(k.value, p) || p.sm != state_machine_version) {
      error = tfb::error{
          error_kind::store_unreachable,
          fmt::format("the host {} of this store runs state-machine version {} and this one {}: every host of "
                      "a store must run the same tfbarrier version",
                      k.key, p.sm, state_machine_version)};
      return false;
    }
  }
  return true;
}

bool link::register_self(client& c, std::int64_t& lease, std::int64_t& inc, tfb::error& error) {
  std::int64_t asked = steady_ns();  // etcd starts the lease's TTL after this
  if (!c.grant(s_.lease.count(), lease, error)) return false;
  std::string key = s_.keys.host(s_.self);
  for (int attempt = 0; attempt < 5; ++attempt) {
    compare absent{compare::target::version, compare::op::equal, key, 0, {}};
    op put{op::type::put, key, s_.me.format(), {}, lease};
    op read{op::type::range, key, {}, {}, 0};
    txn_result r;
    if (!c.txn({absent}, {put}, {read}, r, error)) return false;
    if (r.succeeded) {
      inc = r.revision;
      renewed_at_ = asked;
      renew_failed_ = false;
      return true;
    }
    // A presence of this node and port is left from a host that died here
    // (we hold its port now): end it, so that its participants are withdrawn.
    if (r.ranges.empty() || r.ranges[0].empty()) continue;
    compare same{compare::target::create_revision, compare::op::equal, key, r.ranges[0][0].create_revision, {}};
    op del{op::type::del, key, {}, {}, 0};
    txn_result d;
    if (!c.txn({same}, {del}, {}, d, error)) return false;
  }
  error = tfb::error{error_kind::store_unreachable,
                     fmt::format("cannot register {} in the store: its presence key keeps coming back", key)};
  return false;
}

std::optional<tfb::error> link::start() {
  std::string error;
  // Hosts spread over etcd's members: each starts at the endpoint its name
  // picks (FNV-1a), and moves on only when that one stops answering.
  client_config cfg = s_.client;
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : s_.self) h = (h ^ ch) * 1099511628211ull;
  cfg.first = static_cast<std::size_t>(h % std::max<std::size_t>(1, cfg.endpoints.size()));
  auto make = [&](std::unique_ptr<client>& c, const client_config& cc) {
    return (c = load_client(cc, error)) != nullptr;
  };
  // The keeper asks often, and gives each member a quarter of the lease: a
  // member that hangs must not hold a renewal past the renew deadline (two
  // thirds of the lease) before the next member is asked.
  client_config keeper = cfg;
  keeper.timeout = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(s_.lease) / 4,
                                                       std::chrono::milliseconds(250));
  keeper.attempt_timeout = std::min(keeper.attempt_timeout, keeper.timeout);
  if (!make(writer_c_, cfg) || !make(keeper_c_, keeper) || !make(watcher_c_, cfg) || !make(janitor_c_, cfg))
    return tfb::error{error_kind::store_unreachable, error};
  std::int64_t lease = 0, inc = 0;
  if (auto e = ensure_origin(*writer_c_)) return e;
  tfb::error failed;
  if (!check_versions(*writer_c_, failed) || !register_self(*writer_c_, lease, inc, failed)) return failed;
  lease_ = lease;
  inc_ = inc;
  cb_.registered(inc);
  writer_ = quiet_thread([this] { writer_loop(); });
  keeper_ = quiet_thread([this] { keeper_loop(); });
  watcher_ = quiet_thread([this] { watcher_loop(); });
  janitor_ = quiet_thread([this] { janitor_loop(); });
  return std::nullopt;
}

void link::write(std::string line) {
  {
    std::lock_guard lk(m_);
    backlog_ += line.size();
    queue_.push_back(std::move(line));
  }
  cv_.notify_one();  // the writer: the only thread waiting on cv_
}

void link::mark_gone(const std::string& h, std::int64_t inc, std::string presence) {
  {
    std::lock_guard lk(m_);
    std::string key = s_.keys.gone(h, inc);
    std::string value = seal_gone(key, presence, s_.secret);
    chores_.push_back(chore{std::move(key), std::move(value), false, 0});
  }
  janitor_cv_.notify_one();
}

void link::write_digest(std::int64_t rev, std::string value) {
  {
    std::lock_guard lk(m_);
    // Bounded while etcd is away: digests older than the last few are worth nothing.
    std::size_t digests = std::count_if(chores_.begin(), chores_.end(), [](const chore& c) { return c.digest; });
    for (auto it = chores_.begin(); digests >= max_queued_digests && it != chores_.end();)
      if (it->digest) {
        it = chores_.erase(it);
        --digests;
      } else {
        ++it;
      }
    chores_.push_back(chore{s_.keys.digest(rev, s_.self), std::move(value), true, 0});
  }
  janitor_cv_.notify_one();
}

void link::start_over() {
  start_over_ = true;
  if (watcher_c_) watcher_c_->interrupt();
}

void link::write_snapshot(std::int64_t rev, std::string text) {
  {
    std::lock_guard lk(m_);
    // Bounded while etcd is away: a newer snapshot makes an older one not worth writing.
    std::erase_if(chores_, [](const chore& c) { return c.key.empty() && c.snap_rev != 0; });
    chores_.push_back(chore{{}, std::move(text), false, rev});
  }
  janitor_cv_.notify_one();
}

void link::reregister() {
  {
    std::lock_guard lk(m_);
    for (const auto& l : queue_) backlog_ -= l.size();
    queue_.clear();
    reregister_ = true;
  }
  abandoned_lease_ = lease_.load();  // the keeper renews it no more (it would keep the old presence alive)
  cv_.notify_all();
  // A host fenced because it was cut off from etcd may watch through a
  // connection that outlived the cut, and get nothing on it until TCP
  // retransmits (seconds after the link is back): watch on a new one.
  if (watcher_c_) watcher_c_->interrupt();
}

void link::stop() {
  {
    std::lock_guard lk(m_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  janitor_cv_.notify_all();
  stop_cv_.notify_all();
  for (auto* c : {writer_c_.get(), keeper_c_.get(), watcher_c_.get(), janitor_c_.get()})
    if (c) c->cancel();
  for (auto* t : {&writer_, &keeper_, &watcher_, &janitor_})
    if (t->joinable()) t->join();
  // Leave at once: the others withdraw this host's participants now, not at the lease's end.
  if (lease_ != 0) {
    std::string error;
    tfb::error ignored;
    if (auto c = load_client(s_.client, error)) c->revoke(lease_, ignored);
  }
}

bool link::write_batch(client& c, const std::string& value, std::uint64_t seq, std::string& why) {
  std::string host = s_.keys.host(s_.self);
  unsigned failures = 0;
  for (;;) {
    {
      // Fenced (etcd said the lease is gone, or this host could not renew it
      // within its renew deadline): this batch is the old incarnation's,
      // whose participants were closed. Written late, it would act for a
      // host that stopped acting: drop it, and register again.
      std::lock_guard lk(m_);
      if (reregister_) return true;
    }
    std::int64_t inc = inc_;
    std::string key = s_.keys.input(s_.self, inc, seq);
    // Fenced on the presence of this very incarnation; written once (a retry
    // after a lost answer finds its own batch and stops).
    compare present{compare::target::create_revision, compare::op::equal, host, inc, {}};
    compare fresh{compare::target::version, compare::op::equal, key, 0, {}};
    op put{op::type::put, key, value, {}, 0};
    op read_host{op::type::range, host, {}, {}, 0};
    op read_key{op::type::range, key, {}, {}, 0};
    txn_result r;
    tfb::error error;
    if (c.txn({present, fresh}, {put}, {read_host, read_key}, r, error)) {
      if (r.succeeded || (r.ranges.size() == 2 && !r.ranges[1].empty())) {
        if (failures > 0) log(fmt::format("store: writing again, after {} attempts", failures + 1));
        return true;
      }
      bool gone = r.ranges.empty() || r.ranges[0].empty() || r.ranges[0][0].create_revision != inc;
      if (gone) {
        why = fmt::format("this host's presence in the store went (its lease of {}s expired: was it stopped, or cut "
                          "off from etcd?)",
                          s_.lease.count());
        return false;
      }
    } else {
      ++write_errors_;
      // Said once, then every 10 s while it lasts (etcd may refuse for long: no quorum, NOSPACE).
      if (failures++ % 50 == 0)
        log(fmt::format("warning: cannot write to the store, retrying every {} ms: {}", retry_every.count(),
                        error.text));
    }
    if (!sleep_for(retry_every)) return true;
  }
}

void link::writer_loop() {
  std::uint64_t seq = 0;
  for (;;) {
    std::vector<std::string> lines;
    std::size_t taken = 0;  // of backlog_
    bool again = false;
    {
      std::unique_lock lk(m_);
      cv_.wait(lk, [&] { return stopping_ || reregister_ || !queue_.empty(); });
      if (stopping_) return;
      if (reregister_) {
        again = true;
        reregister_ = false;
      } else {
        std::size_t bytes = 0;
        while (!queue_.empty() && (lines.empty() || bytes + queue_.front().size() < max_batch_bytes)) {
          bytes += queue_.front().size() + 1;
          taken += queue_.front().size();
          lines.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
    }
    if (again) {
      std::int64_t lease = 0, inc = 0;
      tfb::error error;
      while (!register_self(*writer_c_, lease, inc, error)) {
        log(fmt::format("warning: cannot register again in the store, retrying: {}", error.text));
        if (!sleep_for(std::chrono::seconds(1))) return;
      }
      lease_ = lease;
      inc_ = inc;
      seq = 0;
      cb_.post([this, inc] { cb_.registered(inc); });
      continue;
    }
    std::string value = seal_batch(lines, s_.keys.input(s_.self, inc_, seq), s_.secret);
    std::string why;
    bool ok = write_batch(*writer_c_, value, seq, why);
    backlog_ -= taken;
    if (ok) {
      ++seq;
      ++written_;
    } else {
      cb_.post([this, why] { cb_.fenced(why); });
    }
  }
}

void link::keeper_loop() {
  // Six times a lease: a renewal that fails is tried again well before the
  // renew deadline (host.cpp, on_renew_overdue).
  auto every = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(s_.lease) / 6, std::chrono::milliseconds(100));
  std::int64_t fenced_lease = 0;
  while (sleep_for(every)) {
    std::int64_t lease = lease_, ttl = 0;
    if (lease == fenced_lease || lease == abandoned_lease_) continue;  // waiting for the writer to register again
    tfb::error error;
    std::int64_t asked = steady_ns();
    renewing_since_ = asked;
    bool renewed = keeper_c_->keepalive(lease, ttl, error);
    renewing_since_ = 0;
    if (lease != lease_) continue;  // registered again meanwhile: this was the old lease
    if (!renewed) {
      renew_failed_ = true;
      log(fmt::format("warning: cannot renew the store lease, retrying: {}", error.text));
      continue;
    }
    renew_failed_ = false;
    if (ttl > 0) renewed_at_ = asked;
    if (ttl == 0) {
      fenced_lease = lease;
      std::string why = fmt::format("this host's store lease expired (not renewed within {}s: was it stopped, or cut "
                                    "off from etcd?)",
                                    s_.lease.count());
      cb_.post([this, why] { cb_.fenced(why); });
    }
  }
}

// The newest whole snapshot and every event after it, read at one revision.
// Deleted presences leave no event here, which is why a host's end is a key
// of its own (gone/H/INC): every change to the replicated state is a key
// that stays until a snapshot covers it.
bool link::read_catch_up(client& c, catch_up& out, tfb::error& error) {
  const std::string from = s_.keys.prefix + "/";
  std::vector<kv> all;
  if (!c.range(from, prefix_end(from), all, out.revision, error)) return false;
  std::map<std::int64_t, const kv*> markers;
  std::map<std::int64_t, std::vector<const kv*>> chunks;
  for (const auto& k : all) {
    auto p = s_.keys.parse(k.key);
    if (p.what == layout::parsed::kind::snap) markers[p.inc] = &k;
    if (p.what == layout::parsed::kind::snap_chunk) chunks[p.inc].push_back(&k);  // in key order: by index
  }
  // The newest only: the keys it covers are gone, so an older one would not
  // do. A marker is written after its chunks, so one that is not whole (or
  // whose MAC is wrong) was written by someone else: refuse to go on.
  if (!markers.empty()) {
    auto it = std::prev(markers.end());
    std::int64_t rev = it->first;
    std::size_t count = 0, bytes = 0;
    std::string mac;
    std::string_view v = it->second->value;
    bool ok = std::sscanf(std::string(v).c_str(), "chunks=%zu bytes=%zu", &count, &bytes) == 2;
    if (auto m = v.find(" mac="); m != std::string_view::npos) mac = v.substr(m + 5);
    std::string text;
    const auto& parts = chunks[rev];
    ok = ok && parts.size() == count;
    for (std::size_t i = 0; ok && i < parts.size(); ++i) {
      ok = s_.keys.parse(parts[i]->key).seq == i;
      text += parts[i]->value;
    }
    ok = ok && text.size() == bytes;
    if (!ok) {
      error = tfb::error{error_kind::store_unreachable,
                         fmt::format("the newest snapshot {} is not whole (its chunks or size do not match its "
                                     "marker); it was not written by a host of this store: check who else writes "
                                     "under {}",
                                     it->second->key, s_.keys.prefix)};
      return false;
    }
    if (s_.secret && !auth::equal(mac, auth::hmac_hex(*s_.secret, it->second->key + "\n" + text))) {
      error = tfb::error{
          error_kind::store_unreachable,
          fmt::format("the newest snapshot {} does not carry this job's MAC: it was written by someone without "
                      "the job's secret (or the hosts have different secrets)",
                      it->second->key)};
      return false;
    }
    out.snapshot = std::move(text);
    out.snap_rev = rev;
  }
  // A key put again since its first version (someone else writes under the
  // prefix) takes effect, as on the watch, at its create_revision with its
  // first value: read it there while etcd still has it (follower.h).
  for (auto& k : all) {
    auto p = s_.keys.parse(k.key).what;
    if (k.version <= 1 || k.create_revision <= out.snap_rev ||
        (p != layout::parsed::kind::host && p != layout::parsed::kind::input && p != layout::parsed::kind::gone))
      continue;
    std::vector<kv> first;
    std::int64_t at = 0;
    tfb::error why;
    if (c.range(k.key, {}, first, at, why, k.create_revision) && first.size() == 1 &&
        first[0].create_revision == k.create_revision) {
      k.value = std::move(first[0].value);
      k.lease = first[0].lease;  // a presence counts by its first version's lease (follower.h, leased)
    } else {
      log(
          fmt::format("warning: store: {} was put again since revision {} and its first version cannot be read "
                      "({}): this host uses the value it has now, which other hosts may not have applied",
                      k.key, k.create_revision, why.text.empty() ? "not found" : why.text));
    }
  }
  catch_up_events(s_.keys, all, s_.secret, out);
  return true;
}

void link::watcher_loop() {
  const std::string from = s_.keys.prefix + "/";
  bool need_catch_up = true, again = false;
  // Catch-up takes the events after the snapshot from etcd's history, as the
  // live hosts saw them (catch_up::history); only when that is compacted from
  // what the keys say now, which cannot show a key deleted since.
  bool history = true, fresh = false, last_again = false;
  unsigned failures = 0, broke_since = 0;
  auto next_broke_log = std::chrono::steady_clock::time_point{};
  while (!stopping_) {
    tfb::error error;
    if (need_catch_up) {
      auto cu = std::make_shared<catch_up>();
      if (!read_catch_up(*watcher_c_, *cu, error)) {
        if (failures++ % 50 == 0) log(fmt::format("warning: cannot catch up from the store, retrying: {}", error.text));
        if (!sleep_for(retry_every)) return;
        continue;
      }
      cu->again = last_again = again;
      // Is the history after the snapshot still there? Asked before the state
      // is handed over, so that a host does not start over twice (from the
      // snapshot, then from the keys) and answer in between from a state
      // that lacks what followed the snapshot (store.bats, compacted revision).
      if (std::int64_t start = std::max(cu->snap_rev + 1, origin_rev_); history && start <= cu->revision)
        history = !history_compacted(from, start);
      cu->history = history;
      if (history) cu->events.clear();
      again = true;
      need_catch_up = false;
      fresh = history;
      history = true;
      // Nothing of the prefix precedes its origin: with no snapshot, its history starts there.
      watch_from_ = cu->history ? std::max(cu->snap_rev + 1, origin_rev_) : cu->revision + 1;
      cb_.post([this, cu] { cb_.caught_up(std::move(*cu)); });
    }
    auto end = watch_prefix(from, fresh, error);
    if (end == watch_end::cancelled) return;
    if (end == watch_end::interrupted && start_over_.exchange(false)) {
      need_catch_up = true;  // this host's state differs from the others' (follower: diverged)
      continue;
    }
    if (end == watch_end::interrupted) {
      log(fmt::format("store: watching again from revision {}, on a new connection (this host was fenced)",
                      watch_from_));
      continue;
    }
    if (end == watch_end::compacted) {
      if (fresh) {  // the history after the snapshot is compacted: from the keys as they are
        log(fmt::format("store: the history after the snapshot (revision {}) was compacted; catching up from the "
                        "keys as they are now",
                        watch_from_ - 1));
        history = false;
        again = last_again;
      } else {
        log(fmt::format("warning: store: the history before revision {} was compacted; catching up from the newest "
                        "snapshot",
                        watch_from_));
      }
      need_catch_up = true;
      continue;
    }
    ++watch_restarts_;
    log_broken_watch(error.text, broke_since, next_broke_log);
    if (!sleep_for(retry_every)) return;
  }
}

bool link::history_compacted(const std::string& from, std::int64_t start) {
  std::vector<kv> none;
  std::int64_t at = 0;
  tfb::error why;
  if (!watcher_c_->range(from, {}, none, at, why, start, true) && why.text.find("compacted") != std::string::npos) {
    log(fmt::format("store: the history after the snapshot (revision {}) was compacted; catching up from the "
                    "keys as they are now",
                    start - 1));
    return true;
  }
  return false;
}

watch_end link::watch_prefix(const std::string& from, bool& fresh, tfb::error& error) {
  return watcher_c_->watch(
      from, prefix_end(from), watch_from_,
      [this, &fresh](const std::vector<event>& evs) {
        if (!evs.empty()) {
          watch_from_ = evs.back().now.mod_revision + 1;
          received_rev_ = evs.back().now.mod_revision;
        }
        fresh = false;
        // Bounded: while the event loop is behind, the watch waits (and
        // etcd with it, through TCP), rather than queue without end.
        while (posted_ >= max_posted && !stopping_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ++posted_;
        cb_.post([this, evs] {
          --posted_;
          cb_.events(evs);
        });
        return true;
      },
      error,
      // Nothing under the prefix up to rev: resume after it, so that a
      // quiet prefix does not fall behind another tenant's compaction.
      [this](std::int64_t rev) { watch_from_ = std::max(watch_from_, rev + 1); });
}

void link::log_broken_watch(const std::string& error, unsigned& broke_since,
                            std::chrono::steady_clock::time_point& next_log) {
  constexpr auto broke_every = std::chrono::seconds(10);
  // Said once per broke_every at most: a member that refuses every watch
  // at once would otherwise write five lines a second.
  if (auto now = std::chrono::steady_clock::now(); now >= next_log) {
    log(fmt::format("warning: the store's watch broke, resuming at revision {}: {}{}", watch_from_, error,
                    broke_since ? fmt::format(" ({} more times in the last {} s)", broke_since,
                                              std::chrono::duration_cast<std::chrono::seconds>(broke_every).count())
                                : ""));
    next_log = now + broke_every;
    broke_since = 0;
  } else {
    ++broke_since;
  }
}

// Puts key once: true when it holds value now (written here, or by an
// earlier attempt at the same snapshot). Another value there (a forgery, or
// a snapshot at this revision from another state) is an error: nothing that
// a snapshot would cover may be deleted on its strength.
bool link::put_once(client& c, const std::string& key, const std::string& value, tfb::error& error) {
  compare fresh{compare::target::version, compare::op::equal, key, 0, {}};
  txn_result r;
  if (!c.txn({fresh}, {op{op::type::put, key, value, {}, 0}}, {op{op::type::range, key, {}, {}, 0}}, r, error))
    return false;
  if (r.succeeded || (!r.ranges.empty() && !r.ranges[0].empty() && r.ranges[0][0].value == value)) return true;
  error =
      tfb::error{error_kind::store_unreachable, key + " exists already with another value (written by someone else?)"};
  return false;
}

bool link::store_snapshot(client& c, std::int64_t rev, const std::string& text, tfb::error& error) {
  std::size_t count = 0;
  for (std::size_t at = 0; at < text.size() || count == 0; at += snapshot_chunk_bytes, ++count)
    if (!put_once(c, s_.keys.snap_chunk(rev, count), text.substr(std::min(at, text.size()), snapshot_chunk_bytes),
                  error))
      return false;
  std::string marker = s_.keys.snap(rev);
  std::string value = fmt::format("chunks={} bytes={}", count, text.size());
  if (s_.secret) value += " mac=" + auth::hmac_hex(*s_.secret, marker + "\n" + text);
  return put_once(c, marker, value, error);
}

// What the snapshot at rev covers goes: inputs and ends up to rev, older
// snapshots. Never a host's last batch, which its writer may be retrying.
void link::delete_covered(client& c, std::int64_t rev) {
  std::vector<std::string> doomed;
  std::set<std::pair<std::string, std::int64_t>> live;  // incarnations present now: their last batch stays
  for (const std::string& under :
       {s_.keys.hosts(), s_.keys.inputs(), s_.keys.gones(), s_.keys.snaps(), s_.keys.digests()}) {
    std::vector<kv> keys;
    std::int64_t at = 0;
    tfb::error error;
    if (!c.range(under, prefix_end(under), keys, at, error, 0, true)) {
      log(fmt::format("warning: store: cannot list {} to delete what the snapshot covers: {}", under, error.text));
      return;
    }
    for (std::size_t i = 0; i < keys.size(); ++i) {
      auto p = s_.keys.parse(keys[i].key);
      bool covered = false;
      if (p.what == layout::parsed::kind::host) {
        live.emplace(p.host, keys[i].create_revision);
      } else if (p.what == layout::parsed::kind::input) {
        auto q = i + 1 < keys.size() ? s_.keys.parse(keys[i + 1].key) : layout::parsed{};
        bool last = q.what != layout::parsed::kind::input || q.host != p.host || q.inc != p.inc;
        covered = keys[i].mod_revision <= rev && !(last && live.count({p.host, p.inc}));
      } else if (p.what == layout::parsed::kind::gone) {
        covered = keys[i].mod_revision <= rev;
      } else if (p.what == layout::parsed::kind::snap || p.what == layout::parsed::kind::snap_chunk ||
                 p.what == layout::parsed::kind::digest) {
        covered = p.inc < rev;
      }
      if (covered) doomed.push_back(keys[i].key);
    }
  }
  for (std::size_t at = 0; at < doomed.size(); at += ops_per_txn) {
    std::vector<op> dels;
    for (std::size_t i = at; i < std::min(doomed.size(), at + ops_per_txn); ++i)
      dels.push_back(op{op::type::del, doomed[i], {}, {}, 0});
    txn_result r;
    tfb::error error;
    if (!c.txn({}, dels, {}, r, error)) {
      log(fmt::format("warning: store: cannot delete keys the snapshot covers: {}", error.text));
      return;
    }
  }
}

// etcd's space quota is every tenant's: past it, etcd takes no writes
// ("database space exceeded") until an operator frees space and disarms.
void link::check_alarms(client& c) {
  std::vector<std::string> alarms;
  tfb::error error;
  if (!c.alarms(alarms, error)) return;  // unreachable: the other threads say so
  bool nospace = std::find(alarms.begin(), alarms.end(), "NOSPACE") != alarms.end();
  if (nospace && !nospace_)
    log("error: etcd's space quota is exceeded (alarm NOSPACE): etcd takes no writes from any tenant, so no "
        "barrier can change; ask its operator to compact, defragment and disarm it (etcdctl alarm disarm), "
        "or raise --quota-backend-bytes");
  if (!nospace && nospace_) log("store: etcd's NOSPACE alarm is off again: writes go on");
  nospace_ = nospace;
}

// One attempt at a host's end: true when it is written (by us or by
// another). Fenced on this host's presence: a host that was cut off marks
// nothing until it has registered again (then it may be the only one left to).
// An end there already that does not carry this job's MAC is someone else's
// forgery: it is deleted and the end written anew (a first version: only a
// key's first version counts, follower.h), or that host's participants would
// never go.
bool link::write_gone(client& c, const chore& ch, tfb::error& error) {
  std::string host = s_.keys.host(s_.self);
  compare present{compare::target::create_revision, compare::op::equal, host, inc_, {}};
  compare fresh{compare::target::version, compare::op::equal, ch.key, 0, {}};
  txn_result r;
  if (!c.txn({present, fresh}, {op{op::type::put, ch.key, ch.value, {}, 0}}, {op{op::type::range, ch.key, {}, {}, 0}},
             r, error))
    return false;
  if (r.succeeded) return true;
  if (r.ranges.empty() || r.ranges[0].empty()) {
    error = tfb::error{error_kind::store_unreachable, "this host is not registered now (fenced)"};
    return false;
  }
  const kv& there = r.ranges[0][0];
  std::string presence, why;
  if (open_gone(there.key, there.value, s_.secret, presence, why)) return true;
  compare same{compare::target::mod_revision, compare::op::equal, ch.key, there.mod_revision, {}};
  txn_result w;
  if (!c.txn({present, same}, {op{op::type::del, ch.key, {}, {}, 0}}, {}, w, error)) return false;
  error = tfb::error{error_kind::store_unreachable, w.succeeded ? "a forged end was there (deleted): writing it anew"
                                                                : "the end key changed while it was deleted"};
  return false;
}

void link::janitor_loop() {
  auto next_check = std::chrono::steady_clock::now();
  auto next_try = next_check;
  unsigned failures = 0;
  for (;;) {
    chore ch;
    bool have = false;
    {
      // A chore that failed waits its turn again, behind the alarm check: one
      // end that cannot be written (NOSPACE, fenced) must not stop the rest.
      // The deadline is worked out again at each wake-up: with no chore, the
      // next alarm check (a deadline of "now" would spin).
      std::unique_lock lk(m_);
      for (;;) {
        if (stopping_) return;
        auto now = std::chrono::steady_clock::now();
        if (!chores_.empty() && now >= next_try) {
          ch = std::move(chores_.front());
          chores_.pop_front();
          have = true;
          break;
        }
        if (now >= next_check) break;
        janitor_cv_.wait_until(lk, chores_.empty() ? next_check : std::min(next_check, next_try));
      }
    }
    if (std::chrono::steady_clock::now() >= next_check) {
      check_alarms(*janitor_c_);
      next_check = std::chrono::steady_clock::now() + alarm_every;
    }
    if (!have) continue;
    tfb::error error;
    if (ch.digest) {  // once: a digest that cannot be written now is not worth a retry
      txn_result r;
      if (!janitor_c_->txn({}, {op{op::type::put, ch.key, ch.value, {}, 0}}, {}, r, error) && ++write_errors_)
        log(fmt::format("warning: store: cannot write {}: {}", ch.key, error.text));
      continue;
    }
    if (!ch.key.empty()) {
      if (write_gone(*janitor_c_, ch, error)) {
        failures = 0;
        continue;
      }
      ++write_errors_;
      if (failures++ % 50 == 0)
        log(fmt::format("warning: store: cannot write {} yet, retrying: {}", ch.key, error.text));
      next_try = std::chrono::steady_clock::now() + retry_every;
      std::lock_guard lk(m_);
      chores_.push_back(std::move(ch));
      continue;
    }
    bool ok = store_snapshot(*janitor_c_, ch.snap_rev, ch.value, error);
    if (ok)
      delete_covered(*janitor_c_, ch.snap_rev);
    else if (++write_errors_)
      log(fmt::format("warning: store: cannot write the snapshot at revision {}: {}", ch.snap_rev, error.text));
    std::int64_t rev = ch.snap_rev;
    cb_.post([this, rev, ok] { cb_.snapshot_written(rev, ok); });
  }
}

}  // namespace tfb::store
