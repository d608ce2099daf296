#!/usr/bin/env bats
# `tfbarrier config --json` under each launcher's variables, the precedence
# flag > TFBARRIER_* > launcher > default (checked through the `source` object),
# and bad values (exit 2, naming the variable). No cluster: every command runs
# under `env -i` with exactly the variables the test gives, so nothing from the
# caller's environment (a CI job inside Slurm, say) leaks in.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  # The default port is the user's own: 30000 + uid % 2768.
  MYPORT=$((30000 + $(id -u) % 2768))
}
teardown() {
  teardown_other_uid
  teardown_common  # the host of the status test (it ran for ever after the suites)
}

# cfg [VAR=value...] [-- config flags...]: runs `tfbarrier config --json` with only
# those variables (plus HOME and PATH), stdout and stderr apart.
cfg() {
  local vars=() flags=()
  while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then
      shift
      flags=("$@")
      break
    fi
    vars+=("$1")
    shift
  done
  run --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin "${vars[@]}" "$TFB" config --json "${flags[@]}"
}

# has_fields LINE...: every key=value line is in the output's fields.
has_fields() {
  local all want
  all=$(json_fields <<<"$output") || { echo "not JSON: $output" >&2; return 1; }
  for want in "$@"; do
    if ! grep -qxF -- "$want" <<<"$all"; then
      echo "missing: $want" >&2
      echo "fields:" >&2
      echo "$all" >&2
      return 1
    fi
  done
}

# bad_value VAR=value...: exit 2, nothing on stdout, and the error names $NAMED.
bad_value() {
  cfg "$@"
  assert_equal "$status" 2
  assert_equal "$output" ""
  [[ $stderr == "tfbarrier: error: "*"$NAMED"* ]] || {
    echo "stderr does not name $NAMED: $stderr" >&2
    return 1
  }
}

# ---------------------------------------------------------------- launchers

@test "nothing set: 127.0.0.1 and the user's own port, scope default, may start the host itself" {
  cfg
  assert_success
  has_fields launcher=none addr=127.0.0.1:$MYPORT host=127.0.0.1 port=$MYPORT scope=default \
    n=null rank=null may_start_host=true addr_explicit=false warnings=[] \
    source.host=default "source.port=default for uid $(id -u)" source.scope=default source.n=unset source.rank=unset
}

@test "Slurm task inside a step: n, rank, host, port and scope from srun's variables" {
  cfg SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=6 SLURM_NTASKS=8 SLURM_PROCID=3 \
    SLURM_STEP_NODELIST='node[3-5]' SLURM_JOB_NODELIST='node[1-5]' SLURMD_NODENAME=node4
  assert_success
  has_fields launcher=slurm addr=node3:14242 host=node3 port=14242 n=6 rank=3 scope=slurm-4242.0 \
    node=node4 may_start_host=false addr_explicit=false warnings=[] \
    source.host=derived:SLURM_STEP_NODELIST source.port=derived:SLURM_JOB_ID \
    source.n=env:SLURM_STEP_NUM_TASKS source.rank=env:SLURM_PROCID \
    source.scope=derived:SLURM_JOB_ID source.node=env:SLURMD_NODENAME
}

@test "Slurm: a task on the host's node may start the host, the port wraps at 20000 jobs, a requeue changes the scope" {
  cfg SLURM_JOB_ID=123456 SLURM_RESTART_COUNT=2 SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=1 \
    SLURM_STEP_NODELIST='gpu-a[07,09],gpu-b01' SLURMD_NODENAME=gpu-a07
  assert_success
  # 10000 + 123456 % 20000 = 13456
  has_fields host=gpu-a07 port=13456 scope=slurm-123456.2 node=gpu-a07 may_start_host=true
}

