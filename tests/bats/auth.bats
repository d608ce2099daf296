#!/usr/bin/env bats
# Authentication: shared secrets, a fake host, replays, MUNGE and another uid.

setup() {
  load helpers
  setup_common
  SECRET=$BATS_TEST_TMPDIR/secret
  "$TFB" secret --file "$SECRET" >/dev/null
}
teardown() {
  teardown_common
  stop_munged_if_ours
  [ -z "${OTHER_DIR:-}" ] || rm -rf "$OTHER_DIR"
}

@test "tfbarrier secret writes a 0600 file and refuses to overwrite it without --force" {
  run stat -c %a "$SECRET"
  assert_output 600
  run -2 "$TFB" secret --file "$SECRET"
  assert_output --partial "exists already; pass --force"
  run -0 "$TFB" secret --file "$SECRET" --force
}

@test "participants with the host's secret are released" {
  start_host --secret-file "$SECRET"
  run -0 timeout 20 "$TFB" wait --name a --n 1 --secret-file "$SECRET"
  grep -q "authentication: shared secret" "$HOST_LOG"
}

@test "a participant without the secret is refused with exit 77 and told what to do" {
  start_host --secret-file "$SECRET"
  run -77 timeout 20 "$TFB" wait --name a --n 1
  assert_output --partial "requires authentication"
  assert_output --partial "--secret-file"
}

@test "a participant with a different secret is refused with exit 77" {
  start_host --secret-file "$SECRET"
  "$TFB" secret --file "$BATS_TEST_TMPDIR/other" >/dev/null
  run -77 timeout 20 "$TFB" wait --name a --n 1 --secret-file "$BATS_TEST_TMPDIR/other"
  assert_output --partial "could not prove it knows the secret"
}

@test "a secret file that others can read is refused, with the chmod that fixes it" {
  chmod 644 "$SECRET"
  run -77 "$TFB" serve --listen 127.0.0.1:0 --secret-file "$SECRET"
  assert_output --partial "chmod 600"
  run -77 timeout 20 "$TFB" wait --name a --n 1 --secret-file "$SECRET" --connect-timeout 1s
  assert_output --partial "can be read by others"
}

@test "a participant with a secret refuses a host that does not authenticate (a fake host)" {
  start_host --insecure
  run -77 timeout 20 "$TFB" wait --name a --n 1 --secret-file "$SECRET"
  assert_output --partial "refusing a host that could be a fake"
}

@test "the default secret file in the home directory is used by host and participants alike" {
  "$TFB" secret >/dev/null
  [ -f "$HOME/.tfbarrier/secret" ]
  start_host
  grep -q "authentication: shared secret" "$HOST_LOG"
  run -0 timeout 20 "$TFB" wait --name a --n 1
}

@test "a replayed handshake is refused" {
  start_host --secret-file "$SECRET"
  run -0 /usr/bin/python3 "$BATS_TEST_DIRNAME/../tools/replay.py" 127.0.0.1 "${TFBARRIER_ADDR##*:}" "$SECRET"
  assert_line --partial "first: PONG mac="
  assert_line --partial "replayed: ERR AUTH :wrong proof"
}

# start_proxy FROM TO: tests/tools/rewrite_proxy.py in front of the host,
# rewriting each client's HELLO; sets PROXY_ADDR and PROXY_LOG.
start_proxy() {
  PROXY_LOG=$BATS_TEST_TMPDIR/proxy.log
  /usr/bin/python3 "$BATS_TEST_DIRNAME/../tools/rewrite_proxy.py" 127.0.0.1 "$HOST_PORT" "$1" "$2" \
    >"$BATS_TEST_TMPDIR/proxy.out" 2>"$PROXY_LOG" 3>&- &
  BG_PIDS+=($!)
  local i
  for i in $(seq 100); do grep -q '^PORT=' "$BATS_TEST_TMPDIR/proxy.out" && break; sleep 0.05; done
  PROXY_ADDR=127.0.0.1:$(sed -n 's/^PORT=//p' "$BATS_TEST_TMPDIR/proxy.out")
}

