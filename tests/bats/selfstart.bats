#!/usr/bin/env bats
# Zero configuration in a plain shell: no launcher, no TFBARRIER_ADDR, no host.
# The first participant that finds no host starts one itself
# (`tfbarrier serve --self-started`, log in ~/.tfbarrier/serve-NODE.log).
# TFBARRIER_PORT is a free port, so no default port is touched, and each test
# has its own HOME, so the log is its own. Participants run under `env -i`
# with only the variables named here.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  cd "$BATS_TEST_TMPDIR" || return
  PORT=$(free_port)
  HOST_LOG=$HOME/.tfbarrier/serve-$(hostname -s).log
  # A plain shell's environment: nothing but these (and what a command adds).
  PLAIN=(env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="$BATS_TEST_TMPDIR")
  OURS="127\\.0\\.0\\.1:$PORT"  # this test's host's address, as a regex for self_started_pids
}

teardown() {
  teardown_common
  stop_self_started "$HOST_LOG" "$OURS"
}

# participant NAME LABEL [wait options]: one `tfbarrier wait` spawned as LABEL,
# with nothing configured but TFBARRIER_PORT.
participant() {
  local name=$1 label=$2
  shift 2
  spawn "$label" "${PLAIN[@]}" TFBARRIER_PORT="$PORT" "$TFB" wait --name "$name" --timeout 30s "$@"
}

