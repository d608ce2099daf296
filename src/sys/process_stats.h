#pragma once
// The standard process_* metrics of the running process, read from /proc
// (system calls: the host's side, not the pure core).
#include <optional>

#include "metrics.h"

namespace tfb {

/// This process's CPU time, memory, file descriptors and start time; nullopt
/// when /proc/self cannot be read (no /proc mounted).
std::optional<metrics::process_stats> read_process_stats();

}  // namespace tfb
