#pragma once
// Files that only their owner may read or change: the journal (serve
// --state-dir), the host's log, the secret. Another local user must not be
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

/// Opens name inside dir with O_NOFOLLOW (never through a symlink). With
/// O_CREAT in flags the file is fchmod-ed to mode after it is made. Checks
/// that it is a regular file owned by the effective uid and, when mode has no
/// bits for others, that others cannot read it.
std::optional<fd> open_in(int dir, std::string_view name, int flags, mode_t mode, const std::string& shown_dir,
                          std::string& error);

/// Replaces name in dir with bytes, atomically: a new file of a random name
/// (O_EXCL, so no planted file is reused, and a left-over one from a crash
/// blocks nothing), written, fsync-ed, renamed over name, then the directory
/// fsync-ed. Mode 0600 unless given (the metrics textfile, which another
/// user's node_exporter reads, is 0644).
bool replace_in(int dir, std::string_view name, std::string_view bytes, const std::string& shown_dir,
                std::string& error, mode_t mode = 0600);

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
