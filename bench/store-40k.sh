#!/usr/bin/env bash
# Past one process's fds (issue #20): one round of N participants (default
# 40,000, twice what one host process holds here) spread over H hosts
# (default 8), each `tfbarrier serve --store etcd://...` in a network
# namespace of its own, with one load generator (bench/loadgen.cpp) per
# namespace talking to that namespace's host from the namespace's own address;
# beside it, in the same run, a single host's round of S participants (default
# 19,000) on loopback, without a store.
#
# Release latency: the last participant's ARRIVE (held back by the first load
# generator until every other participant has its WAITING) to the last
# RELEASE received by any load generator, merged on the wall clock
# (CLOCK_REALTIME: the load generators are different processes). Every
# participant's RELEASE is checked (round, name, verdict, exactly one), and
# the count of wrong or missing releases is printed.
#
# Network (root only): a bridge b40k-br (10.233.0.254/24) in the root
# namespace; namespaces b40k-h0..b40k-h{H-1} at 10.233.0.1.. for the hosts and
# their load generators, and b40k-e0..b40k-e2 at 10.233.0.101..103 for the
# three etcd members (tests/tools/etcd-cluster). Everything it made is removed
# by name on exit; it touches no other namespace. The hosts listen on the
# bridge without authentication (--insecure): the bridge is private to this run.
#
#   sudo bench/store-40k.sh                          # 8 hosts x 5,000 and a single host at 19,000
#   BENCH_HOSTS=8 BENCH_PER_HOST=200 BENCH_SINGLE=1000 bench/store-40k.sh   # a small try
#
# Outside CI: it needs root (ip netns), etcd-server and 40k descriptors.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_init

HOSTS=${BENCH_HOSTS:-8}
PER_HOST=${BENCH_PER_HOST:-5000}
SINGLE=${BENCH_SINGLE:-19000}
TIMEOUT=${BENCH_TIMEOUT:-300}
N=$((HOSTS * PER_HOST))
[ "$(id -u)" = 0 ] || { echo "bench: network namespaces need root" >&2; exit 1; }
if [ "$HOSTS" -lt 1 ] || [ "$HOSTS" -gt 100 ]; then echo "bench: BENCH_HOSTS must be 1 to 100" >&2; exit 1; fi
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge $((SINGLE + 64)) ] || { echo "bench: ulimit -n $(ulimit -n) is too low for $SINGLE" >&2; exit 1; }

bench_build
cmake --build "$BUILD" -j"${BENCH_JOBS:-1}" --target tfbarrier_etcd >/dev/null
need_pkgs etcd-server etcd-client >/dev/null || { echo "bench: etcd is needed" >&2; exit 1; }
cluster=$bench_root/tests/tools/etcd-cluster
etcd_dir=$BENCH_TMP/etcd

# ---- the network: only b40k-* names and 10.233.0.0/24 ----
MADE_NS=()
MADE_LINKS=()
net_down() {
  local ns l
  for ns in "${MADE_NS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  for l in "${MADE_LINKS[@]}"; do ip link del "$l" 2>/dev/null || true; done
  MADE_NS=()
  MADE_LINKS=()
}
all_down() {
  if [ -d "$etcd_dir" ]; then "$cluster" stop "$etcd_dir" || true; fi
  bench_cleanup
  net_down
}
trap all_down EXIT

