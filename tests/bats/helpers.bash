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
  HOST_WRAP=()
  BG_PIDS=()
  SPAWN_LIMIT=20
  declare -gA PID_OF=()
  # A home of its own: the default secret file (~/.tfbarrier/secret) never leaks between tests.
  export HOME=$BATS_TEST_TMPDIR/home
  mkdir -p "$HOME"
  unset TFBARRIER_SECRET_FILE TFBARRIER_KEEPALIVE TFBARRIER_STATE_DIR XDG_RUNTIME_DIR
}

# start_host [serve options...]: starts `tfbarrier serve` on 127.0.0.1:0,
# waits until it prints its address, exports TFBARRIER_ADDR. Log in $HOST_LOG.
start_host() {
  start_host_on 127.0.0.1:0 "$@"
}

# start_host_on HOST:PORT [serve options...]: as start_host, on a given address
# (the same again to restart a host where it was). Sets HOST_PID and HOST_PORT.
# HOST_LOG holds the log of every host the test started, in order. The host
# runs under the command in the array HOST_WRAP when set (ip netns exec ...),
# which must exec it, so that HOST_PID is the host's own.
start_host_on() {
  local listen=$1
  shift
  HOST_LOG=$BATS_TEST_TMPDIR/host.log
  local out=$BATS_TEST_TMPDIR/host.out
  : >"$out"
  "${HOST_WRAP[@]}" "$TFB" serve --listen "$listen" "$@" >"$out" 2>>"$HOST_LOG" 3>&- &
  HOST_PID=$!
  HOST_PIDS+=("$HOST_PID")
  local i
  for i in $(seq 200); do
    if grep -q '^TFBARRIER_ADDR=' "$out"; then
      export TFBARRIER_ADDR=$(sed -n 's/^TFBARRIER_ADDR=//p' "$out")
      # shellcheck disable=SC2034  # for the test
      HOST_PORT=${TFBARRIER_ADDR##*:}
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

# A free TCP port nobody listens on (bound and released by the kernel). Another
# process may take it later: where a test needs the port to stay closed, it
# uses closed_ports.
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# closed_ports N: sets CLOSED_PORTS to N ports of 127.0.0.1 that stay closed
# for the whole test: each is bound and never listened on, by a process in
# BG_PIDS, so a connection to it is refused and no other process (another
# test's etcd or frozen relay) can take it. A port from free_port was once
# taken between the test's choice and its connect, and the refusal the test
# expected became a timeout. Called directly, not in $(...): the process
# must be in this shell's BG_PIDS, and hold none of Bats's descriptors.
closed_ports() {
  local n=$1 f="$BATS_TEST_TMPDIR/closed-ports.$RANDOM"
  /usr/bin/python3 -c '
import socket, sys, time, os
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(" ".join(str(s.getsockname()[1]) for s in socks) + "\n")
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
time.sleep(600)
' "$n" "$f" </dev/null >/dev/null 2>&1 3>&- &
  BG_PIDS+=("$!")
  local i
  for i in $(seq 100); do [ -s "$f" ] && break; sleep 0.05; done
  read -r -a CLOSED_PORTS <"$f"
}

# Ends every host and background process of the test, frozen ones (SIGSTOP) too.
teardown_common() {
  local p
  for p in "${HOST_PIDS[@]}" "${BG_PIDS[@]:-}"; do
    [ -n "$p" ] || continue
    kill "$p" 2>/dev/null || true
    kill -CONT "$p" 2>/dev/null || true
  done
  for p in "${HOST_PIDS[@]}" "${BG_PIDS[@]:-}"; do
    [ -n "$p" ] && wait "$p" 2>/dev/null || true
  done
}

# ---- Processes in the background, bounded ----------------------------------
# Every one runs under `timeout $SPAWN_LIMIT` (20 s; a file whose participants
# wait longer sets more in its setup), which is its own process group's leader:
# teardown_common's SIGTERM to it reaches the whole group (with a SIGCONT after
# it, for a frozen one), and nothing outlives a hung test by more than that.

# spawn LABEL CMD...: runs CMD in the background, stdout in $BATS_TEST_TMPDIR/LABEL.out
# and stderr in LABEL.err. Its pid (timeout's) goes to BG_PIDS and PID_OF[LABEL].
spawn() {
  local label=$1
  shift
  timeout "$SPAWN_LIMIT" "$@" >"$BATS_TEST_TMPDIR/$label.out" 2>"$BATS_TEST_TMPDIR/$label.err" 3>&- &
  BG_PIDS+=("$!")
  PID_OF[$label]=$!
}

# spawn_wait LABEL [wait options...]: spawn LABEL "$TFB" wait OPTIONS.
spawn_wait() {
  local label=$1
  shift
  spawn "$label" "$TFB" wait "$@"
}

# arrive NAME N RANK...: for each RANK, spawns `wait --name NAME --n N --rank RANK`
# as pRANK; returns once the host counts them all at NAME (whose round was empty).
arrive() {
  local name=$1 n=$2 rank
  shift 2
  for rank in "$@"; do spawn_wait "p$rank" --name "$name" --n "$n" --rank "$rank"; done
  wait_arrived "$name" $#
}

# spawn_timed LABEL CMD...: as spawn, and writes the time it exited
# (`date +%s.%N`) to $BATS_TEST_TMPDIR/LABEL.end.
spawn_timed() {
  local label=$1
  shift
  # shellcheck disable=SC2016  # expanded by the inner bash
  spawn "$label" bash -c 'end=$1; shift; "$@"; rc=$?; date +%s.%N >"$end"; exit "$rc"' _ \
    "$BATS_TEST_TMPDIR/$label.end" "$@"
}

# out LABEL / err LABEL: the paths of LABEL's stdout and stderr.
out() { echo "$BATS_TEST_TMPDIR/$1.out"; }
err() { echo "$BATS_TEST_TMPDIR/$1.err"; }

# pid_of LABEL: the pid of LABEL's command itself (the child of its `timeout`),
# e.g. the tfbarrier process that the host lists as a member.
pid_of() {
  local t=${PID_OF[$1]} i p
  for i in $(seq 100); do
    p=$(pgrep -P "$t" | head -n 1)
    if [ -n "$p" ]; then
      echo "$p"
      return 0
    fi
    sleep 0.02
  done
  echo "$1 (pid $t) has no child process" >&2
  return 1
}

# alive PID: PID runs (a zombie, exited but not yet reaped, does not count).
alive() {
  local line
  while IFS= read -r line; do
    if [[ $line == State:* ]]; then
      [[ $line != *Z* ]]
      return
    fi
  done 2>/dev/null <"/proc/$1/status"
  return 1
}

# wait_gone PID [seconds]: waits until PID has exited (default 5 s).
wait_gone() {
  local pid=$1 limit=${2:-5} i
  for i in $(seq $((limit * 20))); do
    alive "$pid" || return 0
    sleep 0.05
  done
  echo "pid $pid still runs after ${limit}s" >&2
  return 1
}

# finish LABEL: waits for LABEL (at most its SPAWN_LIMIT) and sets RC to its exit status.
finish() {
  RC=0
  wait "${PID_OF[$1]}" || RC=$?
}

# expect_exits CODE LABEL...: waits for each LABEL; each must exit CODE.
expect_exits() {
  local want=$1 label bad=0
  shift
  for label in "$@"; do
    finish "$label"
    if [ "$RC" -ne "$want" ]; then
      echo "$label exited $RC, not $want; its stderr:" >&2
      cat "$(err "$label")" >&2
      bad=1
    fi
  done
  if [ "$bad" -ne 0 ]; then
    [ -n "${HOST_LOG:-}" ] && [ -e "$HOST_LOG" ] && { echo "--- host log" >&2; cat "$HOST_LOG" >&2; }
    return 1
  fi
}

# expect_exit_within CODE SECONDS LABEL: LABEL must exit CODE within SECONDS.
# One still running then is a hang: it is ended (timeout passes SIGTERM on, and
# SIGCONT for a frozen one) and the test fails.
expect_exit_within() {
  local want=$1 limit=$2 label=$3 i
  local pid=${PID_OF[$label]}
  for ((i = 0; i < limit * 20; i++)); do
    alive "$pid" || break
    sleep 0.05
  done
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "$label was still running after ${limit}s (expected exit $want): ended it" >&2
    return 1
  fi
  expect_exits "$want" "$label"
}

# still_running SECONDS LABEL...: for SECONDS (tenths allowed: 0.5), checks every
# 0.1 s that each LABEL still runs. This proves a negative ("not released yet"),
# so it has to let some time pass; it never waits for readiness.
still_running() {
  local tenths label i
  tenths=$(awk -v s="$1" 'BEGIN { printf "%d", s * 10 }')
  shift
  for i in $(seq "$tenths"); do
    for label in "$@"; do
      if ! alive "${PID_OF[$label]}"; then
        finish "$label"
        echo "$label stopped early (exit $RC); its stderr:" >&2
        cat "$(err "$label")" >&2
        return 1
      fi
    done
    sleep 0.1
  done
}

# wait_for_match FILE REGEX [seconds]: waits until FILE has a line matching REGEX (grep -E).
wait_for_match() {
  local file=$1 pattern=$2 limit=${3:-10}
  for _ in $(seq $((limit * 20))); do
    grep -qE -- "$pattern" "$file" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "$file never matched '$pattern'; it holds:" >&2
  cat "$file" >&2 2>/dev/null
  return 1
}

# ---- JSON, with jq if installed, else python3 --------------------------------

# jq_filter PATH: PATH (dotted: barriers.0.members) as a jq filter (.["barriers"][0]["members"]).
jq_filter() {
  local filter=. part parts=()
  IFS=. read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    if [[ $part =~ ^[0-9]+$ ]]; then filter+="[$part]"; else filter+="[\"$part\"]"; fi
  done
  echo "$filter"
}

# json PATH: the value at PATH in $output, as compact JSON ("open", 3, null, true).
# PATH is dotted and numbers index lists: barriers.0.members.1.rank. A missing key is null.
json() {
  if command -v jq >/dev/null; then
    jq -c "$(jq_filter "$1")" <<<"$output"
  else
    /usr/bin/python3 -c '
import json, sys
v = json.loads(sys.stdin.read())
for p in filter(None, sys.argv[1].split(".")):
    if isinstance(v, list):
        v = v[int(p)] if int(p) < len(v) else None
    elif isinstance(v, dict):
        v = v.get(p)
    else:
        v = None
print(json.dumps(v, separators=(",", ":")))
' "$1" <<<"$output"
  fi
}

# json_each PATH FIELD: FIELD of each element of the list at PATH, one a line, sorted.
json_each() {
  if command -v jq >/dev/null; then
    jq -c "$(jq_filter "$1")[][\"$2\"]" <<<"$output" | sort
  else
    /usr/bin/python3 -c '
import json, sys
v = json.loads(sys.stdin.read())
for p in filter(None, sys.argv[1].split(".")):
    v = v[int(p)] if isinstance(v, list) else v[p]
for e in v:
    print(json.dumps(e.get(sys.argv[2]), separators=(",", ":")))
' "$1" "$2" <<<"$output" | sort
  fi
}

# assert_json PATH EXPECTED: json PATH prints exactly EXPECTED (JSON: '"open"', 3, null).
assert_json() {
  local got
  got=$(json "$1") || { echo "not JSON: $output" >&2; return 1; }
  if [ "$got" != "$2" ]; then
    echo "$1: expected $2, got $got; the JSON:" >&2
    echo "$output" >&2
    return 1
  fi
}

# wait_status NAME PATH EXPECTED: polls `status --name NAME --json` until PATH is EXPECTED.
wait_status() {
  local name=$1 path=$2 want=$3 output
  for _ in $(seq 200); do
    output=$("$TFB" status --name "$name" --json --connect-timeout 2s 2>/dev/null) &&
      [ "$(json "$path")" = "$want" ] && return 0
    sleep 0.05
  done
  echo "barrier $name: $path never became $want; last status:" >&2
  echo "$output" >&2
  return 1
}

# json_fields: the JSON object on stdin as sorted key=value lines, nested keys
# dotted (source.n=env:WORLD_SIZE), null as null, lists and booleans as JSON.
json_fields() {
  /usr/bin/python3 -c '
import json, sys
def walk(prefix, v):
    if isinstance(v, dict):
        for k in v:
            walk(prefix + k + ".", v[k])
    else:
        print(prefix[:-1] + "=" + (json.dumps(v) if isinstance(v, (list, bool)) or v is None else str(v)))
walk("", json.load(sys.stdin))
' | sort
}

# ---- Hosts that participants started themselves -------------------------------
# They outlive their participants (detached, until 10 minutes idle): a test
# that makes one ends it.

# self_started_pids LOG [ADDR]: the pids of the hosts whose start LOG records
# (`tfbarrier[PID]: tfbarrier ... listening on ADDR ...`); ADDR is a regex, any address if not given.
self_started_pids() {
  local log=$1 addr=${2:-[^ ]*}
  [ -e "$log" ] || return 0
  sed -n "s/.* tfbarrier\[\([0-9]*\)\]: tfbarrier .* listening on $addr .*/\1/p" "$log" | sort -u
}

# stop_self_started LOG [ADDR]: ends those hosts, each only while its pid is
# still a `serve --listen ADDR ... --self-started`; each within 5 s.
stop_self_started() {
  local addr=${2:-[^ ]*} pid
  for pid in $(self_started_pids "$1" "$addr"); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "serve --listen $addr .*--self-started" || continue
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  done
}

# ---- Descriptors a daemon must not keep ----------------------------------------
# eof_pipe: makes $BATS_TEST_TMPDIR/fifo, with a reader in the background that
# writes $BATS_TEST_TMPDIR/eof once nobody holds the pipe open for writing, as
# `$(...)` or `| tee` wait for. Give the command under test `7>"$EOF_PIPE"`.
eof_pipe() {
  EOF_PIPE=$BATS_TEST_TMPDIR/fifo
  mkfifo "$EOF_PIPE"
  { timeout 20 cat "$EOF_PIPE" >/dev/null; echo eof >"$BATS_TEST_TMPDIR/eof"; } 3>&- &
  BG_PIDS+=("$!")
}

# assert_pipe_released PID: the reader of eof_pipe saw its end within 5 s, and
# PID holds no descriptor of the pipe.
assert_pipe_released() {
  local pid=$1 i
  for i in $(seq 50); do [ -e "$BATS_TEST_TMPDIR/eof" ] && break; sleep 0.1; done
  ls -l "/proc/$pid/fd" >&2
  [ -e "$BATS_TEST_TMPDIR/eof" ]
  run -0 ls -l "/proc/$pid/fd"
  refute_output --partial "$EOF_PIPE"
}

# other_uid_tfb USER: sets OTHER_TFB to a copy of $TFB that USER can run. The
# build may lie where USER cannot enter (a clone in root's 0700 home, or in
# Bats' own 0700 temporary directory), and USER would get exit 126 instead of
# tfbarrier's own answer. The copy is root's, in a directory of root's that
# others may pass through but neither list nor write (0711): USER can run it,
# and cannot change or replace it.
other_uid_tfb() {
  local user=$1
  OTHER_DIR=$(mktemp -d /tmp/tfb-other-uid.XXXXXX)
  chmod 0711 "$OTHER_DIR"
  OTHER_TFB=$OTHER_DIR/tfbarrier
  install -m 0755 "$TFB" "$OTHER_TFB"
  # USER can run it, and can write neither it nor its directory.
  run -0 runuser -u "$user" -- "$OTHER_TFB" --version
  # shellcheck disable=SC2016  # expanded by sh
  run -0 runuser -u "$user" -- sh -c 'for f; do test -w "$f" && echo "writable: $f"; done; echo checked' _ \
    "$OTHER_TFB" "$OTHER_DIR"
  assert_output checked
}

# stranger_sends PORT LINE...: the user tfbtest sends the lines to 127.0.0.1:PORT at
# once and prints what came back until the host closed (or 5 s passed).
stranger_sends() {
  local port=$1
  shift
  runuser -u tfbtest -- /usr/bin/python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall("".join(l + "\n" for l in sys.argv[2:]).encode())
data = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except OSError as e:
    data += ("<%s>" % e).encode()
sys.stdout.write(data.decode(errors="replace"))
' "$port" "$@"
}

# fake_addr_from FILE: waits (10 s at most) until a fake host started by a
# test prints FAKE_ADDR=... into FILE, and sets FAKE_ADDR; on failure shows
# $BATS_TEST_TMPDIR/fake.err, the fake host's stderr.
fake_addr_from() {
  local i
  for i in $(seq 200); do
    FAKE_ADDR=$(sed -n 's/^FAKE_ADDR=//p' "$1")
    [ -n "$FAKE_ADDR" ] && return 0
    sleep 0.05
  done
  echo "the fake host did not start" >&2
  cat "$BATS_TEST_TMPDIR/fake.err" >&2
  return 1
}

# teardown_other_uid: removes other_uid_tfb's copy.
teardown_other_uid() {
  [ -z "${OTHER_DIR:-}" ] || rm -rf "$OTHER_DIR"
}

# ---- munged, for the tests that need it (auth.bats, store.bats) ----

munge_up() { [ -S /run/munge/munge.socket.2 ] && munge -n >/dev/null 2>&1; }

# start_munged: munged, started for the test unless it runs (then
# MUNGED_STARTED=1, and teardown stops it).
start_munged() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to start munged"
  if ! munge_up; then
    command -v munged >/dev/null || skip "munge is not installed (scripts/deps test installs it)"
    install -d -o munge -g munge -m 0755 /run/munge
    "$BATS_TEST_DIRNAME/../infra/detached" runuser -u munge -- /usr/sbin/munged
    MUNGED_STARTED=1
  fi
  local i
  for i in $(seq 50); do munge_up && break; sleep 0.1; done
  munge_up
}

# The test that needs munged starts it when it is not running, and stops it
# again here: a daemon left behind would outlive the suite.
stop_munged_if_ours() {
  [ -n "${MUNGED_STARTED:-}" ] || return 0
  local pid i
  pid=$(cat /run/munge/munged.pid 2>/dev/null) || return 0
  [[ $pid =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = munged ] || return 0
  kill -CONT "$pid"  # a test may have stopped it (SIGSTOP)
  kill "$pid"
  for i in $(seq 50); do [ -e "/proc/$pid" ] || return 0; sleep 0.1; done
  echo "munged (pid $pid) did not stop" >&2
  return 1
}
