#!/usr/bin/env bats
# Bad input: with a real barrier of 3 participants running beside it, none of
# these may disturb the barrier (it completes), kill the host, or make its
# memory grow without bound (VmRSS from /proc/PID/status, before and after,
# within +20 MB). Protocol errors get the ERR line docs/protocol.md documents.
# Raw connections come from tests/faults/wire.py (run with /usr/bin/python3) or nc.
load helpers

WIRE=$BATS_TEST_DIRNAME/../faults/wire.py

setup() {
  setup_common
  cd "$BATS_TEST_TMPDIR" || return
  BG_PIDS=()
  start_host
  PORT=${TFBARRIER_ADDR##*:}
  RSS0=$(rss_kb)
}

teardown() {
  teardown_common
}

wire() { /usr/bin/python3 "$WIRE" "$TFBARRIER_ADDR" "$@"; }

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$HOST_PID/status"; }

# barrier_begin NAME: ranks 0 and 1 of a 3-participant barrier wait in the background.
barrier_begin() {
  NAME=$1
  "$TFB" wait --name "$NAME" --n 3 --rank 0 --timeout 60s -q >r0.out 2>r0.err 3>&- &
  P0=$!
  "$TFB" wait --name "$NAME" --n 3 --rank 1 --timeout 60s -q >r1.out 2>r1.err 3>&- &
  P1=$!
  BG_PIDS+=("$P0" "$P1")
  wait_arrived "$NAME" 2
}

# barrier_end: rank 2 arrives; all three must be released (exit 0), and the
# host must be alive with its memory within +20 MB of what it was.
barrier_end() {
  run -0 timeout 30 "$TFB" wait --name "$NAME" --n 3 --rank 2 --timeout 20s
  local rc=0
  wait "$P0" || rc=$?
  [ "$rc" -eq 0 ] || { echo "rank 0 exited $rc: $(cat r0.err)" >&2; return 1; }
  wait "$P1" || rc=$?
  [ "$rc" -eq 0 ] || { echo "rank 1 exited $rc: $(cat r1.err)" >&2; return 1; }
  host_healthy
}

host_healthy() {
  kill -0 "$HOST_PID" || { echo "the host died:" >&2; tail -20 "$HOST_LOG" >&2; return 1; }
  local rss
  rss=$(rss_kb)
  echo "host VmRSS ${RSS0} kB before, ${rss} kB after" >&3
  [ "$((rss - RSS0))" -lt 20480 ] || { echo "host VmRSS grew from $RSS0 kB to $rss kB" >&2; return 1; }
  run -0 timeout 10 "$TFB" status --connect-timeout 5s
}

@test "badinput: 1 MiB of random bytes, 8 times, before and after HELLO" {
  barrier_begin g
  local i
  for i in 1 2 3 4; do
    head -c 1M /dev/urandom | timeout 10 nc -w 2 127.0.0.1 "$PORT" >/dev/null 2>&1 || true
    { printf 'HELLO v=2 host=garbage pid=1\n'; head -c 1M /dev/urandom; } |
      timeout 10 nc -w 2 127.0.0.1 "$PORT" >/dev/null 2>&1 || true
  done
  # Every one of them was turned away as a bad client.
  [ "$(grep -c 'bad client' "$HOST_LOG")" -ge 8 ]
  barrier_end
}

@test "badinput: a 10 MB line gets ERR TOOLONG and a close, before and after HELLO" {
  barrier_begin long
  run -0 timeout 30 /usr/bin/python3 "$WIRE" "$TFBARRIER_ADDR" --long 10000000 --hold 10
  assert_output "ERR TOOLONG :line longer than 4096 bytes
<closed>"
  run -0 timeout 30 /usr/bin/python3 "$WIRE" "$TFBARRIER_ADDR" --long 10000000 --hold 10 'HELLO v=2 host=n1 pid=1'
  assert_line --index 0 --partial "HELLO v=2 server=tfbarrier/"
  assert_line --index 1 "ERR TOOLONG :line longer than 4096 bytes"
  assert_line --index 2 "<closed>"
  # The same through nc, which does not read while it sends: the host must survive it.
  head -c 10000000 /dev/zero | tr '\0' a | timeout 20 nc -w 2 127.0.0.1 "$PORT" >/dev/null 2>&1 || true
  barrier_end
}

@test "badinput: half-open connections (part of a line, then silence) do not hold the barrier" {
  barrier_begin half
  wire --half-open 'HELLO v=2 host=half pi' --hold 60 >half1.out 3>&- &
  BG_PIDS+=($!)
  wire --half-open $'HELLO v=2 host=half pid=1\nARRIVE name=half scope=default id=halfopen n=3 ra' --hold 60 \
    >half2.out 3>&- &
  BG_PIDS+=($!)
  local i
  for i in $(seq 100); do
    grep -q '<ready>' half1.out && grep -q '<ready>' half2.out && break
    sleep 0.05
  done
  grep -q '<ready>' half1.out
  grep -q '<ready>' half2.out
  # The half ARRIVE was not counted: still 2 of 3.
  run -0 "$TFB" status --name half --json
  assert_output --partial '"arrived": 2,'
  barrier_end
}

@test "badinput: 1,000 connections that never speak do not hold the barrier or the host" {
  barrier_begin silent
  wire --silent 1000 --hold 60 >silent.out 3>&- &
  local holder=$!
  BG_PIDS+=("$holder")
  local i
  for i in $(seq 200); do
    grep -q '<ready>' silent.out && break
    kill -0 "$holder" 2>/dev/null || break
    sleep 0.05
  done
  run grep '<ready>' silent.out
  assert_output "<ready> 1000"
  # While all 1,000 are open (their 10 s handshake timeout has not passed), the host answers at once.
  run -0 timeout 5 "$TFB" status --name silent --connect-timeout 3s
  barrier_end
  kill -0 "$holder"  # still holding them: the barrier completed beside them
}

@test "badinput: a client that sends STATUS in a loop and reads nothing is dropped past 1 MiB of replies" {
  barrier_begin noread
  run -0 timeout 60 /usr/bin/python3 "$WIRE" "$TFBARRIER_ADDR" --no-read --hold 45
  assert_output --regexp '^<dropped after [0-9]+ bytes>$'
  grep -q "it does not read its replies; closing" "$HOST_LOG"
  barrier_end
}

@test "badinput: HELLO v=7 gets ERR VERSION and a close" {
  barrier_begin ver
  run -0 wire --hold 3 'HELLO v=7 host=n1 pid=1'
  assert_output "ERR VERSION :this host (tfbarrier/$("$TFB" --version | awk '{print $2}')) speaks protocol version 2, and the client asked for version 7: run the same version of tfbarrier on the host and in the job
<closed>"
  # A client of protocol 1 (its proofs cover less) is refused the same way.
  run -0 wire --hold 3 'HELLO v=1 host=n1 pid=1'
  assert_line --index 0 --partial "ERR VERSION :this host (tfbarrier/"
  assert_line --index 0 --partial "speaks protocol version 2, and the client asked for version 1: run the same version"
  run -0 wire --hold 3 'HELLO v=0 host=n1 pid=1'
  assert_line --index 0 --regexp '^ERR VERSION :'
  assert_line --index 1 "<closed>"
  run -0 wire --hold 3 'HELLO v=99999999999999999999 host=n1 pid=1'
  assert_line --index 0 --regexp '^ERR (VERSION|BADREQUEST) :'
  assert_line --index 1 "<closed>"
  barrier_end
}

@test "badinput: ARRIVE before HELLO gets ERR HANDSHAKE and a close" {
  barrier_begin pre
  run -0 wire --hold 3 "ARRIVE name=pre scope=default id=early n=3 rank=2 chief=0"
  assert_output "ERR HANDSHAKE :the first line must be HELLO v=2 (see docs/protocol.md)
<closed>"
  # ... and was not counted.
  run -0 "$TFB" status --name pre --json
  assert_output --partial '"arrived": 2,'
  barrier_end
}

@test "badinput: a second HELLO gets ERR BADREQUEST and a close" {
  barrier_begin twice
  run -0 wire --hold 3 'HELLO v=2 host=n1 pid=1' 'HELLO v=2 host=n1 pid=1'
  assert_line --index 0 --partial "HELLO v=2 server=tfbarrier/"
  assert_line --index 1 "ERR BADREQUEST :HELLO was already sent"
  assert_line --index 2 "<closed>"
  barrier_end
}

@test "badinput: unknown verbs and bad fields get ERR BADREQUEST and a close" {
  barrier_begin verbs
  run -0 wire --hold 3 'HELLO v=2 host=n1 pid=1' 'FROB x=1'
  assert_line --index 1 "ERR BADREQUEST :unknown request 'FROB'; see docs/protocol.md"
  assert_line --index 2 "<closed>"
  local bad
  for bad in 'ARRIVE name=a/b scope=default id=x n=3 rank=0 chief=0' \
             'ARRIVE scope=default id=x n=3 rank=0 chief=0' \
             'arrive name=verbs scope=default id=x n=3 rank=2 chief=0' \
             $'ABORT scope=default name=verbs :bad\x01text' \
             '' \
             'PING extra=fields=here' \
             'STATUS scope=default name=verbs detail=1 :x'"$(head -c 2000 /dev/zero | tr '\0' y)"; do
    run -0 wire --hold 3 'HELLO v=2 host=n1 pid=1' "$bad"
    assert_line --index 1 --regexp '^ERR BADREQUEST :'
    assert_line --index 2 "<closed>"
  done
  # A first line that is not HELLO, whatever it is, gets HANDSHAKE (docs/protocol.md).
  for bad in 'FROB x=1' 'hello v=1' '' 'GET / HTTP/1.1'; do
    run -0 wire --hold 3 "$bad"
    assert_line --index 0 "ERR HANDSHAKE :the first line must be HELLO v=2 (see docs/protocol.md)"
    assert_line --index 1 "<closed>"
  done
  # AUTH to a host that does not authenticate: told so.
  run -0 wire --hold 3 'HELLO v=2 host=n1 pid=1' "AUTH proof=$(head -c 32 /dev/zero | tr '\0' a)"
  assert_line --index 1 "ERR BADREQUEST :this host does not authenticate: send no AUTH"
  assert_line --index 2 "<closed>"
  # A second ARRIVE on one connection.
  run -0 wire --hold 3 'HELLO v=2 host=n1 pid=1' 'ARRIVE name=other scope=default id=o1 n=5 rank=0 chief=0' \
    'ARRIVE name=other2 scope=default id=o2 n=5 rank=0 chief=0'
  assert_line --index 1 --regexp '^WAITING name=other gen=1 arrived=1 n=5'
  assert_line --index 2 "ERR BADREQUEST :one ARRIVE or DECIDE per connection"
  assert_line --index 3 "<closed>"
  # None of it touched the barrier: the ABORT above was refused, not carried out.
  run -0 "$TFB" status --name verbs --json
  assert_output --partial '"state": "open"'
  assert_output --partial '"arrived": 2,'
  barrier_end
}

@test "badinput: text that is not UTF-8 gets ERR BADREQUEST, and a --state-dir host does not crash journaling it" {
  # A DECIDE with the message $'\xff' was accepted, and journaling it threw
  # (nlohmann type_error 316): the host aborted (exit 134).
  start_host --state-dir "$BATS_TEST_TMPDIR/state"
  RSS0=$(rss_kb)
  barrier_begin utf
  local bad
  for bad in $'\xff' $'a\xc3' $'\xed\xa0\x80' $'\xc0\xaf' $'\xc2\x9b2J'; do
    run -0 wire --hold 3 'HELLO v=2 host=n1 pid=1' "DECIDE scope=default id=d1 verdict=stop name=utf wait=0 :$bad"
    assert_line --index 1 --regexp '^ERR BADREQUEST :trailing text (is not valid UTF-8 \(byte \\x[0-9a-f]{2} at [0-9]+\)|holds a control character \(U\+009B at byte 0\); use one line of printable text)$'
    assert_line --index 2 "<closed>"
    run -0 wire --hold 3 'HELLO v=2 host=n1 pid=1' "ABORT scope=default name=utf :$bad"
    assert_line --index 1 --regexp '^ERR BADREQUEST :'
  done
  # Real UTF-8 passes, through the journal too: rank 2 arrives with the verdict.
  run -0 timeout 20 "$TFB" decide continue --name utf --n 3 --rank 2 --message 'héllo ✓ 🎉'
  wait "$P0"
  wait "$P1"
  host_healthy
  assert_equal "$(cat r0.out)" 'héllo ✓ 🎉'
  assert_equal "$(cat r1.out)" 'héllo ✓ 🎉'
  grep -q 'héllo ✓ 🎉' "$BATS_TEST_TMPDIR/state/journal"
  # And the command line says what is wrong before anything is sent.
  run -2 "$TFB" decide stop --name utf -m $'\xff'
  assert_output --partial 'the message is not valid UTF-8 (byte \xff at 0)'
  run -2 "$TFB" abort --name utf --reason $'tab\there'
  assert_output --partial 'the reason holds a control character (\x09 at byte 3)'
}
