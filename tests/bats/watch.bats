#!/usr/bin/env bats
# status --watch on a real terminal: tmux (its own server, -L, killed by the
# test) runs it in a 100x30 pane; capture-pane reads what it shows.
load helpers

setup() {
  setup_common
  command -v tmux || skip "tmux is not installed"
  cd "$BATS_TEST_TMPDIR" || return
  SOCK=tfbw-$$-$BATS_TEST_NUMBER
  start_host
}

teardown() {
  tmux -L "$SOCK" kill-server 2>/dev/null || true
  teardown_common
}

# pane LANG [VAR=VALUE...]: a shell in a 100x30 pane of our own tmux server,
# with LANG set (and the variables given).
pane() {
  local lang=$1
  shift
  tmux -u -L "$SOCK" -f /dev/null new-session -d -x 100 -y 30 \
    env -i PATH=/usr/bin:/bin HOME="$HOME" TERM=xterm-256color LANG="$lang" TFBARRIER_ADDR="$TFBARRIER_ADDR" \
    "$@" PS1='$ ' bash --norc --noprofile
  tmux -L "$SOCK" send-keys 'echo BEFORE-THE-WATCH' Enter
}
screen() { tmux -L "$SOCK" capture-pane -p; }
# The pane with its colours and attributes as escape sequences.
screen_escaped() { tmux -L "$SOCK" capture-pane -p -e; }
# until_gone PATTERN: waits (10 s at most) until the pane no longer shows PATTERN.
until_gone() {
  local i
  for i in $(seq 200); do
    screen | grep -qE "$1" || return 0
    sleep 0.05
  done
  echo "the pane still shows '$1':" >&2
  screen >&2
  return 1
}
# until_screen PATTERN: waits (10 s at most) until the pane shows PATTERN (grep -E).
until_screen() {
  local i
  for i in $(seq 200); do
    screen | grep -qE "$1" && return 0
    sleep 0.05
  done
  echo "the pane never showed '$1':" >&2
  screen >&2
  return 1
}

watch_until_ctrl_c() {  # watch_until_ctrl_c LANG BAR-CHAR
  pane "$1"
  "$TFB" wait --name ep --n 3 --rank 0 --quiet &
  BG_PIDS+=($!)
  wait_arrived ep 1
  tmux -L "$SOCK" send-keys "$TFB status --watch 200ms; echo EXIT=\$?" Enter
  until_screen "^ep r1 \[.*\] 1/3 open"
  [[ "$(screen)" != *BEFORE-THE-WATCH* ]]  # the alternate screen
  until_screen "missing ranks: 1-2"
  [[ "$(screen)" == *"$2"* ]]
  "$TFB" wait --name ep --n 3 --rank 2 --quiet &
  BG_PIDS+=($!)
  until_screen "\] 2/3 open"
  until_screen "missing ranks: 1$"
  tmux -L "$SOCK" send-keys C-c
  until_screen "^EXIT=0$"
  [[ "$(screen)" == *BEFORE-THE-WATCH* ]]  # the screen is restored
  [[ "$(screen)" != *"missing ranks"* ]]
}

@test "status --watch shows the barrier and its arrivals live in UTF-8, and Ctrl-C restores the screen with 0" {
  watch_until_ctrl_c C.UTF-8 "█"
}

@test "status --watch under LANG=C draws an ASCII bar" {
  watch_until_ctrl_c C "#"
  [[ "$(screen)" != *"█"* ]]
}

@test "status --watch: a lost host becomes a banner over the last view, the host back ends it, and q ends the watch with 0" {
  pane C.UTF-8
  "$TFB" wait --name ep --n 2 --rank 0 --quiet &
  BG_PIDS+=($!)
  wait_arrived ep 1
  tmux -L "$SOCK" send-keys "$TFB status --watch 200ms; echo EXIT=\$?" Enter
  until_screen "^ep r1 \[.*\] 1/2 open"
  [[ "$(screen)" == *"(q or Ctrl-C ends)"* ]]
  kill -9 "$HOST_PID"
  until_screen "^lost the host at $TFBARRIER_ADDR; reconnecting…$"
  until_screen "lost the connection to the host at $TFBARRIER_ADDR"
  until_screen "next try in .*; below, the view at [0-9:]{8}"
  [[ "$(screen)" == *"ep r1 ["* ]]       # the last view stays under the banner
  until_screen "[0-9]+ tr(y|ies) failed; next try in"  # it keeps trying
  [[ "$(screen)" != *EXIT=* ]]
  start_host_on "$TFBARRIER_ADDR"
  until_gone "lost the host"             # back: the banner goes, the view is live again
  until_screen "^ep r1 \[.*\] [01]/2 open"
  tmux -L "$SOCK" send-keys q
  until_screen "^EXIT=0$"
  [[ "$(screen)" == *BEFORE-THE-WATCH* ]]  # the screen is restored
  [[ "$(screen)" != *"lost the host"* ]]
  # and the terminal too: what is typed is echoed again
  tmux -L "$SOCK" send-keys 'echo typed-after' Enter
  until_screen "^typed-after$"
  until_screen "echo typed-after"
}

