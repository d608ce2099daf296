#!/usr/bin/env bats
# `tfbarrier report` (issue #21): a job whose rank 3 is slow every round puts
# rank 3 first, from the running host and from the history file after the host
# exited; SVG, JSON, CSV; a bad history file.
load helpers

setup() { setup_common; }
teardown() {
  [ -z "${SOCK:-}" ] || tmux -L "$SOCK" kill-server 2>/dev/null || true
  teardown_common
}

# rounds K: K rounds of 4 ranks; rank 3 arrives 0.4 s after the others.
rounds() {
  local e r pids
  for e in $(seq "$1"); do
    pids=()
    for r in 0 1 2 3; do
      ( if [ "$r" = 3 ]; then sleep 0.4; fi; timeout 20 "$TFB" wait --name "epoch$e" --n 4 --rank "$r" ) &
      pids+=($!)
    done
    wait "${pids[@]}"
  done
}

@test "report puts the slow rank first, from the host and from the history file after it exited" {
  start_host --history-file "$HOME/job.history"
  rounds 3
  run -0 timeout 20 "$TFB" report
  assert_line --index 0 --regexp '^rank 3 \(node .*\) was the last rank in 3 of 3 rounds, median \+[0-9]+ ms$'
  # It slept 0.4 s after the others started: at least 300 ms late, however
  # slowly the others started; how much later is the machine's load's to say.
  late=$(sed -n '1s/.*median +\([0-9]*\) ms$/\1/p' <<<"$output")
  [ "$late" -ge 300 ]
  assert_output --partial 'STRAGGLERS BY RANK'
  run -0 timeout 20 "$TFB" report --json
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["stragglers"]["ranks"][0]["who"]=="rank 3"; assert len(d["rounds"])==3' "$output"
  run -0 timeout 20 "$TFB" report --csv --last 2
  assert_line --index 0 'seq,scope,name,round,end,verdict,first_arrival_unix_ms,rank,node,late_ms,after_first_ms,run'
  [ "${#lines[@]}" -eq 9 ]
  kill "$HOST_PID"
  wait "$HOST_PID" || true
  run -0 timeout 20 "$TFB" report --file "$HOME/job.history" --name 'epoch?'
  assert_output --partial 'rank 3'
  run -0 timeout 20 "$TFB" report --file "$HOME/job.history"
  assert_line --index 0 --regexp '^rank 3 .* was the last rank in 3 of 3 rounds'
}

@test "report finds a stopped host's default history file without options" {
  start_host
  rounds 2
  kill "$HOST_PID"
  wait "$HOST_PID" || true
  run -0 --separate-stderr timeout 20 "$TFB" report --connect-timeout 200ms
  assert_line --index 0 --regexp '^rank 3 .* was the last rank in 2 of 2 rounds'
}

@test "report --svg writes a picture that parses and renders" {
  command -v xmllint >/dev/null || skip "xmllint (libxml2-utils) is not installed"
  start_host --history-file "$HOME/job.history"
  rounds 2
  run -0 timeout 20 "$TFB" report --svg "$BATS_TEST_TMPDIR/late.svg"
  xmllint --noout "$BATS_TEST_TMPDIR/late.svg"
  if command -v rsvg-convert >/dev/null; then
    rsvg-convert -o "$BATS_TEST_TMPDIR/late.png" "$BATS_TEST_TMPDIR/late.svg"
    [ "$(stat -c %s "$BATS_TEST_TMPDIR/late.png")" -gt 4000 ]
  fi
}

@test "report --file names the file and line of a bad line (a warning), and a file that is no history is exit 2" {
  printf 'TFBHISTORY v=1\nARR a=1@x+3\n' >"$BATS_TEST_TMPDIR/bad.history"
  run -0 --separate-stderr timeout 20 "$TFB" report --file "$BATS_TEST_TMPDIR/bad.history"
  [[ $stderr == *"warning: $BATS_TEST_TMPDIR/bad.history:2: an ARR line outside a round; skipped that round"* ]]
  assert_output 'no finished rounds recorded'
  printf 'TFBHISTORY v=7\n' >"$BATS_TEST_TMPDIR/bad.history"
  run -2 timeout 20 "$TFB" report --file "$BATS_TEST_TMPDIR/bad.history"
  assert_output --partial "bad.history:1: history format 'v=7' is not the one this tfbarrier reads"
  run -2 timeout 20 "$TFB" report --file "$BATS_TEST_TMPDIR/none.history"
  assert_output --partial "cannot open the history file"
}