if ip link show b40k-br >/dev/null 2>&1; then echo "bench: b40k-br exists already (another run?)" >&2; exit 1; fi
ip link add b40k-br type bridge
MADE_LINKS+=(b40k-br)
ip addr add 10.233.0.254/24 dev b40k-br
ip link set b40k-br up
# make_ns NAME VETH ADDR: a namespace on the bridge at ADDR.
make_ns() {
  local ns=$1 veth=$2 addr=$3
  if ip netns list | grep -qw "$ns"; then echo "bench: namespace $ns exists already" >&2; exit 1; fi
  ip netns add "$ns"
  MADE_NS+=("$ns")
  ip link add "$veth" type veth peer name "$veth-p"
  MADE_LINKS+=("$veth")
  ip link set "$veth-p" netns "$ns"
  ip link set "$veth" master b40k-br up
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$veth-p" name eth0
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
}
for i in 0 1 2; do make_ns "b40k-e$i" "b40k-ve$i" "10.233.0.$((101 + i))"; done
for ((i = 0; i < HOSTS; i++)); do make_ns "b40k-h$i" "b40k-vh$i" "10.233.0.$((1 + i))"; done

endpoints=$(ETCD_ADDRS="10.233.0.101 10.233.0.102 10.233.0.103" ETCD_NETNS="b40k-e0 b40k-e1 b40k-e2" \
  "$cluster" start "$etcd_dir" 3 | tail -n 1)
store="etcd://${endpoints//http:\/\//}/b40k"

machine_info
echo "etcd $(etcd --version | sed -n 's/^etcd Version: //p'): 3 members in namespaces b40k-e0..2 ($endpoints)"
echo "round: $N participants = $HOSTS hosts x $PER_HOST, one load generator per host's namespace; single host: $SINGLE"

# ---- the single host, S participants, loopback, no store ----
echo "single host: $SINGLE participants (load average $(cut -d' ' -f1 /proc/loadavg))" >&2
start_server S TFBARRIER_ADDR "$TFB" serve --listen 127.0.0.1:0 --quiet --history 0
"$BIN/tfb_loadgen" --addr "$S" --participants "$SINGLE" --rounds 1 --host-pid "$S_PID" --timeout "$TIMEOUT" \
  --quiet >"$BENCH_TMP/single" 2>&1 || true
stop_server "$S_PID"
single_ms=$(grep '^RESULT ' "$BENCH_TMP/single" | field tail_ms || true)
single_rel=$(grep '^RESULT ' "$BENCH_TMP/single" | field released || true)
single_err=$(grep '^RESULT ' "$BENCH_TMP/single" | field errors || true)

# ---- H hosts with the store, one per namespace ----
echo "store: $HOSTS hosts x $PER_HOST (load average $(cut -d' ' -f1 /proc/loadavg))" >&2
# A host's id in the store is NODE:PORT, and the namespaces share the node
# name: a port of its own for each host.
port=7400
for ((i = 0; i < HOSTS; i++)); do
  start_server "H$i" TFBARRIER_ADDR ip netns exec "b40k-h$i" "$TFB" serve --listen "10.233.0.$((1 + i)):$((port + i))" \
    --insecure --quiet --history 0 --store "$store"
done
go=$BENCH_TMP/go
rt=$BENCH_TMP/release
lg_pids=()
# Load generators 1..H-1: all their participants arrive; load generator 0
# holds back one participant until the go file exists.
for ((i = HOSTS - 1; i >= 0; i--)); do
  extra=(--no-hold)
  [ "$i" = 0 ] && extra=(--go-file "$go")
  ip netns exec "b40k-h$i" "$BIN/tfb_loadgen" --addr "10.233.0.$((1 + i)):$((port + i))" --source-base "10.233.0.$((1 + i))" \
    --sources 1 --participants "$PER_HOST" --n "$N" --id-prefix "h$i" --name big --scope b40k \
    --release-times "$rt.h$i" --timeout "$TIMEOUT" --quiet "${extra[@]}" >"$BENCH_TMP/lg$i" 2>&1 &
  lg_pids[i]=$!
done
# Every participant but the held-back one waits: its WAITING came back through etcd.
waiting() {
  ip netns exec b40k-h0 "$TFB" status --insecure --addr "10.233.0.1:$port" --scope b40k --name big --json 2>/dev/null |
    sed -n 's/.*"arrived": \([0-9]*\),.*/\1/p' | head -n 1
}
ok_ready=0
for _ in $(seq $((TIMEOUT * 10))); do
  if grep -q '^READY' "$BENCH_TMP/lg0" 2>/dev/null && [ "$(waiting)" = $((N - 1)) ]; then ok_ready=1; break; fi
  kill -0 "${lg_pids[0]}" 2>/dev/null || break
  sleep 0.1
