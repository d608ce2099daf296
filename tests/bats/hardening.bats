#!/usr/bin/env bats
# Issue #19: what another local user (uid tfbtest, made by `scripts/deps test`)
# could plant or forge, and what tfbarrier does about it. Each test fails on
# the code before its fix.
load helpers

setup() {
  setup_common
  cd "$BATS_TEST_TMPDIR" || return
  id tfbtest >/dev/null 2>&1 || skip "no user tfbtest: run scripts/deps test"
}
teardown() {
  teardown_common
  [ -z "${SELF_PORT:-}" ] || stop_self_started_on_port "$SELF_PORT"
  [ -z "${SELF_PORT2:-}" ] || stop_self_started_on_port "$SELF_PORT2"
  [ -z "${OTHER_PID:-}" ] || { kill "$OTHER_PID" 2>/dev/null; wait "$OTHER_PID" 2>/dev/null || :; }
  teardown_other_uid
}

# stop_self_started_on_port PORT: ends the self-started host listening on
# 127.0.0.1:PORT (found with ss: its log may be what the test refused).
stop_self_started_on_port() {
  local pid
  pid=$(ss -Htlnp "sport = :$1" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
  [ -n "$pid" ] || return 0
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--self-started" || return 0
  kill "$pid"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}

@test "secret --force replaces a planted symlink instead of writing through it" {
  mkdir -m 700 d
  echo precious >victim
  ln -s "$PWD/victim" d/secret
  run -0 "$TFB" secret --file d/secret --force
  [ "$(cat victim)" = precious ]
  [ -f d/secret ]
  [ ! -L d/secret ]
  run stat -c %a d/secret
  assert_output 600
}

@test "a secret file that is a symlink is refused by name" {
  mkdir -m 700 d
  "$TFB" secret --file d/real >/dev/null
  ln -s "$PWD/d/real" d/link
  run -77 "$TFB" status --secret-file d/link --addr 127.0.0.1:1 --connect-timeout 1s
  assert_output --partial "is a symbolic link"
}

@test "root does not take another user's 0600 file as its secret" {
  mkdir -m 755 theirs
  "$TFB" secret --file theirs/secret >/dev/null
  chown tfbtest theirs/secret
  run -77 "$TFB" status --secret-file theirs/secret --addr 127.0.0.1:1 --connect-timeout 1s
  assert_output --partial "belongs to uid $(id -u tfbtest), not to you"
}

@test "secret with HOME unset goes to the password database's home, never /tmp" {
  local home
  home=$(getent passwd tfbtest | cut -d: -f6)
  [ "$home" != /tmp ]
  other_uid_tfb tfbtest  # a copy: tfbtest may not enter the checkout (a 0700 `mktemp -d` clone)
  run env -u HOME -u TFBARRIER_SECRET_FILE runuser -u tfbtest -- "$OTHER_TFB" secret
  refute_output --partial "/tmp/.tfbarrier"
  assert_output --partial "cannot create the directory $home"
}

@test "a request that gives a key twice is refused with BADREQUEST" {
  start_host
  run -0 /usr/bin/python3 "$BATS_TEST_DIRNAME/../faults/wire.py" "$TFBARRIER_ADDR" --hold 2 \
    'HELLO v=2 host=n1 pid=1' 'ARRIVE name=a scope=default id=x n=2 n=1 rank=0'
  assert_output --partial "ERR BADREQUEST"
  assert_output --partial "the key n is given twice"
  run -0 "$TFB" status --name a
  assert_output --partial "no barrier"
}

@test "serve --state-dir refuses a directory others can write (a planted journal would forge verdicts)" {
  mkdir -m 777 shared
  chmod 777 shared
  run -2 timeout 20 "$TFB" serve --listen 127.0.0.1:0 --state-dir shared
  assert_output --partial "can be changed by others (mode 0777)"
}

@test "serve --state-dir refuses a directory of another user" {
  mkdir -m 700 theirs
  chown tfbtest theirs
  run -2 timeout 20 "$TFB" serve --listen 127.0.0.1:0 --state-dir theirs
  assert_output --partial "belongs to uid $(id -u tfbtest)"
}

@test "a planted journal.tmp symlink is not followed, and a bad journal line names FILE:LINE" {
  mkdir -m 700 state
  echo precious >victim
  ln -s "$PWD/victim" state/journal.tmp
  start_host --state-dir state
  run -0 timeout 20 "$TFB" wait --name j --n 1
  [ "$(cat victim)" = precious ]
  kill "$HOST_PID"
  wait "$HOST_PID" || true
  printf '%s\n' '{"t":"abort","scope":"default","name":"x","gen":1,"message":"ok"}' \
    '{"t":"abort","scope":"default","name":"y","gen":0,"message":"bad"}' >>state/journal
  run -2 timeout 20 "$TFB" serve --listen 127.0.0.1:0 --state-dir state
  assert_output --partial "state/journal:"
  assert_output --partial "fix or remove the line"
}

@test "a self-started host logs to a private directory, and not through a planted symlink" {
  local port log victim=$BATS_TEST_TMPDIR/victim
  port=$(free_port)
  SELF_PORT=$port
  log=$HOME/.tfbarrier/serve-$(hostname -s).log
  echo precious >"$victim"
  mkdir -m 700 "$HOME/.tfbarrier"
  ln -s "$victim" "$log"
  run -0 timeout 30 env TFBARRIER_PORT="$port" "$TFB" wait --name s --n 1 --connect-timeout 10s
  assert_output --partial "starting one here (log: $log)"
  [ "$(cat "$victim")" = precious ]
  stop_self_started_on_port "$port"
  rm "$log"
  run -0 timeout 30 env TFBARRIER_PORT="$port" "$TFB" wait --name s --n 1 --connect-timeout 10s
  [ -f "$log" ]
  [ ! -L "$log" ]
  run stat -c %a "$HOME/.tfbarrier" "$log"
  assert_output $'700\n600'
  grep -q "listening on 127.0.0.1:$port" "$log"
  stop_self_started_on_port "$port"
}

@test "status and status --json answer over 20,000 barriers (a reply over 1 MiB is not a client that does not read)" {
  start_host
  /usr/bin/python3 - "$TFBARRIER_ADDR" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)))
