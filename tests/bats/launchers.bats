#!/usr/bin/env bats
# Zero configuration under every launcher (docs/launchers.md): for each one, a
# whole job's processes, each with the environment that launcher gives its
# tasks (and the files it names), against a host on loopback. They release
# together, and `config` names the launcher and the source of every value.
#
# MPICH runs for real: Debian's mpich, `mpiexec -n 4 tfbarrier wait`, alone and
# inside a Slurm job's variables (an mpiexec in an sbatch). The others are
# tested through the environment their documentation describes, not a real
# cluster. Grid Engine: Debian has gridengine-master, -exec and -client
# (`apt-get install -s` resolves them), but a one-node cell (qmaster, execd, a
# parallel environment, a queue, a host name that resolves beyond loopback)
# was not brought up in this test environment: its documented environment is
# tested instead. PBS, LSF, Flux, HTCondor and Kubernetes have no cluster here.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
# shellcheck disable=SC2016  # sh -c scripts take their arguments as $0 and "$@"
load helpers

N=4

setup() {
  setup_common
  # A port the job id maps to (10000 + id mod 20000), free now: the host listens
  # there, so the participants reach it only through the port they derived.
  PORT=$(/usr/bin/python3 -c '
import random, socket
for _ in range(500):
    p = random.randint(10000, 29999)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError:
        pass')
  JOB=$((PORT - 10000 + 40000))  # mod 20000 is PORT - 10000
  # Each task runs with only the variables its launcher gives it.
  CLEAN=(env -i HOME="$HOME" PATH=/usr/bin:/bin)
}
teardown() {
  [ -n "${SELF_LOG:-}" ] && stop_self_started "$SELF_LOG"
  teardown_common
}

# host_on_port: a host on 127.0.0.1:$PORT, found by the participants through the job id.
host_on_port() {
  start_host_on "127.0.0.1:$PORT"
  unset TFBARRIER_ADDR
}


# arrived_at SCOPE NAME COUNT: the host counts COUNT arrivals at NAME in SCOPE.
arrived_at() {
  local scope=$1 name=$2 count=$3 output
  for _ in $(seq 200); do
    output=$("$TFB" status --addr "127.0.0.1:$PORT" --scope "$scope" --name "$name" --json --connect-timeout 2s 2>/dev/null) &&
      [ "$(json barriers.0.arrived)" = "$count" ] && return 0
    sleep 0.05
  done
  echo "$name in $scope never reached $count arrivals: $output" >&2
  return 1
}

# run_job SCOPE ENVFN: N tasks, task I with the variables `ENVFN I`
# prints (one a line). The first N-1 wait; the last releases them all, together.
run_job() {
  local scope=$1 envfn=$2 i vars
  for ((i = 0; i < N; i++)); do
    mapfile -t vars < <("$envfn" "$i")
    [ "$i" -eq $((N - 1)) ] && { arrived_at "$scope" epoch1 $((N - 1)); still_running 0.3 $(seq -f 't%g' 0 $((N - 2))); }
    spawn "t$i" "${CLEAN[@]}" "${vars[@]}" "$TFB" wait --name epoch1 --connect-timeout 10s
  done
  # shellcheck disable=SC2046
  expect_exits 0 $(seq -f 't%g' 0 $((N - 1)))
}

# config_of ENVFN I: `config --json` of task I, in $output.
config_of() {
  local vars
  mapfile -t vars < <("$1" "$2")
  run --separate-stderr "${CLEAN[@]}" "${vars[@]}" "$TFB" config --json
  assert_success
}

# has VAR=value...: every key=value is in config's output (see config.bats).
has() {
  local all want
  all=$(json_fields <<<"$output")
  for want in "$@"; do
    grep -qxF -- "$want" <<<"$all" || { echo "missing: $want; fields:" >&2; echo "$all" >&2; return 1; }
  done
}

# ---- PBS: pbsdsh's tasks, one per line of PBS_NODEFILE --------------------------
pbs_env() {
  echo "PBS_JOBID=$JOB.pbs01"
  echo "PBS_NODEFILE=$BATS_TEST_TMPDIR/nodefile"
  echo "PBS_TASKNUM=$((2 + $1))"
  echo "PBS_NODENUM=0"
  echo "PBS_VNODENUM=$1"
  echo "TFBARRIER_NODE=n$1"
}

@test "PBS: pbsdsh's tasks take PBS_VNODENUM, the lines of PBS_NODEFILE and its first host, and PBS_JOBID's port" {
  printf '127.0.0.1\n127.0.0.1\n127.0.0.1\n127.0.0.1\n' >"$BATS_TEST_TMPDIR/nodefile"
  host_on_port
  config_of pbs_env 2
  has launcher=pbs launchers='["pbs"]' rank=2 n=4 host=127.0.0.1 port="$PORT" scope="pbs-$JOB.pbs01" \
    source.rank=env:PBS_VNODENUM 'source.n=derived:PBS_NODEFILE (lines)' source.host=derived:PBS_NODEFILE \
    source.port=derived:PBS_JOBID source.scope=derived:PBS_JOBID
  run_job "pbs-$JOB.pbs01" pbs_env
  # An unreadable PBS_NODEFILE: exit 2, naming the variable, the file and why.
  rm "$BATS_TEST_TMPDIR/nodefile"
  local vars
  mapfile -t vars < <(pbs_env 0)
  run --separate-stderr "${CLEAN[@]}" "${vars[@]}" "$TFB" wait --name x
  assert_equal "$status" 2
  [[ $stderr == *"cannot read \"$BATS_TEST_TMPDIR/nodefile\", which PBS_NODEFILE names"*"No such file or directory"* ]] ||
    { echo "$stderr"; false; }
}

# ---- LSF: blaunch's tasks ------------------------------------------------------
lsf_env() {
  echo "LSB_JOBID=$JOB"
  echo "LSB_MCPU_HOSTS=127.0.0.1 4"
  echo "LSB_HOSTS=127.0.0.1 127.0.0.1 127.0.0.1 127.0.0.1"
  echo "LSB_DJOB_NUMPROC=4"
  echo "LSF_PM_TASKID=$((1 + $1))"
}

@test "LSF: blaunch's tasks take LSF_PM_TASKID - 1, LSB_DJOB_NUMPROC, LSB_MCPU_HOSTS's first host and LSB_JOBID's port" {
  host_on_port
  config_of lsf_env 3
  has launcher=lsf rank=3 n=4 host=127.0.0.1 port="$PORT" scope="lsf-$JOB" \
    'source.rank=env:LSF_PM_TASKID (minus 1)' source.n=env:LSB_DJOB_NUMPROC source.host=derived:LSB_MCPU_HOSTS \
    source.port=derived:LSB_JOBID
  run_job "lsf-$JOB" lsf_env
}

# ---- Grid Engine: tasks of qrsh -inherit, which get no rank --------------------
sge_env() {
  echo "JOB_ID=$JOB"
  echo "SGE_TASK_ID=undefined"
  echo "NSLOTS=4"
  echo "PE_HOSTFILE=$BATS_TEST_TMPDIR/pe_hostfile"
  echo "TFBARRIER_RANK=$1"  # Grid Engine gives none: the job script's loop does
}

@test "Grid Engine: NSLOTS, PE_HOSTFILE's first host and JOB_ID's port; the rank is the script's" {
  echo "127.0.0.1 4 all.q@127.0.0.1 UNDEFINED" >"$BATS_TEST_TMPDIR/pe_hostfile"
  host_on_port
  config_of sge_env 1
  has launcher=sge rank=1 n=4 host=127.0.0.1 port="$PORT" scope="sge-$JOB" \
    source.rank=env:TFBARRIER_RANK source.n=env:NSLOTS source.host=derived:PE_HOSTFILE source.port=derived:JOB_ID
  run_job "sge-$JOB" sge_env
}

# ---- Flux: flux run's tasks ------------------------------------------------------
flux_env() {
  echo "FLUX_JOB_ID=$JOB"
  echo "FLUX_JOB_SIZE=4"
  echo "FLUX_JOB_NNODES=1"
  echo "FLUX_TASK_RANK=$1"
  echo "FLUX_TASK_LOCAL_ID=$1"
}

@test "Flux: FLUX_TASK_RANK, FLUX_JOB_SIZE and FLUX_JOB_ID's port; the host on loopback, with a warning" {
  host_on_port
  config_of flux_env 0
  has launcher=flux rank=0 n=4 host=127.0.0.1 port="$PORT" scope="flux-$JOB" may_start_host=true \
    source.rank=env:FLUX_TASK_RANK source.n=env:FLUX_JOB_SIZE source.port=derived:FLUX_JOB_ID source.host=default
  [[ $output == *'Flux does not say where rank 0 runs'* ]]
  run_job "flux-$JOB" flux_env
}

# ---- HTCondor's parallel universe -----------------------------------------------
condor_env() {
  echo "_CONDOR_PROCNO=$1"
  echo "_CONDOR_NPROCS=4"
  echo "_CONDOR_REMOTE_SPOOL_DIR=/tmp"
  echo "TFBARRIER_PORT=$PORT"  # HTCondor gives no job id in the environment
}

@test "HTCondor: _CONDOR_PROCNO and _CONDOR_NPROCS" {
  host_on_port
  config_of condor_env 3
  has launcher=condor rank=3 n=4 scope=default source.rank=env:_CONDOR_PROCNO source.n=env:_CONDOR_NPROCS
  run_job default condor_env
}

# ---- Kubernetes Indexed Job: pod 0 through the headless service ------------------
# Each pod is its own mount namespace whose /etc/hosts names train-0.train-svc,
# as the cluster's DNS would: pod 0 starts the host there, the others find it.
k8s_env() {
  echo "JOB_COMPLETION_INDEX=$1"
  echo "HOSTNAME=train-$1"
  echo "SUBDOMAIN=train-svc"
  echo "TFBARRIER_N=4"
  echo "TFBARRIER_PORT=$PORT"
}

@test "Kubernetes: JOB_COMPLETION_INDEX, and pod 0 (JOB-0.SUBDOMAIN) starts the host the others reach" {
  [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null || skip "needs root for a mount namespace"
  # The environment is the example manifest's: check that it gives the pods this.
  local m=$BATS_TEST_DIRNAME/../../examples/kubernetes/indexed-job.yaml
  grep -q 'completionMode: Indexed' "$m"
  grep -q '^  name: train$' "$m"
  grep -q 'subdomain: train-svc' "$m" && grep -A1 'name: SUBDOMAIN$' "$m" | grep -q 'value: train-svc'
  grep -q 'completions: 4' "$m" && grep -A1 'name: TFBARRIER_N$' "$m" | grep -q 'value: "4"'
  echo "127.0.0.1 train-0.train-svc train-0" >"$BATS_TEST_TMPDIR/hosts"
  config_of k8s_env 2
  has launcher=k8s rank=2 n=4 host=train-0.train-svc scope=k8s-train may_start_host=false \
    source.rank=env:JOB_COMPLETION_INDEX source.host=derived:HOSTNAME+SUBDOMAIN source.scope=derived:HOSTNAME
  config_of k8s_env 0
  has may_start_host=true
  local i vars
  SELF_LOG=$HOME/.tfbarrier/serve-$(hostname -s).log
  for i in 3 2 1 0; do
    mapfile -t vars < <(k8s_env "$i")
    spawn "p$i" unshare -m sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$BATS_TEST_TMPDIR/hosts" \
      "${CLEAN[@]}" "${vars[@]}" "$TFB" wait --name epoch1 --connect-timeout 15s
  done
  expect_exits 0 p0 p1 p2 p3
  SELF_LOG=$(ls "$HOME"/.tfbarrier/serve-*.log)
  grep -q 'listening on train-0.train-svc\|listening on 127.0.0.1' "$SELF_LOG"
}

# ---- MPICH, for real -------------------------------------------------------------
@test "MPICH: mpiexec -n 4 tfbarrier wait releases all four; config shows Hydra's rank, size and node" {
  command -v mpiexec.hydra >/dev/null || command -v mpiexec.mpich >/dev/null || skip "no MPICH (scripts/deps test installs it)"
  MPIEXEC=$(command -v mpiexec.mpich || command -v mpiexec.hydra)
  start_host
  unset TFBARRIER_ADDR
  run --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin TFBARRIER_PORT="$HOST_PORT" \
    "$MPIEXEC" -n 4 sh -c '"$0" config --json | tr -d "\n "; echo' "$TFB"
  assert_success
  local line
  for r in 0 1 2 3; do
    line=$(grep -F "\"rank\":$r," <<<"$output")
    [[ $line == *'"launcher":"mpich"'* && $line == *'"n":4'* && $line == *'"rank":"env:PMI_RANK"'* &&
      $line == *'"n":"env:PMI_SIZE"'* && $line == *'"node":"env:MPIR_CVAR_CH3_INTERFACE_HOSTNAME"'* ]] ||
      { echo "rank $r: $line"; false; }
  done
  run --separate-stderr timeout 30 env -i HOME="$HOME" PATH=/usr/bin:/bin TFBARRIER_PORT="$HOST_PORT" \
    "$MPIEXEC" -n 4 "$TFB" wait --name mpi1 --connect-timeout 10s
  assert_success
  run -0 --separate-stderr "$TFB" status --addr "127.0.0.1:$HOST_PORT" --name mpi1 --json
  assert_json barriers.0.round 2  # one round of four released; the next is open
}

@test "MPICH inside a Slurm job (an mpiexec in an sbatch): PMI's rank and size, Slurm's job and first node" {
  command -v mpiexec.mpich >/dev/null || skip "no MPICH (scripts/deps test installs it)"
  host_on_port
  # The batch script's variables; Hydra starts its ranks here (fork), not through srun.
  local slurm=(SLURM_JOB_ID="$JOB" SLURM_JOB_NODELIST=127.0.0.1 SLURM_NODELIST=127.0.0.1 SLURM_NTASKS=1
    SLURM_PROCID=0 SLURMD_NODENAME=node1 HYDRA_BOOTSTRAP=fork HYDRA_RMK=user)
  run --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin "${slurm[@]}" \
    mpiexec.mpich -n 4 sh -c '"$0" config --json | tr -d "\n "; echo' "$TFB"
  assert_success
  local line
  line=$(grep -F '"rank":2,' <<<"$output")
  [[ $line == *'"launcher":"mpich","launchers":["mpich","slurm"]'* && $line == *"\"port\":$PORT,"* &&
    $line == *'"rank":"env:PMI_RANK"'* && $line == *'"host":"derived:SLURM_JOB_NODELIST"'* &&
    $line == *'"port":"derived:SLURM_JOB_ID"'* && $line == *"\"scope\":\"slurm-$JOB.0\""* ]] ||
    { echo "$output"; false; }
  run --separate-stderr timeout 30 env -i HOME="$HOME" PATH=/usr/bin:/bin "${slurm[@]}" \
    mpiexec.mpich -n 4 "$TFB" wait --name mpi2 --connect-timeout 10s
  assert_success
  run -0 --separate-stderr "$TFB" status --addr "127.0.0.1:$PORT" --scope "slurm-$JOB.0" --name mpi2 --json
  assert_json barriers.0.round 2  # one round of four released; the next is open
}
