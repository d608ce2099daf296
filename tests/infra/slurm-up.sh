#!/bin/bash
# Usage: tests/infra/slurm-up.sh [single|multi|netns] [NODES]     (as root)
#
# Starts a throw-away local Slurm 22.05 cluster for tests. Everything lives in
# /tmp/tfb-slurm (wiped at start; logs stay there after slurm-down.sh).
#   single        one slurmd, NodeName=$(hostname -s), on 127.0.0.1   (NODES ignored)
#   multi  [N=3]  N slurmd on loopback (slurmd -N nodeI), NodeName=node[1-N],
#                 all on 127.0.0.1, ports 6821..; `node1` does NOT resolve
#   netns  [N=3]  netns-up.sh N, slurmctld in tfb-head (10.231.0.254), slurmdI in
#                 tfb-nodeI (10.231.0.I) with that namespace's /etc/hosts; clients
#                 (srun/sbatch/squeue/sinfo/scancel) must run in tfb-head:
#                     ip netns exec tfb-head srun ...   (or tests/infra/slurm-client.sh srun ...)
# Steps: apt-get install slurm-wlm munge if missing; start munged if it is not
# running (recorded, so slurm-down.sh stops it only if we started it); write
# /tmp/tfb-slurm/slurm.conf; symlink /etc/slurm/slurm.conf to it; start the
# daemons; wait (bounded) until every node is idle; write /tmp/tfb-slurm/slurm.env.
# Anything already up from an earlier run is stopped first (slurm-down.sh).
#
# Env knobs:
#   TFB_SLURM_CPUS=64          CPUs per node (large, so parallel jobs do not serialize)
#   TFB_SLURM_MEM=4000         RealMemory per node (MB)
#   TFB_SLURM_MINJOBAGE=10     seconds a finished job stays visible to scontrol
#   TFB_SLURMD_TIMEOUT=30      SlurmdTimeout (only 30 was proven in the notes)
#   TFB_SLURM_UP_TIMEOUT=30    seconds to wait for the nodes to become idle
#
# Afterwards:  . /tmp/tfb-slurm/slurm.env    (always source with a path)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
D=/tmp/tfb-slurm
CONF=$D/slurm.conf
MODE=${1:-single}
CPUS=${TFB_SLURM_CPUS:-64}
MEM=${TFB_SLURM_MEM:-4000}
MINJOBAGE=${TFB_SLURM_MINJOBAGE:-10}
SLURMD_TIMEOUT=${TFB_SLURMD_TIMEOUT:-30}
UP_TIMEOUT=${TFB_SLURM_UP_TIMEOUT:-30}

die() { echo "slurm-up: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

[ "$(id -u)" -eq 0 ] || die "must run as root"
case $MODE in
  single) NODES=1 ;;
  multi | netns) NODES=${2:-3} ;;
  *) die "usage: $0 [single|multi|netns] [NODES]" ;;
esac
if ! [[ $NODES =~ ^[0-9]+$ ]] || [ "$NODES" -lt 1 ] || [ "$NODES" -gt 200 ]; then
  die "NODES must be 1..200, got '$NODES'"
fi
for v in CPUS MEM MINJOBAGE SLURMD_TIMEOUT UP_TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
done

t_start=$(now)

# ---------------------------------------------------------------- install
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
   || ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
  echo "slurm-up: installing slurm-wlm munge"
  t_apt=$(now)
  DEBIAN_FRONTEND=noninteractive timeout 900 \
    apt-get -o DPkg::Lock::Timeout=600 install -y slurm-wlm munge >"/tmp/tfb-slurm-apt.log" 2>&1 \
    || { tail -20 /tmp/tfb-slurm-apt.log >&2; die "apt-get install failed (log: /tmp/tfb-slurm-apt.log)"; }
  echo "slurm-up: installed in $(elapsed "$t_apt") s"
fi

