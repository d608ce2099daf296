#!/usr/bin/env bats
# Issue #30 item 2: every file tfbarrier writes goes through one opener
# (src/sys/private_files.h, files::open_in): never through a symlink, never into
# another user's file or one others can write, made 0600 (0644 where others
# must read). And what a client sends before it has authenticated reaches the
# log escaped and cut short. Run as root, with uid tfbtest as the other user.
load helpers

setup() {
  setup_common
  cd "$BATS_TEST_TMPDIR" || return
  echo precious >victim
  DAEMON_PID=
}
teardown() {
  [ -z "${DAEMON_PID:-}" ] || kill "$DAEMON_PID" 2>/dev/null || :
  teardown_common
}

# daemon_pid: the pid a `serve --daemon` printed in $output (to end it when a
# test that expected a refusal got a host).
daemon_pid() {
  DAEMON_PID=$(sed -n 's/^TFBARRIER_PID=\([0-9]*\);.*/\1/p' <<<"$output")
}

# theirs_0666 PATH: a file of uid tfbtest, mode 0666, that says "theirs".
theirs_0666() {
  id tfbtest >/dev/null 2>&1 || skip "no user tfbtest: run scripts/deps test"
  echo theirs >"$1"
  chown tfbtest "$1"
  chmod 0666 "$1"
}

@test "serve --log does not follow a planted symlink, in the foreground or with --daemon" {
  ln -s "$PWD/victim" host.log
  run -2 timeout 10 "$TFB" serve --listen 127.0.0.1:0 --log "$PWD/host.log"
  assert_output --partial "the log file $PWD/host.log is a symbolic link: refusing to follow it; remove it, or give another --log"
  run -2 timeout 10 "$TFB" serve --daemon --listen 127.0.0.1:0 --log "$PWD/host.log"
  daemon_pid
  assert_output --partial "the log file $PWD/host.log is a symbolic link: refusing to follow it"
  [ "$(cat victim)" = precious ]
  # A dangling one would otherwise make its target.
  ln -s "$PWD/made" dangling.log
  run -2 timeout 10 "$TFB" serve --listen 127.0.0.1:0 --log "$PWD/dangling.log"
  [ ! -e made ]
}

@test "root's host refuses a log file another user made 0666, and writes nothing to it" {
  mkdir -m 755 theirs
  theirs_0666 theirs/host.log
  chown tfbtest theirs
  run -2 timeout 10 "$TFB" serve --listen 127.0.0.1:0 --log "$PWD/theirs/host.log"
  assert_output --partial "the log file $PWD/theirs/host.log belongs to uid $(id -u tfbtest), not to you"
  assert_output --partial "give another --log"
  run -2 timeout 10 "$TFB" serve --daemon --listen 127.0.0.1:0 --log "$PWD/theirs/host.log"
  daemon_pid
  assert_output --partial "belongs to uid $(id -u tfbtest), not to you"
  [ "$(cat theirs/host.log)" = theirs ]
  run stat -c '%a %U' theirs/host.log
  assert_output "666 tfbtest"
}

@test "a log file of your own that others can write is refused with the chmod that fixes it" {
  install -m 0666 /dev/null open.log
  chmod 0666 open.log
  run -2 timeout 10 "$TFB" serve --listen 127.0.0.1:0 --log open.log
  assert_output --partial "the log file open.log can be changed by others (mode 0666); run \`chmod go-w open.log\`"
}

@test "serve --log makes its file 0600, in the foreground and with --daemon" {
  umask 022
  start_host --log "$PWD/fg.log"
  run stat -c %a fg.log
  assert_output 600
  run -0 timeout 10 "$TFB" serve --daemon --listen 127.0.0.1:0 --log "$PWD/bg.log"
  daemon_pid
  run stat -c %a bg.log
  assert_output 600
  grep -q "listening on" fg.log
}

