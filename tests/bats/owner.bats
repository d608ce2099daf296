#!/usr/bin/env bats
# Issue #30, item 1: a host without a secret (or MUNGE, or --insecure) serves
# its own uid only. Another local user (tfbtest, made by `scripts/deps test`)
# connects to the port and sends what the issue's repro sent: a forged DECIDE,
# a forged ARRIVE of the missing rank, a STATUS that would list the barrier.
# Before the fix the victim printed "forged" and exited 1. Each kind of host
# is tried: a plain default host, one self-started by `wait`, and (in
# store.bats) a store's per-node host and the door that `status --store` starts.
load helpers

setup() {
  setup_common
  cd "$BATS_TEST_TMPDIR" || return
  id tfbtest >/dev/null 2>&1 || skip "no user tfbtest: run scripts/deps test"
  other_uid_tfb tfbtest
}
teardown() {
  teardown_common
  [ -z "${SELF_LOG:-}" ] || stop_self_started "$SELF_LOG" "127.0.0.1:$SELF_PORT"
  teardown_other_uid
}

# attack PORT NAME: the issue's repro against the barrier NAME of 2 that rank 1
# (label victim) waits at; the victim must still be waiting afterwards.
attack() {
  local port=$1 name=$2
  run -0 stranger_sends "$port" "HELLO v=2 host=evil pid=1" \
    "DECIDE scope=default id=e verdict=stop name=$name n=2 rank=0 wait=0 :forged"
  assert_output --partial "ERR AUTH"
  assert_output --partial "serves its own user only"
  refute_output --partial "OK"
  run -0 stranger_sends "$port" "HELLO v=2 host=evil pid=1" "ARRIVE scope=default id=e name=$name n=2 rank=0"
  assert_output --partial "ERR AUTH"
  run -0 stranger_sends "$port" "HELLO v=2 host=evil pid=1" "STATUS detail=1"
  assert_output --partial "ERR AUTH"
  refute_output --partial "$name"
  # Its first line need not be HELLO: nothing a stranger sends is parsed.
  run -0 stranger_sends "$port" "STATUS detail=1"
  assert_output --partial "ERR AUTH"
  # tfbarrier itself, run by that user: its host check passes (root's host), the host's refuses.
  run -77 runuser -u tfbtest -- env HOME=/ "$OTHER_TFB" decide stop --addr "127.0.0.1:$port" --name "$name" --n 2 \
    --rank 0 -m forged
  assert_output --partial "serves its own user only"
  run -77 runuser -u tfbtest -- env HOME=/ "$OTHER_TFB" status --addr "127.0.0.1:$port"
  alive "$(pid_of victim)"
  ! grep -q forged "$(out victim)"
}

@test "a default host without a secret refuses another uid's DECIDE, ARRIVE and STATUS, and logs it" {
  [ ! -e "$HOME/.tfbarrier/secret" ]
  start_host
  grep -q "authentication: none, its own uid $(id -u) only" "$HOST_LOG"
  spawn_wait victim --name epoch7 --n 2 --rank 1
  wait_arrived epoch7 1
  attack "$HOST_PORT" epoch7
  wait_for_log "warning: refused a connection from 127\.0\.0\.1:[0-9]+: it is run by uid $(id -u tfbtest), and this host serves its own user \(uid $(id -u)\) only"
  # The owner's own chief is served as before.
  run -0 "$TFB" decide continue --name epoch7 --n 2 --rank 0
  expect_exits 0 victim
}

@test "a host self-started by wait refuses another uid" {
  SELF_PORT=$(free_port)
  export TFBARRIER_PORT=$SELF_PORT
  spawn_wait victim --name s1 --n 2 --rank 1
  TFBARRIER_ADDR=127.0.0.1:$SELF_PORT wait_arrived s1 1
  SELF_LOG=$(ls "$HOME"/.tfbarrier/serve-*.log)
  [ -n "$SELF_LOG" ]
  attack "$SELF_PORT" s1
  grep -q "refused a connection from .* it is run by uid $(id -u tfbtest)" "$SELF_LOG"
  run -0 env TFBARRIER_ADDR=127.0.0.1:$SELF_PORT "$TFB" decide stop --name s1 --n 2 --rank 0 -m mine
  expect_exits 1 victim
  grep -qx mine "$(out victim)"
}

@test "a flood of strangers is logged at most once a second, with a count of the rest" {
  start_host
  local t0 t1 i
  t0=$(date +%s)
  for i in $(seq 30); do stranger_sends "$HOST_PORT" "HELLO v=2 host=evil pid=$i" >/dev/null; done
  t1=$(date +%s)
  run -0 "$TFB" status   # the owner is served all along
  lines=$(grep -c "refused a connection from" "$HOST_LOG")
  # At most one line per second begun, never one per connection.
  [ "$lines" -ge 1 ]
  [ "$lines" -le $((t1 - t0 + 1)) ]
  [ "$lines" -lt 30 ]
}

@test "with --insecure the host serves anyone who can connect, as documented" {
  start_host --insecure
  grep -q "authentication: none, anyone who can connect (--insecure)" "$HOST_LOG"
  spawn_wait victim --name i1 --n 2 --rank 1
  wait_arrived i1 1
  run -0 stranger_sends "$HOST_PORT" "HELLO v=2 host=evil pid=1" "STATUS"
  assert_output --partial "auth=none"
  refute_output --partial "ERR AUTH"
}
