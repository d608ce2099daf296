#!/usr/bin/env bats
# Zero configuration in a plain shell: no launcher, no TFBARRIER_ADDR, no host.
# The first participant that finds no host starts one itself
# (`tfbarrier serve --self-started`, log in $TMPDIR/tfbarrier-serve-UID.log).
# TFBARRIER_PORT is a free port, so nothing on 7727 is touched, and each test
# has its own TMPDIR, so the log is its own. Participants run under `env -i`
# with only the variables named here.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  cd "$BATS_TEST_TMPDIR" || return
  PORT=$(free_port)
  LOG=$BATS_TEST_TMPDIR/tfbarrier-serve-$(id -u).log
  BG_PIDS=()
}

teardown() {
  teardown_common
  stop_self_started
}

# The pids of the hosts this test's participants started: from the log lines
# `tfbarrier[PID]: ... listening on 127.0.0.1:PORT`.
self_started_pids() {
  [ -e "$LOG" ] || return 0
  sed -n "s/.* tfbarrier\[\([0-9]*\)\]: .* listening on 127\.0\.0\.1:$PORT .*/\1/p" "$LOG" | sort -u
}

# Ends the hosts this test started (and only those: the pid must still be a
# `serve --listen 127.0.0.1:PORT --self-started`), bounded to 5 s.
stop_self_started() {
  local pid
  for pid in $(self_started_pids); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "serve --listen 127.0.0.1:$PORT .*--self-started" ||
      continue
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  done
}

# participant NAME OUT [wait options]: one `tfbarrier wait` in the background,
# with nothing configured but TFBARRIER_PORT. Its pid goes to BG_PIDS.
participant() {
  local name=$1 out=$2
  shift 2
  env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="$BATS_TEST_TMPDIR" TFBARRIER_PORT="$PORT" \
    "$TFB" wait --name "$name" --timeout 30s "$@" >"$out.out" 2>"$out.err" 3>&- &
  BG_PIDS+=($!)
}

# wait_all: waits for every participant; fails with their stderr unless all exit $1.
wait_all() {
  local want=$1 p f rc bad=0
  for p in "${BG_PIDS[@]}"; do
    rc=0
    wait "$p" || rc=$?
    [ "$rc" -eq "$want" ] || bad=1
  done
  BG_PIDS=()
  if [ "$bad" -ne 0 ]; then
    for f in *.err; do echo "--- $f"; cat "$f"; done >&2
    [ -e "$LOG" ] && { echo "--- host log"; cat "$LOG"; } >&2
    return 1
  fi
}

@test "four participants started at once with nothing configured: one starts the host, all four are released" {
  SECONDS=0
  for r in 0 1 2 3; do participant x "p$r" --n 4; done
  wait_all 0
  echo "released in ${SECONDS}s" >&3

  # The host: started by one of them, listening on the port, its log where commands.cpp puts it.
  [ -s "$LOG" ]
  run -0 grep -c "listening on 127.0.0.1:$PORT " "$LOG"
  assert_output 1
  run -0 grep -c "release x#1: 4 participants" "$LOG"
  assert_output 1
  # Several may have raced to start one (each says so); the others only failed to bind.
  run -0 grep -l "no host answers at 127.0.0.1:$PORT; starting one here (log: $LOG)" p0.err p1.err p2.err p3.err
  starters=${#lines[@]}
  echo "participants that tried to start a host: $starters" >&3
  # The others found the port taken and gave up; that is the only trouble in the log.
  trouble=$(grep -E 'error|warning' "$LOG" || true)
  other=$(grep -vF "error: cannot listen on 127.0.0.1:$PORT: Address already in use" <<<"$trouble" || true)
  assert_equal "$other" ""
  [ "$(grep -c . <<<"$trouble")" -le $((starters - 1)) ]

  # Its pid from the log, checked against who listens on the port.
  run -0 self_started_pids
  [ "${#lines[@]}" -eq 1 ]
  pid=${lines[0]}
  run -0 ss -Htlnp "sport = :$PORT"
  assert_output --partial "pid=$pid,"
  run -0 tr '\0' ' ' <"/proc/$pid/cmdline"
  assert_output --partial "serve --listen 127.0.0.1:$PORT --idle-exit 10m --self-started"

  # The next round uses the same host: nobody starts another.
  for r in 0 1; do participant y "q$r" --n 2; done
  wait_all 0
  run -1 grep -l "starting one here" q0.err q1.err
  run -0 grep -c "listening on 127.0.0.1:$PORT " "$LOG"
  assert_output 1

  # Stop it; it is gone from the port.
  stop_self_started
  run ! kill -0 "$pid"
  run -0 ss -Htln "sport = :$PORT"
  assert_output ""
}

@test "the host a participant starts keeps none of the participant's descriptors" {
  # The host outlives the participant by its idle time (10 min).
  eof_pipe
  env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="$BATS_TEST_TMPDIR" TFBARRIER_PORT="$PORT" \
    "$TFB" wait --name fd --n 1 --timeout 20s >p.out 2>p.err 3>&- 7>"$EOF_PIPE"
  local pid
  pid=$(self_started_pids)
  [ -n "$pid" ]
  assert_pipe_released "$pid"
}

@test "with TFBARRIER_ADDR given, a participant never starts a host: it exits 69 after --connect-timeout" {
  run -69 --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="$BATS_TEST_TMPDIR" \
    TFBARRIER_ADDR="127.0.0.1:$PORT" "$TFB" wait --name x --n 2 --connect-timeout 1s
  [[ $stderr == *"cannot reach the host at 127.0.0.1:$PORT within 1s"* ]]
  [[ $stderr != *"starting one here"* ]]
  [ ! -e "$LOG" ]
}

@test "with TFBARRIER_HOST given, a participant never starts a host either" {
  run -69 --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="$BATS_TEST_TMPDIR" \
    TFBARRIER_HOST=127.0.0.1 TFBARRIER_PORT="$PORT" "$TFB" wait --name x --n 2 --connect-timeout 1s
  [[ $stderr != *"starting one here"* ]]
  [ ! -e "$LOG" ]
}

@test "status never starts a host: with none there it exits 69 and says where it looked" {
  run -69 --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="$BATS_TEST_TMPDIR" \
    TFBARRIER_PORT="$PORT" "$TFB" status --connect-timeout 1s
  echo "$stderr"
  [[ $stderr == *"cannot reach the host at 127.0.0.1:$PORT within 1s"* ]]
  [[ $stderr != *"starting one here"* ]]
  [ ! -e "$LOG" ]
  # A participant, in the same setting, does start one; status then sees it.
  participant s1 p0 --n 2
  run -0 --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="$BATS_TEST_TMPDIR" \
    TFBARRIER_PORT="$PORT" "$TFB" status --connect-timeout 20s
  run -0 --separate-stderr env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="$BATS_TEST_TMPDIR" \
    TFBARRIER_PORT="$PORT" "$TFB" wait --name s1 --n 2
  wait_all 0
}