@test "Slurm without SLURM_STEP_*: n from SLURM_NTASKS, no rank for the batch script, a warning about SLURM_PROCID" {
  cfg SLURM_JOB_ID=77 SLURM_NTASKS=6 SLURM_NPROCS=6 SLURM_PROCID=0 SLURM_JOB_NODELIST='node[1-3]' \
    SLURMD_NODENAME=node1
  assert_success
  has_fields launcher=slurm host=node1 port=10077 n=6 rank=null scope=slurm-77.0 may_start_host=true \
    source.host=derived:SLURM_JOB_NODELIST source.n=env:SLURM_NTASKS source.rank=unset
  [[ $output == *'SLURM_PROCID is ignored outside an srun step'* ]]
}

@test "Slurm: the host falls back from SLURM_JOB_NODELIST to SLURM_NODELIST, n to SLURM_NPROCS" {
  cfg SLURM_JOB_ID=5 SLURM_NODELIST='cn[010-012]' SLURM_NPROCS=3
  assert_success
  has_fields host=cn010 source.host=derived:SLURM_NODELIST n=3 source.n=env:SLURM_NPROCS
}

@test "torchrun: RANK, WORLD_SIZE and MASTER_ADDR; MASTER_PORT is never used" {
  cfg RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 MASTER_ADDR=trainer-0 MASTER_PORT=29500
  assert_success
  has_fields launcher=torchrun addr=trainer-0:$MYPORT host=trainer-0 port=$MYPORT n=4 rank=2 scope=default \
    may_start_host=false source.host=env:MASTER_ADDR "source.port=default for uid $(id -u)" source.n=env:WORLD_SIZE \
    source.rank=env:RANK
  [[ $output != *MASTER_PORT* && $output != *29500* ]]
  # Not even a broken MASTER_PORT matters: torch's own store owns that port.
  cfg RANK=0 WORLD_SIZE=4 MASTER_ADDR=trainer-0 MASTER_PORT=not-a-port
  assert_success
  has_fields port=$MYPORT "source.port=default for uid $(id -u)" may_start_host=true
}

@test "torchrun elastic: the scope comes from the run id and the restart count" {
  cfg TORCHELASTIC_RUN_ID=job-17 TORCHELASTIC_RESTART_COUNT=1 RANK=0 WORLD_SIZE=2 MASTER_ADDR=10.0.0.5 \
    MASTER_PORT=29400
  assert_success
  has_fields launcher=torchrun host=10.0.0.5 port=$MYPORT scope=torchrun-job-17.1 \
    source.scope=derived:TORCHELASTIC_RUN_ID
}

@test "Open MPI: OMPI_COMM_WORLD_SIZE and _RANK; the host stays on loopback, with a warning" {
  cfg OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_LOCAL_RANK=1
  assert_success
  has_fields launcher=openmpi addr=127.0.0.1:$MYPORT n=8 rank=5 scope=default may_start_host=false \
    source.n=env:OMPI_COMM_WORLD_SIZE source.rank=env:OMPI_COMM_WORLD_RANK source.host=default
  [[ $output == *'Open MPI does not say where rank 0 runs'* ]]
  cfg OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_RANK=0
  has_fields may_start_host=true
}

@test "MPICH / PMI: PMI_SIZE and PMI_RANK" {
  cfg PMI_SIZE=3 PMI_RANK=1
  assert_success
  has_fields launcher=pmi addr=127.0.0.1:$MYPORT n=3 rank=1 scope=default may_start_host=false \
    source.n=env:PMI_SIZE source.rank=env:PMI_RANK
  [[ $output == *'PMI does not say where rank 0 runs'* ]]
}

