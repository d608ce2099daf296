#pragma once
// The prefix of a store address (etcd://HOST:PORT[,HOST:PORT...][/PREFIX]):
// the job's place in etcd, and what a host of the store names in its HELLO
// (store=), so that a client given a store can tell a host of another store,
// or one without, on the port it expected its own (docs/store.md). Pure; no
// validation here (store_location.h parse_store validates what serve is given).
#include <string>
#include <string_view>

namespace tfb {

inline constexpr std::string_view default_store_prefix = "/tfbarrier";

inline std::string store_prefix_of(std::string_view text) {
  constexpr std::string_view scheme = "etcd://";
  if (text.starts_with(scheme)) text.remove_prefix(scheme.size());
  auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::string(default_store_prefix);
  std::string_view p = text.substr(slash);
  while (p.size() > 1 && p.ends_with('/')) p.remove_suffix(1);
  return std::string(p);
}

}  // namespace tfb
