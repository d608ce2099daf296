#!/usr/bin/env bash
# Rounds of N separate processes that meet at a barrier, on this machine, in
# one run: `tfbarrier wait`, floor (a) (a C process that crosses loopback
# once), a barrier of files polled in a shared directory, redis-cli (INCR,
# then BLPOP) against a local redis-server, and PyTorch's TCPStore. With
# tfbarrier runs floor (p): a C process that speaks tfbarrier's protocol to
# the same host (bench/floor_p_client.c), which splits tfbarrier's time over
# floor (a) into what the protocol and the host cost, and what the `wait`
# process itself costs.
#
# A round (bench/roundrun.c): N processes are forked and held; the clock
# starts when all N are let go at once, and stops when the last has exited.
# Each cell is the median of BENCH_ROUNDS rounds (after one warm-up round),
# and its ratio to floor (a) at the same N.
#
#   bench/compare.sh                       # N = 8 32 128 512, 5 rounds each
#   BENCH_NS="8 32" BENCH_ROUNDS=3 bench/compare.sh
#   BENCH_ALTS="floor tfbarrier" bench/compare.sh   # only these columns (floor (a) always runs)
#
# Bounded: every round is killed after BENCH_ROUND_TIMEOUT_S (120 s), and no
# new round of one cell starts after BENCH_BUDGET_S (300 s). Installs
# redis-server, redis-tools and python3-torch from Debian when missing; a
# column that cannot run says why.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init

NS=${BENCH_NS:-8 32 128 512}
ALTS=" ${BENCH_ALTS:-floor tfbarrier files redis tcpstore} "
want() { [[ "$ALTS" == *" $1 "* ]]; }
ROUNDS=${BENCH_ROUNDS:-5}
ROUND_TIMEOUT=${BENCH_ROUND_TIMEOUT_S:-120}
BUDGET=${BENCH_BUDGET_S:-300}
# A python3 with torch imported holds about 115 MiB of its own (measured with
# /proc/self/smaps_rollup); N of them must fit in half the available memory.
TORCH_MIB_PER_PROCESS=${BENCH_TORCH_MIB:-130}

bench_build
redis_note="" torch_note=""
if want redis; then
  need_pkgs redis-server redis-tools || redis_note="not run: redis-server could not be installed"
else
  redis_note="not run (BENCH_ALTS)"
fi
if want tcpstore; then
  need_pkgs python3-torch || torch_note="not run: python3-torch could not be installed"
else
  torch_note="not run (BENCH_ALTS)"
fi
machine_info
echo "rounds: median of $ROUNDS after 1 warm-up, per cell; N = $NS"

start_server TFB_ADDR TFBARRIER_ADDR "$TFB" serve --listen 127.0.0.1:0 --quiet
export TFBARRIER_ADDR=$TFB_ADDR
if [ -z "$redis_note" ]; then
  RPORT=$(free_port)
  redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --maxclients 10000 \
    >"$BENCH_TMP/redis.log" 2>&1 </dev/null &
  BENCH_PIDS+=("$!")
  for _ in $(seq 100); do
    redis-cli -h 127.0.0.1 -p "$RPORT" ping 2>/dev/null | grep -q PONG && break
    sleep 0.1
  done
  redis-cli -h 127.0.0.1 -p "$RPORT" ping 2>/dev/null | grep -q PONG || redis_note="not run: redis-server did not start"
