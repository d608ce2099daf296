#!/usr/bin/env bats
# Faults: the fault-injection harness (tests/faults/harness.py) at CI size, and
# focused tests of each fault it injects: the host killed with kill -9 and
# restarted on the same address, a frozen host (SIGSTOP), a frozen participant,
# a connection that dies while its round releases, and what --state-dir keeps.
# Every process here is real and talks real TCP on loopback (the harness also
# across network namespaces of its own when root). See docs/reliability.md.
load helpers

FAULTS=$BATS_TEST_DIRNAME/../faults

setup() {
  setup_common
  cd "$BATS_TEST_TMPDIR" || return
  # shellcheck disable=SC2034  # read by spawn (helpers.bash)
  SPAWN_LIMIT=60  # participants wait through host restarts and freezes
  export TFBARRIER_KEEPALIVE=300ms
}

teardown() {
  teardown_common
  if [ "$(id -u)" -eq 0 ]; then /usr/bin/python3 "$FAULTS/harness.py" --cleanup; fi
  if [ -n "${FULL_MOUNT:-}" ]; then umount "$FULL_MOUNT" 2>/dev/null || true; fi
}

# A free port below the ephemeral range: a client reconnecting while the host
# is down can never get it as its own source port (and connect to itself).
low_port() {
  /usr/bin/python3 -c '
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
while True:
    p = random.randint(lo - 12000, lo - 1)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()'
}

# kill9_host: kill -9 the host and reap it.
kill9_host() {
  kill -9 "$HOST_PID"
  wait "$HOST_PID" 2>/dev/null || true
}

@test "faults: the checker finds each kind of violation in made-up records" {
  run -0 /usr/bin/python3 "$FAULTS/harness.py" --self-test
  refute_output --partial FAILED
}

@test "faults: harness at CI size on loopback: kills, freezes and host restarts; 0 violations" {
  run timeout -k 5 150 /usr/bin/python3 "$FAULTS/harness.py" --bin "$TFB" --netns off --rounds 60 --budget 30
  echo "$output"
  [ "$status" -eq 0 ]
  assert_line --regexp '^violations: 0 '
  assert_line --regexp '^faults injected: [1-9][0-9]* .*host_kill [1-9].*host_stop [1-9].*participant_kill [1-9].*participant_stop [1-9]'
}

