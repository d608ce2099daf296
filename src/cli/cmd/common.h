#pragma once
// What the commands share: settings from the process, the connection to the
// host, printing an outcome, and detaching a daemon. No Asio, no CLI11.
#include <optional>
#include <string_view>
#include <string>

#include "client.h"
#include "commands.h"
#include "settings.h"

namespace tfb::cmd {

/// This machine's short host name, made a valid protocol value.
std::string short_hostname();
/// This node's name, for a host's logs and its store key: TFBARRIER_NODE,
/// else SLURMD_NODENAME, else short_hostname() (settings' node, from the environment).
std::string node_name();
/// 16 random letters and digits: a participant's id.
std::string random_id();
/// Resolves the settings from the flags and the process's environment; prints why not.
std::optional<settings> resolve(const common_options& c, std::optional<std::uint32_t> n,
                                std::optional<std::uint32_t> rank, bool counts = true);
/// PRIVATE_DIR/serve-NODE[-JOB].log (files::private_dir_path): where a
/// detached or self-started host logs by default.
std::string default_log_file();
/// Opens the log to append to: the default one in its private directory
/// (made 0700 and checked), any other through files::open_path (never a
/// symlink, nor a file of another user or one others can write; made 0600).
/// The descriptor, or why not (a file error).
result<int> open_log(const std::string& log);
/// PRIVATE_DIR/serve-NODE[-JOB].history: the host's history file by default
/// (node and job named as the log's); "" when there is no private directory.
std::string default_history_file();
/// What a self-started host that cannot start logs after its error, when
/// trying again would not help (cmd/serve.cpp): its participant stops waiting.
inline constexpr std::string_view self_start_gave_up = "this host cannot start; it gives up";
/// How to reach the host; may start one here (settings::may_start_host).
connect_options connection(const settings& s, const common_options& c);
/// The participant's secret: --secret-file, else the default file if it exists.
/// Or why not (auth): a secret file is there but unusable.
std::optional<error> client_secret(const common_options& c, connect_options& o);
/// Prints an outcome (stdout, then stderr) and returns its exit code.
int finish(const outcome& o, bool quiet);
/// Prints a failure's text and returns its exit code (exit_code_of): how a
/// command ends with an error.
int fail(const error& e);

/// Called in a process forked to become a daemon (after setsid): stdin and stdout on /dev/null, stderr appended to `log`, and no descriptor left
/// open but keep_fd (-1: none). When the log cannot be opened stderr goes to
/// /dev/null and the reason is returned; "" otherwise.
std::string detach(const std::string& log, int keep_fd);

}  // namespace tfb::cmd
