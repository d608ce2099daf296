#!/bin/bash
# Usage: tests/infra/netns-up.sh N        (as root; 1 <= N <= 253)
#
# Builds a private test network made of network namespaces only:
#   tfb-sw            holds the bridge br0 (the "switch"); no address
#   tfb-node1..N      hosts node1..nodeN at 10.231.0.1..N/24, interface eth0
#   tfb-head          host "head" at 10.231.0.254/24, interface eth0
# Each host namespace is joined to br0 by a veth pair (eth0 <-> swI / swhead in
# tfb-sw) and gets /etc/netns/<ns>/hosts (localhost, node1..N, head, and the real
# short hostname mapped to the namespace's own address), which `ip netns exec`
# bind-mounts over /etc/hosts.
#
# FIRST of all it adds the root-namespace guard
#     ip route add unreachable 10.231.0.0/24
# so that a command that forgets `ip netns exec` fails at once with
# "No route to host" instead of sending test traffic off the machine.
# The namespaces have no default route: they can reach only each other.
#
# Any tfb-* namespaces left over are torn down first (netns-down.sh).
# On any failure the partial setup is torn down again.
# Env: TFB_NETNS_QUIET=1 suppresses the summary.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SUBNET=10.231.0.0/24
PREFIX=10.231.0

die() { echo "netns-up: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root"
[ $# -eq 1 ] || die "usage: $0 N"
N=$1
if ! [[ $N =~ ^[0-9]+$ ]] || [ "$N" -lt 1 ] || [ "$N" -gt 253 ]; then
  die "N must be 1..253, got '$N'"
fi
command -v ip >/dev/null || die "ip (iproute2) not found"

# Start from nothing: tear down leftovers of an earlier run.
if ip netns list 2>/dev/null | awk '{print $1}' | grep -q '^tfb-' \
   || [ -n "$(ip route show type unreachable exact "$SUBNET" 2>/dev/null)" ]; then
  "$here/netns-down.sh"
fi

# 1. The guard, before anything else. Refuse if the range is used by a real route.
start=$(date +%s.%N)
existing=$(ip route show root "$SUBNET")
if [ -n "$existing" ]; then
  die "root namespace already has a route for $SUBNET ($existing); refusing to use the range"
fi
cleanup_on_error() {
  local rc=$?
  trap - EXIT
  if [ "$rc" -ne 0 ]; then
    echo "netns-up: failed (rc $rc), tearing down" >&2
    "$here/netns-down.sh" >&2 || true
  fi
  exit "$rc"
}
ip route add unreachable "$SUBNET"
trap cleanup_on_error EXIT
if ip route get "$PREFIX.1" >/dev/null 2>&1; then
  die "guard check failed: 'ip route get $PREFIX.1' succeeds in the root namespace"
fi

short=$(hostname -s)

# 2. The switch.
ip netns add tfb-sw
ip -n tfb-sw link set lo up
ip -n tfb-sw link add br0 type bridge
ip -n tfb-sw link set br0 up

# 3. The hosts (namespace, index, switch port).
hosts_body() {   # $1 = own address (for the real hostname)
  printf '127.0.0.1 localhost\n'
  printf '%s %s\n' "$1" "$short"
  local i
  for ((i = 1; i <= N; i++)); do printf '%s.%d node%d\n' "$PREFIX" "$i" "$i"; done
  printf '%s.254 head\n' "$PREFIX"
}

add_host() {   # ns idx port
  local ns=$1 idx=$2 port=$3
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add eth0 netns "$ns" type veth peer name "$port" netns tfb-sw
  ip -n tfb-sw link set "$port" master br0
  ip -n tfb-sw link set "$port" up
  ip -n "$ns" addr add "$PREFIX.$idx/24" dev eth0
  ip -n "$ns" link set eth0 up
  mkdir -p "/etc/netns/$ns"
  hosts_body "$PREFIX.$idx" > "/etc/netns/$ns/hosts"
}

for ((i = 1; i <= N; i++)); do add_host "tfb-node$i" "$i" "sw$i"; done
add_host tfb-head 254 swhead

# 4. Sanity: head must have no default route; the guard must still be there.
if ip -n tfb-head route get 8.8.8.8 >/dev/null 2>&1; then
  die "tfb-head unexpectedly has a route off the machine"
fi
ip route show "$SUBNET" | grep -q '^unreachable' || die "root guard route vanished"

trap - EXIT
end=$(date +%s.%N)
if [ "${TFB_NETNS_QUIET:-0}" != 1 ]; then
  awk -v n="$N" -v p="$PREFIX" -v s="$SUBNET" -v t0="$start" -v t1="$end" 'BEGIN {
    printf "netns-up: tfb-node1..%d (%s.1-%d), tfb-head (%s.254), bridge br0 in tfb-sw; root guard: unreachable %s; %.2f s\n",
      n, p, n, p, s, t1 - t0 }'
fi
