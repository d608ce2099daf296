#!/usr/bin/env bats
# Zero configuration under a real Slurm 22.05 cluster: node[1-3], each slurmd in
# its own network namespace with its own address (tests/infra/slurm-up.sh netns 3),
# so host lists, host placement and name resolution work across nodes.
# Nothing tells tfbarrier its n, rank or address: it reads Slurm's variables.
# Clients (srun, sbatch, squeue, scontrol) run in tfb-head through
# slurm-client.sh, always under `timeout -k`. Root only.
load helpers

INFRA=$BATS_TEST_DIRNAME/../infra
EXAMPLE=$(cd "$BATS_TEST_DIRNAME/../../examples/slurm" && pwd)/epochs.sbatch

setup_file() {
  # (bats 1.8 cannot skip from setup_file: setup skips each test instead)
  if [ "$(id -u)" -ne 0 ]; then
    export ROOT_SKIP="needs root: starts a Slurm cluster in network namespaces (tests/infra/slurm-up.sh netns 3)"
    return 0
  fi
  "$INFRA/slurm-up.sh" netns 3
}

teardown_file() {
  if [ -n "${ROOT_SKIP:-}" ]; then return 0; fi
  "$INFRA/slurm-down.sh"
}

setup() {
  if [ -n "${ROOT_SKIP:-}" ]; then skip "$ROOT_SKIP"; fi
  setup_common
  # Nothing from a Slurm job this suite may itself run in reaches the test cluster's jobs.
  local v
  for v in $(compgen -e); do
    case $v in SLURM_* | SLURMD_* | SBATCH_* | SRUN_* | SALLOC_*) unset "$v" ;; esac
  done
  # The tasks' cwd is srun's; the self-started hosts log to
  # ~/.tfbarrier/serve-NODE-JOB.log (HOME is the test's), gathered into HOST_LOG.
  cd "$BATS_TEST_TMPDIR" || return
  export TMPDIR=$BATS_TEST_TMPDIR
  HOST_LOG=$BATS_TEST_TMPDIR/hosts.log
  BG_PIDS=()
}

teardown() {
  if [ -n "${ROOT_SKIP:-}" ]; then return 0; fi
  teardown_common
  if [ -n "${ETCD_DIR:-}" ]; then "$BATS_TEST_DIRNAME/../tools/etcd-cluster" stop "$ETCD_DIR"; fi
  collect_logs
  stop_self_started "$HOST_LOG"  # the hosts the jobs of this test started
}

client() { "$INFRA/slurm-client.sh" "$@"; }

# collect_logs: every self-started host's log of this test, in one file: HOST_LOG.
collect_logs() { cat "$HOME"/.tfbarrier/serve-*.log >"$HOST_LOG" 2>/dev/null || :; }

# epochs_as_expected OUT: epochs.sbatch's output OUT has one line per task per
# epoch, exactly epochs 1..STOP_AT of six tasks on node1-3: every task (the
# chief too: one --decide-by line) rc 0 with the "continue" message, then rc 1 with the "stop" message.
epochs_as_expected() {
  local expected r e msg rc
  expected=$(
    for r in 0 1 2 3 4 5; do
      for ((e = 1; e <= STOP_AT; e++)); do
        if [ "$e" -lt "$STOP_AT" ]; then msg="epoch $e looks good"; rc=0; else msg="converged at epoch $e"; rc=1; fi
        echo "rank $r node node$((r / 2 + 1)) epoch $e rc $rc msg $msg"
      done
    done | sort
  )
  run -0 bash -c "grep '^rank ' '$1' | sort"
  assert_output "$expected"
}

# port_of JOBID: the port tfbarrier derives from a Slurm job id.
port_of() { echo $((10000 + $1 % 20000)); }

