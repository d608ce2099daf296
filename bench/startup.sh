#!/usr/bin/env bash
# Startup: `tfbarrier --version` against a C program that does nothing
# (bench/noop.c), with hyperfine (Debian's, installed when missing) and with
# a loop of 1,000 runs timed by bench/roundrun.c (fork, exec, exit). Then the
# same for a whole round of one: `tfbarrier wait --n 1` against floor (a)'s
# client, which is where a `wait` process's own cost shows.
#
#   bench/startup.sh               # 1,000 runs each
#   BENCH_RUNS=200 bench/startup.sh
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init

RUNS=${BENCH_RUNS:-1000}
bench_build
have_hyperfine=1
need_pkgs hyperfine || have_hyperfine=0
machine_info

declare -A med
loop() {  # loop KEY command...: median of $RUNS runs, one at a time (tfb_roundrun -n 1)
  local key=$1 out
  shift
  out=$("$BIN/tfb_roundrun" -n 1 -r "$RUNS" -w 20 -t 30 -p "$key-" -- "$@")
  med[$key]=$(field median_ms <<<"$out")
}
hyper() {  # hyper KEY command: mean and median from hyperfine, no shell
  local key=$1
  shift
  hyperfine -N --warmup 50 --runs "$RUNS" --export-json "$BENCH_TMP/$key.json" "$*" >/dev/null 2>&1 || return 0
  read -r "med[h_$key]" "med[hmean_$key]" "med[hsd_$key]" < <(/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print("%.3f %.3f %.3f" % (r["median"] * 1e3, r["mean"] * 1e3, r["stddev"] * 1e3))' "$BENCH_TMP/$key.json")
}

loop noop "$BIN/tfb_noop"
loop version "$TFB" --version
if [ "$have_hyperfine" = 1 ]; then
  hyper noop "$BIN/tfb_noop"
  hyper version "$TFB" --version
fi

start_server H TFBARRIER_ADDR "$TFB" serve --listen 127.0.0.1:0 --quiet
start_server FA FLOOR_ADDR "$BIN/tfb_floor_a_server" --n 1
loop floor1 "$BIN/tfb_floor_a_client" "$FA"
TFBARRIER_ADDR=$H loop wait1 "$TFB" wait --name "s%r" --n 1 --quiet
if [ "$have_hyperfine" = 1 ]; then
  hyper floor1 "$BIN/tfb_floor_a_client" "$FA"
  # hyperfine reuses the name: a barrier of one is a new round each time.
  TFBARRIER_ADDR=$H hyper wait1 "$TFB" wait --name s1 --n 1 --quiet
fi

d() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "") print "-"; else printf "%+.3f ms", a - b}'; }
echo
echo "Startup, median of $RUNS runs; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| what | loop (fork+exec+exit) | hyperfine median (mean ± sd) | over the C program |"
echo "|---|---|---|---|"
echo "| C no-op (bench/noop.c) | ${med[noop]} ms | ${med[h_noop]:-n/a} ms (${med[hmean_noop]:-?} ± ${med[hsd_noop]:-?}) | - |"
echo "| tfbarrier --version | ${med[version]} ms | ${med[h_version]:-n/a} ms (${med[hmean_version]:-?} ± ${med[hsd_version]:-?}) | loop $(d "${med[version]}" "${med[noop]}"), hyperfine $(d "${med[h_version]:-}" "${med[h_noop]:-}") |"
echo "| floor (a) client, a round of 1 | ${med[floor1]} ms | ${med[h_floor1]:-n/a} ms (${med[hmean_floor1]:-?} ± ${med[hsd_floor1]:-?}) | - |"
echo "| tfbarrier wait --n 1, a round of 1 | ${med[wait1]} ms | ${med[h_wait1]:-n/a} ms (${med[hmean_wait1]:-?} ± ${med[hsd_wait1]:-?}) | loop $(d "${med[wait1]}" "${med[floor1]}"), hyperfine $(d "${med[h_wait1]:-}" "${med[h_floor1]:-}") over floor (a) |"
echo
# What a CPU probe at start-up would cost here (a VM exit per CPUID on a virtual
# machine; tests/bats/startup.bats keeps tfbarrier's own code free of them).
"$BIN/tfb_cpuid_cost"
