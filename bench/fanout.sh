#!/usr/bin/env bash
# Host fan-out to M participants (M = 2,000, 10,000, 19,000): `tfbarrier serve`
# against floor (b), a single-threaded epoll server that counts M one-line
# arrivals and writes one line to each, both driven by the same load
# generator (bench/loadgen.cpp) over M TCP connections from 64 loopback
# source addresses. A fresh host for each M, so its memory figures start
# from nothing.
#
# Per M: fan-out = last ARRIVE sent -> last RELEASE received (median of the
# rounds without a chief), the host's memory growth per waiting participant
# (RSS with M-1 waiting minus RSS before the first round, over M-1), its CPU
# time per round, and one more round with a chief whose verdict comes in a
# DECIDE (its fan-out is counted from the DECIDE).
#
#   bench/fanout.sh                         # M = 2000 10000 19000, 5 rounds
#   BENCH_MS="2000" BENCH_ROUNDS=3 bench/fanout.sh
#   BENCH_SERVE_EXTRA=--insecure bench/fanout.sh   # more serve options (--insecure: no owner check)
#   BENCH_TURNS=3 bench/fanout.sh           # tfbarrier and floor (b) in turns, 3 each:
#                                           # the medians are over every turn's rounds
#
# The fan-out on this 2-CPU VM has two modes (about 200 and 350 ms at 19,000,
# for floor (b) as for tfbarrier), and a run lands in one or the other, so
# a single run's ratio swings; turns put both sides in the same stretch.
#
# Bounded: each load-generator round gives up after 120 s.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init

MS=${BENCH_MS:-2000 10000 19000}
ROUNDS=${BENCH_ROUNDS:-5}
TURNS=${BENCH_TURNS:-1}
bench_build
machine_info
echo "rounds: $ROUNDS without a chief (medians), then 1 with a chief (stop); M = $MS; turns: $TURNS"

verdicts=$(printf 'none,%.0s' $(seq "$ROUNDS"))stop
declare -A res
for m in $MS; do
  : >"$BENCH_TMP/tfb.$m"
  : >"$BENCH_TMP/floor.$m"
  for turn in $(seq "$TURNS"); do
    echo "M=$m turn $turn: tfbarrier (load average $(cut -d' ' -f1 /proc/loadavg))" >&2
    start_server H TFBARRIER_ADDR "$TFB" serve --listen 127.0.0.1:0 --quiet ${BENCH_SERVE_EXTRA:-}
    "$BIN/tfb_loadgen" --addr "$H" --participants "$m" --rounds $((ROUNDS + 1)) --verdicts "$verdicts" \
      --host-pid "$H_PID" --timeout 120 --quiet >>"$BENCH_TMP/tfb.$m" || echo "bench: tfbarrier at M=$m: WRONG" >&2
    stop_server "$H_PID"
    echo "M=$m turn $turn: floor (b) (load average $(cut -d' ' -f1 /proc/loadavg))" >&2
    start_server F FLOOR_ADDR "$BIN/tfb_floor_b_server" --n "$m"
    "$BIN/tfb_loadgen" --addr "$F" --participants "$m" --rounds "$ROUNDS" --raw --host-pid "$F_PID" --timeout 120 \
      --quiet >>"$BENCH_TMP/floor.$m" || echo "bench: floor (b) at M=$m: WRONG" >&2
    stop_server "$F_PID"
  done
  cat "$BENCH_TMP/tfb.$m" "$BENCH_TMP/floor.$m" >&2
  for who in tfb floor; do
    f=$BENCH_TMP/$who.$m
    plain=$(grep '^RESULT .* verdict=none ' "$f" || true)
    res[$who,$m,fanout]=$(field fanout_ms <<<"$plain" | median)
    res[$who,$m,connect]=$(field connect_ms <<<"$plain" | median)
    res[$who,$m,cpu]=$(field host_sched_ms <<<"$plain" | median)
    res[$who,$m,cpufan]=$(field host_sched_fanout_ms <<<"$plain" | median)
    res[$who,$m,mem]=$(grep '^RESULT round=1 ' "$f" | field bytes_per_waiting | median || true)
    res[$who,$m,ok]=$(grep -c '^RESULT .* ok=1$' "$f" || true)
    res[$who,$m,rounds]=$(grep -c '^RESULT ' "$f" || true)
    res[$who,$m,chief]=$(grep '^RESULT .* verdict=stop ' "$f" | field fanout_ms | median || true)
  done
done

num() { awk -v v="$1" -v d="${2:-1}" 'BEGIN {if (v == "") print "-"; else printf "%.*f", d, v}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || b == 0) print "-"; else printf "%.2fx", a / b}'; }
echo
echo "Fan-out: last ARRIVE sent -> last RELEASE received, median of $((ROUNDS * TURNS)) rounds ($TURNS turn(s)); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| M | tfbarrier fan-out | floor (b) fan-out | ratio | chief round: DECIDE -> last RELEASE | host memory per waiting participant (tfbarrier / floor) | host CPU per round (tfbarrier / floor) | host CPU in the fan-out (tfbarrier / floor) | connect+arrive (tfbarrier / floor) | rounds correct |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for m in $MS; do
  echo "| $m | $(num "${res[tfb,$m,fanout]}") ms | $(num "${res[floor,$m,fanout]}") ms | $(ratio "${res[tfb,$m,fanout]}" "${res[floor,$m,fanout]}") | $(num "${res[tfb,$m,chief]}") ms | $(num "${res[tfb,$m,mem]}" 0) B / $(num "${res[floor,$m,mem]}" 0) B | $(num "${res[tfb,$m,cpu]}" 0) ms / $(num "${res[floor,$m,cpu]}" 0) ms | $(num "${res[tfb,$m,cpufan]}" 0) ms / $(num "${res[floor,$m,cpufan]}" 0) ms | $(num "${res[tfb,$m,connect]}" 0) ms / $(num "${res[floor,$m,connect]}" 0) ms | ${res[tfb,$m,ok]}/${res[tfb,$m,rounds]}, ${res[floor,$m,ok]}/${res[floor,$m,rounds]} |"
done
