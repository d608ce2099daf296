#!/usr/bin/env bats
# `wait --decide-by CMD` (issue #33 part 1): one line for every rank. The chief
# (rank 0, or --chief) runs CMD once all have arrived; its exit status is the
# verdict, the last line of its stdout the message. The chief dying while CMD
# runs aborts the round at once; --decide-timeout and --decide-within bound
# the decision.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  HOSTNAME_=$(uname -n)
}
teardown() { teardown_common; }

# line NAME RANK CMD [options...]: spawns rank RANK of 3 (as rRANK) with the one line every rank runs.
line() {
  local name=$1 rank=$2 cmd=$3
  shift 3
  spawn_wait "r$rank" --name "$name" --n 3 --rank "$rank" --decide-by "$cmd" "$@"
}

@test "every rank runs the same line: the chief's CMD gives the verdict and its last line the message" {
  start_host
  local cmd='echo "CMD ran" >>'"$BATS_TEST_TMPDIR"'/ran; echo noise; printf "loss 0.25\n"; echo to-stderr >&2; exit 1'
  line ep1 1 "$cmd"
  line ep1 2 "$cmd"
  wait_arrived ep1 2
  line ep1 0 "$cmd"
  expect_exits 1 r0 r1 r2
  for r in r0 r1 r2; do [ "$(cat "$(out "$r")")" = "loss 0.25" ]; done
  # CMD ran once, on the chief, and its stderr went to the chief's stderr.
  [ "$(wc -l <"$BATS_TEST_TMPDIR/ran")" -eq 1 ]
  grep -q '^to-stderr$' "$(err r0)"
  ! grep -q to-stderr "$(err r1)"
  grep -q 'verdict ep1#1: stop .*: loss 0.25' "$HOST_LOG"
}

@test "CMD exiting 0 releases everyone with continue; the chief by --chief instead of rank 0" {
  start_host
  spawn_wait a --name ep2 --n 2 --rank 1 --decide-by 'exit 1'
  wait_arrived ep2 1
  run -0 --separate-stderr timeout 20 "$TFB" wait --name ep2 --n 2 --chief --decide-by 'echo fine'
  assert_output "fine"
  expect_exits 0 a
  [ "$(cat "$(out a)")" = "fine" ]
}

@test "CMD runs with SIGPIPE at its default, not ignored as tfbarrier has it" {
  start_host
  spawn_wait a --name ep10 --n 2 --rank 1 --decide-by true
  wait_arrived ep10 1
  # SigIgn is a hex mask; SIGPIPE (13) is bit 12: 0x1000.
  run -0 timeout 20 "$TFB" wait --name ep10 --n 2 --rank 0 \
    --decide-by 'm=$(sed -n "s/^SigIgn:[[:space:]]*//p" /proc/$$/status); echo $(( (0x$m >> 12) & 1 ))'
  assert_output "0"
  expect_exits 0 a
}

@test "CMD failing aborts the round, naming its status; everyone exits 3" {
  start_host
  line ep3 1 'exit 7'
  line ep3 2 'exit 7'
  wait_arrived ep3 2
  line ep3 0 'echo partial; exit 7'
  expect_exits 3 r0 r1 r2
  for r in r0 r1 r2; do
    grep -q "aborted: the chief's --decide-by command (rank 0 on $HOSTNAME_) exited with status 7" "$(err "$r")"
  done
}

@test "CMD killed by a signal aborts the round, naming the signal" {
  start_host
  line ep4 1 'kill -KILL $$'
  line ep4 2 'kill -KILL $$'
  wait_arrived ep4 2
  line ep4 0 'kill -KILL $$'
  expect_exits 3 r0 r1 r2
  grep -q "was killed by signal 9 (SIGKILL)" "$(err r1)"
}