@test "two launchers at once, the innermost first: an mpirun inside an sbatch takes MPI's rank and Slurm's job" {
  # Open MPI's ranks in a batch script: the job's variables, not a step's.
  cfg SLURM_JOB_ID=9 SLURM_JOB_NODELIST='n[1-2]' SLURM_NTASKS=1 SLURM_PROCID=0 SLURMD_NODENAME=n2 \
    OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_RANK=5
  assert_success
  has_fields launcher=openmpi 'launchers=["openmpi", "slurm"]' host=n1 port=10009 n=8 rank=5 scope=slurm-9.0 \
    node=n2 may_start_host=false warnings=[] source.n=env:OMPI_COMM_WORLD_SIZE source.rank=env:OMPI_COMM_WORLD_RANK \
    source.host=derived:SLURM_JOB_NODELIST source.port=derived:SLURM_JOB_ID source.scope=derived:SLURM_JOB_ID
  # torchrun inside an srun step: torchrun's rank, size, host and run; Slurm's port.
  cfg SLURM_JOB_ID=9 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 SLURM_STEP_NODELIST=n1 \
    RANK=7 WORLD_SIZE=16 MASTER_ADDR=trainer0 TORCHELASTIC_RUN_ID=r1
  assert_success
  has_fields launcher=torchrun 'launchers=["torchrun", "slurm"]' host=trainer0 n=16 rank=7 port=10009 \
    scope=torchrun-r1.0 source.port=derived:SLURM_JOB_ID
  # srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE itself: still Slurm's task.
  cfg SLURM_JOB_ID=9 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 SLURM_STEP_NODELIST=n1 PMI_RANK=1 PMI_SIZE=2
  assert_success
  has_fields launcher=slurm 'launchers=["slurm", "pmi"]' host=n1 n=2 rank=1 source.n=env:SLURM_STEP_NUM_TASKS
  # The text form says it in words.
  run --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin SLURM_JOB_ID=9 SLURM_JOB_NODELIST=n1 \
    OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$TFB" config
  assert_line --regexp '^launcher +openmpi \(inside slurm\)$'
}

@test "the text form shows every value with its source" {
  run --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin SLURM_JOB_ID=31 SLURM_STEP_NUM_TASKS=2 \
    SLURM_PROCID=0 SLURM_STEP_NODELIST='node[1-2]' SLURMD_NODENAME=node1 "$TFB" config
  assert_success
  assert_line --regexp '^port +10031 +\(derived:SLURM_JOB_ID\)$'
  assert_line --regexp '^n +2 +\(env:SLURM_STEP_NUM_TASKS\)$'
  assert_line --regexp '^scope +slurm-31\.0 +\(derived:SLURM_JOB_ID\)$'
  assert_line --regexp '^may_start_host +yes$'
}

# ---------------------------------------------------------------- precedence

slurm_step=(SLURM_JOB_ID=4242 SLURM_STEP_NUM_TASKS=6 SLURM_PROCID=3 SLURM_STEP_NODELIST='node[1-3]'
  SLURMD_NODENAME=node1)

@test "n: --n beats TFBARRIER_N beats SLURM_STEP_NUM_TASKS" {
  cfg "${slurm_step[@]}" TFBARRIER_N=5 -- --n 4
  assert_success
  has_fields n=4 source.n=flag:--n
  cfg "${slurm_step[@]}" TFBARRIER_N=5
  has_fields n=5 source.n=env:TFBARRIER_N
  cfg "${slurm_step[@]}"
  has_fields n=6 source.n=env:SLURM_STEP_NUM_TASKS
}

@test "rank: --rank beats TFBARRIER_RANK beats SLURM_PROCID" {
  cfg "${slurm_step[@]}" TFBARRIER_RANK=2 -- --rank 1
  assert_success
  has_fields rank=1 source.rank=flag:--rank
  cfg "${slurm_step[@]}" TFBARRIER_RANK=2
  has_fields rank=2 source.rank=env:TFBARRIER_RANK
  cfg "${slurm_step[@]}"
  has_fields rank=3 source.rank=env:SLURM_PROCID
}

@test "scope: --scope beats TFBARRIER_SCOPE beats the Slurm job" {
  cfg "${slurm_step[@]}" TFBARRIER_SCOPE=from-env -- --scope from-flag
  assert_success
  has_fields scope=from-flag source.scope=flag:--scope
  cfg "${slurm_step[@]}" TFBARRIER_SCOPE=from-env
  has_fields scope=from-env source.scope=env:TFBARRIER_SCOPE
  cfg "${slurm_step[@]}"
  has_fields scope=slurm-4242.0 source.scope=derived:SLURM_JOB_ID
}

