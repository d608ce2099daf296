#!/usr/bin/env bats
# `tfbarrier abort`: everyone waiting in the round exits 3 at once with the
# reason on stderr, so does everyone who arrives in that round later, and
# abort itself exits 0 and says how many it told.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() { setup_common; }
teardown() { teardown_common; }

@test "abort makes every waiting participant exit 3 promptly with the reason on stderr" {
  start_host
  spawn_wait p0 --name ab --n 4 --rank 0
  spawn_wait p1 --name ab --n 4 --rank 1
  spawn_wait p2 --name ab --n 4
  wait_arrived ab 3

  SECONDS=0
  run -0 timeout 20 "$TFB" abort --name ab --reason 'rank 3 ran out of memory'
  expect_exits 3 p0 p1 p2
  [ "$SECONDS" -le 3 ]
  local label
  for label in p0 p1 p2; do
    grep -q '^tfbarrier: error: .*ab.*was aborted: rank 3 ran out of memory$' "$(err "$label")"
    [ ! -s "$(out "$label")" ]
  done
}

@test "participants that arrive after the abort exit 3 too, with the reason" {
  start_host
  arrive late 3 0
  run -0 timeout 20 "$TFB" abort --name late --reason 'bad node'
  expect_exits 3 p0

  # With the round's n, without it, without a rank: all aborted, none counted.
  local args
  for args in "--n 3 --rank 1" "--rank 2" ""; do
    # shellcheck disable=SC2086  # $args is words on purpose
    run -3 --separate-stderr timeout 20 "$TFB" wait --name late $args
    assert_equal "$output" ""
    [[ $stderr == "tfbarrier: error: "*"was aborted: bad node" ]]
  done
  run -0 "$TFB" status --name late --json
  assert_json barriers.0.state '"aborted"'
  assert_json barriers.0.arrived 0
}

@test "abort exits 0 and notes how many waiting participants it told" {
  start_host
  arrive note 3 0 1
  run -0 --separate-stderr timeout 20 "$TFB" abort --name note --reason why
  echo "$stderr"
  assert_equal "$output" ""
  [[ $stderr == "tfbarrier: aborted barrier note round 1: 2 waiting participants told" ]]
  expect_exits 3 p0 p1
  grep -q 'abort note#1: 2 participants told: why' "$HOST_LOG"
  # The table shows the round as aborted, with its reason, and no count of arrivals.
  run -0 "$TFB" status --name note
  assert_line --regexp '^default +note +1 aborted +- +no +none '
  assert_line '    aborted: why'

  # A barrier nobody waits at can be aborted in advance: 0 told, and it is aborted.
  run -0 --separate-stderr timeout 20 "$TFB" abort --name ahead --quiet
  assert_equal "$stderr" ""
  run -0 "$TFB" status --name ahead --json
  assert_json barriers.0.state '"aborted"'
  run -3 timeout 20 "$TFB" wait --name ahead --n 1
  # Without --quiet it says how long that lasts, in case the name was a typo.
  run -0 --separate-stderr timeout 20 "$TFB" abort --name typo
  [[ $stderr == *"0 waiting participants told; nobody was waiting, so check the name (and --scope): later arrivals exit 3 until the host forgets the barrier (serve --forget-after, default 1h)" ]]
}
