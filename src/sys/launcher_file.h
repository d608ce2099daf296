#pragma once
// The launchers' files (PBS_NODEFILE, PE_HOSTFILE, LSB_DJOB_HOSTFILE:
// docs/launchers.md), read for resolve_settings (core/settings.h), which
// reads them only through the file_lookup it is given.
#include <optional>
#include <string>

namespace tfb {

/// file_lookup for the real file system: at most max_launcher_file bytes.
std::optional<std::string> read_launcher_file(const std::string& path, std::string& why);

}  // namespace tfb