@test "address: --addr beats TFBARRIER_ADDR beats TFBARRIER_HOST/PORT beats the launcher" {
  cfg "${slurm_step[@]}" TFBARRIER_ADDR=envhost:2000 TFBARRIER_HOST=h TFBARRIER_PORT=3000 -- --addr flaghost:1000
  assert_success
  has_fields addr=flaghost:1000 source.host=flag:--addr source.port=flag:--addr addr_explicit=true \
    may_start_host=false
  [[ $output == *'TFBARRIER_HOST is ignored: the address comes from --addr'* ]]
  [[ $output == *'TFBARRIER_PORT is ignored: the address comes from --addr'* ]]

  cfg "${slurm_step[@]}" TFBARRIER_ADDR=envhost:2000 TFBARRIER_HOST=h TFBARRIER_PORT=3000
  has_fields addr=envhost:2000 source.host=env:TFBARRIER_ADDR source.port=env:TFBARRIER_ADDR addr_explicit=true \
    may_start_host=false

  cfg "${slurm_step[@]}" TFBARRIER_HOST=h TFBARRIER_PORT=3000
  has_fields addr=h:3000 source.host=env:TFBARRIER_HOST source.port=env:TFBARRIER_PORT addr_explicit=true \
    may_start_host=false

  # Each half alone: the other half still comes from the launcher.
  cfg "${slurm_step[@]}" TFBARRIER_PORT=3000
  has_fields addr=node1:3000 source.host=derived:SLURM_STEP_NODELIST source.port=env:TFBARRIER_PORT \
    may_start_host=true
  cfg "${slurm_step[@]}" TFBARRIER_HOST=h
  has_fields addr=h:14242 source.host=env:TFBARRIER_HOST source.port=derived:SLURM_JOB_ID

  cfg "${slurm_step[@]}"
  has_fields addr=node1:14242 source.host=derived:SLURM_STEP_NODELIST source.port=derived:SLURM_JOB_ID
}

@test "two users get two default ports, and --insecure or TFBARRIER_INSECURE shows with its source" {
  cfg
  has_fields "port=$MYPORT" insecure=false source.insecure=default
  if id tfbtest >/dev/null 2>&1; then  # made by scripts/deps test
    local other uid
    uid=$(id -u tfbtest)
    other_uid_tfb tfbtest
    other=$(runuser -u tfbtest -- env -i PATH=/usr/bin:/bin "$OTHER_TFB" config --json)
    [[ $other == *"\"port\": $((30000 + uid % 2768)),"* ]]
    [[ $other == *"\"port\": \"default for uid $uid\""* ]]
  fi
  cfg TFBARRIER_INSECURE=1
  has_fields insecure=true source.insecure=env:TFBARRIER_INSECURE
  cfg TFBARRIER_INSECURE=0 -- --insecure
  has_fields insecure=true source.insecure=flag:--insecure
  NAMED=TFBARRIER_INSECURE bad_value TFBARRIER_INSECURE=maybe
}

@test "TFBARRIER_* also beat torchrun's and MPI's variables, and an empty variable counts as unset" {
  cfg RANK=1 WORLD_SIZE=4 MASTER_ADDR=m TFBARRIER_N=2 TFBARRIER_RANK=0 TFBARRIER_HOST=h2
  assert_success
  has_fields launcher=torchrun n=2 rank=0 host=h2 source.n=env:TFBARRIER_N source.rank=env:TFBARRIER_RANK \
    source.host=env:TFBARRIER_HOST
  cfg OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_RANK=5 TFBARRIER_N= TFBARRIER_RANK= TFBARRIER_ADDR=
  assert_success
  has_fields n=8 rank=5 source.n=env:OMPI_COMM_WORLD_SIZE addr=127.0.0.1:$MYPORT
}

@test "IPv6: TFBARRIER_ADDR with brackets, TFBARRIER_HOST without" {
  cfg TFBARRIER_ADDR='[fd00::1]:9000'
  assert_success
  has_fields 'addr=[fd00::1]:9000' host=fd00::1 port=9000
  cfg TFBARRIER_HOST=fd00::2 TFBARRIER_PORT=9001
  has_fields 'addr=[fd00::2]:9001' host=fd00::2
}

