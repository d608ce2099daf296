#!/usr/bin/env bash
# The `wait` process's own cost, in figures that do not depend on the load of
# the machine: instructions (callgrind) and page faults (perf stat) of
# `tfbarrier --version` and of `tfbarrier wait --n 1` against a host on
# loopback. Use it for A/B checks of a change (the issue's budget: within 1%).
#
#   bench/startup-cost.sh                  # the tree's own Release build (build/bench)
#   TFB_BENCH_BUILD=/tmp/b bench/startup-cost.sh
#   BENCH_RUNS=500 bench/startup-cost.sh   # runs for the page-fault figures (default 200)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init

RUNS=${BENCH_RUNS:-200}
bench_build
need_pkgs valgrind linux-perf >/dev/null 2>&1 || true

start_server H TFBARRIER_ADDR "$TFB" serve --listen 127.0.0.1:0 --quiet
export TFBARRIER_ADDR=$H

instructions() {  # instructions COMMAND...: callgrind's total Ir for one run
  local out=$BENCH_TMP/cg.out
  valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >/dev/null 2>&1
  sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out"
}
faults() {  # faults COMMAND...: page faults, mean of $RUNS runs (perf stat -r)
  perf stat -x, -e page-faults -r "$RUNS" "$@" 2>&1 >/dev/null | awk -F, '/page-faults/ {print $1}'
}

v_ir=$(instructions "$TFB" --version)
w_ir=$(instructions "$TFB" wait --name cg --n 1 --quiet)
v_pf=$(faults "$TFB" --version)
w_pf=$(faults "$TFB" wait --name pf --n 1 --quiet)

echo "| what | instructions (callgrind) | page faults (perf stat, mean of $RUNS) |"
echo "|---|---|---|"
echo "| tfbarrier --version | $v_ir | $v_pf |"
echo "| tfbarrier wait --n 1, a round of one | $w_ir | $w_pf |"
