#!/usr/bin/env bats
# Participants that disagree with the round: another n, a rank already held, a
# rank beyond n. The newcomer exits 4 (2 when its own command line is
# inconsistent) and names the other party; the round itself is not harmed.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  HOSTNAME_=$(uname -n)
}
teardown() { teardown_common; }

@test "a participant asking for another n exits 4 naming who set n, and the round still releases" {
  start_host
  arrive nn 3 0
  local pid0
  pid0=$(pid_of p0)

  run -4 --separate-stderr timeout 20 "$TFB" wait --name nn --n 4 --rank 1
  assert_equal "$output" ""
  [[ $stderr == "tfbarrier: error: "* ]]
  # The other party: its n, rank, host and pid; and what this one asked for.
  [[ $stderr == *"n=3 (set by rank 0 on $HOSTNAME_ pid $pid0)"* ]]
  [[ $stderr == *"n=4"* ]]

  # The round is as it was: one member, n=3, and three arrivals release it.
  run -0 "$TFB" status --name nn --json
  assert_json barriers.0.n 3
  assert_json barriers.0.arrived 1
  still_running 0.2 p0
  spawn_wait p1 --name nn --n 3 --rank 1
  wait_arrived nn 2
  run -0 timeout 20 "$TFB" wait --name nn --n 3 --rank 2
  expect_exits 0 p0 p1
}

@test "a second participant with a rank already held exits 4 naming the holder" {
  start_host
  arrive dup 2 0
  local pid0
  pid0=$(pid_of p0)

  run -4 --separate-stderr timeout 20 "$TFB" wait --name dup --n 2 --rank 0
  assert_equal "$output" ""
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"rank 0"* ]]
  [[ $stderr == *"held by $HOSTNAME_ pid $pid0"* ]]

  # The holder keeps its place, and the round releases with the right rank 1.
  run -0 "$TFB" status --name dup --json
  assert_json barriers.0.arrived 1
  assert_json barriers.0.members.0.pid "$pid0"
  run -0 timeout 20 "$TFB" wait --name dup --n 2 --rank 1
  expect_exits 0 p0
}

@test "a rank not below n on the command line is a usage error, and the host never hears of it" {
  start_host
  run -2 --separate-stderr timeout 20 "$TFB" wait --name big --rank 7 --n 6
  assert_equal "$output" ""
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"rank 7"* ]]
  [[ $stderr == *"n=6"* ]]
  run grep -E 'big#|conflict' "$HOST_LOG"
  assert_failure
}

@test "a rank beyond the round's n exits 4, and the round is not harmed" {
  start_host
  arrive small 3 0

  # No --n of its own: the round's n (3) is what rank 5 is beyond.
  run -4 --separate-stderr timeout 20 "$TFB" wait --name small --rank 5
  assert_equal "$output" ""
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"rank 5"* ]]
  [[ $stderr == *"n=3"* ]]

  run -0 "$TFB" status --name small --json
  assert_json barriers.0.arrived 1
  assert_json barriers.0.missing '[1,2]'
  spawn_wait p1 --name small --rank 1
  wait_arrived small 2
  run -0 timeout 20 "$TFB" wait --name small --rank 2
  expect_exits 0 p0 p1
}