# On a terminal (tmux, its own server, killed by the test): the heatmap, in
# Unicode shades in a UTF-8 locale and in ASCII under LANG=C.
heatmap_in_tmux() {  # heatmap_in_tmux LANG
  command -v tmux >/dev/null || skip "tmux is not installed"
  SOCK=tfbr-$$-$BATS_TEST_NUMBER
  tmux -u -L "$SOCK" -f /dev/null new-session -d -x 100 -y 40 \
    env -i PATH=/usr/bin:/bin HOME="$HOME" TERM=xterm-256color LANG="$1" PS1='$ ' bash --norc --noprofile
  tmux -L "$SOCK" send-keys "$TFB report --file $HOME/job.history; echo EXIT=\$?" Enter
  local i
  for i in $(seq 200); do
    tmux -L "$SOCK" capture-pane -p | grep -q '^EXIT=' && break
    sleep 0.05
  done
  SCREEN=$(tmux -L "$SOCK" capture-pane -p -S -200)
  tmux -L "$SOCK" kill-server
  [[ $SCREEN == *"EXIT=0"* ]] || { echo "$SCREEN" >&2; false; }
  [[ $SCREEN == *"Arrival lateness, rounds (rows) by ranks (columns)"* ]]
  [[ $SCREEN == *"legend: "* ]]
}

@test "on a terminal report draws a heatmap: Unicode shades in UTF-8, ASCII only under LANG=C" {
  start_host --history-file "$HOME/job.history"
  rounds 2
  heatmap_in_tmux C.UTF-8
  [[ $SCREEN == *"█"* ]] || { echo "$SCREEN" >&2; false; }
  heatmap_in_tmux C
  [[ $SCREEN == *"#"* ]]
  ! LC_ALL=C grep -q '[^ -~]' <<<"$SCREEN" || { echo "non-ASCII under LANG=C: $SCREEN" >&2; false; }
}

# ---- issue #30: long node names, a bad line, .bad files, CSV quoting ----

# waits_from NODE N NAME: N ranks of barrier NAME, every one on a machine named
# NODE (a UTS namespace of their own: a participant's HELLO host= is its host
# name).
waits_from() {
  [ "$(id -u)" -eq 0 ] || skip "needs root: a host name of its own (unshare --uts)"
  command -v unshare >/dev/null || skip "unshare is not installed"
  # shellcheck disable=SC2016  # expanded by the inner bash
  unshare --uts bash -c '
    hostname "$1" || exit 1
    pids=()
    for r in $(seq 0 $(($2 - 1))); do
      timeout 30 "$TFB" wait --name "$3" --n "$2" --rank "$r" 3>&- &
      pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    exit $rc' _ "$1" "$2" "$3"
}

# raw_arrive NODE SCOPE NAME: one participant that says HELLO host=NODE itself
# and arrives alone (n=1) at SCOPE/NAME.
raw_arrive() {
  python3 - "${TFBARRIER_ADDR%:*}" "${TFBARRIER_ADDR##*:}" "$@" <<'PY'
import os, socket, sys
host, port, node, scope, name = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
s = socket.create_connection((host, port), timeout=10); f = s.makefile("rwb")
hello = f"HELLO v=2 host={node} pid={os.getpid()}\n"
f.write(f"{hello}ARRIVE scope={scope} name={name} id=raw{os.getpid()} n=1 rank=0\n".encode()); f.flush()
hello, reply = f.readline(), f.readline()
assert hello.startswith(b"HELLO ") and reply and not reply.startswith(b"ERR"), (hello, reply)
PY
}

# csv_rows FILE: checks that every row of the CSV in FILE has the header's 10
# fields (python's csv module) and prints the node field of each data row.
csv_rows() {
  python3 - "$1" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert rows[0][8] == "node", rows[0]
for r in rows:
    assert len(r) == 12, r
for r in rows[1:]:
    print(r[8])
PY
}

@test "70 ranks on gpu-node-a07x: report reads them from the host and the file, and a restarted host keeps the file" {
  start_host --history-file "$HOME/job.history"
  waits_from gpu-node-a07x 70 big
  run -0 --separate-stderr timeout 20 "$TFB" report --csv
  [ "${#lines[@]}" -eq 71 ]
  assert_line --index 1 --regexp '^1,.*,big,1,release,.*,gpu-node-a07x,[0-9]+,[0-9]+,[^,]+$'
  run -0 --separate-stderr timeout 20 "$TFB" report --file "$HOME/job.history" --csv
  [ "${#lines[@]}" -eq 71 ]
  [ -z "$stderr" ]
  kill "$HOST_PID"
  wait "$HOST_PID" || true
  start_host --history-file "$HOME/job.history"
  [ ! -e "$HOME/job.history.bad" ]
  run -0 --separate-stderr timeout 20 "$TFB" report --csv
  [ "${#lines[@]}" -eq 71 ]
}

