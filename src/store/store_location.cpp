#include "store_location.h"

#include <fmt/format.h>

namespace tfb::store {

bool parse_store(std::string_view text, bool tls, store_location& out, std::string& error) {
  constexpr std::string_view scheme = "etcd://";
  auto bad = [&](std::string_view why) {
    error = fmt::format("bad store '{}': {}; expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX], for example "
                        "etcd://10.0.0.1:2379,10.0.0.2:2379/tfbarrier",
                        text, why);
    return false;
  };
  out = store_location{std::string(text), {}, std::string(default_store_prefix), tls};
  if (!text.starts_with(scheme)) return bad("it must start with etcd://");
  text.remove_prefix(scheme.size());
  auto slash = text.find('/');
  std::string_view hosts = text.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string p = store_prefix_of(text);  // as a client names it (store_name.h)
    if (p == "/") return bad("the prefix is empty");
    for (char ch : p)
      if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) return bad("the prefix has a space or control character");
    out.prefix = p;
  }
  while (!hosts.empty()) {
    auto comma = hosts.find(',');
    std::string_view one = hosts.substr(0, comma);
    std::string why;
    auto a = parse_address(one, address_use::connect, why);
    if (!a || a->host.empty() || a->port == 0) return bad(fmt::format("'{}' is not HOST:PORT", one));
    out.endpoints.push_back(std::move(*a));
    hosts = comma == std::string_view::npos ? std::string_view{} : hosts.substr(comma + 1);
  }
  if (out.endpoints.empty()) return bad("no endpoint");
  return true;
}

std::vector<std::string> store_location::urls() const {
  std::vector<std::string> out;
  for (const auto& e : endpoints) out.push_back(fmt::format("{}://{}", tls ? "https" : "http", e.text()));
  return out;
}

}  // namespace tfb::store
