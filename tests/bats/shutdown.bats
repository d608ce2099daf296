#!/usr/bin/env bats
# The host stops (SIGTERM, SIGINT) while participants wait: they are told,
# exit 69 at once with a message that the host shut down (no reconnecting for
# a minute), and the host exits 0 and logs it.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() { setup_common; }
teardown() { teardown_common; }

# stop_host_with SIGNAL: a host with three waiting participants and a waiting
# one-step decide gets SIGNAL; everyone must be gone within 3 s.
stop_host_with() {
  local sig=$1
  start_host
  spawn_wait p0 --name sd --n 5 --rank 0
  spawn_wait p1 --name sd --n 5 --rank 1
  spawn_wait p2 --name sd --n 5
  spawn chief "$TFB" decide stop --name sd --n 5 --rank 4 --message never
  wait_arrived sd 4

  SECONDS=0
  kill "-$sig" "$HOST_PID"
  expect_exits 69 p0 p1 p2 chief
  local took=$SECONDS
  [ "$took" -le 3 ]
  local label
  for label in p0 p1 p2 chief; do
    grep -q "^tfbarrier: error: the host at $TFBARRIER_ADDR is shutting down" "$(err "$label")" || {
      echo "$label did not say the host shut down:" >&2
      cat "$(err "$label")" >&2
      return 1
    }
    [ ! -s "$(out "$label")" ]
  done

  wait_gone "$HOST_PID" 5
  local rc=0
  wait "$HOST_PID" || rc=$?
  [ "$rc" -eq 0 ]
  grep -q "shutting down ($sig)" "$HOST_LOG"
  grep -q ': stopped$' "$HOST_LOG"
}

@test "on SIGTERM the host tells waiting participants, they exit 69 within 3 s, and the host exits 0" {
  stop_host_with SIGTERM
}

@test "on SIGINT the host does the same" {
  stop_host_with SIGINT
}
