#!/usr/bin/env bash
# What would close target 1 of docs/performance.md (a round of N `wait`
# processes within 1.1x floor (a))? Rounds of N processes, as in
# bench/compare.sh, for floor (a), tfbarrier as shipped, and three what-if
# builds of the same `wait` (bench/CMakeLists.txt):
#   nocli         no CLI11: bench/variant_wait.cpp calls run_wait() directly
#   static        tfbarrier linked fully static (glibc too)
#   static_nocli  both
# and two more floors, C clients linked like floor (a)'s, to say how much of
# the round any participant of a request-and-reply barrier must pay:
#   floorr        floor (b)'s server (no protocol), a client that sends its
#                 arrival and reads one line back (bench/floor_p_client.c)
#   floorp        floor (p): the same client against `tfbarrier serve`, with
#                 tfbarrier's protocol (HELLO, ARRIVE; WAITING, RELEASE)
# The machine is noisy, so the seven run in turns, BENCH_TURNS times, a few
# rounds each; a cell is the median of its turns' medians. Then page faults
# and CPU per process (perf stat, a round of 1), where perf is installed.
#
#   bench/variants.sh                              # N = 8 128 512, 4 turns of 11 rounds
#   BENCH_NS=128 BENCH_TURNS=2 BENCH_ROUNDS=5 bench/variants.sh
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init

NS=${BENCH_NS:-8 128 512}
TURNS=${BENCH_TURNS:-4}
ROUNDS=${BENCH_ROUNDS:-11}
VARIANTS=(floor floorr floorp tfbarrier nocli static static_nocli)

bench_build
cmake --build "$BUILD" -j"${BENCH_JOBS:-1}" --target tfb_variant_nocli tfb_variant_static tfb_variant_static_nocli \
  >"$BENCH_TMP/variants-build.log" 2>&1 || { tail -n 20 "$BENCH_TMP/variants-build.log" >&2; exit 1; }
machine_info
echo "rounds: $TURNS turns of $ROUNDS rounds (after 3 warm-up rounds) per cell; N = $NS"

cmd_of() {  # cmd_of VARIANT N: sets CMD to the command line of one participant
  case $1 in
    floor) CMD=("$BIN/tfb_floor_a_client" "$FA") ;;
    floorr) CMD=("$BIN/tfb_floor_p_client" "$FB" "r%r" "$2") ;;
    floorp) CMD=("$BIN/tfb_floor_p_client" "$H" "p%r" "$2") ;;
    tfbarrier) CMD=("$TFB" wait --name "v%r" --n "$2" --quiet) ;;
    *) CMD=("$BIN/tfb_variant_$1" wait --name "v%r" --n "$2" --quiet) ;;
  esac
}

declare -A turns
for n in $NS; do
  start_server H TFBARRIER_ADDR "$TFB" serve --listen 127.0.0.1:0 --quiet
  start_server FA FLOOR_ADDR "$BIN/tfb_floor_a_server" --n "$n"
  start_server FB FLOOR_ADDR "$BIN/tfb_floor_b_server" --n "$n" --reply "RELEASE verdict=continue"
  for t in $(seq "$TURNS"); do
    for v in "${VARIANTS[@]}"; do
      cmd_of "$v" "$n"
      out=$(TFBARRIER_ADDR=$H "$BIN/tfb_roundrun" -n "$n" -r "$ROUNDS" -w 3 -t 60 -b 120 -p "$v$t-" -- "${CMD[@]}") || {
        echo "bench: $v at N = $n failed: $out" >&2
        exit 1
      }
      turns[$v.$n]+="$(field median_ms <<<"$out") "
      echo "N=$n turn $t $v: $out" >&2
    done
  done
  stop_server "$FA_PID"
  stop_server "$FB_PID"
  stop_server "$H_PID"
done

echo
echo "Rounds of N processes: median of $TURNS turns (each the median of $ROUNDS rounds); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '| N | floor (a) | C request, floor (b) server | floor (p) | tfbarrier wait | no CLI11 | static | static, no CLI11 |\n|---|---|---|---|---|---|---|---|\n'
for n in $NS; do
  fl=$(tr ' ' '\n' <<<"${turns[floor.$n]}" | grep . | median)
  row="| $n |"
  for v in "${VARIANTS[@]}"; do
    m=$(tr ' ' '\n' <<<"${turns[$v.$n]}" | grep . | median)
    row+=" $(awk -v m="$m" -v f="$fl" 'BEGIN {printf "%.1f ms (%.2fx)", m, m / f}') |"
  done
  echo "$row"
done

command -v perf >/dev/null || { echo; echo "(perf is not installed: no page-fault figures)"; exit 0; }
start_server H TFBARRIER_ADDR "$TFB" serve --listen 127.0.0.1:0 --quiet
start_server FA FLOOR_ADDR "$BIN/tfb_floor_a_server" --n 1
start_server FB FLOOR_ADDR "$BIN/tfb_floor_b_server" --n 1 --reply "RELEASE verdict=continue"
echo
echo "One process, a round of 1: perf stat -r 200, two batches in turns (task-clock is CPU time)"
echo
printf '| | page faults | task-clock |\n|---|---|---|\n'
declare -A pf tc
for t in 1 2; do
  for v in "${VARIANTS[@]}"; do
    cmd_of "$v" 1
    for i in "${!CMD[@]}"; do CMD[i]=${CMD[i]//"%r"/1}; done
    stat=$(TFBARRIER_ADDR=$H perf stat -r 200 -x, -e page-faults,task-clock -- "${CMD[@]}" 2>&1 >/dev/null)
    pf[$v]+="$(awk -F, '$3 == "page-faults" {print $1}' <<<"$stat") "
    tc[$v]+="$(awk -F, '$3 == "task-clock" {printf "%.3f", $1}' <<<"$stat") "
  done
done
for v in "${VARIANTS[@]}"; do echo "| $v | ${pf[$v]% } | ${tc[$v]% } ms |"; done