@test "a proxy that rewrites keepalive= in HELLO is refused (protocol 2 binds both HELLO lines)" {
  start_host --secret-file "$SECRET"
  # The same proxy, rewriting nothing: the participant is released through it.
  start_proxy 'keepalive=1234567' 'keepalive=1234567'
  run -0 timeout 20 env TFBARRIER_ADDR="$PROXY_ADDR" "$TFB" wait --name a --n 1 --secret-file "$SECRET"
  # Protocol 1 let this make the host withdraw the participant as unresponsive over and over.
  start_proxy 'keepalive=[0-9]+' 'keepalive=100'
  run -77 timeout 20 env TFBARRIER_ADDR="$PROXY_ADDR" "$TFB" wait --name b --n 2 --rank 0 \
    --secret-file "$SECRET" --keepalive 5s --connect-timeout 2s
  assert_output --partial "the handshake was altered on the way"
  grep -q "rewrote: HELLO v=2 .*keepalive=5000 .* -> HELLO v=2 .*keepalive=100 " "$PROXY_LOG"
  # Nothing reached the barriers: no member of b.
  run -0 timeout 20 "$TFB" status --secret-file "$SECRET"
  refute_output --partial " b "
  ! grep -q "arrive.*name=b\|b: .*arrived" "$HOST_LOG"
}

@test "a line with a bad MAC after the handshake ends the connection" {
  start_host --secret-file "$SECRET"
  run /usr/bin/python3 - 127.0.0.1 "${TFBARRIER_ADDR##*:}" "$SECRET" <<'PY'
import hashlib, hmac, socket, sys
host, port, sf = sys.argv[1], int(sys.argv[2]), sys.argv[3]
k = open(sf).read().strip().encode(); cn = "ab" * 16
s = socket.create_connection((host, port), timeout=5); f = s.makefile("rwb")
hello = f"HELLO v=2 host=t pid=1 nonce={cn}"
f.write(f"{hello}\n".encode()); f.flush()
reply = f.readline().decode().rstrip("\n")
hn = dict(t.split("=", 1) for t in reply.split()[1:])["nonce"]
# protocol 2: the proof covers both HELLO lines (the reply's without its proof=)
t = hashlib.sha256(f"{hello}\n{reply[:reply.index(' proof=')]}\n".encode()).hexdigest()
p = hmac.new(k, f"tfbarrier-client-proof\n{cn}\n{hn}\n{t}".encode(), hashlib.sha256).hexdigest()
f.write(f"AUTH proof={p}\nSTATUS mac={'0'*32} scope=*\n".encode()); f.flush()
print(f.readline().decode().strip())
PY
  assert_output --regexp "^ERR (mac=[0-9a-f]+ )?AUTH :a line without a valid MAC"
}

@test "the handshake timeout names what is missing: HELLO, or AUTH after HELLO" {
  # Both connections wait out the host's 10 s handshake timeout side by side.
  start_host --secret-file "$SECRET"
  run /usr/bin/python3 - 127.0.0.1 "${TFBARRIER_ADDR##*:}" <<'PY'
import socket, sys, threading
host, port = sys.argv[1], int(sys.argv[2])
got = {}
def one(key, hello):
    s = socket.create_connection((host, port), timeout=20); f = s.makefile("rwb")
    if hello:
        f.write(b"HELLO v=2 host=t pid=1 nonce=" + b"ab" * 16 + b"\n"); f.flush()
        f.readline()  # the host's HELLO
    got[key] = f.readline().decode().strip()
ts = [threading.Thread(target=one, args=(k, h)) for k, h in (("silent", False), ("hello", True))]
for t in ts: t.start()
for t in ts: t.join()
print("silent:", got["silent"]); print("hello:", got["hello"])
PY
  assert_success
  assert_line "silent: ERR TIMEOUT :no HELLO in time"
  assert_line "hello: ERR TIMEOUT :no AUTH in time"
  wait_for_log "no AUTH within the handshake timeout"
}