@test "status --watch on a terminal that never reached its host ends with 69 at once" {
  closed_ports 1
  local port=${CLOSED_PORTS[0]}
  pane C.UTF-8
  tmux -L "$SOCK" send-keys "TFBARRIER_ADDR=127.0.0.1:$port $TFB status --watch 200ms --connect-timeout 1s; echo EXIT=\$?" Enter
  until_screen "^EXIT=69$"
  [[ "$(screen)" == *"cannot reach the host at 127.0.0.1:$port"* ]]
}

@test "status --watch keeps a barrier between rounds with its last round, and names the node of each missing rank" {
  pane C.UTF-8
  tmux -L "$SOCK" send-keys "$TFB status --watch 200ms; echo EXIT=\$?" Enter
  until_screen "no barriers"
  local a b
  TFBARRIER_NODE=nodeA "$TFB" wait --name ep --n 3 --rank 0 --quiet &
  a=$!
  TFBARRIER_NODE=nodeB "$TFB" wait --name ep --n 3 --rank 1 --quiet &
  b=$!
  wait_arrived ep 2
  TFBARRIER_NODE=nodeC "$TFB" wait --name ep --n 3 --rank 2 --quiet  # the last: it releases round 1
  wait "$a"
  wait "$b"
  # Between rounds the barrier stays on screen, with who was last.
  until_screen "^ep r2 \[.*\] 0/\? open"
  until_screen "^  last round r1: released [0-9.]+m?s ago, took [0-9.]+m?s, verdict continue, last in 2@nodeC$"
  [[ "$(screen)" != *"no barriers"* ]]
  # Round 2: rank 1 is missing; it was on nodeB in round 1.
  TFBARRIER_NODE=nodeA "$TFB" wait --name ep --n 3 --rank 0 --quiet &
  BG_PIDS+=($!)
  TFBARRIER_NODE=nodeC "$TFB" wait --name ep --n 3 --rank 2 --quiet &
  BG_PIDS+=($!)
  until_screen "^ep r2 \[.*\] 2/3 open"
  until_screen "^  missing ranks: 1@nodeB$"
  until_screen "^  last round r1: "
  tmux -L "$SOCK" send-keys q
  until_screen "^EXIT=0$"
}

@test "status --watch draws in colour on a terminal, and without with NO_COLOR or TERM=dumb" {
  "$TFB" wait --name ep --n 3 --rank 0 --quiet &
  BG_PIDS+=($!)
  wait_arrived ep 1
  pane C.UTF-8
  tmux -L "$SOCK" send-keys "$TFB status --watch 200ms; echo EXIT=\$?" Enter
  until_screen "missing ranks: 1-2"
  local e=$'\e'
  [[ "$(screen_escaped)" == *"${e}[33mopen"* ]] || { screen_escaped | cat -v >&2; return 1; }  # yellow
  [[ "$(screen_escaped)" == *"${e}[31m1-2"* ]]                                               # red
  tmux -L "$SOCK" send-keys q
  until_screen "^EXIT=0$"
  tmux -L "$SOCK" send-keys "clear; NO_COLOR=1 $TFB status --watch 200ms; echo EXIT=\$?" Enter
  until_screen "missing ranks: 1-2"
  [[ "$(screen_escaped)" != *"$e"* ]] || { screen_escaped | cat -v >&2; return 1; }  # no escape at all
  [[ "$(screen)" == *"ep r1 ["* ]]
  tmux -L "$SOCK" send-keys q
  until_screen "^EXIT=0$"
  tmux -L "$SOCK" send-keys "clear; NO_COLOR= TERM=dumb $TFB status --watch 200ms; echo EXIT=\$?" Enter
  until_screen "missing ranks: 1-2"
  [[ "$(screen_escaped)" != *"${e}[3"* ]] || { screen_escaped | cat -v >&2; return 1; }  # no colour
  tmux -L "$SOCK" send-keys q
  until_screen "^EXIT=0$"
}

