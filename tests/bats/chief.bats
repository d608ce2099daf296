#!/usr/bin/env bats
# The chief's verdict. Two steps: `wait --chief` returns when all n are present
# while the others keep waiting, then `decide`. One step: `decide --n --rank`
# is the chief's arrival with the verdict given in advance. Workers exit 0 for
# continue and 1 for stop, printing the message on stdout; decide itself exits 0
# when it did what it was asked.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  HOSTNAME_=$(uname -n)
}
teardown() { teardown_common; }

# gathered NAME: workers w1, w2 (n=3) wait, the chief (rank 0) arrives with
# --chief and returns 0; the round is then gathered and the workers still wait.
gathered() {
  local name=$1
  spawn_wait w1 --name "$name" --n 3 --rank 1
  spawn_wait w2 --name "$name" --n 3 --rank 2
  wait_arrived "$name" 2
  run -0 --separate-stderr timeout 20 "$TFB" wait --name "$name" --n 3 --rank 0 --chief
  assert_equal "$output" ""
}

# stdout_is LABEL TEXT: LABEL's stdout is exactly TEXT and a newline.
stdout_is() {
  if ! printf '%s\n' "$2" | cmp -s - "$(out "$1")"; then
    echo "$1's stdout is not exactly '$2':" >&2
    od -c "$(out "$1")" >&2
    return 1
  fi
}

# workers_get_stop NAME MESSAGE: ranks 1 and 2 of a round of 3 whose chief has
# given `stop` already arrive; both exit 1 and print MESSAGE on stdout.
workers_get_stop() {
  local name=$1 message=$2
  spawn_wait w1 --name "$name" --n 3 --rank 1
  wait_arrived "$name" 2
  still_running 0.2 w1
  run -1 timeout 20 "$TFB" wait --name "$name" --n 3 --rank 2
  assert_output "$message"
  expect_exits 1 w1
  stdout_is w1 "$message"
}

@test "the chief's wait returns 0 once all are present, while the others keep waiting" {
  start_host
  gathered ep1
  # After the chief returned, the workers are still waiting, in a gathered round.
  still_running 0.5 w1 w2
  run -0 "$TFB" status --name ep1 --json
  assert_json barriers.0.round 1
  assert_json barriers.0.state '"gathered"'
  assert_json barriers.0.chief true
  assert_json barriers.0.verdict null
  assert_json barriers.0.arrived 3
  grep -q 'gathered ep1#1: all 3 present' "$HOST_LOG"
  run grep 'release ep1#' "$HOST_LOG"
  assert_failure
}

@test "decide stop --message: every worker exits 1 and prints exactly the message on stdout" {
  start_host
  gathered ep2
  still_running 0.2 w1 w2
  local text='loss diverged at step 9000: "nan" & more'
  run -0 --separate-stderr timeout 20 "$TFB" decide stop --message "$text"
  assert_equal "$output" ""
  [[ $stderr == *"delivered to 2 participants"* ]]
  expect_exits 1 w1 w2
  stdout_is w1 "$text"
  stdout_is w2 "$text"
}

@test "a worker started with stdout closed still gets the verdict as its exit code" {
  start_host
  run -0 timeout 20 "$TFB" decide stop --name closed --n 2 --rank 0 --no-wait --message "not into the socket"
  run -1 timeout 20 bash -c '"$1" wait --name closed --n 2 --rank 1 >&- 3>&-' _ "$TFB"
  # Nothing it printed reached the host (fd 1 is /dev/null, not one of its own descriptors).
  sleep 0.3
  cat "$HOST_LOG"
  run grep -c "bad client" "$HOST_LOG"
  assert_output 0
}

@test "decide continue: every worker exits 0" {
  start_host
  gathered ep3
  still_running 0.2 w1 w2
  run -0 timeout 20 "$TFB" decide continue --name ep3
  expect_exits 0 w1 w2
  [ ! -s "$(out w1)" ]
  [ ! -s "$(out w2)" ]
}

@test "one step: decide stop with --n and --rank before the others arrive blocks until release, and everyone exits 1 with the message" {
  start_host
  spawn chief "$TFB" decide stop --name one --n 3 --rank 0 --message 'stop here'
  wait_arrived one 1
  run -0 "$TFB" status --name one --json
  assert_json barriers.0.chief true
  assert_json barriers.0.verdict '"stop"'
  spawn_wait w1 --name one --n 3 --rank 1
  wait_arrived one 2
  still_running 0.3 chief w1

  run -1 --separate-stderr timeout 20 "$TFB" wait --name one --n 3 --rank 2
  assert_equal "$output" "stop here"
  expect_exits 1 w1
  stdout_is w1 'stop here'
  expect_exits 0 chief
  grep -q 'delivered to 2 participants' "$(err chief)"
}

@test "one step with --timeout: decide exits 124 naming the missing ranks, and the verdict stands for the others" {
  start_host
  run -124 --separate-stderr timeout 20 "$TFB" decide stop --name to --n 3 --rank 0 --message late --timeout 1s
  [[ $stderr == *"timed out after 1s"* ]]
  [[ $stderr == *"the verdict stop stands"* ]]
  [[ $stderr == *"1/3 arrived; missing ranks 1-2"* ]]
  run -0 "$TFB" status --name to --json
  assert_json barriers.0.chief true
  assert_json barriers.0.verdict '"stop"'
  workers_get_stop to late
}