@test "faults: harness at CI size across network namespaces, with a shared secret, links cut; 0 violations" {
  [ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces"
  # Host in tfbf-h, participants in tfbf-p1..3; the harness builds and removes them.
  run timeout -k 5 150 /usr/bin/python3 "$FAULTS/harness.py" --bin "$TFB" --netns on --auth secret \
    --rounds 60 --budget 30
  echo "$output"
  [ "$status" -eq 0 ]
  assert_line --regexp '^violations: 0 '
  run ip netns list
  refute_output --partial tfbf-
}

@test "faults: the host killed with kill -9 and restarted on the same address: waiting participants carry on" {
  local addr=127.0.0.1:$(low_port)
  start_host_on "$addr"
  export TFBARRIER_CONNECT_TIMEOUT=15s
  spawn_wait r0 -q --name k --n 3 --rank 0 --timeout 30s
  spawn_wait r1 -q --name k --n 3 --rank 1 --timeout 30s
  wait_arrived k 2
  kill9_host
  sleep 0.5
  start_host_on "$addr"  # no --state-dir: arrivals need none, the participants send them again
  wait_arrived k 2
  run -0 timeout 20 "$TFB" wait --name k --n 3 --rank 2 --timeout 10s
  expect_exits 0 r0 r1
  grep -q "release k#1: 3 participants" "$HOST_LOG"
}

@test "faults: with --state-dir, a 'decide stop --no-wait' acknowledged before a kill -9 is delivered after the restart" {
  local addr=127.0.0.1:$(low_port)
  start_host_on "$addr" --state-dir "$BATS_TEST_TMPDIR/state"
  export TFBARRIER_CONNECT_TIMEOUT=15s
  run -0 timeout 10 "$TFB" decide stop --no-wait --name v --n 3 --rank 0 --message "loss diverged at step 9000"
  assert_output --partial "verdict stop recorded for barrier v round 1"
  spawn_wait r1 -q --name v --n 3 --rank 1 --timeout 30s
  wait_arrived v 2
  kill9_host
  start_host_on "$addr" --state-dir "$BATS_TEST_TMPDIR/state"
  run -1 timeout 20 "$TFB" wait --name v --n 3 --rank 2 --timeout 10s
  assert_output "loss diverged at step 9000"
  expect_exits 1 r1
  assert_equal "$(cat r1.out)" "loss diverged at step 9000"
}

@test "faults: without --state-dir, that acknowledged verdict is lost in a kill -9 (documented)" {
  local addr=127.0.0.1:$(low_port)
  start_host_on "$addr"
  export TFBARRIER_CONNECT_TIMEOUT=15s
  run -0 timeout 10 "$TFB" decide stop --no-wait --name v --n 3 --rank 0 --message "loss diverged"
  spawn_wait r1 -q --name v --n 3 --rank 1 --timeout 4s
  wait_arrived v 2
  kill9_host
  start_host_on "$addr"
  # The chief's arrival and its verdict died with the host: rank 0 is missing for good.
  run -124 timeout 20 "$TFB" wait --name v --n 3 --rank 2 --timeout 3s
  assert_output --partial "never arrived: rank 0"
  expect_exits 124 r1
}

@test "faults: a participant frozen with SIGSTOP is withdrawn as unresponsive; the others time out naming it" {
  start_host
  spawn_wait r1 -q --name z --n 3 --rank 1 --timeout 60s
  local frozen
  frozen=$(pid_of r1)
  wait_arrived z 1
  spawn_wait r0 -q --name z --n 3 --rank 0 --timeout 4s
  wait_arrived z 2
  kill -STOP "$frozen"
  wait_for_log "rank 1 \(.* pid $frozen\) withdrew \(unresponsive\)" 5
  run -0 "$TFB" status --name z --json
  echo "$output" >status.json
  run -0 /usr/bin/python3 -c '
import json, sys
b = json.load(open("status.json"))["barriers"][0]
print(b["arrived"], b["missing"], [(g["rank"], g["pid"], g["how"]) for g in b["gone"]])'
  assert_output "1 [1, 2] [(1, $frozen, 'unresponsive')]"
  expect_exits 124 r0
  run cat r0.err
  assert_output --regexp "rank 1 stopped answering \(unreachable or stopped\) [0-9.]+m?s ago \(.* pid $frozen\)"
  assert_output --partial "never arrived: rank 2"
}

@test "faults: the host frozen with SIGSTOP: a new participant exits 69 after --connect-timeout, not 124" {
  start_host
  kill -STOP "$HOST_PID"
  local t0=$SECONDS
  # (timeout(1) would exit 124 too: the bound is 15 s, the participant's own --timeout 10 s)
  run timeout -s KILL 15 "$TFB" wait --name f --n 2 --timeout 10s --connect-timeout 2s
  kill -CONT "$HOST_PID"
  echo "exit $status after $((SECONDS - t0)) s: $output"
  [ "$status" -eq 69 ]
  assert_output --partial "the host did not answer"
  [ $((SECONDS - t0)) -le 6 ]
}

@test "faults: the host frozen with SIGSTOP: a waiting participant exits 69 (host lost), not 124" {
  start_host
  spawn_wait r0 -q --name f --n 2 --rank 0 --timeout 60s --connect-timeout 2s
  wait_arrived f 1
  kill -STOP "$HOST_PID"
  local t0=$SECONDS
  # 3 keep-alives of silence (0.9 s + 0.5 s), then 2 s of trying to reconnect.
  local rc=0
  expect_exit_within 69 10 r0 || rc=1
  kill -CONT "$HOST_PID"
  echo "after $((SECONDS - t0)) s; its stderr:"
  cat r0.err
  [ "$rc" -eq 0 ]
  [ $((SECONDS - t0)) -le 8 ]
  run cat r0.err
  assert_output --partial "stopped answering"
}

# timeout_while_frozen NAME MAX_SECONDS [wait options]: one participant waits at
# NAME (n 2) with the options given; once it has arrived the host is frozen.
# It must exit 75 within MAX_SECONDS of the freeze: the frozen host confirms no
# withdrawal, so it may still count the participant (not 124, issue #31 item 5).
# Its stderr is in r0.err.
timeout_while_frozen() {
  local name=$1 max=$2
  shift 2
  start_host
  spawn_wait r0 -q --name "$name" --n 2 --rank 0 "$@"
  wait_arrived "$name" 1
  local t0=$SECONDS
  kill -STOP "$HOST_PID"
  local rc=0
  expect_exit_within 75 15 r0 || rc=1
  local took=$((SECONDS - t0))
  kill -CONT "$HOST_PID"
  echo "ended after ${took} s: $(cat r0.err)"
  [ "$rc" -eq 0 ]
  [ "$took" -le "$max" ]
}

@test "faults: the host frozen with SIGSTOP: a waiting participant's --timeout still ends it in time (75: unconfirmed)" {
  # The timeout (5 s) passes while the participant is reconnecting: 3 keep-alives
  # of silence (3.5 s), then a TCP connect that the frozen host's kernel accepts
  # and a handshake that never completes (the connect timeout is 6 s). Its
  # ARRIVE went out with HELLO, so it sends LEAVE too, and gives that 2 s.
  timeout_while_frozen ft 9 --timeout 5s --connect-timeout 6s --keepalive 1s
  grep -q "may still be counted in the round" r0.err
}

@test "faults: the host frozen just before a participant's --timeout: it ends 75 soon after, not at the keep-alive" {
  # Keep-alives every 10 s: the silence would take 30 s to notice. The timeout
  # (2 s) sends LEAVE to a host that cannot answer; 2 s later the participant ends.
  timeout_while_frozen fl 6 --timeout 2s --keepalive 10s
  grep -q "did not confirm the withdrawal within 2s" r0.err
  grep -q "may still be counted in the round" r0.err
}

@test "faults: the host frozen for 2 s while participants wait: they carry on and release" {
  start_host
  export TFBARRIER_CONNECT_TIMEOUT=15s
  spawn_wait r0 -q --name t --n 3 --rank 0 --timeout 30s
  spawn_wait r1 -q --name t --n 3 --rank 1 --timeout 30s
  wait_arrived t 2
  kill -STOP "$HOST_PID"
  sleep 2  # longer than 3 keep-alives: both give the connection up and reconnect
  kill -CONT "$HOST_PID"
  run -0 timeout 20 "$TFB" wait --name t --n 3 --rank 2 --timeout 10s
  expect_exits 0 r0 r1
}

@test "faults: the same with a shared secret: participants frozen out mid-handshake carry on (not exit 77)" {
  "$TFB" secret --file "$BATS_TEST_TMPDIR/secret" >/dev/null
  export TFBARRIER_SECRET_FILE=$BATS_TEST_TMPDIR/secret
  start_host --secret-file "$TFBARRIER_SECRET_FILE"
  export TFBARRIER_CONNECT_TIMEOUT=15s
  spawn_wait r0 -q --name s --n 3 --rank 0 --timeout 30s
  spawn_wait r1 -q --name s --n 3 --rank 1 --timeout 30s
  wait_arrived s 2
  kill -STOP "$HOST_PID"
  # Both notice the silence after 1.4 s and reconnect; their HELLO waits in the
  # frozen host's backlog while they send keep-alive PINGs behind it.
  sleep 2.2
  kill -CONT "$HOST_PID"
  run timeout 20 "$TFB" wait --name s --n 3 --rank 2 --timeout 5s
  echo "rank 2 exit $status: $output"
  local ok=0
  expect_exit_within 0 20 r0 || ok=1
  expect_exit_within 0 20 r1 || ok=1
  echo "rank 0: $(cat r0.err)"
  echo "rank 1: $(cat r1.err)"
  grep "authentication failed" "$HOST_LOG" || true
  [ "$ok" -eq 0 ]
}

# release_behind_dead_link ADDR NAME MESSAGE: a round of 3 at NAME on the host
# at ADDR, decided `stop` with MESSAGE in advance; rank 1 talks to the host
# through tests/faults/blackhole.py, which turns its connection into a dead
# link (both ways) before rank 2 arrives. Rank 2 is released at once with
# MESSAGE; rank 1's RELEASE is stuck in the dead link. Rank 1 is spawned as r1.
release_behind_dead_link() {
  local addr=$1 name=$2 message=$3 proxy_port proxy i
  proxy_port=$(low_port)
  /usr/bin/python3 "$FAULTS/blackhole.py" "$proxy_port" "$addr" --lifetime 60 >proxy.out 3>&- &
  proxy=$!
  BG_PIDS+=("$proxy")
  for i in $(seq 100); do grep -q '<ready>' proxy.out && break; sleep 0.05; done
  run -0 timeout 10 "$TFB" decide stop --no-wait --name "$name" --n 3 --rank 0 --message "$message"
  spawn_wait r1 -q --name "$name" --n 3 --rank 1 --timeout 30s --addr "127.0.0.1:$proxy_port" --connect-timeout 15s
  wait_arrived "$name" 2
  kill -USR1 "$proxy"
  for i in $(seq 100); do grep -q '<dead>' proxy.out && break; sleep 0.05; done
  run -1 timeout 20 "$TFB" wait --name "$name" --n 3 --rank 2 --timeout 10s
  assert_output "$message"
}

@test "faults: a connection lost while its round releases: the participant comes back and gets that round's outcome" {
  start_host
  release_behind_dead_link "$TFBARRIER_ADDR" cut "stop: cut round"
  # Rank 1 notices the silence, reconnects with the same id and is told its
  # round's outcome.
  expect_exits 1 r1
  assert_equal "$(cat r1.out)" "stop: cut round"
  grep -q "rejoin cut#1: participant .* came back after the release; told the outcome" "$HOST_LOG"
}

@test "faults: with --state-dir, a participant that missed its RELEASE when the host died is told it after the restart" {
  local addr=127.0.0.1:$(low_port)
  start_host_on "$addr" --state-dir "$BATS_TEST_TMPDIR/state"
  release_behind_dead_link "$addr" m "epoch 1: stop"
  # Released (journaled); rank 1's RELEASE is lost in the dead link, and the host dies.
  kill9_host
  start_host_on "$addr" --state-dir "$BATS_TEST_TMPDIR/state"
  expect_exits 1 r1
  assert_equal "$(cat r1.out)" "epoch 1: stop"
}

@test "faults: with --state-dir on a full disk, the host stops before acknowledging; restarted with room, the verdict is taken" {
  [ "$(id -u)" -eq 0 ] || skip "needs root to mount a small tmpfs as the state dir"
  FULL_MOUNT=$BATS_TEST_TMPDIR/state
  mkdir -p "$FULL_MOUNT"
  mount -t tmpfs -o size=64k,mode=0700 tmpfs "$FULL_MOUNT"
  local addr=127.0.0.1:$(low_port)
  start_host_on "$addr" --state-dir "$FULL_MOUNT"
  local host=$HOST_PID
  dd if=/dev/zero of="$FULL_MOUNT/fill" bs=4k 2>/dev/null || true  # until ENOSPC
  # Verdicts with 1000-byte messages, one barrier each, until the journal's last
  # page is full: each is acknowledged (exit 0) while it fits, and the one that
  # does not fit must not be.
  local msg i t decide="" acked=0
  msg=$(head -c 1000 /dev/zero | tr '\0' m)
  for i in $(seq 8); do
    spawn "d$i" "$TFB" decide stop --no-wait --name "full$i" --n 2 --rank 0 --message "$msg" \
      --connect-timeout 20s
    decide=${PID_OF[d$i]}
    for t in $(seq 200); do
      alive "$decide" && alive "$host" || break
      sleep 0.05
    done
    alive "$host" || break
    wait "$decide"  # acknowledged
    acked=$i
  done
  wait_gone "$host" 5 || { echo "the host still runs: it acknowledged all $acked verdicts"; return 1; }
  local rc=0
  wait "$host" || rc=$?
  echo "verdicts acknowledged before the disk was full: $acked; host exit $rc"
  cat "$HOST_LOG"
  [ "$rc" -eq 70 ]
  grep -q "error: cannot write the journal in $FULL_MOUNT: No space left on device; stopping before acknowledging" \
    "$HOST_LOG"
  # The last one was not acknowledged: its decide is still trying.
  alive "$decide"
  local last=$((acked + 1))
  rm "$FULL_MOUNT/fill"
  start_host_on "$addr" --state-dir "$FULL_MOUNT"
  expect_exit_within 0 20 "d$last"
  grep -q "recorded" "d$last.err"
  # Every verdict is there after the restart, the last one too.
  for i in $(seq "$last"); do
    run -1 timeout 20 "$TFB" wait --name "full$i" --n 2 --rank 1
    assert_output "$msg"
  done
}

# gathered_then_kill9 [--stop-workers]: with --state-dir, ranks 1 and 2 wait in
# barrier g (n = 3, spawned as r1 and r2), the chief's
# `wait --chief` is told all are here, and the host is killed with kill -9 and
# started again on the same address. --stop-workers freezes the workers first
# (SIGSTOP), so that none is back before the test lets them go.
gathered_then_kill9() {
  local addr=127.0.0.1:$(low_port)
  start_host_on "$addr" --state-dir "$BATS_TEST_TMPDIR/state"
  export TFBARRIER_CONNECT_TIMEOUT=15s
  spawn_wait r1 -q --name g --n 3 --rank 1 --timeout 60s
  spawn_wait r2 -q --name g --n 3 --rank 2 --timeout 60s
  wait_arrived g 2
  run -0 timeout 10 "$TFB" wait --name g --n 3 --rank 0 --chief --timeout 10s
  [ "${1:-}" != --stop-workers ] || kill -STOP "$(pid_of r1)" "$(pid_of r2)"
  kill9_host
  start_host_on "$addr" --state-dir "$BATS_TEST_TMPDIR/state"
}

@test "faults: with --state-dir, the chief's decide after a kill -9 still releases the workers that came back" {
  # The round whose chief was told ALLHERE is in the journal: after the restart
  # the workers re-arrive into it, and the chief's DECIDE releases it.
  gathered_then_kill9
  wait_arrived g 3
  run -0 timeout 10 "$TFB" decide stop --name g --message "after the crash"
  expect_exits 1 r1 r2
  assert_equal "$(cat r1.out)" "after the crash"
}

@test "faults: with --state-dir, a gathered round survives a kill -9: decide without --n releases it before any worker is back" {
  # Before the gathered round was journaled, this DECIDE got ERR NEEDN (exit 2)
  # and the workers, back later, waited for rank 0 until they timed out.
  gathered_then_kill9 --stop-workers
  run -0 "$TFB" status --name g --json
  assert_json barriers.0.state '"gathered"'
  assert_json barriers.0.arrived 3
  assert_json barriers.0.n 3
  assert_json barriers.0.members.0.host '"'"$(hostname)"'"'  # the chief, from the journal
  assert_json barriers.0.members.1.host null                 # rank 1: not back yet
  assert_json barriers.0.members.1.pid null
  run -0 "$TFB" status --name g
  assert_output --partial "rank 1     present before the host restarted, not back yet"
  run -0 timeout 10 "$TFB" decide stop --name g --message "after the crash"
  kill -CONT "$(pid_of r1)" "$(pid_of r2)"
  expect_exits 1 r1 r2
  assert_equal "$(cat r1.out)" "after the crash"
  assert_equal "$(cat r2.out)" "after the crash"
  # The round is over: the next one is round 2, and the journal has the release.
  run -0 "$TFB" status --name g --json
  assert_json barriers.0.round 2
  grep -q '"t":"release"' "$BATS_TEST_TMPDIR/state/journal"
}