@test "serve beyond loopback without a secret makes one on first use (or uses MUNGE)" {
  run -0 timeout 10 "$TFB" serve --listen 0.0.0.0:0 --idle-exit 200ms --no-munge
  assert_output --partial "created the shared secret $HOME/.tfbarrier/secret"
  run stat -c %a "$HOME/.tfbarrier/secret"
  assert_output 600
}

@test "a serve beyond loopback that cannot listen leaves no secret behind, and clients of a running host still work" {
  # It used to write ~/.tfbarrier/secret before binding: from then on every
  # client refused the hosts that run without one (exit 77).
  start_host  # 127.0.0.1, no secret
  local port=${TFBARRIER_ADDR##*:}
  run -69 timeout 10 "$TFB" serve --listen "0.0.0.0:$port" --no-munge  # the port is taken
  assert_output --partial "0.0.0.0:$port"
  refute_output --partial "created the shared secret"
  [ ! -e "$HOME/.tfbarrier/secret" ]
  run -69 timeout 10 "$TFB" serve --daemon --listen "0.0.0.0:$port" --no-munge
  [ ! -e "$HOME/.tfbarrier/secret" ]
  run -0 timeout 10 "$TFB" wait --name still --n 1
}

@test "serve on a name that does not resolve: not taken for loopback, told before any host starts, and what to do" {
  # Taken for loopback, it needed no secret; had the name resolved by the time
  # the host bound, that host would have served beyond loopback unauthenticated.
  local said="cannot listen on no-such-host.invalid:0: the name \"no-such-host.invalid\" does not resolve here"
  run -69 --separate-stderr timeout 30 "$TFB" serve --listen no-such-host.invalid:0 --no-munge
  [[ $stderr == *"$said"* ]] || { echo "$stderr"; false; }
  [[ $stderr == *"127.0.0.1:PORT for this machine only"* ]]
  # --daemon: said on the caller's stderr, before it forks a host.
  run -69 --separate-stderr timeout 30 "$TFB" serve --daemon --listen no-such-host.invalid:0 --no-munge
  [[ $stderr == *"$said"* ]] || { echo "$stderr"; false; }
  [[ $stderr != *"host pid"* ]]
  [ ! -e "$HOME/.tfbarrier/secret" ]
  # --metrics: the same, not "loopback, no token needed".
  run -69 --separate-stderr timeout 30 "$TFB" serve --listen 127.0.0.1:0 --metrics no-such-host.invalid:0
  [[ $stderr == *"--metrics no-such-host.invalid:0: the name \"no-such-host.invalid\" does not resolve here"* ]] ||
    { echo "$stderr"; false; }
}

@test "serve --daemon beyond loopback says on the caller's stderr that it created the secret" {
  run -0 timeout 10 "$TFB" serve --daemon --listen 0.0.0.0:0 --idle-exit 500ms --no-munge \
    --log "$BATS_TEST_TMPDIR/daemon.log"
  assert_output --partial "tfbarrier: created the shared secret $HOME/.tfbarrier/secret (mode 0600)"
  assert_output --partial "TFBARRIER_ADDR="
  run stat -c %a "$HOME/.tfbarrier/secret"
  assert_output 600
}

# start_munge_host: a host beyond loopback, which authenticates with MUNGE;
# sets MADDR (on 127.0.0.1) and MLOG.
start_munge_host() {
  MLOG=$BATS_TEST_TMPDIR/mhost.log
  "$TFB" serve --listen 0.0.0.0:0 >"$BATS_TEST_TMPDIR/mhost.out" 2>"$MLOG" 3>&- &
  HOST_PIDS+=($!)
  local i
  for i in $(seq 100); do grep -q TFBARRIER_ADDR "$BATS_TEST_TMPDIR/mhost.out" && break; sleep 0.05; done
  MADDR=127.0.0.1:$(sed -n 's/.*://p' "$BATS_TEST_TMPDIR/mhost.out")
  grep -q "authentication: MUNGE" "$MLOG"
}

# wait_for_arrival NAME RANK: until the MUNGE host logged that arrival.
wait_for_arrival() {
  local i
  for i in $(seq 100); do grep -q "arrive $1#1: rank $2 " "$MLOG" && return 0; sleep 0.1; done
  cat "$MLOG" >&2
  return 1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

@test "a flood of MUNGE HELLOs does not hold up a round: each gets its credential or ERR BUSY" {
  start_munged
  start_munge_host
  TFBARRIER_ADDR=$MADDR timeout 60 "$TFB" wait --name r --n 2 --rank 0 >"$BATS_TEST_TMPDIR/a.out" \
    2>"$BATS_TEST_TMPDIR/a.err" 3>&- &
  local a=$!
  BG_PIDS+=("$a")
  wait_for_arrival r 0
  # 600 connections, each HELLO with a nonce: a credential from munged each, more
  # than 4 at once and 256 waiting can hold. They are read once all are sent.
  /usr/bin/python3 - "$MADDR" 600 >"$BATS_TEST_TMPDIR/flood.out" 2>"$BATS_TEST_TMPDIR/flood.err" 3>&- <<'PY' &
import secrets, socket, sys
host, port = sys.argv[1].rsplit(":", 1)
socks = []
for i in range(int(sys.argv[2])):
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(f"HELLO v=2 host=flood pid={i + 1} nonce={secrets.token_hex(16)}\n".encode())
    socks.append(s)
counts = {}
for s in socks:
    words = s.makefile("rb").readline().decode().split()
    kind = " ".join(words[:2]) if words[:1] == ["ERR"] else " ".join(w for w in words if w.startswith("auth="))
    counts[kind or "nothing"] = counts.get(kind or "nothing", 0) + 1
for k, v in sorted(counts.items()):
    print(f"{k}: {v}")
PY
  local flood=$!
  BG_PIDS+=("$flood")
  local t0
  t0=$(now_ms)
  run -0 timeout 30 env TFBARRIER_ADDR="$MADDR" "$TFB" wait --name r --n 2 --rank 1
  echo "the second participant took $(($(now_ms) - t0)) ms during the flood" >&3
  [ $(($(now_ms) - t0)) -lt 10000 ]
  wait "$a"
  wait "$flood" || { cat "$BATS_TEST_TMPDIR/flood.out" "$BATS_TEST_TMPDIR/flood.err" >&3; false; }
  cat "$BATS_TEST_TMPDIR/flood.out" >&3
  # Every flood connection was answered: a MUNGE greeting, or ERR BUSY.
  run awk -F': ' '$1 == "auth=munge" || $1 == "ERR BUSY" {n += $2} END {print n}' "$BATS_TEST_TMPDIR/flood.out"
  assert_output 600
}

@test "a stopped munged: a MUNGE client gets ERR BUSY within about 5 s, retries until its --connect-timeout, and a participant already waiting is answered" {
  start_munged
  [ -n "${MUNGED_STARTED:-}" ] || skip "munged was running before the test: it stops only a munged it started"
  start_munge_host
  # A participant that authenticated before munged stops, and PINGs every second:
  # were the host's thread inside libmunge, it would hear no PONG for 3.5 s.
  TFBARRIER_ADDR=$MADDR timeout 60 "$TFB" wait --name r --n 2 --rank 0 --keepalive 1s \
    >"$BATS_TEST_TMPDIR/a.out" 2>"$BATS_TEST_TMPDIR/a.err" 3>&- &
  local a=$!
  BG_PIDS+=("$a")
  wait_for_arrival r 0
  local munged
  munged=$(cat /run/munge/munged.pid)
  [ "$(cat "/proc/$munged/comm")" = munged ]
  kill -STOP "$munged"
  local t0 took
  t0=$(now_ms)
  # Told BUSY after 5 s, the client tries again until its budget (7 s) is spent.
  run -69 timeout 30 env TFBARRIER_ADDR="$MADDR" "$TFB" wait --name other --n 1 --connect-timeout 7s
  took=$(($(now_ms) - t0))
  echo "the MUNGE client gave up after $took ms" >&3
  assert_output --partial "stayed busy for 7s (ERR BUSY: munged did not answer the host within 5 s"
  [ "$took" -ge 6500 ]
  [ "$took" -lt 12000 ]
  grep -q "warning: munged did not answer within 5 s" "$MLOG"
  # 300 more: 4 calls in flight and 256 waiting; the other 40 are told at once.
  run -0 timeout 30 /usr/bin/python3 - "$MADDR" 300 <<'PY'
import secrets, socket, sys
host, port = sys.argv[1].rsplit(":", 1)
socks = [socket.create_connection((host, int(port)), timeout=20) for _ in range(int(sys.argv[2]))]
for i, s in enumerate(socks):
    s.sendall(f"HELLO v=2 host=flood pid={i + 1} nonce={secrets.token_hex(16)}\n".encode())
answers = [s.makefile("rb").readline().decode().strip() for s in socks]
full = sum("too many MUNGE calls waiting" in a for a in answers)
late = sum("munged did not answer the host within 5 s" in a for a in answers)
print(f"full: {full}, timed out: {late}, answered: {full + late}")
PY
  echo "$output" >&3
  assert_output --partial "answered: 300"
  # The bound, not a count: 256 wait for a thread, and at most 4 more are in
  # flight (fewer: the first client's attempts still hold some of the 4, and
  # how many, and how fast the queue fills, is timing's), so 40 to 44 are told
  # at once.
  local full
  full=$(sed -n 's/^full: \([0-9]*\),.*/\1/p' <<<"$output")
  [ -n "$full" ]
  [ "$full" -ge 40 ]
  [ "$full" -le 44 ]
  kill -CONT "$munged"
  run -0 timeout 30 env TFBARRIER_ADDR="$MADDR" "$TFB" wait --name r --n 2 --rank 1
  wait "$a"
  run cat "$BATS_TEST_TMPDIR/a.err"
  refute_output --partial "stopped answering"
  refute_output --partial "reconnecting"
}

@test "with munged running, a host beyond loopback accepts its own uid and refuses another uid" {
  [ "$(id -u)" -eq 0 ] || skip "needs root to start munged and to run as another user"
  start_munged
  id tfbtest >/dev/null 2>&1 || skip "no user tfbtest (scripts/deps test creates it)"
  other_uid_tfb tfbtest
  "$TFB" serve --listen 0.0.0.0:0 >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/log" 3>&- &
  HOST_PIDS+=($!)
  for i in $(seq 100); do grep -q TFBARRIER_ADDR "$BATS_TEST_TMPDIR/out" && break; sleep 0.05; done
  port=$(sed -n 's/.*://p' "$BATS_TEST_TMPDIR/out")
  grep -q "authentication: MUNGE" "$BATS_TEST_TMPDIR/log"
  run -0 timeout 20 env TFBARRIER_ADDR=127.0.0.1:$port "$TFB" wait --name m --n 1
  run -77 timeout 20 runuser -u tfbtest -- env HOME=/tmp TFBARRIER_ADDR=127.0.0.1:$port "$OTHER_TFB" wait --name m --n 1
  assert_output --partial "MUNGE"
}

@test "another uid runs its own copy of tfbarrier even when the build lies where it cannot enter" {
  [ "$(id -u)" -eq 0 ] || skip "needs root to run as another user"
  id tfbtest >/dev/null 2>&1 || skip "no user tfbtest (scripts/deps test creates it)"
  # The build in a 0700 directory, as in a clone in root's home.
  local private=$BATS_TEST_TMPDIR/private
  mkdir -m 0700 "$private"
  cp "$TFB" "$private/tfbarrier"
  run -126 runuser -u tfbtest -- env "$private/tfbarrier" --version  # env: 126, cannot run it
  TFB=$private/tfbarrier other_uid_tfb tfbtest
  run -0 runuser -u tfbtest -- "$OTHER_TFB" --version
  assert_output --partial tfbarrier
  run stat -c '%U %a' "$OTHER_TFB" "$OTHER_DIR"
  assert_output "root 755
root 711"
}