@test "decide --timeout: a round that releases in time exits 0 as before" {
  start_host
  spawn chief "$TFB" decide continue --name tq --n 2 --rank 0 --timeout 10s
  wait_arrived tq 1
  run -0 timeout 20 "$TFB" wait --name tq --n 2 --rank 1
  expect_exits 0 chief
  grep -q 'verdict continue delivered to 1 participant of barrier tq round 1$' "$(err chief)"
}

@test "one step with --no-wait: decide returns at once, the verdict stands after it disconnected, and later workers get it" {
  start_host
  run -0 --separate-stderr timeout 20 "$TFB" decide stop --name nw --n 3 --rank 0 --no-wait --message bye
  [[ $stderr == *"recorded"* ]]
  # decide has gone; the round still holds its chief and verdict.
  run -0 "$TFB" status --name nw --json
  assert_json barriers.0.arrived 1
  assert_json barriers.0.chief true
  assert_json barriers.0.verdict '"stop"'
  assert_json barriers.0.members.0.rank 0

  workers_get_stop nw bye
}

@test "decide without --name picks the one round awaiting a verdict" {
  start_host
  gathered pick
  # Another barrier, open and without a chief, must not be touched.
  spawn_wait other --name bystander --n 2 --rank 0
  wait_arrived bystander 1

  run -0 timeout 20 "$TFB" decide stop --message picked
  expect_exits 1 w1 w2
  stdout_is w1 picked
  still_running 0.2 other
  run -0 "$TFB" status --name bystander --json
  assert_json barriers.0.verdict null
  assert_json barriers.0.chief false
}

@test "decide without --name is a usage error listing the rounds when several await a verdict" {
  start_host
  run -0 timeout 20 "$TFB" wait --name first --n 1 --chief
  run -0 timeout 20 "$TFB" wait --name second --n 1 --chief
  run -2 --separate-stderr timeout 20 "$TFB" decide stop
  echo "$stderr"
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *first* ]]
  [[ $stderr == *second* ]]
  [[ $stderr == *"--name"* ]]
  # Neither got a verdict.
  run -0 "$TFB" status --json
  run json_each barriers verdict
  refute_output --partial stop
}

@test "decide without --name is a usage error when no round awaits a verdict" {
  start_host
  run -2 --separate-stderr timeout 20 "$TFB" decide stop
  echo "$stderr"
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"no barrier"* ]]
  [[ $stderr == *"--name"* ]]
}

@test "a second chief in the same round exits 4 naming the first" {
  start_host
  spawn_wait chief --name two --n 3 --rank 0 --chief
  wait_arrived two 1
  local pid0
  pid0=$(pid_of chief)
  run -4 --separate-stderr timeout 20 "$TFB" wait --name two --n 3 --rank 1 --chief
  echo "$stderr"
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"already has a chief: rank 0 ($HOSTNAME_ pid $pid0)"* ]]

  # A chief that arrived with its verdict (one step) is a chief too.
  run -0 timeout 20 "$TFB" decide stop --name three --n 3 --rank 0 --no-wait
  run -4 --separate-stderr timeout 20 "$TFB" wait --name three --n 3 --rank 1 --chief
  [[ $stderr == *"already has a chief"* ]]

  # The first round is unharmed: its chief still waits, and two workers gather it.
  still_running 0.2 chief
  spawn_wait w1 --name two --n 3 --rank 1
  spawn_wait w2 --name two --n 3 --rank 2
  expect_exits 0 chief
  still_running 0.2 w1 w2
  run -0 timeout 20 "$TFB" decide continue --name two
  expect_exits 0 w1 w2
}

@test "a different verdict for a round that has one exits 4, and the first verdict stands" {
  start_host
  run -0 timeout 20 "$TFB" decide stop --name dv --n 2 --rank 0 --no-wait --message first
  run -4 --separate-stderr timeout 20 "$TFB" decide continue --name dv
  echo "$stderr"
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"already has the verdict stop"* ]]
  run -1 timeout 20 "$TFB" wait --name dv --n 2 --rank 1
  assert_output first
}

@test "the same verdict twice is accepted" {
  start_host
  run -0 timeout 20 "$TFB" decide stop --name sv --n 3 --rank 0 --no-wait --message again
  run -0 --separate-stderr timeout 20 "$TFB" decide stop --name sv --no-wait --message again
  assert_equal "$output" ""
  run -0 "$TFB" status --name sv --json
  assert_json barriers.0.arrived 1
  assert_json barriers.0.verdict '"stop"'
  workers_get_stop sv again
}

@test "the verdict belongs to one round: the next round of the same name, without a chief, releases with 0" {
  start_host
  run -0 timeout 20 "$TFB" decide stop --name per --n 2 --rank 0 --no-wait --message 'all done'
  run -1 timeout 20 "$TFB" wait --name per --n 2 --rank 1
  assert_output 'all done'

  spawn_wait r0 --name per --n 2 --rank 0
  wait_arrived per 1
  run -0 "$TFB" status --name per --json
  assert_json barriers.0.round 2
  assert_json barriers.0.verdict null
  assert_json barriers.0.chief false
  run -0 --separate-stderr timeout 20 "$TFB" wait --name per --n 2 --rank 1
  assert_equal "$output" ""
  expect_exits 0 r0
  [ ! -s "$(out r0)" ]
}