@test "four participants started at once with nothing configured: one starts the host, all four are released" {
  SECONDS=0
  for r in 0 1 2 3; do participant x "p$r" --n 4; done
  expect_exits 0 p0 p1 p2 p3
  echo "released in ${SECONDS}s" >&3

  # The host: started by one of them, listening on the port, its log where commands.cpp puts it.
  [ -s "$HOST_LOG" ]
  run -0 grep -c "listening on 127.0.0.1:$PORT " "$HOST_LOG"
  assert_output 1
  run -0 grep -c "release x#1: 4 participants" "$HOST_LOG"
  assert_output 1
  # Several may have raced to start one (each says so); the others only failed to bind.
  run -0 grep -l "no host answers at 127.0.0.1:$PORT; starting one here (log: $HOST_LOG)" p0.err p1.err p2.err p3.err
  starters=${#lines[@]}
  echo "participants that tried to start a host: $starters" >&3
  # The others found the port taken and gave up; that is the only trouble in the log.
  trouble=$(grep -E 'error|warning' "$HOST_LOG" || true)
  other=$(grep -vF "error: cannot listen on 127.0.0.1:$PORT: Address already in use" <<<"$trouble" || true)
  assert_equal "$other" ""
  [ "$(grep -c . <<<"$trouble")" -le $((starters - 1)) ]

  # Its pid from the log, checked against who listens on the port.
  run -0 self_started_pids "$HOST_LOG" "$OURS"
  [ "${#lines[@]}" -eq 1 ]
  pid=${lines[0]}
  run -0 ss -Htlnp "sport = :$PORT"
  assert_output --partial "pid=$pid,"
  run -0 tr '\0' ' ' <"/proc/$pid/cmdline"
  assert_output --partial "serve --listen 127.0.0.1:$PORT --idle-exit 10m --self-started"

  # The next round uses the same host: nobody starts another.
  for r in 0 1; do participant y "q$r" --n 2; done
  expect_exits 0 q0 q1
  run -1 grep -l "starting one here" q0.err q1.err
  run -0 grep -c "listening on 127.0.0.1:$PORT " "$HOST_LOG"
  assert_output 1

  # Stop it; it is gone from the port.
  stop_self_started "$HOST_LOG" "$OURS"
  run ! kill -0 "$pid"
  run -0 ss -Htln "sport = :$PORT"
  assert_output ""
}

@test "the host a participant starts keeps none of the participant's descriptors" {
  # The host outlives the participant by its idle time (10 min).
  eof_pipe
  "${PLAIN[@]}" TFBARRIER_PORT="$PORT" "$TFB" wait --name fd --n 1 --timeout 20s >p.out 2>p.err 3>&- 7>"$EOF_PIPE"
  local pid
  pid=$(self_started_pids "$HOST_LOG" "$OURS")
  [ -n "$pid" ]
  assert_pipe_released "$pid"
}

@test "with TFBARRIER_ADDR given, a participant never starts a host: it exits 69 after --connect-timeout" {
  run -69 --separate-stderr "${PLAIN[@]}" TFBARRIER_ADDR="127.0.0.1:$PORT" "$TFB" wait --name x --n 2 \
    --connect-timeout 1s
  [[ $stderr == *"cannot reach the host at 127.0.0.1:$PORT within 1s"* ]]
  [[ $stderr != *"starting one here"* ]]
  [ ! -e "$HOST_LOG" ]
}

@test "with TFBARRIER_HOST given, a participant never starts a host either" {
  run -69 --separate-stderr "${PLAIN[@]}" TFBARRIER_HOST=127.0.0.1 TFBARRIER_PORT="$PORT" "$TFB" wait --name x \
    --n 2 --connect-timeout 1s
  [[ $stderr != *"starting one here"* ]]
  [ ! -e "$HOST_LOG" ]
}

@test "status never starts a host: with none there it exits 69 and says where it looked" {
  run -69 --separate-stderr "${PLAIN[@]}" TFBARRIER_PORT="$PORT" "$TFB" status --connect-timeout 1s
  echo "$stderr"
  [[ $stderr == *"cannot reach the host at 127.0.0.1:$PORT within 1s"* ]]
  [[ $stderr != *"starting one here"* ]]
  [ ! -e "$HOST_LOG" ]
  # A participant, in the same setting, does start one; status then sees it.
  participant s1 p0 --n 2
  run -0 --separate-stderr "${PLAIN[@]}" TFBARRIER_PORT="$PORT" "$TFB" status --connect-timeout 20s
  run -0 --separate-stderr "${PLAIN[@]}" TFBARRIER_PORT="$PORT" "$TFB" wait --name s1 --n 2
  expect_exits 0 p0
}

@test "a host started here that cannot start: the participant says why at once, not after --connect-timeout" {
  # A store and a state directory, which do not go together: the host exits
  # 2, which trying again would not fix, and says so in its log.
  local t0
  t0=$(date +%s)
  run -69 --separate-stderr timeout 50 "${PLAIN[@]}" TFBARRIER_PORT="$PORT" TFBARRIER_STORE="etcd://127.0.0.1:1/none" \
    TFBARRIER_STATE_DIR="$BATS_TEST_TMPDIR/state" "$TFB" wait --name s --n 2 --connect-timeout 60s
  [ $(($(date +%s) - t0)) -lt 30 ]
  [[ $stderr == *"the host started here could not start ($HOST_LOG): --state-dir journals"* ]] || { echo "$stderr"; false; }
  grep -q "this host cannot start; it gives up (exit 2)" "$HOST_LOG"
}

@test "a host started here that cannot reach etcd (yet) does not end the wait early: another participant's host may" {
  # Its host exits 69, which says nothing of a host that another participant
  # starts once etcd is up: the participant waits its --connect-timeout.
  "$TFB" secret >/dev/null  # the store's key: the host gets as far as etcd
  run -69 --separate-stderr timeout 50 "${PLAIN[@]}" TFBARRIER_PORT="$PORT" TFBARRIER_STORE="etcd://127.0.0.1:1/none" \
    "$TFB" wait --name s --n 2 --connect-timeout 3s
  [[ $stderr == *"cannot reach the host at 127.0.0.1:$PORT within 3s"* ]] || { echo "$stderr"; false; }
  ! grep -q "it gives up" "$HOST_LOG"
}

@test "wait --secret-file F starts its host with F: the round releases, and the host refuses a client without F" {
  # F in a private directory, and no ~/.tfbarrier/secret: only the flag names
  # it. One participant gives it relative to its directory, the other absolute.
  mkdir -m 0700 keys
  "$TFB" secret --file "$BATS_TEST_TMPDIR/keys/s" >/dev/null
  [ ! -e "$HOME/.tfbarrier/secret" ]
  participant sf p0 --n 2 --rank 0 --secret-file keys/s
  participant sf p1 --n 2 --rank 1 --secret-file "$BATS_TEST_TMPDIR/keys/s"
  expect_exits 0 p0 p1
  run -0 grep -c "listening on 127.0.0.1:$PORT (.*authentication: shared secret" "$HOST_LOG"
  assert_output 1
  pid=$(self_started_pids "$HOST_LOG" "$OURS")
  run -0 tr '\0' ' ' <"/proc/$pid/cmdline"
  assert_output --partial "--self-started --secret-file $BATS_TEST_TMPDIR/keys/s"
  # Without F, nobody gets in.
  run -77 --separate-stderr "${PLAIN[@]}" TFBARRIER_PORT="$PORT" "$TFB" status --connect-timeout 5s
  run -0 --separate-stderr "${PLAIN[@]}" TFBARRIER_PORT="$PORT" "$TFB" status --connect-timeout 5s \
    --secret-file keys/s
}

@test "a host started here that cannot use its secret file exits at once (77) and does not linger" {
  # What a self-started host does when its auth setting fails: it gives up and
  # exits, leaving no unauthenticated host behind.
  run -77 --separate-stderr timeout 20 "${PLAIN[@]}" "$TFB" serve --listen "127.0.0.1:$PORT" --idle-exit 10m \
    --self-started --secret-file "$BATS_TEST_TMPDIR/none"
  [[ $stderr == *"this host cannot start; it gives up (exit 77)"* ]] || { echo "$stderr"; false; }
  run -0 ss -Htln "sport = :$PORT"
  assert_output ""
}

@test "wait --insecure starts its host with --insecure, unless the participant has a secret" {
  # No secret: the participant takes a host without authentication, and its
  # host needs none (with --store it would otherwise refuse to start for want
  # of a key, or make a secret beyond loopback).
  participant in p0 --n 1 --insecure
  expect_exits 0 p0
  pid=$(self_started_pids "$HOST_LOG" "$OURS")
  run -0 tr '\0' ' ' <"/proc/$pid/cmdline"
  assert_output --partial "--self-started --insecure"
  stop_self_started "$HOST_LOG" "$OURS"
  # With ~/.tfbarrier/secret the participant refuses a host without it: the
  # host uses it, and --insecure is not passed on.
  "$TFB" secret >/dev/null
  : >"$HOST_LOG"
  spawn p1 "${PLAIN[@]}" TFBARRIER_PORT="$PORT" TFBARRIER_INSECURE=1 "$TFB" wait --name in --n 1 --timeout 30s
  expect_exits 0 p1
  pid=$(self_started_pids "$HOST_LOG" "$OURS")
  run -0 tr '\0' ' ' <"/proc/$pid/cmdline"
  refute_output --partial "--insecure"
  grep -q "authentication: shared secret" "$HOST_LOG"
}