# wait_job JOBID SECONDS: polls squeue (bounded) until the job has left the queue,
# then prints `JobState=... ExitCode=...` from scontrol. Cancels it on timeout.
wait_job() {
  local jid=$1 limit=$2
  for _ in $(seq $((limit * 5))); do
    if [ -z "$(timeout -k 5 5 "$INFRA/slurm-client.sh" squeue -h -j "$jid" 2>/dev/null || echo queued)" ]; then
      timeout -k 5 5 "$INFRA/slurm-client.sh" scontrol -o show job "$jid" |
        grep -o 'JobState=[A-Z_]* \|ExitCode=[0-9:]*' | tr -d '\n'
      echo
      return 0
    fi
    sleep 0.2
  done
  echo "job $jid still queued or running after ${limit}s; cancelling it" >&2
  timeout -k 5 5 "$INFRA/slurm-client.sh" scancel "$jid" || true
  return 1
}

@test "srun -N3 -n6: every task resolves n, rank, host, port and scope from Slurm alone" {
  run -0 timeout -k 5 30 "$INFRA/slurm-client.sh" srun -N3 -n6 --ntasks-per-node=2 -o 'cfg-%j-%t.json' \
    "$TFB" config --json
  files=(cfg-*-0.json)
  [ -e "${files[0]}" ]
  jid=${files[0]#cfg-}
  jid=${jid%-0.json}
  port=$(port_of "$jid")
  for t in 0 1 2 3 4 5; do
    node=node$((t / 2 + 1))
    if [ "$node" = node1 ]; then may=true; else may=false; fi
    run -0 json_fields <"cfg-$jid-$t.json"
    assert_output "addr=node1:$port
addr_explicit=false
host=node1
insecure=false
launcher=slurm
launchers=[\"slurm\"]
may_start_host=$may
n=6
node=$node
port=$port
rank=$t
scope=slurm-$jid.0
source.host=derived:SLURM_STEP_NODELIST
source.insecure=default
source.n=env:SLURM_STEP_NUM_TASKS
source.node=env:SLURMD_NODENAME
source.port=derived:SLURM_JOB_ID
source.rank=env:SLURM_PROCID
source.scope=derived:SLURM_JOB_ID
source.store=default
source.store_user=default
store=null
store_user=null
warnings=[]"
  done
}

@test "the batch script itself is not a task: host from SLURM_JOB_NODELIST, n from SLURM_NTASKS, no rank" {
  jid=$(timeout -k 5 15 "$INFRA/slurm-client.sh" sbatch --parsable -N3 -n6 --ntasks-per-node=2 \
    -o "$BATS_TEST_TMPDIR/batch.json" -e "$BATS_TEST_TMPDIR/batch.err" --wrap "'$TFB' config --json")
  run -0 wait_job "$jid" 60
  assert_output "JobState=COMPLETED ExitCode=0:0"
  run -0 json_fields <batch.json
  assert_line launcher=slurm
  assert_line "addr=node1:$(port_of "$jid")"
  assert_line source.host=derived:SLURM_JOB_NODELIST
  assert_line n=6
  assert_line source.n=env:SLURM_NTASKS
  assert_line rank=null
  assert_line "scope=slurm-$jid.0"
  assert_line node=node1
  assert_line --partial 'warnings=["SLURM_PROCID is ignored outside an srun step'
}

@test "epochs.sbatch: six tasks on three nodes run epochs 1..STOP_AT and stop together; the host started itself on node1" {
  # STOP_AT is not the script's default (3): it must come through sbatch's environment.
  export TFBARRIER=$TFB STOP_AT=4 EPOCHS=6 TRAIN_S=0.2
  SECONDS=0
  jid=$(timeout -k 5 15 "$INFRA/slurm-client.sh" sbatch --parsable -N3 -n6 --ntasks-per-node=2 \
    -o "$BATS_TEST_TMPDIR/job-%j.out" "$EXAMPLE")
  run -0 wait_job "$jid" 60
  echo "job $jid: $output after ${SECONDS}s" >&3
  out=$BATS_TEST_TMPDIR/job-$jid.out
  [ "$output" = "JobState=COMPLETED ExitCode=0:0" ] || { cat "$out"; false; }

  epochs_as_expected "$out"

  # The host: started by a task on node1 (no one else may), listening on node1's
  # address and the port of this job, and exactly one of it.
  port=$(port_of "$jid")
  collect_logs
  [ -s "$HOST_LOG" ]
  [ -s "$HOME/.tfbarrier/serve-node1-$jid.log" ]
  run -0 grep "listening on " "$HOST_LOG"
  assert_equal "${#lines[@]}" 1
  assert_output --partial "listening on 10.231.0.1:$port "
  run -0 grep -c "no host answers at node1:$port; starting one here (log: $HOME/.tfbarrier/serve-node1-$jid.log)" "$out"
  run -0 self_started_pids "$HOST_LOG"
  pid=${lines[0]}
  run -0 ip netns identify "$pid"
  assert_output tfb-node1
  run -0 tr '\0' ' ' <"/proc/$pid/cmdline"
  assert_output --partial "serve --listen node1:$port --idle-exit 10m --self-started"
  run -0 grep -c "release slurm-$jid.0/epoch[1-4]#1: 6 participants" "$HOST_LOG"
  assert_output 4
  run -0 grep -c "verdict slurm-$jid.0/epoch4#1: stop" "$HOST_LOG"
}

@test "a store: an etcd member and a host on each node; epochs.sbatch's chief's stop reaches every task" {
  # issue #20: TFBARRIER_STORE is all the job is told. Each node's first task
  # starts that node's host (on its loopback, the job's port), and the three
  # hosts share the barriers through an etcd member on each node.
  ETCD_DIR=$BATS_TEST_TMPDIR/etcd
  ETCD_ADDRS="10.231.0.1 10.231.0.2 10.231.0.3" ETCD_NETNS="tfb-node1 tfb-node2 tfb-node3" \
    "$BATS_TEST_DIRNAME/../tools/etcd-cluster" start "$ETCD_DIR" 3 >/dev/null
  export TFBARRIER=$TFB STOP_AT=3 EPOCHS=5 TRAIN_S=0.2
  export TFBARRIER_STORE="etcd://10.231.0.1:2379,10.231.0.2:2379,10.231.0.3:2379/slurm-$$"
  jid=$(timeout -k 5 15 "$INFRA/slurm-client.sh" sbatch --parsable -N3 -n6 --ntasks-per-node=2 \
    -o "$BATS_TEST_TMPDIR/job-%j.out" "$EXAMPLE")
  run -0 wait_job "$jid" 90
  out=$BATS_TEST_TMPDIR/job-$jid.out
  [ "$output" = "JobState=COMPLETED ExitCode=0:0" ] || { cat "$out"; collect_logs; cat "$HOST_LOG"; false; }
  epochs_as_expected "$out"
  # One host per node, each on its own loopback, each with the store; all saw every release.
  port=$(port_of "$jid")
  local n
  for n in 1 2 3; do
    log=$HOME/.tfbarrier/serve-node$n-$jid.log
    grep -q "listening on 127.0.0.1:$port .*store etcd://" "$log"
    # Nothing set up but the store: the hosts' key came from MUNGE, which the cluster runs.
    grep -q "inputs MACed with the job's key from MUNGE" "$log"
    run -0 grep -c "release slurm-$jid.0/epoch[1-3]#1: 6 participants" "$log"
    assert_output 3
  done
}

@test "a store: a node's host killed mid-run is named as lost with its node, and the run goes on once it is back" {
  # issue #20: node2's host is killed (kill -9) while node2's task waits at e2.
  # The task's wait loses its connection, finds no host on its node and starts
  # one (as the node's first participant did); the new host ends the killed
  # one's presence, so every host names rank 1 lost with node2's host, and the
  # task arrives again through the new host. The run then goes on.
  ETCD_DIR=$BATS_TEST_TMPDIR/etcd
  ETCD_ADDRS="10.231.0.1 10.231.0.2 10.231.0.3" ETCD_NETNS="tfb-node1 tfb-node2 tfb-node3" \
    "$BATS_TEST_DIRNAME/../tools/etcd-cluster" start "$ETCD_DIR" 3 >/dev/null
  export TFBARRIER_STORE="etcd://10.231.0.1:2379,10.231.0.2:2379,10.231.0.3:2379/slurm-kill-$$"
  export TFBARRIER_STORE_LEASE=2s
  # Rank 0 (node1) holds e2 until the test says go.
  # shellcheck disable=SC2016  # expanded by the tasks' bash
  task='set -u
    "$TFB" wait --name e1 --timeout 60s && echo "$SLURM_JOB_ID" >"job-$SLURM_PROCID" || exit
    if [ "$SLURM_PROCID" -eq 0 ]; then while [ ! -e go ]; do sleep 0.1; done; fi
    "$TFB" wait --name e2 --timeout 60s && "$TFB" wait --name e3 --timeout 60s &&
      echo "rank $SLURM_PROCID node $SLURMD_NODENAME done"'
  timeout -k 5 90 "$INFRA/slurm-client.sh" srun -N3 -n3 --ntasks-per-node=1 bash -c "$task" >srun.out 2>srun.err 3>&- &
  BG_PIDS+=($!)
  for _ in $(seq 300); do [ -e job-0 ] && break; sleep 0.1; done
  jid=$(cat job-0)
  port=$(port_of "$jid")
  log1=$HOME/.tfbarrier/serve-node1-$jid.log log2=$HOME/.tfbarrier/serve-node2-$jid.log
  arrived_e2() {
    for _ in $(seq 200); do
      ip netns exec tfb-node1 "$TFB" status --addr "127.0.0.1:$port" --scope "slurm-$jid.0" --name e2 --json \
        2>/dev/null | grep -q '"arrived": 2,' && return 0
      sleep 0.1
    done
    return 1
  }
  arrived_e2
  pid=$(self_started_pids "$log2")
  [ -n "$pid" ]
  kill -9 "$pid"
  # Named lost, with node2's host, on node1's host; rank 1 back through node2's new host.
  wait_for_match "$log1" "store: host node2:$port left \\(incarnation [0-9]+\\); its participants of open rounds are withdrawn" 15
  wait_for_match "$log1" "leave slurm-$jid.0/e2#1: rank 1 \\(.*\\) withdrew \\(lost\\), 1/3" 15
  arrived_e2
  run -0 grep -c "listening on 127.0.0.1:$port .*store etcd://" "$log2"
  assert_output 2
  run -0 grep -c "starting one here (log: $log2)" srun.err
  assert_output 2
  touch go
  wait "${BG_PIDS[0]}" || { cat srun.out srun.err; collect_logs; cat "$HOST_LOG"; false; }
  BG_PIDS=()
  run -0 sort srun.out
  assert_output "$(printf 'rank %d node node%d done\n' 0 1 1 2 2 3)"
  run -0 grep -c "release slurm-$jid.0/e3#1: 3 participants" "$log1"
}

@test "two jobs on one node get their own port, scope and host, and do not collide" {
  # Both jobs run on node2, each with two tasks that meet at the same barrier name.
  # shellcheck disable=SC2016  # expanded by the tasks' bash
  task='"$TFB" config --json >"cfg-$SLURM_JOB_ID-$SLURM_PROCID.json" &&
    "$TFB" wait --name epoch1 --timeout 30s && sleep 1 && "$TFB" wait --name epoch2 --timeout 30s'
  for j in a b; do
    timeout -k 5 60 "$INFRA/slurm-client.sh" srun -w node2 -N1 -n2 bash -c "$task" >"srun-$j.out" 2>&1 3>&- &
    BG_PIDS+=($!)
  done
  for p in "${BG_PIDS[@]}"; do
    wait "$p" || { collect_logs; cat srun-a.out srun-b.out "$HOST_LOG"; false; }
  done
  BG_PIDS=()

  mapfile -t jids < <(printf '%s\n' cfg-*-0.json | sed 's/^cfg-\([0-9]*\)-0\.json$/\1/' | sort -n)
  assert_equal "${#jids[@]}" 2
  [ "${jids[0]}" != "${jids[1]}" ]
  collect_logs
  for jid in "${jids[@]}"; do
    port=$(port_of "$jid")
    for t in 0 1; do
      run -0 json_fields <"cfg-$jid-$t.json"
      assert_line "addr=node2:$port"
      assert_line "scope=slurm-$jid.0"
      assert_line "may_start_host=true"
    done
    # Its own host on node2, on its own port, which saw only its own job.
    run -0 grep "listening on 10.231.0.2:$port " "$HOST_LOG"
    assert_equal "${#lines[@]}" 1
    pid=$(sed -n 's/.* tfbarrier\[\([0-9]*\)\]: .*/\1/p' <<<"$output")
    run -0 ip netns identify "$pid"
    assert_output tfb-node2
    run -0 grep "tfbarrier\[$pid\]: release " "$HOST_LOG"
    assert_equal "${#lines[@]}" 2
    assert_line --index 0 --partial "release slurm-$jid.0/epoch1#1: 2 participants"
    assert_line --index 1 --partial "release slurm-$jid.0/epoch2#1: 2 participants"
    run -0 grep -c "tfbarrier\[$pid\]: arrive " "$HOST_LOG"
    assert_output 4
    run -0 grep -c "tfbarrier\[$pid\]: arrive slurm-$jid\.0/epoch[12]#1: " "$HOST_LOG"
    assert_output 4
  done
  # Both hosts are up at the same time, side by side on node2.
  run -0 ip netns exec tfb-node2 ss -Htln
  assert_output --partial "10.231.0.2:$(port_of "${jids[0]}") "
  assert_output --partial "10.231.0.2:$(port_of "${jids[1]}") "
}

@test "a step on part of the allocation puts its host on the step's first node" {
  # -r1: the step starts at the allocation's second node, so its nodes are node[2-3].
  # shellcheck disable=SC2016  # expanded by the tasks' bash
  task='"$TFB" config --json >"cfg-$SLURM_PROCID.json" && "$TFB" wait --name x --timeout 20s'
  run -0 timeout -k 5 30 "$INFRA/slurm-client.sh" salloc -N3 -n3 --ntasks-per-node=1 \
    srun -r1 -N2 -n2 bash -c "$task"
  for t in 0 1; do
    run -0 json_fields <"cfg-$t.json"
    assert_line host=node2
    assert_line source.host=derived:SLURM_STEP_NODELIST
    assert_line n=2
  done
  collect_logs
  run -0 grep "listening on " "$HOST_LOG"
  assert_equal "${#lines[@]}" 1
  assert_output --partial "listening on 10.231.0.2:"
  run -0 grep -c 'release slurm-[0-9]*\.0/x#1: 2 participants' "$HOST_LOG"
}

@test "a job's host logs no failed authentication for the job's own tasks" {
  run -0 timeout -k 5 30 "$INFRA/slurm-client.sh" srun -N3 -n3 --ntasks-per-node=1 \
    "$TFB" wait --name x --timeout 20s
  collect_logs
  run -0 grep -c 'release slurm-[0-9]*\.0/x#1: 3 participants' "$HOST_LOG"
  run -0 grep "listening on" "$HOST_LOG"
  assert_output --partial "authentication: MUNGE"
  run grep -E 'bad client|authentication failed' "$HOST_LOG"
  assert_output ""
}