s.sendall(b"HELLO v=2 host=t pid=1\n")
n = 20000
for start in range(0, n, 1000):
    s.sendall(b"".join(b"ABORT scope=default name=b%05d :a reason of some length for the reply\n" % i
                       for i in range(start, start + 1000)))
got, buf = 0, b""
while got < n + 1:
    data = s.recv(1 << 16)
    if not data:
        sys.exit("the host closed the connection after %d replies" % got)
    buf += data
    got = buf.count(b"\n")
PY
  run -0 timeout 60 "$TFB" status
  [ "${#lines[@]}" -gt 20000 ]
  run -0 timeout 60 "$TFB" status --json
  /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["barriers"]) == 20000, len(d["barriers"])' <<<"$output"
}

@test "serve --max-barriers: past the limit a new barrier gets a clear error and exit 69, a known one still works" {
  start_host --max-barriers 3
  local i
  for i in 1 2 3; do run -0 "$TFB" abort --name "b$i" --reason r; done
  run -69 "$TFB" abort --name b4 --reason r
  assert_output --partial "the host holds 3 barriers, its limit (serve --max-barriers)"
  run -0 "$TFB" abort --name b2 --reason again
  run -69 timeout 20 "$TFB" wait --name b5 --n 1
  assert_output --partial "--max-barriers"
}

# other_host: another user (tfbtest) starts a host on loopback first; OTHER_ADDR is where.
other_host() {
  other_uid_tfb tfbtest
  local out=$BATS_TEST_TMPDIR/other.out
  runuser -u tfbtest -- env HOME=/ "$OTHER_TFB" serve --listen 127.0.0.1:0 >"$out" 2>"$BATS_TEST_TMPDIR/other.log" 3>&- &
  OTHER_PID=$!
  for _ in $(seq 200); do
    grep -q '^TFBARRIER_ADDR=' "$out" && break
    sleep 0.05
  done
  OTHER_ADDR=$(sed -n 's/^TFBARRIER_ADDR=//p' "$out")
  [ -n "$OTHER_ADDR" ]
}

@test "a participant without a secret takes no verdict from another user's host on loopback, and tells it nothing" {
  other_host
  run -77 timeout 20 "$TFB" wait --name epoch1 --n 2 --rank 1 --addr "$OTHER_ADDR"
  assert_output --partial "is run by uid $(id -u tfbtest) (tfbtest), not by you"
  run -77 timeout 20 "$TFB" decide stop --name epoch1 --n 2 --rank 0 --message secret-plan --addr "$OTHER_ADDR"
  # The stranger's host never heard of the barrier, nor of the message.
  run grep -E 'epoch1|secret-plan|arrive' "$BATS_TEST_TMPDIR/other.log"
  assert_output ""
}

@test "two users with default settings never meet: each starts a host of their own, on their own port" {
  other_uid_tfb tfbtest
  local mine theirs home p pid
  mine=$((30000 + $(id -u) % 2768))
  theirs=$((30000 + $(id -u tfbtest) % 2768))
  [ "$mine" != "$theirs" ]
  for p in $mine $theirs; do
    if ss -Htln "sport = :$p" | grep -q .; then skip "port $p is taken on this machine"; fi
  done
  SELF_PORT=$mine
  SELF_PORT2=$theirs
  home=$BATS_TEST_TMPDIR/theirs
  mkdir -m 0700 "$home"
  chown tfbtest "$home"
  run -0 timeout 30 env -i HOME="$BATS_TEST_TMPDIR" PATH=/usr/bin:/bin "$TFB" wait --name e --n 1
  run -0 timeout 30 runuser -u tfbtest -- env -i HOME="$home" PATH=/usr/bin:/bin "$OTHER_TFB" wait --name e --n 1
  # Two hosts, each run by its user, on that user's port.
  pid=$(ss -Htlnp "sport = :$mine" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
  assert_equal "$(ps -o user= -p "$pid")" "$(id -un)"
  pid=$(ss -Htlnp "sport = :$theirs" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
  assert_equal "$(ps -o user= -p "$pid")" tfbtest
}

@test "a participant takes its own user's host on loopback, as before" {
  start_host
  run -0 timeout 20 "$TFB" wait --name own --n 1
}
