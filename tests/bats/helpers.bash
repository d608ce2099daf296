# Shared by every .bats file: start real hosts on ephemeral ports, wait for
# readiness (never sleep N), and clean up by PID.
bats_require_minimum_version 1.5.0

setup_common() {
  bats_load_library bats-support
  bats_load_library bats-assert
  TFB=${TFBARRIER_BIN:-$BATS_TEST_DIRNAME/../../build/test/tfbarrier}
  [ -x "$TFB" ] || { echo "tfbarrier binary not found at $TFB (set TFBARRIER_BIN)" >&2; return 1; }
  export TFB
  # Each test gets its own scope, so nothing leaks between tests.
  unset TFBARRIER_ADDR TFBARRIER_N TFBARRIER_RANK TFBARRIER_HOST TFBARRIER_PORT TFBARRIER_SCOPE
  unset SLURM_JOB_ID SLURM_PROCID SLURM_NTASKS SLURM_STEP_NUM_TASKS RANK WORLD_SIZE MASTER_ADDR
  unset OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMI_SIZE PMI_RANK TORCHELASTIC_RUN_ID
  HOST_PIDS=()
  # A home of its own: the default secret file (~/.tfbarrier/secret) never leaks between tests.
  export HOME=$BATS_TEST_TMPDIR/home
  mkdir -p "$HOME"
  unset TFBARRIER_SECRET_FILE TFBARRIER_KEEPALIVE TFBARRIER_STATE_DIR
}

# start_host [serve options...]: starts `tfbarrier serve` on 127.0.0.1:0,
# waits until it prints its address, exports TFBARRIER_ADDR. Log in $HOST_LOG.
start_host() {
  HOST_LOG=$BATS_TEST_TMPDIR/host.log
  local out=$BATS_TEST_TMPDIR/host.out
  : >"$out"
  "$TFB" serve --listen 127.0.0.1:0 "$@" >"$out" 2>"$HOST_LOG" 3>&- &
  HOST_PID=$!
  HOST_PIDS+=("$HOST_PID")
  local i
  for i in $(seq 200); do
    if grep -q '^TFBARRIER_ADDR=' "$out"; then
      export TFBARRIER_ADDR=$(sed -n 's/^TFBARRIER_ADDR=//p' "$out")
      return 0
    fi
    kill -0 "$HOST_PID" 2>/dev/null || { echo "host died:" >&2; cat "$HOST_LOG" >&2; return 1; }
    sleep 0.05
  done
  echo "host did not report its address in 10 s" >&2
  cat "$HOST_LOG" >&2
  return 1
}

# wait_for_log PATTERN [seconds]: waits until the host log matches.
wait_for_log() {
  local pattern=$1 limit=${2:-10} i
  for i in $(seq $((limit * 20))); do
    grep -qE "$pattern" "$HOST_LOG" && return 0
    sleep 0.05
  done
  echo "host log never matched '$pattern':" >&2
  cat "$HOST_LOG" >&2
  return 1
}

# wait_arrived NAME COUNT: waits until the host has COUNT arrivals in NAME's open round.
wait_arrived() {
  local name=$1 count=$2 i
  for i in $(seq 200); do
    if "$TFB" status --name "$name" --json --connect-timeout 2s 2>/dev/null |
        grep -q "\"arrived\": $count,"; then
      return 0
    fi
    sleep 0.05
  done
  echo "barrier $name never reached $count arrivals" >&2
  "$TFB" status --all-scopes >&2 || true
  return 1
}

# A free TCP port nobody listens on (bound and released by the kernel).
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

teardown_common() {
  local p
  for p in "${HOST_PIDS[@]}" "${BG_PIDS[@]:-}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null || true
  done
  for p in "${HOST_PIDS[@]}" "${BG_PIDS[@]:-}"; do
    [ -n "$p" ] && wait "$p" 2>/dev/null || true
  done
}
