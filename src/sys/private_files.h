#pragma once
// Files that only their owner may read or change: the journal (serve
// --state-dir), the host's log, the history file, the metrics textfile, the
// secret, report --svg's picture. Every file tfbarrier writes is opened by
// open_in below, and by nothing else. Another local user must not be
// able to plant a file, a symlink or a directory where tfbarrier will write,
// nor read what it writes (docs/security.md).
//
// Every function here works through file descriptors: a directory is opened
// once with O_DIRECTORY|O_NOFOLLOW, checked with fstat (owned by the effective
// uid, no write for group or others), and files are opened relative to it with
// openat(O_NOFOLLOW). A mode given to mkdir or open can be widened by a default
// ACL (common on HPC project directories), so what this code creates is
// fchmod-ed after creation as well. Errors are sentences: what is wrong, what
// to do. Ownership is checked against the real uid: tfbarrier is never
// setuid, and getuid is a libc import the binary has anyway (each new one
// costs every start of a `wait`, which binds them all at once).
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace tfb::files {

/// An open file descriptor, closed when it goes.
class fd {
 public:
  fd() = default;
  explicit fd(int f) : f_(f) {}
  fd(fd&& o) noexcept : f_(o.release()) {}
  fd& operator=(fd&& o) noexcept;
  fd(const fd&) = delete;
  fd& operator=(const fd&) = delete;
  ~fd();
  int get() const { return f_; }
  int release() {
    int f = f_;
    f_ = -1;
    return f;
  }
  explicit operator bool() const { return f_ >= 0; }

 private:
  int f_ = -1;
};

/// Opens (with create: makes, mode 0700, missing parents too) the directory at
/// path and checks it: a directory, not a symlink, owned by the effective uid,
/// writable by nobody else. With private_only it must also be unreadable by
/// others (mode 0700). A directory tfbarrier makes is fchmod-ed to 0700.
std::optional<fd> open_dir(const std::string& path, bool create, bool private_only, std::string& error);

/// What a file is, for messages: "the log file", and what the user can do
/// instead of fixing it ("give another --log").
struct role {
  std::string_view what = "the file";
  std::string_view instead = "choose another file";
  /// A file made for the user to hand on (report --svg): made mode less the
  /// umask, as any program's output, rather than exactly mode.
  bool umask_decides = false;
};

/// The one way tfbarrier opens a file it reads back or writes: name inside
/// dir (an fd from open_dir or open_parent), with O_NOFOLLOW|O_CLOEXEC, never
/// through a symlink. What it opened must be a regular file (a FIFO does not
/// block it: O_NONBLOCK until checked) owned by the real uid that neither
/// group nor others can write; to write, it must also have one link (another
/// name could be a file of ours elsewhere). A file it makes (O_CREAT) gets
/// exactly mode (fchmod: a default ACL can widen it; see role::umask_decides);
/// an existing one is only ever narrowed to mode, never widened. O_TRUNC truncates after the checks:
/// another user's file is never changed. Errors say what is wrong and what to
/// do, with who.what naming the file.
std::optional<fd> open_in(int dir, std::string_view name, int flags, mode_t mode, const std::string& shown_dir,
                          std::string& error, const role& who = {});

/// Splits a path into its directory ("." when none) and its last component.
void split_path(const std::string& path, std::string& dir, std::string& name);

/// Opens the directory that holds path (as named: it may be reached through
/// symlinks the user chose), for open_in; sets name to path's last part.
/// Unlike open_dir it does not require the directory to be the user's: the log
/// or a report may go to a shared directory, where open_in's checks of the
/// file itself are what keeps another user's planted file out.
std::optional<fd> open_parent(const std::string& path, std::string& dir, std::string& name, std::string& error,
                              const role& who = {});

/// open_parent, then open_in: the file at path, for the log and report --svg.
std::optional<fd> open_path(const std::string& path, int flags, mode_t mode, std::string& error, const role& who = {});

/// Replaces name in dir with bytes, atomically: a new file of a random name
/// made by open_in (O_EXCL, so no planted file is reused, and a left-over one
/// from a crash blocks nothing), written, fsync-ed, renamed over name (a
/// symlink there is replaced, never followed), then the directory fsync-ed.
/// Mode 0600 unless given (the metrics textfile, which another user's
/// node_exporter reads, is 0644).
bool replace_in(int dir, std::string_view name, std::string_view bytes, const std::string& shown_dir,
                std::string& error, mode_t mode = 0600);

/// Writes all of bytes to f (retrying short writes and EINTR); false with errno set.
bool write_all(int f, std::string_view bytes);

/// The user's home directory: $HOME when set, else the password database's
/// (getpwuid). Never /tmp. nullopt + error when neither is known.
std::optional<std::string> home_dir(std::string& error);

/// The user's private directory for the host's logs and other per-user files:
/// $XDG_RUNTIME_DIR/tfbarrier when XDG_RUNTIME_DIR exists, is owned by this
/// user and is mode 0700 (Slurm passes the login node's value, often missing
/// on a compute node), else ~/.tfbarrier. Not created here.
std::optional<std::string> private_dir_path(std::string& error);

/// The host log's file name: serve-NODE[-JOB].log (homes are shared over NFS,
/// so the node and the job are in the name). Characters other than letters,
/// digits, '.', '_' and '-' become '_'.
std::string log_file_name(std::string_view node, std::string_view job);

/// Opens (creates, appends to) the host's log in the user's private
/// directory: PRIVATE_DIR/serve-NODE[-JOB].log. Sets path to the file's path
/// (for messages) either way.
std::optional<fd> open_host_log(std::string_view node, std::string_view job, std::string& path, std::string& error);

}  // namespace tfb::files