@test "status --watch fits the view to the terminal again at once when it is resized" {
  "$TFB" wait --name ep --n 3 --rank 0 --quiet &
  BG_PIDS+=($!)
  wait_arrived ep 1
  pane C
  # A refresh a minute: what changes within the test is the resize's redraw.
  tmux -L "$SOCK" send-keys "$TFB status --watch 1m; echo EXIT=\$?" Enter
  until_screen "^ep r1 \[[#.]{40,}\] 1/3 open .*verdict none$"
  tmux -L "$SOCK" resize-window -x 50 -y 30
  # At 50 columns the bar gives way to the rest (cutting the old line would keep the bar).
  until_screen "^ep r1  1/3 open .*verdict none$"
  tmux -L "$SOCK" resize-window -x 140 -y 30
  until_screen "^ep r1 \[[#.]{80,}\] 1/3 open .*verdict none$"
  tmux -L "$SOCK" resize-window -x 140 -y 3  # 2 rows drawn: no room for the barrier's two lines
  until_screen "^\.\.\. and 1 more barrier \(use --name\)$"
  tmux -L "$SOCK" send-keys C-c
  until_screen "^EXIT=0$"
}

@test "status --watch without a terminal: a lost host ends it with 69, no reconnecting (nobody is there to press q)" {
  "$TFB" status --watch 100ms >watch.out 2>watch.err &
  local w=$!
  for _ in $(seq 100); do grep -q "no barriers" watch.out && break; sleep 0.05; done
  kill -9 "$HOST_PID"
  local rc=0
  wait "$w" || rc=$?
  [ "$rc" -eq 69 ] || { echo "exit $rc; stderr:" >&2; cat watch.err >&2; return 1; }
  grep -q "lost the connection to the host at $TFBARRIER_ADDR" watch.err
  run grep -c $'\e' watch.out
  assert_output 0
}

@test "status --watch without a terminal prints plain blocks; SIGTERM ends it with 0" {
  "$TFB" wait --name ep --n 2 --rank 0 --quiet &
  BG_PIDS+=($!)
  wait_arrived ep 1
  "$TFB" status --watch 100ms >watch.out 2>watch.err &
  local w=$!
  for _ in $(seq 100); do [ "$(grep -c '^ep r1' watch.out)" -ge 2 ] && break; sleep 0.05; done
  kill -TERM "$w"
  local rc=0
  wait "$w" || rc=$?
  [ "$rc" -eq 0 ] || { echo "exit $rc; stderr:" >&2; cat watch.err >&2; return 1; }
  run grep -c $'\e' watch.out
  assert_output 0
  run grep -c "^  missing ranks: 1$" watch.out
  [ "$output" -ge 2 ]
}

@test "status --watch takes an interval checked like every duration, and refuses --json" {
  run --separate-stderr "$TFB" status --watch 10ms
  assert_failure 2
  [[ "$stderr" == *"too short"* ]]
  run --separate-stderr "$TFB" status --watch soon
  assert_failure 2
  [[ "$stderr" == *"not a duration"* ]]
  run --separate-stderr "$TFB" status --watch --json
  assert_failure 2
}

@test "status --watch after a restart with --state-dir shows the round before it, from the history file" {
  stop_host_by_pid() { kill -TERM "$1"; wait "$1" || true; }
  stop_host_by_pid "$HOST_PID"
  start_host_on 127.0.0.1:0 --state-dir "$BATS_TEST_TMPDIR/state" --history-file "$BATS_TEST_TMPDIR/h.hist"
  local addr=$TFBARRIER_ADDR
  "$TFB" wait --name ep --n 2 --rank 0 --quiet &
  BG_PIDS+=($!)
  "$TFB" wait --name ep --n 2 --rank 1 --quiet
  stop_host_by_pid "$HOST_PID"
  start_host_on "$addr" --state-dir "$BATS_TEST_TMPDIR/state" --history-file "$BATS_TEST_TMPDIR/h.hist"
  "$TFB" status --watch 100ms >watch.out 2>watch.err &
  local w=$!
  for _ in $(seq 100); do grep -q '^  last round r1: released' watch.out && break; sleep 0.05; done
  kill -TERM "$w"
  wait "$w" || true
  run grep -E '^ep r2 .* open' watch.out
  assert_success
  run grep -E '^  last round r1: released .* verdict continue, last in [01]@' watch.out
  assert_success
}
