#!/usr/bin/env bats
# No host at the address: give up after --connect-timeout with exit 69 and the
# address; a host that comes up late is found (the client retries with backoff).
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  PORT=$(free_port)
}
teardown() { teardown_common; }

@test "with no host at a free port, wait exits 69 after --connect-timeout 1s naming the address" {
  SECONDS=0
  run -69 --separate-stderr timeout 20 "$TFB" wait --name u --n 1 --addr "127.0.0.1:$PORT" --connect-timeout 1s
  local took=$SECONDS
  echo "$stderr"
  [ "$took" -le 4 ]
  assert_equal "$output" ""
  [[ $stderr == "tfbarrier: error: "* ]]
  [[ $stderr == *"127.0.0.1:$PORT"* ]]
}

@test "with no host, decide, abort and status exit 69 naming the address too" {
  local cmd
  for cmd in "decide stop --name u" "abort --name u" "status"; do
    # shellcheck disable=SC2086  # $cmd is words on purpose
    run -69 --separate-stderr timeout 20 "$TFB" $cmd --addr "127.0.0.1:$PORT" --connect-timeout 1s
    [[ $stderr == "tfbarrier: error: "* ]]
    [[ $stderr == *"127.0.0.1:$PORT"* ]]
  done
}

@test "a participant started a second before its host connects once the host is up, and is released" {
  spawn_wait early --name late --n 1 --addr "127.0.0.1:$PORT" --connect-timeout 10s
  # The scenario is a host that starts late: this sleep is that delay, not a readiness wait.
  sleep 1
  still_running 0.1 early
  start_host_on "127.0.0.1:$PORT"
  expect_exits 0 early
  grep -q 'release late#1: 1 participant, verdict' "$HOST_LOG"
}

@test "with no host, status gives up after 10 s by default (a question, not a wait), and says so" {
  local port start took
  port=$(free_port)
  start=$(date +%s)
  run -69 timeout 30 env -u TFBARRIER_CONNECT_TIMEOUT "$TFB" status --addr "127.0.0.1:$port"
  took=$(($(date +%s) - start))
  assert_output --partial "cannot reach the host at 127.0.0.1:$port within 10s"
  # what to do: where the address comes from, and how to see which one set it
  assert_output --partial "Check --addr, TFBARRIER_ADDR or TFBARRIER_HOST and TFBARRIER_PORT (\`tfbarrier config\` says which set it)"
  [ "$took" -lt 20 ]
}
