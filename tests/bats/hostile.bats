#!/usr/bin/env bats
# What a host sends is shown, never obeyed, and never grows a client without
# bound (issue #30, items 3 and 5). A fake host (Python, on 127.0.0.1:0) says
# BUSY with escape sequences, bidi overrides and line separators, or streams
# a STATUS that never ends; a real host passes on a verdict message and an
# abort's reason of the same kind. Whatever came from the wire reaches the
# terminal escaped (\x1b, \x9b, \u202e, \u2028), never raw.
load helpers

setup() { setup_common; }
teardown() { teardown_common; }

# The bytes a hostile text carries: clear the screen, set the title, the
# 8-bit CSI, a right-to-left override (U+202E), a line separator (U+2028), a
# zero-width space (U+200B); as UTF-8 bytes, whatever the locale.
HOSTILE=$'\e[2J\e]0;owned\a\x9b31m\xe2\x80\xaeevil\xe2\x80\xa8\xe2\x80\x8bend'

# no_raw FILE: FILE holds none of the raw bytes of HOSTILE (nor any other C0
# but newline, DEL, or C1/bidi/separator/zero-width character).
no_raw() {
  /usr/bin/python3 - "$1" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
bad = [b for b in data if (b < 0x20 and b != 0x0a) or b == 0x7f]
try:
    text = data.decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit(f"{sys.argv[1]}: not UTF-8 ({e}): a raw C1 byte such as 0x9b")
bad += [c for c in text if 0x80 <= ord(c) <= 0x9f or ord(c) in (0x061c, 0x2028, 0x2029, 0xfeff)
        or 0x200b <= ord(c) <= 0x200f or 0x202a <= ord(c) <= 0x202e or 0x2060 <= ord(c) <= 0x2069]
if bad:
    sys.exit(f"{sys.argv[1]}: raw control characters {bad!r} in {data!r}")
PY
}

# escaped FILE: FILE shows each of HOSTILE's controls visibly.
escaped() {
  local f=$1 want
  for want in '\x1b[2J' '\x1b]0;owned\x07' '\x9b31m' '\u202eevil\u2028\u200bend'; do
    grep -qF -- "$want" "$f" || { echo "$f does not show $want:" >&2; cat -v "$f" >&2; return 1; }
  done
}

# fake_host MODE [TEXT]: a Python server on 127.0.0.1:0. MODE:
#   busy            answers each connection's first line with ERR BUSY :TEXT, closes
#   endless-status  greets; answers STATUS with BARRIER lines, never END
#   trickle-watch   greets; answers the first STATUS whole, the next one a line
#                   every 0.2 s, never END
#   empty-history   greets; answers each HISTORY with an empty page that says
#                   there is more (HEND next=FROM+1), for ever
# Sets FAKE_ADDR; the server is stopped by teardown (BG_PIDS).
fake_host() {
  local out=$BATS_TEST_TMPDIR/fake.out
  timeout 120 /usr/bin/python3 -u - "$1" "${2:-}" >"$out" 2>"$BATS_TEST_TMPDIR/fake.err" 3>&- <<'PY' &
import os, socket, sys, threading, time
mode, text = sys.argv[1], os.fsencode(sys.argv[2])
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(64)
print(f"FAKE_ADDR=127.0.0.1:{srv.getsockname()[1]}", flush=True)
HELLO = b"HELLO v=2 server=fake auth=none\n"
BARRIER = b"BARRIER scope=default name=x gen=1 state=open n=9 arrived=1 chief=0 verdict=none age_ms=1\n"
MEMBER = b"MEMBER rank=1 host=n pid=7 chief=0 age_ms=5\n"
def serve(c):
    with c:
        f = c.makefile("rb")
        if not f.readline():
            return
        if mode == "busy":
            c.sendall(b"ERR BUSY :" + text + b"\n")
            return
        c.sendall(HELLO)
        statuses = 0
        for line in f:
            if mode == "empty-history" and line.startswith(b"HISTORY"):
                fields = dict(w.split(b"=", 1) for w in line.split()[1:] if b"=" in w)
                c.sendall(b"HEND next=%d\n" % (int(fields.get(b"from", b"0")) + 1))
                print("page", flush=True)
                continue
            if not line.startswith(b"STATUS"):
                continue
            statuses += 1
            if mode == "trickle-watch" and statuses == 1:
                c.sendall(BARRIER + MEMBER + b"END\n")
                continue
            c.sendall(BARRIER)
            print("streaming", flush=True)
            if mode == "endless-status":  # BARRIER lines: the most a client holds per byte
                chunk = BARRIER * 20000
                while True:
                    c.sendall(chunk)
            while True:
                c.sendall(MEMBER)
                time.sleep(0.2)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
  BG_PIDS+=("$!")
  fake_addr_from "$out"
}

