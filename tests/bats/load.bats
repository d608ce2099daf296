#!/usr/bin/env bats
# The load generator (bench/loadgen.cpp) against a real host: 2,000
# participants over 2,000 TCP connections from 64 loopback source addresses.
# A correctness test, not a timed one: every participant is released exactly
# once, with the right verdict, and none before the last ARRIVE was sent; the
# rounds follow each other (gen G, G+1, ...). The figures it prints are not
# checked (docs/performance.md has those).
load helpers

setup() {
  setup_common
  LOADGEN=${TFBARRIER_LOADGEN:-$BATS_TEST_DIRNAME/../../build/test/bench/tfb_loadgen}
  [ -x "$LOADGEN" ] || { echo "load generator not found at $LOADGEN (set TFBARRIER_LOADGEN)" >&2; return 1; }
}

teardown() {
  teardown_common
}

@test "load: 2,000 participants, two rounds without a chief, each released exactly once" {
  start_host --quiet
  run -0 timeout 120 "$LOADGEN" --addr "$TFBARRIER_ADDR" --participants 2000 --rounds 2 --host-pid "$HOST_PID" \
    --timeout 60
  assert_output --partial "2 round(s) of 2000 participants correct"
  assert_line --regexp '^RESULT round=1 m=2000 mode=protocol verdict=none .* released=2000 .* ok=1$'
  assert_line --regexp '^RESULT round=2 m=2000 mode=protocol verdict=none .* released=2000 .* ok=1$'
  kill -0 "$HOST_PID"  # the host is still up
}

@test "load: 2,000 participants over two worker processes, with a round that takes the chief's verdict" {
  start_host --quiet
  # Round 1: no chief. Round 2: a chief waits for ALLHERE, then a DECIDE says stop;
  # the other 1,999 must get RELEASE verdict=stop with its message, the decider delivered=1999.
  run -0 timeout 120 "$LOADGEN" --addr "$TFBARRIER_ADDR" --participants 2000 --rounds 2 --verdicts none,stop \
    --workers 2 --host-pid "$HOST_PID" --timeout 60
  assert_output --partial "2 round(s) of 2000 participants correct"
  assert_line --regexp '^RESULT round=2 m=2000 mode=protocol verdict=stop workers=2 .* released=1999 .* ok=1$'
}

@test "load: the load generator notices a wrong release (raw mode against a host that answers too early)" {
  # A host that answers every line at once is not a barrier: the check must say so.
  start_host --quiet
  run -1 timeout 60 "$LOADGEN" --addr "$TFBARRIER_ADDR" --participants 50 --raw --raw-line 'PING' --timeout 10
  assert_output --partial "WRONG"
}

@test "floor (p), the C client of bench/compare.sh, is released by a real host with the chief's verdict" {
  local floorp=${LOADGEN%/*}/tfb_floor_p_client
  [ -x "$floorp" ] || { echo "floor (p) client not found at $floorp" >&2; return 1; }
  start_host
  spawn p0 "$floorp" "$TFBARRIER_ADDR" fp 3
  spawn p1 "$floorp" "$TFBARRIER_ADDR" fp 3
  wait_arrived fp 2
  still_running 0.2 p0 p1
  spawn chief "$TFB" wait --name fp --n 3 --chief
  expect_exits 0 chief
  "$TFB" decide stop --name fp
  expect_exits 1 p0 p1
  # A round without a chief: continue, exit 0.
  run -0 "$floorp" "$TFBARRIER_ADDR" solo 1
}
