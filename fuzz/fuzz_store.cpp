// libFuzzer target: arbitrary bytes as a batch of inputs that a host of a
// store wrote (src/store/replica.h, docs/store.md): what every other host applies.
// scripts/fuzz builds and runs it. Invariants, each a __builtin_trap():
//   - a line that decodes encodes to a line that decodes to the same line
//     (what one host writes, another reads back unchanged);
//   - two replicas that apply the same batches, and then lose the same host,
//     hold the same barriers (STATUS of everything says the same), and each
//     replies only to its own connections;
//   - a replica loaded from another's snapshot (dump) dumps the same text,
//     and the bytes themselves, read as a snapshot, are refused or load to
//     a state whose dump loads back to the same dump;
//   - a key record (PREFIX/key) that parses formats to a record that parses
//     to the same fields;
//   - nothing crashes, whatever the bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "replica.h"

namespace {

using namespace tfb;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Every line on its own: decode, encode, decode again.
  std::string_view rest = bytes;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    door_input in, again;
    std::string error;
    if (!store::decode(line, in, error)) continue;
    std::string canon = store::encode(in);
    check(store::decode(canon, again, error));
    check(store::encode(again) == canon);
  }
  // The bytes as a key record: what parses round-trips.
  store::key_record kr, kr2;
  if (store::key_record::parse(bytes, kr)) {
    check(store::key_record::parse(kr.format(), kr2));
    check(kr2.id == kr.id && kr2.munge == kr.munge);
  }
  // The whole input as batches of hosts A and B (split at a NUL, if any), applied by two replicas.
  barrier_set sa, sb;
  store::replica a("A:1", sa), b("B:1", sb);
  store::presence p{store::state_machine_version, "n", "x", 1};
  for (auto* r : {&a, &b}) {
    r->host_up("A:1", 5, p);
    r->host_up("B:1", 6, p);
  }
  a.set_incarnation(5);
  b.set_incarnation(6);
  auto nul = bytes.find('\0');
  std::string_view first = bytes.substr(0, nul), second = nul == std::string_view::npos ? "" : bytes.substr(nul + 1);
  output oa, ob;
  std::string error;
  bool ok_a = a.apply_batch("A:1", 5, 0, "k1", first, nullptr, oa, error);
  bool ok_b = b.apply_batch("A:1", 5, 0, "k1", first, nullptr, ob, error);
  check(ok_a == ok_b);
  check(ob.sends.empty());  // all of host A's: B answers none
  ok_a = a.apply_batch("B:1", 6, 0, "k2", second, nullptr, oa, error);
  ok_b = b.apply_batch("B:1", 6, 0, "k2", second, nullptr, ob, error);
  check(ok_a == ok_b);
  a.host_down("A:1", 5, oa);
  b.host_down("A:1", 5, ob);
  proto::status_req all{"*", "", true};
  check(proto::format_reply(sa.status(all, 0)) == proto::format_reply(sb.status(all, 0)));
  // Snapshots: the state as text, and the bytes as a snapshot.
  barrier_set sc;
  store::replica c("C:1", sc);
  std::string snap = a.dump();
  check(c.load(snap, error));
  check(c.dump() == snap);
  barrier_set sd;
  store::replica d("D:1", sd);
  if (d.load(bytes, error)) {
    std::string once = d.dump();
    barrier_set se;
    store::replica e("E:1", se);
    check(e.load(once, error));
    check(e.dump() == once);
  }
  return 0;
}
