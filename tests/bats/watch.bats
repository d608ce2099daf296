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

# pane LANG: a shell in a 100x30 pane of our own tmux server, with LANG set.
pane() {
  tmux -u -L "$SOCK" -f /dev/null new-session -d -x 100 -y 30 \
    env -i PATH=/usr/bin:/bin HOME="$HOME" TERM=xterm-256color LANG="$1" TFBARRIER_ADDR="$TFBARRIER_ADDR" \
    PS1='$ ' bash --norc --noprofile
  tmux -L "$SOCK" send-keys 'echo BEFORE-THE-WATCH' Enter
}
screen() { tmux -L "$SOCK" capture-pane -p; }
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

@test "status --watch: a lost host ends it with 69 and a message, the screen restored first" {
  pane C.UTF-8
  tmux -L "$SOCK" send-keys "$TFB status --watch 200ms; echo EXIT=\$?" Enter
  until_screen "no barriers"
  kill -9 "$HOST_PID"
  until_screen "^EXIT=69$"
  [[ "$(screen)" == *BEFORE-THE-WATCH* ]]
  [[ "$(screen)" == *"lost the connection to the host"* ]]
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