# ---------------------------------------------------------------- bad values

@test "bad TFBARRIER_* values exit 2 and name the variable" {
  NAMED=TFBARRIER_N bad_value TFBARRIER_N=abc
  NAMED=TFBARRIER_N bad_value TFBARRIER_N=0
  NAMED=TFBARRIER_N bad_value TFBARRIER_N=1000001
  NAMED=TFBARRIER_RANK bad_value TFBARRIER_RANK=-1
  NAMED=TFBARRIER_PORT bad_value TFBARRIER_PORT=70000
  NAMED=TFBARRIER_PORT bad_value TFBARRIER_PORT=0
  NAMED=TFBARRIER_ADDR bad_value TFBARRIER_ADDR=no-port
  NAMED=TFBARRIER_ADDR bad_value TFBARRIER_ADDR=fd00::1:7727
  NAMED=TFBARRIER_HOST bad_value TFBARRIER_HOST=node1:7727
  NAMED=TFBARRIER_HOST bad_value 'TFBARRIER_HOST=bad host'
  NAMED=TFBARRIER_SCOPE bad_value 'TFBARRIER_SCOPE=has space'
  NAMED=TFBARRIER_SCOPE bad_value "TFBARRIER_SCOPE=$(printf 'x%.0s' {1..129})"
}

@test "TFBARRIER_SCOPE=- is a usage error (2) for config and wait, not BADREQUEST from the host (70)" {
  # The wire's "-" means "no value"; config once passed it and the host refused the ARRIVE.
  NAMED=TFBARRIER_SCOPE bad_value TFBARRIER_SCOPE=-
  [[ $stderr == *'TFBARRIER_SCOPE="-" is not a valid scope: a lone - means none on the wire'* ]]
  start_host
  TFBARRIER_SCOPE=- run --separate-stderr timeout 20 "$TFB" wait --name s --n 1
  assert_equal "$status" 2
  assert_equal "$output" ""
  [[ $stderr == 'tfbarrier: error: TFBARRIER_SCOPE="-" is not a valid scope'* ]]
  run --separate-stderr timeout 20 "$TFB" wait --name s --n 1 --scope -
  assert_equal "$status" 2
}

@test "status and abort do not read the n and rank variables: a bad one does not stop them" {
  # status is what one runs when a job is misconfigured; neither takes --n or --rank.
  start_host
  TFBARRIER_N=abc TFBARRIER_RANK=x run --separate-stderr timeout 20 "$TFB" status
  assert_success
  SLURM_JOB_ID=1 SLURM_JOB_NODELIST=n1 SLURM_NTASKS=xyz run --separate-stderr timeout 20 "$TFB" status --all-scopes
  assert_success
  TFBARRIER_N=abc run --separate-stderr timeout 20 "$TFB" abort --name zz --quiet
  assert_success
  # wait, which uses them, still names the bad one.
  TFBARRIER_N=abc run --separate-stderr timeout 20 "$TFB" wait --name zz
  assert_equal "$status" 2
  [[ $stderr == *'TFBARRIER_N="abc"'* ]]
}

