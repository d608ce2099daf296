#!/bin/bash
# Usage: tests/infra/netns-down.sh        (as root; no arguments)
#
# Tears down everything netns-up.sh builds, and is safe to run when nothing is up:
#   - for every namespace named tfb-* : SIGTERM the PIDs from `ip netns pids NS`,
#     wait up to 5 s, SIGKILL what is left, wait up to 2 s more;
#   - `ip netns del NS` (this also destroys the veths and the bridge);
#   - rm -rf /etc/netns/tfb-*;
#   - removes the root-namespace guard route `unreachable 10.231.0.0/24`.
# Only processes inside our own tfb-* namespaces are signalled, by PID.
set -euo pipefail

SUBNET=10.231.0.0/24

[ "$(id -u)" -eq 0 ] || { echo "netns-down: must run as root" >&2; exit 1; }

mapfile -t namespaces < <(ip netns list 2>/dev/null | awk '$1 ~ /^tfb-/ {print $1}')

ns_pids() {   # all PIDs in our namespaces
  local ns
  for ns in "${namespaces[@]}"; do
    ip netns pids "$ns" 2>/dev/null || true
  done | sort -un
}

if [ "${#namespaces[@]}" -gt 0 ]; then
  mapfile -t pids < <(ns_pids)
  if [ "${#pids[@]}" -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for ((t = 0; t < 50; t++)); do
      [ -z "$(ns_pids)" ] && break
      sleep 0.1
    done
    mapfile -t pids < <(ns_pids)
    if [ "${#pids[@]}" -gt 0 ]; then
      echo "netns-down: SIGKILL ${pids[*]}" >&2
      kill -KILL "${pids[@]}" 2>/dev/null || true
      for ((t = 0; t < 20; t++)); do
        [ -z "$(ns_pids)" ] && break
        sleep 0.1
      done
    fi
  fi
  for ns in "${namespaces[@]}"; do
    ip netns del "$ns" 2>/dev/null || echo "netns-down: could not delete $ns" >&2
  done
fi

for d in /etc/netns/tfb-*; do
  [ -e "$d" ] && rm -rf -- "$d"
done
rmdir /etc/netns 2>/dev/null || true   # only if empty (we may have created it)

if [ -n "$(ip route show type unreachable exact "$SUBNET")" ]; then
  ip route del unreachable "$SUBNET"
fi

left=$(ip netns list 2>/dev/null | awk '$1 ~ /^tfb-/ {print $1}')
if [ -n "$left" ]; then
  echo "netns-down: namespaces still present: $left" >&2
  exit 1
fi
echo "netns-down: removed ${#namespaces[@]} namespace(s)${namespaces[*]:+ (${namespaces[*]})}; no guard route left"