@test "a malformed HELLO's bytes reach the log escaped and cut short, before any authentication" {
  "$TFB" secret --file secret >/dev/null
  start_host --log "$PWD/host.log" --secret-file secret
  local digits long
  digits=$(printf '9%.0s' $(seq 1000))
  long=$(printf 'x%.0s' $(seq 3000))
  /usr/bin/python3 - "$TFBARRIER_ADDR" "$digits" "$long" <<'PY'
import socket, sys
addr, digits, long = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
host, port = addr.rsplit(":", 1)
lines = [
    b"HELLO v=2 host=n pid=1 keepalive=" + digits,              # quoted back: 1000 bytes
    b"HELLO v=2 host=n pid=1 keepalive=" + digits + b"\x1b[2J",  # and an escape sequence
    b"HELLO v=2 host=n\x1b]0;owned\x07 pid=1",
    b"HELLO v=2 \x1b[31m=1 pid=1",
    b"HELLO v=2 host=n pid=1 :\x1b[2J\xc2\x9b31m\x9b\xe2\x80\xae",
    b"HELLO v=2 host=n pid=1 keepalive=" + long,
    b"HELLO v=2 host=n pid=1 " + long + b"=1",
    b"HELLO v=2 host=n pid=1 n=\xc2\x9b" + long[:1000],
    b"HELLO\x1b[2J v=2",
]
for line in lines:
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(line + b"\n")
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()
PY
  # Nine bad clients logged (each closes on its BADREQUEST or HANDSHAKE).
  local i
  for i in $(seq 100); do
    [ "$(grep -c 'bad client' host.log)" -ge 9 ] && break
    sleep 0.1
  done
  [ "$(grep -c 'bad client' host.log)" -ge 9 ]
  run grep -c $'\e' host.log
  assert_output 0
  run env LC_ALL=C grep -caP '[\x00-\x08\x0b-\x1f\x7f-\x9f]' host.log
  assert_output 0
  run awk 'length($0) > 300 { print NR ": " length($0) }' host.log
  assert_output ""
  grep -q 'keepalive=9999.*\.\.\.$' host.log
}

@test "serve --history-file does not write through a planted symlink" {
  mkdir -m 700 d
  ln -s "$PWD/victim" d/h.history
  start_host --history-file "$PWD/d/h.history"
  run -0 timeout 20 "$TFB" wait --name h --n 1
  kill "$HOST_PID"
  wait "$HOST_PID" || :
  [ "$(cat victim)" = precious ]
  [ -f d/h.history ] && [ ! -L d/h.history ]
  run stat -c %a d/h.history
  assert_output 600
}

@test "serve --metrics-textfile replaces a planted symlink instead of writing through it" {
  mkdir -m 700 d
  ln -s "$PWD/victim" d/m.prom
  start_host --metrics-textfile "$PWD/d/m.prom"
  local i
  for i in $(seq 100); do [ -L d/m.prom ] || break; sleep 0.1; done
  [ -f d/m.prom ] && [ ! -L d/m.prom ]
  [ "$(cat victim)" = precious ]
  run stat -c %a d/m.prom
  assert_output 644
}

@test "serve --state-dir refuses a journal that is a planted symlink, and leaves its target alone" {
  mkdir -m 700 state
  ln -s "$PWD/victim" state/journal
  run -2 timeout 10 "$TFB" serve --listen 127.0.0.1:0 --state-dir state
  assert_output --partial "the journal state/journal is a symbolic link: refusing to follow it"
  [ "$(cat victim)" = precious ]
}

@test "report --svg does not write through a symlink, nor into another user's file" {
  mkdir -m 700 d
  start_host --history-file "$PWD/d/h.history"
  run -0 timeout 20 "$TFB" wait --name r --n 1
  theirs_0666 theirs.svg
  run -2 "$TFB" report --svg theirs.svg
  assert_output --partial "the --svg file theirs.svg belongs to uid $(id -u tfbtest), not to you"
  [ "$(cat theirs.svg)" = theirs ]
  ln -s "$PWD/victim" out.svg
  run -2 "$TFB" report --svg out.svg
  assert_output --partial "the --svg file out.svg is a symbolic link: refusing to follow it; remove it, or give another --svg FILE"
  [ "$(cat victim)" = precious ]
  umask 022
  run -0 "$TFB" report --svg new.svg
  run stat -c %a new.svg
  assert_output 644
}

@test "another user's directory is refused in plain words (not \"use a the directory\")" {
  id tfbtest >/dev/null 2>&1 || skip "no user tfbtest: run scripts/deps test"
  mkdir -m 700 theirs
  chown tfbtest theirs
  run -2 timeout 10 "$TFB" serve --listen 127.0.0.1:0 --state-dir theirs
  assert_output --partial "the directory theirs belongs to uid $(id -u tfbtest), not to you"
  assert_output --partial "; remove it, or use a directory of your own"
  refute_output --partial "use a the"
}
