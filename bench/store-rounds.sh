#!/usr/bin/env bash
# Rounds of N real `tfbarrier wait` processes, on one host and on three hosts
# sharing a 3-member etcd (serve --store, docs/store.md), side by side. For
# each N it prints the release latency (from the start of the last
# participant, once the N-1 others are counted, to the exit of all N; the
# median of the rounds) and, with the store, the etcd writes per round (the
# store's revision before and after: one revision per transaction), both with
# arrivals spread as the processes start one by one, and with arrivals that
# reach the hosts at once (the hosts are paused while the processes start).
#
#   bench/store-rounds.sh                         # N = 8 32 128 512, 5 rounds each
#   BENCH_NS="8 64" BENCH_ROUNDS=3 bench/store-rounds.sh
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init

NS=${BENCH_NS:-8 32 128 512}
ROUNDS=${BENCH_ROUNDS:-5}
bench_build
cmake --build "$BUILD" -j"${BENCH_JOBS:-1}" --target tfbarrier_etcd >/dev/null
need_pkgs etcd-server etcd-client >/dev/null || { echo "bench: etcd is needed" >&2; exit 1; }
cluster=$bench_root/tests/tools/etcd-cluster
etcd_dir=$BENCH_TMP/etcd
endpoints=$("$cluster" start "$etcd_dir" 3 | tail -n 1)
trap '"$cluster" stop "$etcd_dir"; bench_cleanup' EXIT
store="etcd://${endpoints//http:\/\//}/bench"

revision() {
  ETCDCTL_API=3 etcdctl --endpoints="${endpoints%%,*}" endpoint status -w json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])'
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

start_server S0 TFBARRIER_ADDR "$TFB" serve --listen 127.0.0.1:0 --quiet --history 0
for i in 0 1 2; do
  start_server "H$i" TFBARRIER_ADDR "$TFB" serve --listen 127.0.0.1:0 --quiet --history 0 --store "$store" --insecure
done
hosts_store=("$H0" "$H1" "$H2")
hosts_single=("$S0")

# round MODE N NAME: one round; prints "latency_ms writes"
round() {
  local mode=$1 n=$2 name=$3 k pids=() a
  local -n hs="hosts_$mode"
  local before=0
  [ "$mode" = store ] && before=$(revision)
  for ((k = 1; k < n; k++)); do
    a=${hs[$((k % ${#hs[@]}))]}
    TFBARRIER_ADDR=$a "$TFB" wait --name "$name" --n "$n" --rank "$k" --timeout 120s >/dev/null 2>&1 &
    pids+=("$!")
  done
  a=${hs[0]}
  for _ in $(seq 1200); do
    TFBARRIER_ADDR=$a "$TFB" status --name "$name" --json 2>/dev/null | grep -q "\"arrived\": $((n - 1))," && break
    sleep 0.05
  done
  local t0 t1
  t0=$(now_ms)
  TFBARRIER_ADDR=$a "$TFB" wait --name "$name" --n "$n" --rank 0 --timeout 120s >/dev/null 2>&1
  for p in "${pids[@]}"; do wait "$p"; done
  t1=$(now_ms)
  local writes=-
  [ "$mode" = store ] && writes=$(($(revision) - before))
  echo "$((t1 - t0)) $writes"
}

# burst N NAME: the N participants start while the three hosts are stopped
# (SIGSTOP), so that their arrivals reach the hosts at once, as at the end of
# an epoch; prints the etcd writes of the round.
burst() {
  local n=$1 name=$2 k pids=() before
  kill -STOP "$H0_PID" "$H1_PID" "$H2_PID"
  for ((k = 0; k < n; k++)); do
    TFBARRIER_ADDR=${hosts_store[$((k % 3))]} "$TFB" wait --name "$name" --n "$n" --rank "$k" --timeout 120s \
      >/dev/null 2>&1 &
    pids+=("$!")
  done
  # Every participant connected (the kernel accepts for a stopped host) and sent its ARRIVE.
  for _ in $(seq 600); do
    [ "$(ss -Htn state established "( dport = :${H0##*:} or dport = :${H1##*:} or dport = :${H2##*:} )" |
      wc -l)" -ge "$n" ] && break
    sleep 0.05
  done
  sleep 0.5
  before=$(revision)
  kill -CONT "$H0_PID" "$H1_PID" "$H2_PID"
  for p in "${pids[@]}"; do wait "$p"; done
  echo $(($(revision) - before))
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

echo "| N | single host: release latency (median ms) | 3 hosts + etcd: release latency (median ms) | etcd writes per round, arrivals spread (median) | etcd writes per round, arrivals at once (median) |"
echo "|---|---|---|---|---|"
for n in $NS; do
  single=() store_lat=() store_w=() burst_w=()
  for r in $(seq "$ROUNDS"); do
    read -r l _ < <(round single "$n" "s$n-$r")
    single+=("$l")
    read -r l w < <(round store "$n" "e$n-$r")
    store_lat+=("$l")
    store_w+=("$w")
    burst_w+=("$(burst "$n" "b$n-$r")")
  done
  echo "| $n | $(printf '%s\n' "${single[@]}" | median) | $(printf '%s\n' "${store_lat[@]}" | median) | $(printf '%s\n' "${store_w[@]}" | median) | $(printf '%s\n' "${burst_w[@]}" | median) |"
done
echo
echo "($(nproc) cores; etcd $(etcd --version | sed -n 's/^etcd Version: //p'), 3 members on loopback; $ROUNDS rounds each)"