done
[ "$ok_ready" = 1 ] || echo "bench: the $((N - 1)) others did not all arrive (status: $(waiting))" >&2
[ "$ok_ready" = 1 ] || tail -n 5 "$BENCH_TMP/servers.log" >&2
# Every load generator's own participants acknowledged as well (WAITING), so
# that the round measured is only the fan-out.
sleep 1
touch "$go"
fail=0
for ((i = 0; i < HOSTS; i++)); do wait "${lg_pids[i]}" || fail=1; done
for ((i = 0; i < HOSTS; i++)); do stop_server "$(eval echo "\$H${i}_PID")"; done

# ---- merge ----
final=$(grep '^RESULT ' "$BENCH_TMP/lg0" | field final_arrive_wall_ns || true)
errs=0
for ((i = 0; i < HOSTS; i++)); do
  e=$(grep '^RESULT ' "$BENCH_TMP/lg$i" | field errors || true)
  errs=$((errs + ${e:-$PER_HOST}))
done
cat "$rt".h*.* 2>/dev/null >"$BENCH_TMP/all-releases" || true
released=$(awk '{print $1}' "$BENCH_TMP/all-releases" | sort -u | wc -l)
dups=$(($(wc -l <"$BENCH_TMP/all-releases") - released))
last=$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$BENCH_TMP/all-releases")
store_ms=$(awk -v a="${final:-0}" -v b="$last" 'BEGIN {if (a == 0 || b == 0) print ""; else printf "%.1f", (b - a) / 1e6}')
first=$(awk 'BEGIN {m = 0} m == 0 || $2 < m {m = $2} END {print m}' "$BENCH_TMP/all-releases")
first_ms=$(awk -v a="${final:-0}" -v b="$first" 'BEGIN {if (a == 0 || b == 0) print "?"; else printf "%.1f", (b - a) / 1e6}')
early=$(awk -v a="${final:-0}" '$2 < a {c++} END {print c + 0}' "$BENCH_TMP/all-releases")
absent=$((N - released))
if [ "$fail" != 0 ] || [ "$errs" != 0 ]; then
  echo "bench: a load generator reported errors:" >&2
  for ((i = 0; i < HOSTS; i++)); do grep -h 'WRONG\|tfb_loadgen:' "$BENCH_TMP/lg$i" | head -n 3 >&2 || true; done
  tail -n 5 "$BENCH_TMP/servers.log" >&2
fi

ratio=$(awk -v a="$store_ms" -v b="$single_ms" 'BEGIN {if (a == "" || b == "" || b == 0) print "-"; else printf "%.2fx", a / b}')
echo
echo "Release latency: last ARRIVE sent -> last RELEASE received (one round each; load average at the end $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| round | participants | release latency | last ARRIVE -> first RELEASE | released correctly | wrong or missing |"
echo "|---|---|---|---|---|---|"
echo "| single host, loopback, no store | $SINGLE | ${single_ms:-?} ms | - | ${single_rel:-0} | $((SINGLE - ${single_rel:-0} + ${single_err:-0})) |"
echo "| $HOSTS hosts x $PER_HOST in $HOSTS namespaces, 3-member etcd | $N | ${store_ms:-?} ms ($ratio the single host) | $first_ms ms | $released | $((absent + errs + dups + early)) (missing $absent, errors $errs, duplicates $dups, before the last ARRIVE $early) |"
[ "$absent" = 0 ] && [ "$errs" = 0 ] && [ "$dups" = 0 ] && [ "$early" = 0 ] && [ "$fail" = 0 ]
