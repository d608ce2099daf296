#!/usr/bin/env bash
# Writes bench/link-order.txt: the functions of tfbarrier that its short
# commands run, in the order lld is to place them (CMakeLists.txt links with
# --symbol-ordering-file when lld is there). Grouped, they share a few pages
# of code, so a `tfbarrier wait` takes 24 -> 8 page faults in its own code
# (docs/performance.md, "Grouping the code a wait runs").
#
# Runs each command under callgrind against a host on loopback and keeps the
# functions it saw executing in the tfbarrier binary. Inlining differs between
# builds, so give it each build the list should serve (their lists are merged):
#
#   bench/link-order.sh                                   # the Release build of bench/ (-O3)
#   bench/link-order.sh build/bench/tfbarrier build/test/tfbarrier
#
# Needs valgrind. Run it again when the code a `wait` runs has changed much:
# tests/bats/startup.bats fails when too few of the names are left.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init
command -v valgrind >/dev/null || need_pkgs valgrind || exit 1

bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  bench_build
  bins=("$TFB")
fi
out=$bench_root/bench/link-order.txt
cg=$BENCH_TMP/cg
mkdir -p "$cg"

for bin in "${bins[@]}"; do
  bin=$(realpath "$bin")
  start_server H TFBARRIER_ADDR "$bin" serve --listen 127.0.0.1:0 --quiet
  export TFBARRIER_ADDR=$H
  i=0
  # The commands a job script runs, each ending as it does in a job: a round
  # of one, released; the chief's verdict given in one step; status; abort.
  while read -r -a cmd; do
    i=$((i + 1))
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$cg/$i.$(basename "$(dirname "$bin")").out" \
      "$bin" "${cmd[@]}" >/dev/null 2>"$BENCH_TMP/valgrind.log" || true
  done <<'EOF'
--version
wait --name lo1 --n 1 --quiet
wait --name lo2 --n 1 --rank 0
wait --name lo3 --n 1 --chief --quiet
decide continue --name lo4 --n 1 --rank 0 --quiet
decide stop --name lo5 --n 1 --rank 0 --message done
status
status --json
abort --name lo6 --reason test --quiet
config
EOF
  stop_server "$H_PID"
done

# Callgrind names a function once per file ("fn=(id) name"), then by id; the
# object ("ob=") says whose code it is.
/usr/bin/python3 - "$out" "$cg"/*.out <<'EOF'
import re, sys
out, files = sys.argv[1], sys.argv[2:]
seen = {}
for path in files:
    names, obs, ob = {}, {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"(c?ob|c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if not m:
            continue
        kind, i, name = m.groups()
        table = obs if kind.endswith("ob") else names
        if name:
            table[i] = name
        if kind == "ob":
            ob = obs.get(i)
        elif (kind == "fn" and ob and ob.endswith("/tfbarrier") and names.get(i) and " " not in names[i]
              and not names[i].startswith("0x")):
            seen.setdefault(names[i], None)  # not callgrind's "(below main)", nor an address (no symbol to order)
with open(out, "w") as f:
    f.write("# The functions tfbarrier's short commands run, grouped by the linker (lld\n"
            "# --symbol-ordering-file). Written by bench/link-order.sh; do not edit.\n")
    f.writelines(s + "\n" for s in seen)
print(f"link-order: {len(seen)} functions from {len(files)} runs -> {out}")
EOF