@test "a HELLO host= of 1,024 bytes leaves a history that report reads" {
  start_host --history-file "$HOME/job.history"
  long=$(printf 'x%.0s' $(seq 1024))
  raw_arrive "$long" s1 solo
  raw_arrive "$long" s1 solo
  run -0 --separate-stderr timeout 20 "$TFB" report --all-scopes --csv
  [ "${#lines[@]}" -eq 3 ]
  # Cut to 255 bytes: 246 of the name, '~' and a hash.
  assert_line --index 1 --regexp "^1,s1,solo,1,release,continue,[0-9]+,0,x{246}~[0-9a-f]{8},[0-9]+,[0-9]+,[^,]+\$"
  run -0 --separate-stderr timeout 20 "$TFB" report --all-scopes --file "$HOME/job.history" --csv
  [ "${#lines[@]}" -eq 3 ]
  kill "$HOST_PID"
  wait "$HOST_PID" || true
  start_host --history-file "$HOME/job.history"
  [ ! -e "$HOME/job.history.bad" ]
}

# Three rounds of two; the second's ROUND line is cut in the middle.
corrupt_history() {
  printf '%s\n' 'TFBHISTORY v=1' \
    'ROUND seq=1 scope=s name=e1 gen=1 n=2 end=release verdict=- at=5 ms=9 withdrawn=0 timeouts=0 count=2' \
    'ARR a=0@n1+0,1@n2+9' \
    'ROUND seq=2 scope=s name=e2 gen=1 n=2 end=rel' \
    'ARR a=0@n1+0,1@n2+7' \
    'ROUND seq=3 scope=s name=e3 gen=1 n=2 end=release verdict=- at=5 ms=9 withdrawn=0 timeouts=0 count=2' \
    'ARR a=0@n1+4,1@n2+0' >"$1"
}

@test "a history file with one bad line: report shows the other rounds and warns" {
  corrupt_history "$BATS_TEST_TMPDIR/job.history"
  run -0 --separate-stderr timeout 20 "$TFB" report --all-scopes --file "$BATS_TEST_TMPDIR/job.history" --csv
  [ "${#lines[@]}" -eq 5 ]
  assert_line --index 1 --regexp '^1,s,e1,'
  assert_line --index 4 --regexp '^3,s,e3,'
  [[ $stderr == *"warning: $BATS_TEST_TMPDIR/job.history:4: "*"skipped that round"* ]] || { echo "$stderr"; false; }
}

@test "a restarted host keeps the good rounds of a file with a bad line, and sets the file aside as it was" {
  corrupt_history "$HOME/job.history"
  cp "$HOME/job.history" "$HOME/first"
  start_host --history-file "$HOME/job.history"
  wait_for_log 'job.history:4: .*; skipped those rounds, kept 2 rounds, and moved the file as it was to .*/job.history.bad$'
  run -0 --separate-stderr timeout 20 "$TFB" report --all-scopes --csv
  [ "${#lines[@]}" -eq 5 ]
  cmp "$HOME/first" "$HOME/job.history.bad"
}

# restart_on FILE TEXT: a host started on a history file that holds TEXT, then stopped.
restart_on() {
  echo "$2" >"$1"
  start_host --history-file "$1"
  kill "$HOST_PID"
  wait "$HOST_PID" || true
}

@test "two successive bad history files give two .bad files, and a symlink planted at the next name is not followed" {
  cd "$HOME"
  restart_on "$HOME/job.history" one
  restart_on "$HOME/job.history" two
  [ "$(cat job.history.bad)" = one ]
  [ "$(cat job.history.bad.1)" = two ]
  ln -s "$BATS_TEST_TMPDIR/target" job.history.bad.2
  restart_on "$HOME/job.history" three
  [ -L job.history.bad.2 ] && [ ! -e "$BATS_TEST_TMPDIR/target" ]
  [ "$(cat job.history.bad.3)" = three ]
  grep -q 'moved it to .*/job.history.bad.3 and started a new history' "$HOST_LOG"
}