@test "the chief killed while CMD runs: the others exit 3 within a second, not at their timeout" {
  start_host
  local cmd="echo \$\$ >$BATS_TEST_TMPDIR/cmd.pid; exec sleep 60"
  line ep5 1 "$cmd" --timeout 60s
  line ep5 2 "$cmd" --timeout 60s
  wait_arrived ep5 2
  line ep5 0 "$cmd"
  wait_for_match "$BATS_TEST_TMPDIR/cmd.pid" '^[0-9]+$'
  local chief cmd_pid
  chief=$(pid_of r0)
  cmd_pid=$(cat "$BATS_TEST_TMPDIR/cmd.pid")
  alive "$cmd_pid"
  kill -KILL "$chief"
  SECONDS=0
  expect_exit_within 3 2 r1
  expect_exit_within 3 2 r2
  [ "$SECONDS" -le 1 ]
  grep -q "aborted: the chief (rank 0 on $HOSTNAME_) died while deciding" "$(err r1)"
  # Its command does not run on alone.
  wait_gone "$cmd_pid" 5
}

@test "--decide-timeout aborts the round when CMD runs past it, and kills CMD's process group" {
  start_host
  # CMD and a child of its own (in its process group) that would outlive it.
  local cmd="sleep 61 & echo \$! >$BATS_TEST_TMPDIR/child.pid; sleep 60"
  line ep6 1 "$cmd" --decide-timeout 1s
  line ep6 2 "$cmd" --decide-timeout 1s
  wait_arrived ep6 2
  line ep6 0 "$cmd" --decide-timeout 1s
  wait_for_match "$BATS_TEST_TMPDIR/child.pid" '^[0-9]+$'
  SECONDS=0
  expect_exit_within 3 5 r0
  expect_exits 3 r1 r2
  [ "$SECONDS" -le 3 ]
  grep -q "the chief (rank 0 on $HOSTNAME_) gave no verdict within 1s of all arriving" "$(err r2)"
  wait_gone "$(cat "$BATS_TEST_TMPDIR/child.pid")" 5
}

@test "wait --chief --decide-within: no decide within DUR after all arrived aborts the round" {
  start_host
  spawn_wait w1 --name ep7 --n 2 --rank 1
  wait_arrived ep7 1
  run -0 timeout 20 "$TFB" wait --name ep7 --n 2 --rank 0 --chief --decide-within 1s
  SECONDS=0
  expect_exit_within 3 5 w1
  [ "$SECONDS" -le 3 ]
  grep -q "gave no verdict within 1s of all arriving" "$(err w1)"
  # A decide in time releases as before.
  spawn_wait w2 --name ep8 --n 2 --rank 1
  wait_arrived ep8 1
  run -0 timeout 20 "$TFB" wait --name ep8 --n 2 --rank 0 --chief --decide-within 30s
  run -0 timeout 20 "$TFB" decide stop --name ep8 --message enough
  expect_exits 1 w2
}

@test "wait --chief --decide-within survives a kill -9 of a host with --state-dir: the round is aborted DUR after the restart" {
  start_host --state-dir "$BATS_TEST_TMPDIR/state"
  local addr=$TFBARRIER_ADDR
  spawn_wait w1 --name ep10 --n 2 --rank 1
  wait_arrived ep10 1
  run -0 timeout 20 "$TFB" wait --name ep10 --n 2 --rank 0 --chief --decide-within 2s
  kill -9 "$HOST_PID"
  wait "$HOST_PID" 2>/dev/null || true
  start_host_on "$addr" --state-dir "$BATS_TEST_TMPDIR/state"
  SECONDS=0
  # w1 reconnects and is told of the abort; it once waited for good (the
  # journal did not keep the deadline).
  expect_exit_within 3 10 w1
  [ "$SECONDS" -ge 1 ]
  grep -q "gave no verdict within 2s of all arriving" "$(err w1)"
}

@test "--decide-by without a rank or --chief, and the chief's options misused, are usage errors" {
  start_host
  run -2 --separate-stderr "$TFB" wait --name ep9 --n 2 --decide-by true
  [[ $stderr == *"--decide-by needs to know which participant is the chief"* ]]
  run -2 --separate-stderr "$TFB" wait --name ep9 --n 2 --rank 0 --decide-timeout 1s
  [[ $stderr == *"--decide-timeout bounds the command of --decide-by"* ]]
  run -2 --separate-stderr "$TFB" wait --name ep9 --n 2 --rank 1 --decide-within 1s
  [[ $stderr == *"--decide-within is the chief's"* ]]
}