# ---------------------------------------------------------------- leftovers
if compgen -G "$D/*.pid" >/dev/null || [ -e "$D/munged.started" ] \
   || ip netns list 2>/dev/null | awk '{print $1}' | grep -q '^tfb-'; then
  echo "slurm-up: stopping what an earlier run left"
  "$here/slurm-down.sh"
fi
rm -rf "$D"
mkdir -p "$D/state" "$D/log"

# From here on, a failure stops whatever we started.
on_exit() {
  local rc=$?
  trap - EXIT
  if [ "$rc" -ne 0 ]; then
    echo "slurm-up: FAILED (rc $rc); last log lines:" >&2
    local f
    for f in "$D"/log/*.log; do
      [ -e "$f" ] || continue
      echo "--- $f" >&2
      tail -15 "$f" >&2
    done
    "$here/slurm-down.sh" >&2 || true
  fi
  exit "$rc"
}
trap on_exit EXIT

# ---------------------------------------------------------------- munge
munged_pidfile=/run/munge/munged.pid
munged_alive() {
  local pid
  [ -r "$munged_pidfile" ] && pid=$(cat "$munged_pidfile") && [[ $pid =~ ^[0-9]+$ ]] \
    && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = munged ]
}
if munged_alive; then
  echo "slurm-up: munged already running (pid $(cat "$munged_pidfile")); not ours, left alone"
else
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    timeout 30 mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
  fi
  rm -f "$munged_pidfile"
  timeout 10 "$here/detached" runuser -u munge -- /usr/sbin/munged
  for ((t = 0; t < 50; t++)); do munged_alive && break; sleep 0.1; done
  munged_alive || die "munged did not start"
  cat "$munged_pidfile" > "$D/munged.started"
fi
timeout 10 munge -n </dev/null | timeout 10 unmunge >/dev/null || die "munge -n | unmunge failed"

# ---------------------------------------------------------------- config
HOST=$(hostname -s)
case $MODE in
  single) CTL_ADDR=127.0.0.1 ;;
  multi) CTL_ADDR=127.0.0.1 ;;
  netns) CTL_ADDR=10.231.0.254 ;;
esac

{
  cat <<EOF
# generated by tests/infra/slurm-up.sh $MODE $NODES
ClusterName=tfb
SlurmctldHost=$HOST($CTL_ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
# default batch_sched_delay=3 holds every sbatch job PENDING for ~3 s
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=$SLURMD_TIMEOUT
MessageTimeout=10
InactiveLimit=0
KillWait=5
MinJobAge=$MINJOBAGE
EOF
  hw="CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM State=UNKNOWN"
  case $MODE in
    single)
      echo "NodeName=$HOST NodeAddr=127.0.0.1 $hw" ;;
    multi)
      for ((i = 1; i <= NODES; i++)); do
        echo "NodeName=node$i NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((6820 + i)) $hw"
      done ;;
    netns)
      for ((i = 1; i <= NODES; i++)); do
        echo "NodeName=node$i NodeHostname=$HOST NodeAddr=10.231.0.$i Port=$((6820 + i)) $hw"
      done ;;
  esac
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$CONF"

mkdir -p /etc/slurm
if [ -e /etc/slurm/slurm.conf ] && [ ! -L /etc/slurm/slurm.conf ]; then
  die "/etc/slurm/slurm.conf is a real file, not ours; refusing to replace it"
fi
ln -sfn "$CONF" /etc/slurm/slurm.conf
export SLURM_CONF=$CONF

if [ "$MODE" = single ]; then
  NODENAMES=("$HOST")
  NODELIST=$HOST
else
  NODENAMES=()
  for ((i = 1; i <= NODES; i++)); do NODENAMES+=("node$i"); done
  if [ "$NODES" -eq 1 ]; then NODELIST=node1; else NODELIST="node[1-$NODES]"; fi
fi
for n in "${NODENAMES[@]}"; do mkdir -p "$D/spool/$n"; done

# Clients must run where they can reach the controller.
if [ "$MODE" = netns ]; then
  CLIENT=(ip netns exec tfb-head)
else
  CLIENT=()
fi

# ---------------------------------------------------------------- network
if [ "$MODE" = netns ]; then
  TFB_NETNS_QUIET=0 "$here/netns-up.sh" "$NODES"
fi

# ---------------------------------------------------------------- daemons
t_daemons=$(now)
case $MODE in
  single | multi)
    timeout 20 "$here/detached" slurmctld -f "$CONF"
    if [ "$MODE" = single ]; then
      timeout 20 "$here/detached" slurmd -f "$CONF"
    else
      for n in "${NODENAMES[@]}"; do timeout 20 "$here/detached" slurmd -f "$CONF" -N "$n"; done
    fi ;;
  netns)
    timeout 20 "$here/detached" nsenter --net=/run/netns/tfb-head slurmctld -f "$CONF"
    for ((i = 1; i <= NODES; i++)); do
      # Not `ip netns exec`: it remounts /sys and hides the cgroup mounts slurmd needs.
      # shellcheck disable=SC2016  # $1..$3 are expanded by the inner sh
      timeout 20 "$here/detached" nsenter --net="/run/netns/tfb-node$i" unshare -m --propagation private \
        sh -c 'mount --bind "$1" /etc/hosts && exec slurmd -f "$2" -N "$3"' \
        sh "/etc/netns/tfb-node$i/hosts" "$CONF" "node$i"
    done ;;
esac

# ---------------------------------------------------------------- wait for idle
deadline=$(( $(date +%s) + UP_TIMEOUT ))
idle=0
while [ "$(date +%s)" -lt "$deadline" ]; do
  idle=$( { timeout 5 "${CLIENT[@]}" sinfo -h -N -t idle -o %N 2>/dev/null || true; } | sort -u | wc -l)
  [ "$idle" -ge "$NODES" ] && break
  sleep 0.2
done
if [ "$idle" -lt "$NODES" ]; then
  timeout 5 "${CLIENT[@]}" sinfo -N >&2 || true
  die "only $idle of $NODES node(s) idle after ${UP_TIMEOUT} s"
fi
t_daemons_done=$(elapsed "$t_daemons")

# ---------------------------------------------------------------- env file
{
  echo "# generated by tests/infra/slurm-up.sh; source it with a path: . $D/slurm.env"
  echo "export SLURM_CONF=$CONF"
  echo "export TFB_SLURM_MODE=$MODE"
  echo "export TFB_SLURM_NODES=$NODES"
  echo "export TFB_SLURM_NODELIST='$NODELIST'"
  echo "export TFB_SLURM_CPUS=$CPUS"
  if [ "$MODE" = netns ]; then
    echo "# clients (srun sbatch squeue sinfo scancel scontrol salloc) must run in tfb-head:"
    echo "export TFB_SLURM_CLIENT_NS=tfb-head"
  else
    echo "export TFB_SLURM_CLIENT_NS="
  fi
} > "$D/slurm.env"

trap - EXIT
echo "slurm-up: mode=$MODE nodes=$NODES nodelist=$NODELIST cpus/node=$CPUS"
if [ -e "$D/munged.started" ]; then
  echo "  munged     pid $(cat "$D/munged.started") (started by us)"
fi
if [ "$MODE" = netns ]; then where=" in tfb-head"; else where=""; fi
echo "  slurmctld  pid $(cat "$D/slurmctld.pid")  $HOST($CTL_ADDR):6817$where"
for n in "${NODENAMES[@]}"; do
  echo "  slurmd     pid $(cat "$D/slurmd-$n.pid")  $n"
done
echo "  conf $CONF (-> /etc/slurm/slurm.conf), env $D/slurm.env, logs $D/log/"
if [ "$MODE" = netns ]; then
  echo "  clients: ip netns exec tfb-head srun ...   (root namespace cannot reach 10.231.0.0/24)"
fi
echo "slurm-up: daemons to idle $t_daemons_done s, total $(elapsed "$t_start") s"