@test "bad launcher values exit 2 and name the variable" {
  NAMED=SLURM_JOB_ID bad_value SLURM_JOB_ID=abc SLURM_STEP_NODELIST=n1
  NAMED=SLURM_PROCID bad_value SLURM_JOB_ID=1 SLURM_STEP_NODELIST=n1 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=x
  NAMED=SLURM_STEP_NUM_TASKS bad_value SLURM_JOB_ID=1 SLURM_STEP_NODELIST=n1 SLURM_STEP_NUM_TASKS=zero
  NAMED=SLURM_STEP_NODELIST bad_value SLURM_JOB_ID=1 'SLURM_STEP_NODELIST=node[1-'
  NAMED=SLURM_RESTART_COUNT bad_value SLURM_JOB_ID=1 SLURM_STEP_NODELIST=n1 SLURM_RESTART_COUNT=again
  NAMED=SLURM_JOB_NODELIST bad_value SLURM_JOB_ID=1
  NAMED=WORLD_SIZE bad_value RANK=0 WORLD_SIZE=many MASTER_ADDR=m
  NAMED=RANK bad_value RANK=x WORLD_SIZE=2 MASTER_ADDR=m
  NAMED=MASTER_ADDR bad_value RANK=0 WORLD_SIZE=2 'MASTER_ADDR=m:29500'
  NAMED=MASTER_ADDR bad_value TORCHELASTIC_RUN_ID=r1
  NAMED=TORCHELASTIC_RUN_ID bad_value TORCHELASTIC_RUN_ID='a/b' MASTER_ADDR=m
  NAMED=OMPI_COMM_WORLD_SIZE bad_value OMPI_COMM_WORLD_SIZE=-8 OMPI_COMM_WORLD_RANK=0
  NAMED=PMI_RANK bad_value PMI_SIZE=2 PMI_RANK=two
}

@test "a rank not below n exits 2 and names where both came from" {
  cfg OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_RANK=8
  assert_equal "$status" 2
  [[ $stderr == *'rank 8 (from OMPI_COMM_WORLD_RANK) is not below n=8 (from OMPI_COMM_WORLD_SIZE)'* ]]
  cfg SLURM_JOB_ID=1 SLURM_STEP_NODELIST=n1 SLURM_STEP_NUM_TASKS=6 SLURM_PROCID=2 TFBARRIER_N=2
  assert_equal "$status" 2
  [[ $stderr == *'(from SLURM_PROCID)'*'(from TFBARRIER_N)'* ]]
}

@test "--rank and --n are decimal, leading zeros and all (010 is 10, not octal 8)" {
  cfg -- --n 020 --rank 010
  assert_success
  assert_json rank 10
  assert_json n 20
  cfg -- --n 20 --rank 08
  assert_success
  assert_json rank 8
}

@test "bad flags exit 2 and name the flag" {
  cfg -- --n 0
  assert_equal "$status" 2
  [[ $stderr == *--n* ]]
  cfg -- --rank abc
  assert_equal "$status" 2
  [[ $stderr == *--rank* ]]
  cfg -- --addr nohost
  assert_equal "$status" 2
  [[ $stderr == *'--addr "nohost"'* ]]
  cfg -- --scope 'a b'
  assert_equal "$status" 2
  [[ $stderr == *'--scope: "a b"'* ]]
}

@test "the node: TFBARRIER_NODE beats SLURMD_NODENAME beats the host name; config names the source, and a bad one exits 2" {
  cfg SLURMD_NODENAME=n03 TFBARRIER_NODE=gpu-node-a07x
  assert_success
  has_fields node=gpu-node-a07x source.node=env:TFBARRIER_NODE
  cfg SLURMD_NODENAME=n03
  has_fields node=n03 source.node=env:SLURMD_NODENAME
  cfg
  has_fields "node=$(hostname -s)" source.node=hostname
  cfg "TFBARRIER_NODE=a b"
  assert_failure 2
  [[ $stderr == *'TFBARRIER_NODE="a b" is not a valid node name'* ]] || { echo "$stderr"; false; }
}

@test "a participant names the node it resolved, not the host name: status and report show it (issue #32)" {
  start_host
  spawn p0 env TFBARRIER_NODE=gpu-a "$TFB" wait --name nd --n 3 --rank 0
  spawn p1 env SLURMD_NODENAME=gpu-b "$TFB" wait --name nd --n 3 --rank 1
  wait_arrived nd 2
  run -0 --separate-stderr "$TFB" status --name nd --json
  assert_equal "$(json_each barriers.0.members host | sort | tr '\n' ' ')" '"gpu-a" "gpu-b" '
  run -0 "$TFB" wait --name nd --n 3 --rank 2
  expect_exits 0 p0 p1
  run -0 "$TFB" report --json
  [[ $output == *'gpu-a'* && $output == *'gpu-b'* ]] || { echo "$output"; false; }
}
