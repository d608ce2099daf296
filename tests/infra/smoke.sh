#!/bin/bash
# Usage: tests/infra/smoke.sh [single|multi|netns] [NODES]     (as root)
#
# Proves the infra scripts end to end for one mode and prints timings:
#   slurm-up.sh MODE NODES; srun -N<nodes> -n6 printing SLURM_PROCID,
#   SLURMD_NODENAME, SLURM_STEP_NODELIST and `hostname -I` per task (netns: checks
#   that each task sees its own node's 10.231.0.x and that node1 resolves);
#   an sbatch job waited for with a bounded squeue poll; in netns mode a plain
#   TCP check with nc (listener in tfb-node1, client in tfb-node2 using the name
#   node1); slurm-down.sh; then checks that no slurm/munge process, no tfb-*
#   namespace and no 10.231 route is left. Exit status 0 only if all checks pass.
# shellcheck disable=SC2317  # check() calls functions indirectly
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODE=${1:-single}
case $MODE in
  single) NODES=1 ;;
  multi | netns) NODES=${2:-3} ;;
  *) echo "usage: $0 [single|multi|netns] [NODES]" >&2; exit 2 ;;
esac

fail=0
check() {   # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "  ok   $what"; else echo "  FAIL $what"; fail=1; fi
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

own_ip_ok() {   # every task line: procid node step_nodelist ip node1-address
  local pid node ip r
  while read -r pid node _ ip r; do
    [ "$ip" = "10.231.0.${node#node}" ] || { echo "    task $pid on $node has $ip"; return 1; }
    [ "$r" = 10.231.0.1 ] || { echo "    task $pid: node1 -> '$r'"; return 1; }
  done <<<"$out"
}
nc_ok() { [ "$sent" = 1 ] && grep -qx "hello from node2" /tmp/tfb-slurm/nc.out; }

# Make sure we always leave the machine clean.
trap '"$here/slurm-down.sh" >/dev/null 2>&1 || true' EXIT

echo "== $MODE $NODES: up"
t=$(now)
"$here/slurm-up.sh" "$MODE" "$NODES"
t_up=$(since "$t")

# shellcheck source=/dev/null
. /tmp/tfb-slurm/slurm.env
if [ -n "$TFB_SLURM_CLIENT_NS" ]; then CL=(ip netns exec "$TFB_SLURM_CLIENT_NS"); else CL=(); fi

NTASKS=6
[ "$NODES" -gt 6 ] && NTASKS=$NODES   # srun cannot use more nodes than tasks
echo "== srun -N$NODES -n$NTASKS"
t=$(now)
# shellcheck disable=SC2016  # expanded by the task's bash
out=$(cd /tmp && timeout 60 "${CL[@]}" srun -N"$NODES" -n"$NTASKS" bash -c \
  'echo "$SLURM_PROCID $SLURMD_NODENAME $SLURM_STEP_NODELIST $(hostname -I | cut -d" " -f1) $(getent hosts node1 | cut -d" " -f1)"' \
  | sort -n)
t_srun=$(since "$t")
echo "procid nodename step_nodelist hostname-I node1-resolves-to"
echo "$out"
check "$NTASKS tasks ran" [ "$(wc -l <<<"$out")" -eq "$NTASKS" ]
check "procids 0..$((NTASKS - 1))" [ "$(cut -d' ' -f1 <<<"$out" | tr '\n' ' ')" = "$(seq -s' ' 0 $((NTASKS - 1))) " ]
check "all $NODES node(s) used" [ "$(cut -d' ' -f2 <<<"$out" | sort -u | wc -l)" -eq "$NODES" ]
check "SLURM_STEP_NODELIST=$TFB_SLURM_NODELIST" \
  [ "$(cut -d' ' -f3 <<<"$out" | sort -u)" = "$TFB_SLURM_NODELIST" ]
if [ "$MODE" = netns ]; then
  check "each task sees its own node's 10.231.0.x and node1 resolves" own_ip_ok
fi

echo "== sbatch"
cat > /tmp/tfb-slurm/smoke.sbatch <<'EOF'
#!/bin/bash
#SBATCH -J tfb-smoke
#SBATCH -o /tmp/tfb-slurm/job-%j.out
#SBATCH -t 00:02:00
echo "batch on $SLURMD_NODENAME: JOB_ID=$SLURM_JOB_ID NTASKS=$SLURM_NTASKS NODELIST=$SLURM_JOB_NODELIST"
srun -l bash -c 'echo "rank $SLURM_PROCID/$SLURM_NTASKS node=$SLURMD_NODENAME ip=$(hostname -I)"' | sort -n
EOF
t=$(now)
jid=$(cd /tmp && timeout 10 "${CL[@]}" sbatch --parsable -N"$NODES" -n"$NTASKS" /tmp/tfb-slurm/smoke.sbatch)
deadline=$(( $(date +%s) + 60 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  [ -z "$(timeout 5 "${CL[@]}" squeue -h -j "$jid" 2>/dev/null || echo still)" ] && break
  sleep 0.2
done
t_sbatch=$(since "$t")
state=$(timeout 5 "${CL[@]}" scontrol -o show job "$jid" 2>/dev/null | grep -o 'JobState=[A-Z]*\|ExitCode=[0-9:]*' | tr '\n' ' ' || true)
echo "job $jid: $state"
cat "/tmp/tfb-slurm/job-$jid.out" 2>/dev/null || true
check "sbatch job $jid COMPLETED with 0:0" grep -q 'JobState=COMPLETED ExitCode=0:0' <<<"$state"
check "job output has $NTASKS ranks" [ "$(grep -c '^ *[0-9]*: rank' "/tmp/tfb-slurm/job-$jid.out" 2>/dev/null || echo 0)" -eq "$NTASKS" ]

if [ "$MODE" = netns ] && [ "$NODES" -ge 2 ]; then
  echo "== nc: listener in tfb-node1, client in tfb-node2 -> node1:9000"
  rm -f /tmp/tfb-slurm/nc.out
  ip netns exec tfb-node1 timeout 10 nc -l -N 10.231.0.1 9000 > /tmp/tfb-slurm/nc.out &
  lpid=$!
  t=$(now)
  sent=0
  for ((i = 0; i < 50; i++)); do
    if echo "hello from node2" | ip netns exec tfb-node2 timeout 3 nc -N -w 2 node1 9000 2>/dev/null; then
      sent=1
      break
    fi
    sleep 0.1
  done
  wait "$lpid" || true
  t_nc=$(since "$t")
  check "nc message arrived ($t_nc s)" nc_ok
  check "root namespace cannot route to 10.231.0.1 (guard)" bash -c '! ip route get 10.231.0.1 >/dev/null 2>&1'
fi

echo "== down"
trap - EXIT
t=$(now)
"$here/slurm-down.sh"
t_down=$(since "$t")

left=$(ps -eo pid=,stat=,comm= | awk '$3 ~ /^(slurm|munge)/')
live=$(awk '$2 !~ /^Z/' <<<"$left")
if [ -n "$left" ]; then printf '  ps after down:\n%s\n' "$left"; fi
check "no live slurm/munge process left" [ -z "$live" ]
check "ip netns list is empty" [ -z "$(ip netns list)" ]
check "no 10.231 route" bash -c '! ip route | grep -q 10.231'
check "/etc/slurm/slurm.conf symlink removed" [ ! -e /etc/slurm/slurm.conf ]

echo "== timings ($MODE $NODES): up ${t_up} s, srun ${t_srun} s, sbatch+wait ${t_sbatch} s, down ${t_down} s"
exit "$fail"
