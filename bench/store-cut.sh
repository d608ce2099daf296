#!/usr/bin/env bash
# One "node" cut off from etcd (issue #20, docs/store.md), outside CI, as root.
#
#   bench/store-cut.sh [TFBARRIER_BIN]      # KEEP=1: keep the hosts' logs
#
# Network namespaces of its own, all named fcut-* in 10.234.0.0/24 (never
# tests/infra's tfb-* in 10.231.0.0/24): fcut-etcd holds a 3-member etcd
# (10.234.0.1-3, tests/tools/etcd-cluster), fcut-n1..n3 are three "nodes"
# (10.234.0.11-13), each with a host `serve --store` on its own loopback and
# its participants beside it, all on one bridge in fcut-sw. Then node 3's link
# goes down for longer than the lease (2 s): its participant is named lost on
# the other hosts, the others' rounds go on, and when the link returns node 3's
# host is fenced, registers again and its participant arrives again; the round
# then completes. Prints what happened, with times. Everything it made is
# removed on exit (a trap), by name and PID, with the guard route
# (unreachable 10.234.0.0/24 in the root namespace) it adds first.
set -euo pipefail
BIN=${1:-${TFBARRIER_BIN:-$PWD/build/test/tfbarrier}}
HERE=$(cd "$(dirname "$0")" && pwd)
ETCD=$HERE/../tests/tools/etcd-cluster
LEASE=2s
CUT_S=${CUT_S:-6}  # seconds node 3 stays cut off (the lease is 2 s)
[ "$(id -u)" -eq 0 ] || { echo "store-cut: needs root (network namespaces)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "store-cut: no tfbarrier at $BIN (give its path)" >&2; exit 2; }
if ip netns list | grep -q '^fcut-'; then
  echo "store-cut: fcut-* namespaces exist already (another run?): $(ip netns list | grep '^fcut-' | cut -d' ' -f1 | tr '\n' ' ')" >&2
  exit 2
fi
if [ -n "$(ip route show root 10.234.0.0/24)" ]; then
  echo "store-cut: a route covers 10.234.0.0/24 already (another run?): $(ip route show root 10.234.0.0/24)" >&2
  exit 2
fi
WORK=$(mktemp -d /tmp/fcut.XXXXXX)
PIDS=()
MADE=()
GUARD=
cleanup() {
  local p ns
  for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  if [ -d "$WORK/etcd" ]; then "$ETCD" stop "$WORK/etcd" || true; fi
  for ns in "${MADE[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  if [ -n "$GUARD" ]; then ip route del unreachable 10.234.0.0/24 2>/dev/null || true; fi
  if [ -n "${KEEP:-}" ]; then echo "store-cut: logs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s.%N)
say() { printf '[%6.2f s] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*"; }

# The guard first (as tests/infra/netns-up.sh does for its range): a command that
# forgets its namespace fails at once instead of sending traffic off the machine.
ip route add unreachable 10.234.0.0/24 && GUARD=1
ip netns add fcut-sw; MADE+=(fcut-sw)
ip -n fcut-sw link add br0 type bridge
ip -n fcut-sw link set br0 up
node_ns() {  # node_ns NS PORTNAME ADDR...
  local ns=$1 port=$2 a
  shift 2
  ip netns add "$ns"; MADE+=("$ns")
  ip -n "$ns" link set lo up
  ip link add eth0 netns "$ns" type veth peer name "$port" netns fcut-sw
  ip -n fcut-sw link set "$port" master br0
  ip -n fcut-sw link set "$port" up
  for a in "$@"; do ip -n "$ns" addr add "$a/24" dev eth0; done
  ip -n "$ns" link set eth0 up
}
node_ns fcut-etcd swe 10.234.0.1 10.234.0.2 10.234.0.3
for i in 1 2 3; do node_ns "fcut-n$i" "sw$i" "10.234.0.1$i"; done

ETCD_ADDRS="10.234.0.1 10.234.0.2 10.234.0.3" ETCD_NETNS="fcut-etcd fcut-etcd fcut-etcd" \
  "$ETCD" start "$WORK/etcd" 3 >/dev/null
STORE="etcd://10.234.0.1:2379,10.234.0.2:2379,10.234.0.3:2379/cut-$$"
say "etcd: 3 members in fcut-etcd; store $STORE; lease $LEASE"

export HOME=$WORK/home TFBARRIER_KEEPALIVE=300ms
mkdir -p "$HOME"
"$BIN" secret >/dev/null  # ~/.tfbarrier/secret: the hosts' key for their inputs, and their clients'
declare -A ADDR HPID
host() {  # host I: node I's host, on its own loopback (a port per node: the hosts share one uname)
  local i=$1
  local out=$WORK/host$i.out
  : >"$out"
  ip netns exec "fcut-n$i" "$BIN" serve --listen "127.0.0.1:770$i" --store "$STORE" --store-lease "$LEASE" \
    >"$out" 2>>"$WORK/host$i.log" &
  HPID[$i]=$!
  PIDS+=("${HPID[$i]}")
  for _ in $(seq 200); do grep -q '^TFBARRIER_ADDR=' "$out" && break; sleep 0.05; done
  ADDR[$i]=$(sed -n 's/^TFBARRIER_ADDR=//p' "$out")
  [ -n "${ADDR[$i]}" ] || { echo "store-cut: host $i did not start:" >&2; cat "$WORK/host$i.log" >&2; exit 1; }
}
for i in 1 2 3; do host "$i"; done
say "hosts: node 1 ${ADDR[1]}, node 2 ${ADDR[2]}, node 3 ${ADDR[3]} (each in its namespace)"

on() {  # on I LABEL WAIT-ARGS...: a participant on node I, in the background
  local i=$1 label=$2
  shift 2
  ip netns exec "fcut-n$i" env TFBARRIER_ADDR="${ADDR[$i]}" "$BIN" wait "$@" >"$WORK/$label.out" 2>"$WORK/$label.err" &
  PIDS+=($!)
  eval "P_$label=$!"
}
status_on() {  # status_on I NAME: status --json of NAME through node I's host
  ip netns exec "fcut-n$1" "$BIN" status --addr "${ADDR[$1]}" --name "$2" --json --connect-timeout 2s 2>/dev/null || true
}
until_status() {  # until_status I NAME PATTERN SECONDS: polls until status matches; prints the seconds taken
  local s
  s=$(date +%s.%N)
  for _ in $(seq $(($4 * 10))); do
    if status_on "$1" "$2" | grep -q "$3"; then echo "$(date +%s.%N) - $s" | bc; return 0; fi
    sleep 0.1
  done
  echo "store-cut: status of $2 on node $1 never matched $3 in $4 s:" >&2
  status_on "$1" "$2" >&2
  return 1
}
exit_of() { RC=0; wait "$1" || RC=$?; }  # sets RC (not in a subshell: wait needs its parent)
round() {  # round NAME NODES...: one participant per listed node, released together; sets ROUND_S
  local name=$1 s r=0 n v
  shift
  n=$#
  s=$(date +%s.%N)
  for node in "$@"; do on "$node" "${name}_$r" --name "$name" --n "$n" --rank "$r" --timeout 30s; r=$((r + 1)); done
  for ((r = 0; r < n; r++)); do
    v="P_${name}_$r"
    exit_of "${!v}"
    [ "$RC" -eq 0 ] || { echo "store-cut: round $name: rank $r exited $RC: $(cat "$WORK/${name}_$r.err")" >&2; exit 1; }
  done
  ROUND_S=$(echo "$(date +%s.%N) - $s" | bc)
}

round before 1 1 2 2 3 3
say "round before the cut (6 participants, 2 per node): released in $ROUND_S s"
# The barrier "held": ranks 0-4 wait (rank 4 on node 3), rank 5 comes after the cut.
on 1 h0 --name held --n 6 --rank 0 --timeout 120s
on 1 h1 --name held --n 6 --rank 1 --timeout 120s
on 2 h2 --name held --n 6 --rank 2 --timeout 120s
on 2 h3 --name held --n 6 --rank 3 --timeout 120s
on 3 h4 --name held --n 6 --rank 4 --timeout 120s
until_status 1 held '"arrived": 5,' 20 >/dev/null
say "barrier held: 5 of 6 arrived (rank 4 through node 3's host)"

ip -n fcut-n3 link set eth0 down
cut_at=$(date +%s.%N)
say "node 3 cut off from etcd (fcut-n3 eth0 down) for $CUT_S s"
lost=$(until_status 1 held '"lost"' 15)
say "rank 4 named lost on node 1's host ${lost} s after the cut"
ip netns exec fcut-n1 "$BIN" status --addr "${ADDR[1]}" --name held 2>&1 | grep -i "lost" | sed 's/^/    status: /'
during=()
for k in 1 2 3; do round "during$k" 1 1 2 2; during+=("$ROUND_S"); done
say "the others' rounds go on during the cut: 3 rounds of 4 (nodes 1-2), released in ${during[*]} s"
still=$(status_on 1 held | grep -c '"arrived": 4,' || true)
[ "$still" -ge 1 ] && say "held: 4 of 6 arrived while node 3 is cut off"
left=$(echo "$CUT_S - ($(date +%s.%N) - $cut_at)" | bc)
case $left in -*) ;; *) sleep "$left" ;; esac
ip -n fcut-n3 link set eth0 up
say "node 3's link is back"
back=$(until_status 1 held '"arrived": 5,' 30)
say "rank 4 arrived again ${back} s after the link returned"
grep -E "warning: store: .*registering again|store: registered as" "$WORK/host3.log" | sed 's/^/    node 3 host: /'
n_reg=$(grep -c "store: registered as" "$WORK/host3.log" || true)
say "node 3's host registered $n_reg times (1 at start, then again after being fenced)"
h5_at=$(date +%s.%N)
on 3 h5 --name held --n 6 --rank 5 --timeout 30s
rcs=()
for r in 5 0 1 2 3 4; do v="P_h$r"; exit_of "${!v}"; rcs[r]=$RC; [ "$r" -eq 5 ] && h5_s=$(echo "$(date +%s.%N) - $h5_at" | bc); done
say "held released: exit codes of ranks 0-5: ${rcs[*]}; rank 5 (node 3) released ${h5_s} s after it started"
# (node 3's host sees the log again only when etcd retransmits on its watch's
# TCP connection, which outlived the cut: its backoff, up to about the cut's length)
round after 1 1 2 2 3 3
say "round after the cut (6 participants, 2 per node): released in $ROUND_S s"
for r in 0 1 2 3 4 5; do [ "${rcs[$r]}" -eq 0 ] || { echo "store-cut: FAILED: rank $r of held exited ${rcs[$r]}" >&2; exit 1; }; done
[ "$n_reg" -ge 2 ] || { echo "store-cut: FAILED: node 3's host did not register again" >&2; exit 1; }
say "store-cut: ok"