fi
if [ -z "$torch_note" ]; then
  if start_server TS_ADDR TCPSTORE_ADDR /usr/bin/python3 "$bench_root/bench/alt/tcpstore_server.py"; then
    TPORT=${TS_ADDR##*:}
  else
    torch_note="not run: the TCPStore master did not start"
  fi
fi

declare -A cell
# run_cell KEY N command...: a cell of the table.
run_cell() {
  local key=$1 n=$2
  shift 2
  local out rc=0
  out=$("$BIN/tfb_roundrun" -n "$n" -r "$ROUNDS" -w 1 -t "$ROUND_TIMEOUT" -b "$BUDGET" -p "$key-$n-" -- "$@" \
    2>"$BENCH_TMP/cell.err") || rc=$?
  local med ndone failed
  med=$(field median_ms <<<"$out")
  ndone=$(field "done" <<<"$out")
  failed=$(field failed <<<"$out")
  if [ "$rc" -ne 0 ] || [ -z "$med" ]; then
    cell[$key,$n]="FAILED: ${failed:-?} round(s): $(head -c 120 "$BENCH_TMP/cell.err" | tr '\n' ' ')"
  else
    cell[$key,$n]=$med
    [ "$ndone" -lt "$ROUNDS" ] && cell[$key,$n]="$med ($ndone rounds)"
  fi
  printf '  %-10s N=%-4s %s\n' "$key" "$n" "$out" >&2
}

for n in $NS; do
  echo "N=$n: running (load average $(cut -d' ' -f1 /proc/loadavg))" >&2
  start_server FA_ADDR FLOOR_ADDR "$BIN/tfb_floor_a_server" --n "$n"
  run_cell floor "$n" "$BIN/tfb_floor_a_client" "$FA_ADDR"
  stop_server "$FA_ADDR_PID"
  cell[tfbarrier,$n]="not run (BENCH_ALTS)" cell[floorp,$n]="not run (BENCH_ALTS)" cell[files,$n]="not run (BENCH_ALTS)"
  if want tfbarrier; then
    run_cell floorp "$n" "$BIN/tfb_floor_p_client" "$TFB_ADDR" "cmpp$n-%r" "$n"
    run_cell tfbarrier "$n" "$TFB" wait --name "cmp$n-%r" --n "$n" --quiet
  fi
  if want files; then
    mkdir -p "$BENCH_TMP/files"
    run_cell files "$n" /bin/sh "$bench_root/bench/alt/files.sh" "$BENCH_TMP/files/$n-%r" "$n" %i
    rm -rf "$BENCH_TMP/files"
  fi
  if [ -z "$redis_note" ]; then
    run_cell redis "$n" /bin/sh "$bench_root/bench/alt/redis.sh" "$RPORT" "cmp$n-%r" "$n"
  else
    cell[redis,$n]=$redis_note
  fi
  avail_mib=$(awk '/^MemAvailable/ {printf "%d", $2 / 1024}' /proc/meminfo)
  if [ -n "$torch_note" ]; then
    cell[tcpstore,$n]=$torch_note
  elif [ $((n * TORCH_MIB_PER_PROCESS)) -gt $((avail_mib / 2)) ]; then
    cell[tcpstore,$n]="not run: $n python3+torch processes need ~$((n * TORCH_MIB_PER_PROCESS / 1024)) GiB; half the available memory is $((avail_mib / 2048)) GiB"
  else
    run_cell tcpstore "$n" /usr/bin/python3 "$bench_root/bench/alt/tcpstore_wait.py" "$TPORT" "cmp$n-%r" "$n"
  fi
done

# The table: median round time in ms, and its ratio to floor (a).
fmt_cell() {
  local v=$1 f=$2
  if [[ "$v" =~ ^[0-9.]+ ]]; then
    local num=${v%% *} rest=""
    [ "$num" != "$v" ] && rest=" ${v#* }"
    awk -v v="$num" -v f="$f" -v r="$rest" 'BEGIN {printf "%.1f ms (%.2fx)%s", v, v / f, r}'
  else
    printf '%s' "$v"
  fi
}
echo
echo "Round of N processes: median time from the start of all N to the last exit (ratio to floor (a)); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| N | floor (a): C client, one byte | floor (p): C client, tfbarrier's protocol | tfbarrier wait | files, 10 ms poll | redis-cli INCR+BLPOP | PyTorch TCPStore |"
echo "|---|---|---|---|---|---|---|"
for n in $NS; do
  f=${cell[floor,$n]%% *}
  if ! [[ "$f" =~ ^[0-9.]+$ ]]; then f=0; fi
  row="| $n"
  for k in floor floorp tfbarrier files redis tcpstore; do
    if [ "$f" = 0 ]; then row+=" | ${cell[$k,$n]}"; else row+=" | $(fmt_cell "${cell[$k,$n]}" "$f")"; fi
  done
  echo "$row |"
done