@test "report --csv quotes a node name with '\"' and disarms formula starts" {
  start_host --history-file "$HOME/job.history"
  raw_arrive '@SUM(1+1)"x,y' -s e
  raw_arrive 'n1' -s e
  timeout 20 "$TFB" report --all-scopes --csv >"$BATS_TEST_TMPDIR/a.csv"
  run -0 csv_rows "$BATS_TEST_TMPDIR/a.csv"
  # ',' is '_' in the history (it separates arrivals); '"' stays, doubled in the file.
  assert_equal "${lines[0]}" "'@SUM(1+1)\"x_y"
  assert_equal "${lines[1]}" 'n1'
  grep -q "^1,'-s,e,1,release,continue,[0-9]*,0,\"'@SUM(1+1)\"\"x_y\",[0-9]*,[0-9]*,[^,]*\$" "$BATS_TEST_TMPDIR/a.csv"
}

@test "runs are kept apart: a host started again on the same history file reports its own run, --all-runs every run" {
  # Found in review (issue #32): every host of a user on a node writes the
  # same default history, and a fresh host's report ranked earlier runs'
  # rounds with its own.
  start_host --history-file "$HOME/job.history"
  rounds 2
  local first
  first=$(sed -n 's/.*this host'"'"'s rounds are run \([^ ]*\) .*/\1/p' "$HOST_LOG" | head -n 1)
  [ -n "$first" ]
  kill "$HOST_PID"
  wait "$HOST_PID" || true
  sleep 1  # a run id has the start time to the second, and the pid
  start_host --history-file "$HOME/job.history"
  rounds 1
  run -0 --separate-stderr timeout 20 "$TFB" report --json
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); r=d["rounds"]; assert len(r)==1, r; assert r[0]["run"] != sys.argv[2], r' "$output" "$first"
  [[ $stderr == *"left out 2 rounds of 1 other run: --all-runs for every run, or --run ID"* ]] || { echo "$stderr"; false; }
  run -0 --separate-stderr timeout 20 "$TFB" report --all-runs --json
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert len(d["rounds"])==3, d["rounds"]' "$output"
  run -0 --separate-stderr timeout 20 "$TFB" report --run "$first" --csv
  [ "${#lines[@]}" -eq 9 ]  # the header and 2 rounds of 4
  [[ ${lines[0]} == *",run" ]]
  [[ ${lines[1]} == *",$first" ]]
  run -2 timeout 20 "$TFB" report --run 'a b'
  assert_output --partial "a run ID is 1-64 of"
}

@test "on a terminal, 200 rounds fit the screen and the summary line comes last" {
  command -v tmux >/dev/null || skip "tmux is not installed"
  python3 - "$HOME/many.history" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("TFBHISTORY v=1\n")
    for s in range(1, 201):
        f.write("ROUND seq=%d scope=default name=epoch%d gen=1 n=8 end=release verdict=- at=5 ms=900 withdrawn=0 timeouts=0 count=8 run=r1\n" % (s, s))
        f.write("ARR a=" + ",".join("%d@gpu-a%02d+%d" % (r, r // 4, 900 if r == 5 else r) for r in range(8)) + "\n")
PY
  SOCK=tfbr-$$-$BATS_TEST_NUMBER
  tmux -u -L "$SOCK" -f /dev/null new-session -d -x 100 -y 40 \
    env -i PATH=/usr/bin:/bin HOME="$HOME" TERM=xterm-256color LANG=C.UTF-8 PS1='$ ' bash --norc --noprofile
  tmux -L "$SOCK" send-keys "$TFB report --all-scopes --file $HOME/many.history | cat -A | wc -l; $TFB report --all-scopes --file $HOME/many.history; echo EXIT=\$?" Enter
  local i
  for i in $(seq 200); do
    tmux -L "$SOCK" capture-pane -p | grep -q '^EXIT=' && break
    sleep 0.05
  done
  SCREEN=$(tmux -L "$SOCK" capture-pane -p)
  tmux -L "$SOCK" kill-server
  [[ $SCREEN == *"EXIT=0"* ]] || { echo "$SCREEN" >&2; false; }
  # What a screen of 40 lines shows at the end: the summary, just above EXIT.
  local before
  before=$(grep -B1 '^EXIT=0' <<<"$SCREEN" | head -n 1)
  [[ $before == "rank 5 (node gpu-a01) was the last rank in 200 of 200 rounds, median +"* ]] || { echo "$SCREEN" >&2; false; }
  [[ $SCREEN == *"rounds to a row"* ]]
  [[ $SCREEN == *"gpu-a00"* ]]
}
