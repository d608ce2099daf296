#!/usr/bin/env bats
# Issue #19 item 6: a full host. Connections that never authenticate must not
# crowd out participants: the host closes the oldest of them to make room. A
# participant told ERR BUSY (the host is full of real participants) backs off
# and tries again within --connect-timeout, and gets in once a slot frees.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  cd "$BATS_TEST_TMPDIR" || return
}
teardown() { teardown_common; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# hold_idle N ADDR...: opens N connections to the host from each source
# address ADDR (127.0.0.x), sends nothing, and holds them for 60 s. Prints
# "<ready> K" once K of them are open (a host that closes some may make K < N).
hold_idle() {
  local n=$1
  shift
  /usr/bin/python3 - "$TFBARRIER_ADDR" "$n" "$@" <<'PY' >idle.out 3>&- &
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
n = int(sys.argv[2])
socks = []
for src in sys.argv[3:]:
    for _ in range(n):
        socks.append(socket.create_connection((host, int(port)), timeout=10, source_address=(src, 0)))
print("<ready>", len(socks), flush=True)
time.sleep(60)
PY
  BG_PIDS+=("$!")
  for _ in $(seq 300); do
    grep -q '<ready>' idle.out && return 0
    sleep 0.05
  done
  return 1
}

# fill_host NAME: a host of 3 connections at most, all three taken by
# participants w1, w2, w3 waiting at NAME (a round of 5).
fill_host() {
  start_host --max-connections 3
  spawn_wait w1 --name "$1" --n 5
  spawn_wait w2 --name "$1" --n 5
  wait_arrived "$1" 2  # status takes the third connection for a moment
  spawn_wait w3 --name "$1" --n 5
  wait_for_log "arrive $1#1: .*, 3/5"
}

@test "350 idle sockets from 127.0.0.2-.8 do not crowd out a participant with the secret: the oldest idle one makes room" {
  run -0 "$TFB" secret --file "$BATS_TEST_TMPDIR/secret"
  start_host --max-per-address 50 --max-connections 300 --secret-file "$BATS_TEST_TMPDIR/secret"
  hold_idle 50 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 127.0.0.6 127.0.0.7 127.0.0.8
  grep -q '<ready> 350' idle.out
  run -0 --separate-stderr timeout 30 "$TFB" wait --name crowd --n 1 --secret-file "$BATS_TEST_TMPDIR/secret" \
    --connect-timeout 10s
  grep -q "closing the oldest that has not authenticated" "$HOST_LOG"
  # It was room made, not a refusal: no "refusing a connection" for the participant.
  ! grep -q "refusing a connection from 127.0.0.1" "$HOST_LOG"
}

@test "a host full of real participants: a newcomer is told BUSY, retries, and exits 69 after --connect-timeout saying the host stayed busy" {
  fill_host full
  local t0 took
  t0=$(now_ms)
  run -69 --separate-stderr timeout 30 "$TFB" wait --name full --n 5 --connect-timeout 3s
  took=$(($(now_ms) - t0))
  [[ $stderr == *"is busy (the host has too many connections"* ]]
  [[ $stderr == *"stayed busy for 3s (ERR BUSY: the host has too many connections"*"--max-connections"* ]]
  # It kept trying until its budget was spent, not a moment less.
  [ "$took" -ge 2900 ]
  [ "$took" -lt 10000 ]
  [ "$(grep -c "refusing a connection from 127.0.0.1" "$HOST_LOG")" -ge 2 ]
}

@test "a newcomer told BUSY gets in once a participant leaves, within its --connect-timeout" {
  fill_host slot
  spawn_wait w4 --name slot --n 5 --connect-timeout 30s
  wait_for_log "refusing a connection from 127.0.0.1"
  kill "$(pid_of w1)"
  # w1's slot goes to w4: the round counts three again.
  wait_for_log "arrive slot#1: .*pid $(pid_of w4).*, 3/5"
  alive "$(pid_of w4)"
}
