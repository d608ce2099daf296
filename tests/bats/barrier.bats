#!/usr/bin/env bats
# The barrier itself, without a chief: everyone released together and nobody
# early, names reused round after round, participants without ranks, and n
# taken from the round when --n is left out.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() { setup_common; }
teardown() { teardown_common; }

@test "six participants are released together, and none before the sixth arrives" {
  start_host
  local r
  for r in 0 1 2 3 4; do spawn_timed "p$r" "$TFB" wait --name six --n 6 --rank "$r"; done
  wait_arrived six 5
  still_running 0.3 p0 p1 p2 p3 p4

  local start6
  start6=$(date +%s.%N)
  spawn_timed p5 "$TFB" wait --name six --n 6 --rank 5
  expect_exits 0 p0 p1 p2 p3 p4 p5

  # Nobody left before the sixth had started, and all six left within a second of each other.
  local ends
  ends=$(cat "$BATS_TEST_TMPDIR"/p[0-5].end)
  echo "sixth started at $start6; exits: $(tr '\n' ' ' <<<"$ends")"
  awk -v start="$start6" '$1 < start { print "exited before the sixth started: " $1; bad = 1 }
    END { exit bad }' <<<"$ends"
  awk 'NR == 1 { lo = hi = $1 } { if ($1 < lo) lo = $1; if ($1 > hi) hi = $1 }
    END { printf "spread %.3fs\n", hi - lo; exit (hi - lo > 1.0) }' <<<"$ends"
  run -0 grep -c 'release six#1: 6 participants' "$HOST_LOG"
  assert_output 1
}

@test "the same name serves three rounds in a row for the same three scripts" {
  start_host
  local r
  for r in 0 1 2; do
    # shellcheck disable=SC2016  # expanded by the inner bash
    spawn "s$r" bash -c 'for round in 1 2 3; do "$1" wait --name reuse --n 3 --rank "$2" || exit; echo "round $round: ok"; done' \
      _ "$TFB" "$r"
  done
  expect_exits 0 s0 s1 s2
  for r in 0 1 2; do
    run cat "$(out "s$r")"
    assert_output "$(printf 'round 1: ok\nround 2: ok\nround 3: ok')"
  done
  for g in 1 2 3; do
    run -0 grep -c "release reuse#$g: 3 participants" "$HOST_LOG"
    assert_output 1
  done
  run grep -c 'reuse#4' "$HOST_LOG"
  assert_output 0
}

@test "a fast participant that calls wait again at once joins the next round, not the one just released" {
  start_host
  # Rank 0 waits twice in a row; rank 1 once, so round 2 has only rank 0 for a while.
  # shellcheck disable=SC2016  # expanded by the inner bash
  spawn fast bash -c '"$1" wait --name again --n 2 --rank 0 && echo "round 1 released" &&
    "$1" wait --name again --n 2 --rank 0 && echo "round 2 released"' _ "$TFB"
  wait_arrived again 1
  run -0 timeout 20 "$TFB" wait --name again --n 2 --rank 1

  # The fast one is now alone in round 2 and must still wait there.
  wait_status again barriers.0.members.0.rank 0
  run -0 "$TFB" status --name again --json
  assert_json barriers.0.round 2
  assert_json barriers.0.arrived 1
  assert_json barriers.0.n 2
  still_running 0.5 fast
  run cat "$(out fast)"
  assert_output "round 1 released"

  run -0 timeout 20 "$TFB" wait --name again --n 2 --rank 1
  expect_exits 0 fast
  run cat "$(out fast)"
  assert_output "$(printf 'round 1 released\nround 2 released')"
  run -0 grep -c 'release again#2: 2 participants' "$HOST_LOG"
}

@test "participants without --rank are released once n of them have arrived" {
  start_host
  spawn_wait a --name norank --n 3
  spawn_wait b --name norank --n 3
  wait_arrived norank 2
  still_running 0.3 a b
  run -0 "$TFB" status --name norank --json
  assert_equal "$(json_each barriers.0.members rank)" "$(printf 'null\nnull')"

  run -0 timeout 20 "$TFB" wait --name norank --n 3
  expect_exits 0 a b
  grep -q 'release norank#1: 3 participants' "$HOST_LOG"
}

@test "a participant without --n takes n from the round" {
  start_host
  arrive fromround 3 0
  spawn_wait p1 --name fromround --rank 1
  wait_arrived fromround 2
  # n is still 3, so two are not enough.
  still_running 0.3 p0 p1
  run -0 "$TFB" status --name fromround --json
  assert_json barriers.0.n 3

  run -0 timeout 20 "$TFB" wait --name fromround --rank 2
  expect_exits 0 p0 p1
}

@test "without --n on an empty round, wait exits 2 and says to give --n" {
  start_host
  run -2 --separate-stderr timeout 20 "$TFB" wait --name empty --rank 0
  assert_equal "$output" ""
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"give --n"* ]]
  [[ $stderr == *empty* ]]
  # It was not counted.
  run -0 "$TFB" status --json
  run json_each barriers arrived
  refute_output --regexp '[1-9]'
}