@test "a fake host's ERR BUSY text reaches wait's stderr escaped, never raw, with a secret or without" {
  fake_host busy "$HOSTILE"
  local e=$BATS_TEST_TMPDIR/wait.err
  rc=0
  timeout 20 "$TFB" wait --name b --n 2 --addr "$FAKE_ADDR" --connect-timeout 1s 2>"$e" || rc=$?
  [ "$rc" -eq 69 ]
  no_raw "$e"
  escaped "$e"
  grep -qF "is busy (" "$e"
  grep -qF "stayed busy for 1s (ERR BUSY: " "$e"
  # A participant with a secret hears the host before it has proved anything: the same.
  "$TFB" secret --file "$BATS_TEST_TMPDIR/secret" >/dev/null
  rc=0
  timeout 20 "$TFB" wait --name b --n 2 --addr "$FAKE_ADDR" --connect-timeout 1s \
    --secret-file "$BATS_TEST_TMPDIR/secret" 2>"$e" || rc=$?
  [ "$rc" -eq 69 ]
  no_raw "$e"
  escaped "$e"
}

@test "a verdict message and an abort's reason from a real host: wait, status, status --watch and --json show them escaped" {
  start_host
  local msg=$'\xe2\x80\xaeevil\xe2\x80\xa8\xe2\x80\x8bend' o=$BATS_TEST_TMPDIR/o e=$BATS_TEST_TMPDIR/e
  # A message with an escape sequence is refused before anything is sent, and said so escaped.
  rc=0
  timeout 20 "$TFB" decide stop --name m --n 2 --rank 0 --no-wait --message $'\e[31mx' 2>"$e" || rc=$?
  [ "$rc" -eq 2 ]
  no_raw "$e"
  grep -qF '\x1b at byte 0' "$e"
  # What UTF-8 allows reaches every worker: printed escaped on stdout.
  run -0 timeout 20 "$TFB" decide stop --name m --n 2 --rank 0 --no-wait --message "$msg"
  rc=0
  timeout 20 "$TFB" wait --name m --n 2 --rank 1 >"$o" 2>"$e" || rc=$?
  [ "$rc" -eq 1 ]
  no_raw "$o"
  no_raw "$e"
  [ "$(cat "$o")" = '\u202eevil\u2028\u200bend' ]
  # An abort's reason: the waiting participant, status, status --watch and --json.
  spawn_wait w --name a --n 2 --rank 0
  wait_arrived a 1
  run -0 timeout 20 "$TFB" abort --name a --reason "$msg"
  expect_exits 3 w
  no_raw "$(err w)"
  grep -qF 'was aborted: \u202eevil\u2028\u200bend' "$(err w)"
  timeout 20 "$TFB" status >"$o"
  no_raw "$o"
  grep -qF 'aborted: \u202eevil\u2028\u200bend' "$o"
  timeout 20 "$TFB" status --json >"$o"
  no_raw "$o"
  grep -qF '"reason": "\u202eevil\u2028\u200bend"' "$o"
  [ "$(jq -r '.barriers[] | select(.name == "a") | .reason' "$o")" = "$msg" ]  # the same text, decoded
  spawn watch "$TFB" status --watch 100ms
  wait_for_match "$(out watch)" 'aborted'
  kill -INT "$(pid_of watch)"
  expect_exits 0 watch
  no_raw "$(out watch)"
  grep -qF 'aborted: \u202eevil\u2028\u200bend' "$(out watch)"
}

@test "a host that streams a STATUS without its end: status exits 70 at once, saying so, its memory bounded" {
  fake_host endless-status
  local e=$BATS_TEST_TMPDIR/e t=$BATS_TEST_TMPDIR/time
  SECONDS=0
  # Under a limit on its address space: a client that grew without bound
  # fails here (out of memory), and does not eat the machine.
  rc=0
  /usr/bin/time -v -o "$t" timeout 60 bash -c 'ulimit -v 1048576; exec "$@"' _ \
    "$TFB" status --addr "$FAKE_ADDR" --connect-timeout 30s 2>"$e" || rc=$?
  cat "$e"
  [ "$rc" -eq 70 ]
  [ "$SECONDS" -le 20 ]
  grep -qF "the host at $FAKE_ADDR sent a status reply over 256 MiB without its end" "$e"
  local rss
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$t")
  echo "max RSS: $rss kB"
  [ "$rss" -lt $((400 * 1024)) ]
}

@test "status --watch against a host that trickles a STATUS without its end: exit 70 within --connect-timeout" {
  fake_host trickle-watch
  local e=$BATS_TEST_TMPDIR/e
  SECONDS=0
  rc=0
  timeout 30 "$TFB" status --watch 100ms --addr "$FAKE_ADDR" --connect-timeout 2s >/dev/null 2>"$e" || rc=$?
  cat "$e"
  [ "$rc" -eq 70 ]
  [ "$SECONDS" -le 10 ]
  grep -qF "the host at $FAKE_ADDR began a status reply and did not end it within 2s" "$e"
}

@test "a host whose history pages say there is more, for ever: report exits 70, saying so" {
  fake_host empty-history
  local e=$BATS_TEST_TMPDIR/e
  rc=0
  timeout 30 "$TFB" report --addr "$FAKE_ADDR" --connect-timeout 2s >/dev/null 2>"$e" || rc=$?
  cat "$e"
  [ "$rc" -eq 70 ]
  grep -qF "the host at $FAKE_ADDR sent an empty page of its history that says there is more" "$e"
  [ "$(grep -c '^page$' "$BATS_TEST_TMPDIR/fake.out")" -eq 1 ]
}
