#!/usr/bin/env bats
# `serve --daemon`: `eval "$(tfbarrier serve --daemon ...)"` exports
# TFBARRIER_ADDR and TFBARRIER_PID, barriers work through it, `kill` stops it,
# --idle-exit ends it once idle (not while someone waits), the log has the
# events, and a busy port is a clear error.
# The daemon is not our child: "exited" means gone or a zombie that init has
# not reaped yet (alive, in helpers.bash).
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
# shellcheck disable=SC2034,SC2153  # PID_OF, HOST_LOG, HOST_PID: used and set by helpers.bash
load helpers

setup() {
  setup_common
  LOG=$BATS_TEST_TMPDIR/daemon.log
}
teardown() {
  teardown_common
  # A daemon whose assignments never came back (a failed test) is not in
  # HOST_PIDS: find it by this test's own log path, which only it was given.
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "serve --daemon --listen 127.0.0.1:0 --log $LOG" &&
      kill "${p#/proc/}" 2>/dev/null
  done
  return 0
}

# daemon [serve options...]: evals `serve --daemon --listen 127.0.0.1:0 --log $LOG`,
# the way a job script does; the daemon's pid goes to HOST_PIDS (teardown kills
# it) and PID_OF[daemon]. The printed assignments are in $ASSIGNMENTS.
daemon() {
  SECONDS=0
  ASSIGNMENTS=$(timeout 20 "$TFB" serve --daemon --listen 127.0.0.1:0 --log "$LOG" "$@" \
    2>"$BATS_TEST_TMPDIR/daemon.err" 3>&-) || {
    echo "serve --daemon failed:" >&2
    cat "$BATS_TEST_TMPDIR/daemon.err" >&2
    return 1
  }
  # It returned at once: the daemon does not hold on to the command substitution.
  [ "$SECONDS" -le 5 ]
  eval "$ASSIGNMENTS"
  HOST_PIDS+=("$TFBARRIER_PID")
  PID_OF[daemon]=$TFBARRIER_PID
  HOST_LOG=$LOG
}

@test "eval of serve --daemon exports TFBARRIER_ADDR and TFBARRIER_PID, a barrier works through it, and the log has the events" {
  daemon
  echo "$ASSIGNMENTS"
  [[ $ASSIGNMENTS =~ (^|$'\n')TFBARRIER_ADDR=127\.0\.0\.1:[0-9]+\;\ export\ TFBARRIER_ADDR\;($'\n'|$) ]]
  [[ $ASSIGNMENTS =~ (^|$'\n')TFBARRIER_PID=[0-9]+\;\ export\ TFBARRIER_PID\;($'\n'|$) ]]
  # Exported: a child process sees both.
  # shellcheck disable=SC2016  # expanded by the child
  run -0 bash -c 'echo "$TFBARRIER_ADDR $TFBARRIER_PID"'
  assert_output "$TFBARRIER_ADDR $TFBARRIER_PID"
  # The pid is that daemon: a tfbarrier serve, detached from us, still running.
  alive "$TFBARRIER_PID"
  tr '\0' ' ' <"/proc/$TFBARRIER_PID/cmdline" | grep -q 'serve'
  grep -q "listening on $TFBARRIER_ADDR" "$LOG"

  arrive dm 3 0 1
  run -0 timeout 20 "$TFB" wait --name dm --n 3 --rank 2
  expect_exits 0 p0 p1

  wait_for_log 'release dm#1: 3 participants' 5
  grep -qE 'arrive dm#1: rank 0 .*, 1/3|arrive dm#1: rank 1 .*, 1/3' "$LOG"
  grep -qE 'arrive dm#1: rank 2 .*, 3/3' "$LOG"
}

@test "kill \$TFBARRIER_PID stops the daemon, and its log says it shut down" {
  daemon
  alive "$TFBARRIER_PID"
  kill "$TFBARRIER_PID"
  wait_gone "$TFBARRIER_PID" 5
  grep -q 'shutting down (SIGTERM)' "$LOG"
  grep -q ': stopped$' "$LOG"
  run -69 timeout 20 "$TFB" status --connect-timeout 200ms
}

@test "--idle-exit 1s: the daemon exits by itself when idle" {
  daemon --idle-exit 1s
  wait_gone "$TFBARRIER_PID" 5
  grep -q 'shutting down (idle for 1s)' "$LOG"
}

@test "--idle-exit 1s: the daemon stays while a participant waits, and exits once the round has released" {
  daemon --idle-exit 1s
  arrive idle 2 0
  # Well past 1 s of waiting, the daemon and its participant are still there.
  still_running 2.5 daemon p0
  run -0 timeout 20 "$TFB" wait --name idle --n 2 --rank 1
  expect_exits 0 p0
  wait_gone "$TFBARRIER_PID" 5
  grep -q 'release idle#1: 2 participants' "$LOG"
  grep -q 'shutting down (idle for 1s)' "$LOG"
}

@test "serve on a busy port exits non-zero with a clear error, with --daemon and without" {
  start_host
  local rc=0 assignments
  assignments=$(timeout 20 "$TFB" serve --daemon --listen "$TFBARRIER_ADDR" --log "$LOG" \
    2>"$BATS_TEST_TMPDIR/busy.err" 3>&-) || rc=$?
  cat "$BATS_TEST_TMPDIR/busy.err"
  echo "--daemon exit status: $rc"
  [ "$rc" -ne 0 ]
  # Nothing for eval to pick up, and the error names the address and the reason.
  assert_equal "$assignments" ""
  grep -q "^tfbarrier: error: cannot listen on $TFBARRIER_ADDR: Address already in use" "$BATS_TEST_TMPDIR/busy.err"

  run --separate-stderr timeout 20 "$TFB" serve --listen "$TFBARRIER_ADDR"
  echo "$stderr"
  echo "foreground exit status: $status"
  [ "$status" -ne 0 ]
  [ "$status" -ne 124 ]
  [[ $stderr == "tfbarrier: error: cannot listen on $TFBARRIER_ADDR: Address already in use"* ]]

  # The host that holds the port is unharmed.
  alive "$HOST_PID"
  run -0 timeout 20 "$TFB" wait --name stillhere --n 1
}

@test "the daemon keeps none of its caller's descriptors: a pipe the caller had open sees its end" {
  eof_pipe
  daemon 7>"$EOF_PIPE"
  assert_pipe_released "${PID_OF[daemon]}"
}

@test "serve --daemon started with stdin and stderr closed still reports its address and returns" {
  SECONDS=0
  run -0 --separate-stderr timeout 20 bash -c '"$1" serve --daemon --listen 127.0.0.1:0 --log "$2" <&- 2>&- 3>&-' \
    _ "$TFB" "$LOG"
  [ "$SECONDS" -le 5 ]
  [[ $output =~ TFBARRIER_PID=([0-9]+) ]]
  HOST_PIDS+=("${BASH_REMATCH[1]}")
  [[ $output == *"TFBARRIER_ADDR=127.0.0.1:"* ]]
}
