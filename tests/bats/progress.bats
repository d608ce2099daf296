#!/usr/bin/env bats
# Progress lines while waiting, in a non-terminal (stderr is a file here):
# `wait --progress 200ms` reports every 200 ms; --quiet reports nothing, and
# without --progress a non-terminal gets a line only every 30 s.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() { setup_common; }
teardown() { teardown_common; }

@test "wait --progress 200ms prints 'waiting at NAME: K/N arrived, TIME, missing ranks ...' lines" {
  start_host
  spawn_wait p0 --name prog --n 3 --rank 0 --progress 200ms
  wait_for_match "$(err p0)" '^tfbarrier: waiting at prog: 1/3 arrived, [0-9]+(ms|s), missing ranks 1-2$' 5

  spawn_wait p1 --name prog --n 3 --rank 1 --quiet
  wait_for_match "$(err p0)" '^tfbarrier: waiting at prog: 2/3 arrived, [0-9]+(ms|s), missing ranks 2$' 5
  run -0 timeout 20 "$TFB" wait --name prog --n 3 --rank 2 --quiet
  expect_exits 0 p0 p1
  [ ! -s "$(out p0)" ]

  # Every line of p0's stderr is a progress line, and there were several.
  run cat "$(err p0)"
  [ "${#lines[@]}" -ge 2 ]
  local line
  for line in "${lines[@]}"; do
    [[ $line =~ ^tfbarrier:\ waiting\ at\ prog:\ [12]/3\ arrived,\ [0-9]+(ms|s),\ missing\ ranks\ (1-2|2)$ ]] || {
      echo "not a progress line: '$line'" >&2
      return 1
    }
  done
}

@test "without ranks, the progress lines just count" {
  start_host
  spawn_wait p0 --name pn --n 2 --progress 200ms
  wait_for_match "$(err p0)" '^tfbarrier: waiting at pn: 1/2 arrived, [0-9]+(ms|s)$' 5
  run -0 timeout 20 "$TFB" wait --name pn --n 2 --quiet
  expect_exits 0 p0
}

@test "--quiet prints no progress lines, and a non-terminal without --progress gets none in the first second" {
  start_host
  spawn_wait quiet --name pq --n 3 --rank 0 --progress 200ms --quiet
  spawn_wait default --name pq --n 3 --rank 1
  wait_arrived pq 2
  # Five progress intervals of 200 ms pass with both still waiting.
  still_running 1 quiet default
  run -0 timeout 20 "$TFB" wait --name pq --n 3 --rank 2 --quiet
  expect_exits 0 quiet default
  run cat "$(err quiet)"
  assert_output ""
  run cat "$(err default)"
  refute_output --partial 'waiting at'
}

@test "--progress 0 means no progress lines, and --timeout 0 polls once" {
  start_host
  spawn_wait p0 --name p0 --n 2 --rank 0 --progress 0
  wait_arrived p0 1
  still_running 1 p0
  run -0 timeout 20 "$TFB" wait --name p0 --n 2 --rank 1 --quiet
  expect_exits 0 p0
  run cat "$(err p0)"
  assert_output ""
  run -124 timeout 20 "$TFB" wait --name t0 --n 2 --timeout 0
}

@test "a worker of a complete round says it waits for the chief's verdict, and a decide that waits says its verdict stands" {
  start_host
  spawn_wait chief --name g --n 2 --rank 0 --chief --quiet
  spawn_wait w1 --name g --n 2 --rank 1 --progress 200ms
  wait_for_match "$(err w1)" "^tfbarrier: waiting at g: all 2 arrived; waiting for the chief's verdict \(tfbarrier decide\), [0-9]+(ms|s)$" 5
  expect_exits 0 chief
  run -0 timeout 20 "$TFB" decide continue --name g
  expect_exits 0 w1
  # A verdict in advance for a round nobody has reached: decide notes it after a second.
  spawn d0 "$TFB" decide stop --name later --n 2 --rank 0
  wait_for_match "$(err d0)" '^tfbarrier: verdict stop recorded for barrier later round 1 \(1/2 arrived\); waiting for its delivery \(interrupting leaves it standing\)$' 5
  kill -INT "$(pid_of d0)"
  expect_exits 130 d0
  run cat "$(err d0)"
  assert_output --partial "interrupted by SIGINT; the verdict stop stands for barrier later round 1, and is delivered when all have arrived"
  run -1 timeout 20 "$TFB" wait --name later --n 2 --rank 1 --quiet
}
