#!/bin/bash
# Usage: tests/infra/slurm-down.sh        (as root; no arguments)
#
# Stops what slurm-up.sh started; safe to run when nothing is up. Every step is bounded.
#   1. if slurmctld is alive: scancel every job of the test cluster (bounded, ~5 s);
#   2. SIGTERM slurmd(s) and slurmctld by the PIDs in /tmp/tfb-slurm/*.pid (a PID is
#      signalled only if /proc/PID/comm is the expected daemon), wait up to 5 s,
#      then SIGKILL;
#   3. strays of ours (slurmstepd and its task children, left when the controller
#      was already dead): processes with an open fd on /tmp/tfb-slurm/log/*, plus
#      their descendants; never by name; SIGTERM, 2 s, SIGKILL;
#   4. munged, only if slurm-up.sh started it (/tmp/tfb-slurm/munged.started);
#   5. removes the /etc/slurm/slurm.conf symlink (only if it points into /tmp/tfb-slurm);
#   6. runs netns-down.sh if any tfb-* namespace, /etc/netns/tfb-* dir or the guard route exists.
# slurm.env is removed (its absence means "no cluster"). Logs stay in /tmp/tfb-slurm/log/ for post-mortems.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
D=/tmp/tfb-slurm

[ "$(id -u)" -eq 0 ] || { echo "slurm-down: must run as root" >&2; exit 1; }
t0=$(date +%s.%N)

# pid_if FILE COMM -> prints the PID if FILE holds a live process named COMM
pid_if() {
  local pid
  [ -r "$1" ] || return 0
  pid=$(tr -dc 0-9 < "$1")
  [ -n "$pid" ] || return 0
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; then echo "$pid"; fi
}

alive() {   # alive PID... -> prints those still alive (zombies count as gone)
  local p st
  for p in "$@"; do
    st=$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
    if [ -n "$st" ] && [ "$st" != Z ]; then echo "$p"; fi
  done
}

# stop GRACE_TENTHS PID...: TERM, wait, KILL, wait (2 s). Bounded.
stop() {
  local grace=$1 t
  shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  for ((t = 0; t < grace; t++)); do
    [ -z "$(alive "$@")" ] && return 0
    sleep 0.1
  done
  local left
  mapfile -t left < <(alive "$@")
  [ "${#left[@]}" -gt 0 ] || return 0
  echo "slurm-down: SIGKILL ${left[*]}" >&2
  kill -KILL "${left[@]}" 2>/dev/null || true
  for ((t = 0; t < 20; t++)); do
    [ -z "$(alive "${left[@]}")" ] && return 0
    sleep 0.1
  done
  echo "slurm-down: still alive after SIGKILL: $(alive "${left[@]}" | tr '\n' ' ')" >&2
}

CLIENT=()
if [ -r "$D/slurm.env" ] && grep -q '^export TFB_SLURM_CLIENT_NS=tfb-head' "$D/slurm.env" \
   && [ -e /run/netns/tfb-head ]; then
  CLIENT=(ip netns exec tfb-head)
fi
export SLURM_CONF=$D/slurm.conf

# 1. cancel jobs while the controller is still there
ctld=$(pid_if "$D/slurmctld.pid" slurmctld)
if [ -n "$ctld" ] && [ -r "$SLURM_CONF" ]; then
  jobs=$(timeout 5 "${CLIENT[@]}" squeue -h -o %i 2>/dev/null || true)
  if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086  # word splitting of the job id list is wanted
    timeout 5 "${CLIENT[@]}" scancel $jobs 2>/dev/null || true
    for ((t = 0; t < 25; t++)); do
      [ -z "$(timeout 5 "${CLIENT[@]}" squeue -h -o %i 2>/dev/null || true)" ] && break
      sleep 0.2
    done
  fi
fi

# 2. daemons, by PID file
daemons=()
for f in "$D"/slurmd-*.pid; do
  [ -e "$f" ] || continue
  p=$(pid_if "$f" slurmd)
  if [ -n "$p" ]; then daemons+=("$p"); fi
done
if [ -n "$ctld" ]; then daemons+=("$ctld"); fi
stop 50 "${daemons[@]}"

# 3. strays of ours: every process holding an open fd on a file under $D/log/
#    (slurmctld, slurmscriptd, slurmd and every slurmstepd keep their log open;
#    slurmstepd overwrites its environ and argv, so nothing else identifies it),
#    plus all their descendants (the tasks); never this script or its ancestors.
declare -A skip=()
p=$$
while [ -n "$p" ] && [ "$p" -gt 1 ]; do
  skip[$p]=1
  p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null || true)
done
declare -A in=()
while IFS=/ read -r _ _ pid _; do
  [ -n "$pid" ] && [ -z "${skip[$pid]:-}" ] && in[$pid]=1
done < <(find /proc/[0-9]*/fd -maxdepth 1 -lname "$D/log/*" 2>/dev/null || true)
strays=()
if [ "${#in[@]}" -gt 0 ]; then
  declare -A parent=()
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [ -n "${skip[$pid]:-}" ] && continue
    read -r st 2>/dev/null < "$dir/stat" || continue
    st=${st##*) }                  # fields after "(comm) "
    read -r _ ppid _ <<<"$st"
    parent[$pid]=$ppid
  done
  changed=1
  while [ "$changed" = 1 ]; do     # add descendants until nothing changes
    changed=0
    for pid in "${!parent[@]}"; do
      if [ -z "${in[$pid]:-}" ] && [ -n "${in[${parent[$pid]}]:-}" ]; then
        in[$pid]=1
        changed=1
      fi
    done
  done
  mapfile -t strays < <(alive "${!in[@]}")
fi
if [ "${#strays[@]}" -gt 0 ]; then
  echo "slurm-down: stopping ${#strays[@]} stray process(es) of ours: ${strays[*]}" >&2
  stop 20 "${strays[@]}"
fi

# 4. munged, only if we started it
munged_msg="munged not ours, left running"
if [ -e "$D/munged.started" ]; then
  m=$(pid_if /run/munge/munged.pid munged)
  [ -z "$m" ] && m=$(pid_if "$D/munged.started" munged)
  if [ -n "$m" ]; then stop 50 "$m"; fi
  rm -f "$D/munged.started"
  munged_msg="munged stopped"
elif [ -z "$(pid_if /run/munge/munged.pid munged)" ]; then
  munged_msg="munged not running"
fi

# 5. symlink
if [ -L /etc/slurm/slurm.conf ]; then
  case $(readlink /etc/slurm/slurm.conf) in
    "$D"/*) rm -f /etc/slurm/slurm.conf ;;
  esac
fi
rm -f "$D"/*.pid "$D/slurm.env"   # no env file = no cluster

# 6. network
if ip netns list 2>/dev/null | awk '{print $1}' | grep -q '^tfb-' \
   || compgen -G '/etc/netns/tfb-*' >/dev/null \
   || [ -n "$(ip route show type unreachable exact 10.231.0.0/24 2>/dev/null)" ]; then
  "$here/netns-down.sh"
fi

awk -v a="$t0" -v b="$(date +%s.%N)" -v n="${#daemons[@]}" -v m="$munged_msg" \
  'BEGIN { printf "slurm-down: stopped %d slurm daemon(s), %s; %.2f s\n", n, m, b - a }'
