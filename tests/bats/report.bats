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
  assert_line --index 0 --regexp '^rank 3 \(node .*\) was the last rank in 3 of 3 rounds, median \+[34][0-9]{2} ms$'
  assert_output --partial 'STRAGGLERS BY RANK'
  run -0 timeout 20 "$TFB" report --json
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["stragglers"]["ranks"][0]["who"]=="rank 3"; assert len(d["rounds"])==3' "$output"
  run -0 timeout 20 "$TFB" report --csv --last 2
  assert_line --index 0 'seq,scope,name,round,end,verdict,first_arrival_unix_ms,rank,node,late_ms'
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

@test "report --file with a bad file names the file and line, exit 2" {
  printf 'TFBHISTORY v=1\nARR a=1@x+3\n' >"$BATS_TEST_TMPDIR/bad.history"
  run -2 timeout 20 "$TFB" report --file "$BATS_TEST_TMPDIR/bad.history"
  assert_output --partial "bad.history:2: an ARR line outside a round"
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
