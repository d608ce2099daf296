#pragma once
// Where a host keeps its barriers (serve --store, docs/store.md): parsed once,
// at the command line (cmd/serve.cpp), and carried in host_options to the
// store link, which turns its endpoints into the etcd client's URLs. Pure.
#include <string>
#include <string_view>
#include <vector>

#include "address.h"
#include "store_name.h"

namespace tfb::store {

/// Parsed `--store etcd://H1:P1,H2:P2[/PREFIX]` (the scheme says which store).
struct store_location {
  std::string given;                    ///< the text as given (--store), for messages
  std::vector<tfb::address> endpoints;  ///< one or more, each with a host and a port
  std::string prefix{default_store_prefix};
  bool tls = false;  ///< https: TLS files were given (--store-ca, --store-cert, --store-key)
  /// The endpoints as the etcd client takes them: "http://H:P", "https://[v6]:P".
  std::vector<std::string> urls() const;
};

/// False with error (a full sentence) for a malformed store address.
bool parse_store(std::string_view text, bool tls, store_location& out, std::string& error);

}  // namespace tfb::store
