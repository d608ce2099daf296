#!/usr/bin/env bats
# Participants against a program that is not quite a tfbarrier host: it
# greets, then falls silent or closes, time after time; or it greets with
# another protocol version or an authentication this client does not know.
# None of them may keep a participant for ever: the host must answer the
# request within --connect-timeout (one budget across reconnects), and a
# greeting that cannot be right is a protocol error (70) at once.
load helpers

setup() { setup_common; }
teardown() { teardown_common; }

# fake_host MODE GREETING: a Python server on 127.0.0.1:0 that answers each
# connection's first line with GREETING, then (MODE) keeps silent, closes, or
# (release-on-leave) says WAITING to an ARRIVE and RELEASE to a LEAVE.
# Sets FAKE_ADDR; the server is stopped by teardown (BG_PIDS).
fake_host() {
  local out=$BATS_TEST_TMPDIR/fake.out
  timeout 60 /usr/bin/python3 -u - "$1" "$2" >"$out" 2>"$BATS_TEST_TMPDIR/fake.err" 3>&- <<'PY' &
import socket, sys, threading
mode, greeting = sys.argv[1], sys.argv[2].encode() + b"\n"
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(64)
print(f"FAKE_ADDR=127.0.0.1:{srv.getsockname()[1]}", flush=True)
def serve(c):
    with c:
        f = c.makefile("rb")
        if not f.readline():
            return
        c.sendall(greeting)
        if mode == "keep":
            while f.readline():  # reads the request and the pings, answers none
                pass
        elif mode == "release-on-leave":  # counts the arrival; a LEAVE finds the round released
            for line in f:
                if line.startswith(b"ARRIVE"):
                    c.sendall(b"WAITING name=f gen=1 arrived=1 n=2\n")
                elif line.startswith(b"STATUS"):  # sent only once the client has read WAITING
                    print("status", flush=True)
                elif line.startswith(b"LEAVE"):
                    c.sendall(b"RELEASE name=f gen=1 verdict=stop\n")
                    return
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
  BG_PIDS+=("$!")
  fake_addr_from "$out"
}

@test "a host that greets and then says nothing: wait exits 69 within --connect-timeout, --timeout or not" {
  fake_host keep "HELLO v=2 server=fake auth=none"
  SECONDS=0
  run --separate-stderr timeout 20 "$TFB" wait --name f --n 2 --addr "$FAKE_ADDR" --timeout 30s \
    --connect-timeout 2s --keepalive 500ms
  [ "$status" -eq 69 ]
  [ "$SECONDS" -le 8 ]
  [[ $stderr == *"$FAKE_ADDR"* ]]
  [[ $stderr == *"within 2s"* ]]
}

@test "a host that greets and then closes, time after time: wait exits 69 within --connect-timeout" {
  fake_host close "HELLO v=2 server=fake auth=none"
  SECONDS=0
  run --separate-stderr timeout 20 "$TFB" wait --name f --n 2 --addr "$FAKE_ADDR" --connect-timeout 2s
  [ "$status" -eq 69 ]
  [ "$SECONDS" -le 8 ]
  [[ $stderr == *"it closed the connection"* ]]
  [[ $stderr == *"cannot reach the host at $FAKE_ADDR within 2s"* ]]
}

@test "decide and status against a host that greets and closes exit 69 too" {
  fake_host close "HELLO v=2 server=fake auth=none"
  run timeout 20 "$TFB" decide stop --name f --addr "$FAKE_ADDR" --connect-timeout 1s
  [ "$status" -eq 69 ]
  run timeout 20 "$TFB" status --addr "$FAKE_ADDR" --connect-timeout 1s
  [ "$status" -eq 69 ]
}

@test "a host of another protocol version: exit 70 at once, naming both versions" {
  fake_host keep "HELLO v=3 server=tfbarrier/9.0 auth=none"
  SECONDS=0
  run --separate-stderr timeout 20 "$TFB" wait --name f --n 2 --addr "$FAKE_ADDR" --timeout 30s
  [ "$status" -eq 70 ]
  [ "$SECONDS" -le 3 ]
  [[ $stderr == *"speaks protocol 3"* ]]
  [[ $stderr == *"speaks 2"* ]]
}

@test "a host of protocol 1 refuses this client: exit 70 at once, naming both versions and what to do" {
  # What a tfbarrier of protocol 1 answers a HELLO v=2, word for word.
  fake_host keep "ERR VERSION :this host speaks protocol version 1, the client asked for 2; use matching tfbarrier versions"
  SECONDS=0
  run --separate-stderr timeout 20 "$TFB" wait --name f --n 2 --addr "$FAKE_ADDR" --timeout 30s
  [ "$status" -eq 70 ]
  [ "$SECONDS" -le 3 ]
  [[ $stderr == *"refused this tfbarrier "*" (protocol version 2): this host speaks protocol version 1"* ]]
  [[ $stderr == *"run the same version of tfbarrier on the host and in the job"* ]]
}

@test "a host that asks for an authentication this client does not know: exit 70 at once" {
  fake_host keep "HELLO v=2 server=fake auth=weird"
  run --separate-stderr timeout 20 "$TFB" wait --name f --n 2 --addr "$FAKE_ADDR"
  [ "$status" -eq 70 ]
  [[ $stderr == *'authentication "weird"'* ]]
}

@test "a real host that answers keeps a participant waiting past --connect-timeout (the budget ends at WAITING)" {
  start_host
  spawn w "$TFB" wait --name real --n 2 --rank 1 --connect-timeout 1s --keepalive 200ms
  wait_arrived real 1
  still_running 2 w  # twice the connect budget, with pings answered
  run timeout 20 "$TFB" wait --name real --n 2 --rank 0
  [ "$status" -eq 0 ]
  expect_exits 0 w
}

@test "interrupted, and the round released before the host read the LEAVE: exit 130 all the same, saying so" {
  fake_host release-on-leave "HELLO v=2 server=fake auth=none"
  "$TFB" wait --name f --n 2 --addr "$FAKE_ADDR" --progress 100ms >"$BATS_TEST_TMPDIR/w.out" 2>"$BATS_TEST_TMPDIR/w.err" &
  local w=$! i
  for i in $(seq 200); do
    grep -q status "$BATS_TEST_TMPDIR/fake.out" && break
    sleep 0.05
  done
  kill -INT "$w"
  local rc=0
  wait "$w" || rc=$?
  cat "$BATS_TEST_TMPDIR/w.err"
  [ "$rc" -eq 130 ]
  grep -q "^tfbarrier: error: interrupted by SIGINT; barrier f (round 1) had released (verdict stop) before the host read the withdrawal" "$BATS_TEST_TMPDIR/w.err"
  [ ! -s "$BATS_TEST_TMPDIR/w.out" ]
}
