#!/usr/bin/env bats
# `wait --timeout`: exit 124, a message that tells who is missing and who is
# there, and a participant that timed out no longer counts.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  HOSTNAME_=$(uname -n)
}
teardown() { teardown_common; }

@test "--timeout 1s exits 124 naming the missing ranks and the arrived ranks with their hosts" {
  start_host
  arrive t 5 0 2
  local pid0 pid2
  pid0=$(pid_of p0)
  pid2=$(pid_of p2)

  SECONDS=0
  run -124 --separate-stderr timeout 20 "$TFB" wait --name t --n 5 --rank 3 --timeout 1s
  [ "$SECONDS" -le 4 ]
  assert_equal "$output" ""
  echo "$stderr"
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"timed out after 1s"* ]]
  [[ $stderr == *"3/5 arrived"* ]]
  [[ $stderr == *"missing ranks 1,4"* ]]
  [[ $stderr == *"rank 0 ($HOSTNAME_ pid $pid0)"* ]]
  [[ $stderr == *"rank 2 ($HOSTNAME_ pid $pid2)"* ]]
  # The others keep waiting.
  still_running 0.2 p0 p2
}

@test "without ranks the timeout message just counts" {
  start_host
  spawn_wait a --name tn --n 3
  wait_arrived tn 1
  run -124 --separate-stderr timeout 20 "$TFB" wait --name tn --n 3 --timeout 1s
  echo "$stderr"
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"2/3 arrived"* ]]
  [[ $stderr != *"missing ranks"* ]]
  [[ $stderr != *"never arrived: rank"* ]]
}

@test "a participant that timed out no longer counts: a later full set still needs n fresh arrivals" {
  start_host
  run -124 timeout 20 "$TFB" wait --name gone --n 2 --timeout 1s
  run -0 "$TFB" status --name gone --json
  assert_json barriers.0.arrived 0
  grep -qE 'leave gone#1: .* withdrew \(left\)' "$HOST_LOG"

  # One fresh arrival is not enough: the one that timed out is not counted.
  spawn_wait a --name gone --n 2
  wait_arrived gone 1
  still_running 0.5 a
  run -0 timeout 20 "$TFB" wait --name gone --n 2
  expect_exits 0 a
  run -0 grep -c 'release gone#1: 2 participants' "$HOST_LOG"
}

@test "a worker that times out in a gathered round says the round waited for the chief's verdict" {
  start_host
  spawn_wait w1 --name tg --n 2 --rank 1 --timeout 2s
  wait_arrived tg 1
  # All are here: the chief's wait returns, and no verdict comes.
  run -0 timeout 20 "$TFB" wait --name tg --n 2 --rank 0 --chief
  expect_exits 124 w1
  cat "$(err w1)"
  grep -q "timed out after 2s" "$(err w1)"
  grep -q "2/2 arrived; everyone had arrived, and the round was waiting for the chief's verdict" "$(err w1)"
  ! grep -q "missing ranks" "$(err w1)" || false
}
