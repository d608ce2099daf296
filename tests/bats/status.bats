#!/usr/bin/env bats
# `tfbarrier status`: the JSON checked field by field (jq if installed, else
# python3), the text table, and scopes (only this scope unless --all-scopes).
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  HOSTNAME_=$(uname -n)
}
teardown() { teardown_common; }

@test "status --json describes an open round field by field" {
  start_host
  arrive st 4 0
  spawn_wait p2 --name st --n 4 --rank 2
  wait_arrived st 2
  local pid0 pid2
  pid0=$(pid_of p0)
  pid2=$(pid_of p2)

  run -0 --separate-stderr timeout 20 "$TFB" status --name st --json
  assert_json barriers.0.scope '"default"'
  assert_json barriers.0.name '"st"'
  assert_json barriers.0.round 1
  assert_json barriers.0.state '"open"'
  assert_json barriers.0.n 4
  assert_json barriers.0.arrived 2
  assert_json barriers.0.chief false
  assert_json barriers.0.verdict null
  assert_json barriers.0.missing "[1,3]"
  assert_json barriers.0.reason null
  assert_json barriers.0.gone '[]'
  # age_ms: milliseconds, the round's at least as old as each member's arrival.
  local age m
  age=$(json barriers.0.age_ms)
  [[ $age =~ ^[0-9]+$ ]]
  for m in $(json_each barriers.0.members age_ms); do
    [[ $m =~ ^[0-9]+$ ]]
    [ "$m" -le "$age" ]
  done
  assert_equal "$(json_each barriers.0.members rank)" "$(printf '0\n2')"
  assert_equal "$(json_each barriers.0.members host | sort -u)" "\"$HOSTNAME_\""
  assert_equal "$(json_each barriers.0.members pid)" "$(printf '%s\n' "$pid0" "$pid2" | sort)"
  assert_equal "$(json_each barriers.0.members chief | sort -u)" false
  # The member with rank 0 is p0's process.
  local i
  for i in 0 1; do
    if [ "$(json "barriers.0.members.$i.rank")" = 0 ]; then
      assert_json "barriers.0.members.$i.pid" "$pid0"
    fi
  done
  run -0 json barriers.1
  assert_output null
}

@test "status --json shows a gathered round and its chief" {
  start_host
  spawn_wait w1 --name gs --n 2 --rank 1
  wait_arrived gs 1
  run -0 timeout 20 "$TFB" wait --name gs --n 2 --rank 0 --chief

  run -0 --separate-stderr timeout 20 "$TFB" status --name gs --json
  assert_json barriers.0.state '"gathered"'
  assert_json barriers.0.chief true
  assert_json barriers.0.arrived 2
  assert_json barriers.0.n 2
  assert_json barriers.0.verdict null
  assert_json barriers.0.missing "[]"
  assert_equal "$(json_each barriers.0.members chief)" "$(printf 'false\ntrue')"

  run -0 timeout 20 "$TFB" decide continue --name gs
  expect_exits 0 w1
}

@test "status --json shows a verdict given in advance, then the abort and its reason" {
  start_host
  run -0 timeout 20 "$TFB" decide stop --name va --n 3 --rank 0 --no-wait
  run -0 timeout 20 "$TFB" status --name va --json
  assert_json barriers.0.state '"open"'
  assert_json barriers.0.chief true
  assert_json barriers.0.verdict '"stop"'
  assert_json barriers.0.arrived 1
  assert_json barriers.0.missing "[1,2]"

  run -0 timeout 20 "$TFB" abort --name va --reason 'node 7 died'
  run -0 timeout 20 "$TFB" status --name va --json
  assert_json barriers.0.state '"aborted"'
  assert_json barriers.0.reason '"node 7 died"'
}

@test "status --json gives missing ranks as an array of numbers (ranges expanded), and null when a member has no rank" {
  start_host
  spawn_wait a --name rg --n 8 --rank 0
  spawn_wait b --name rg --n 8 --rank 4
  wait_arrived rg 2
  run -0 timeout 20 "$TFB" status --name rg --json
  assert_json barriers.0.missing "[1,2,3,5,6,7]"

  spawn_wait c --name rg --n 8
  wait_arrived rg 3
  run -0 timeout 20 "$TFB" status --name rg --json
  assert_json barriers.0.missing null
  assert_json barriers.0.arrived 3
}

@test "status --json marks a missing list the host cut at 64 ranges (missing_truncated), and the text shows the cut" {
  start_host
  # Ranks 0, 2, ..., 128 of 131 arrive: 66 ranges are missing (1, 3, ..., 129, 130), more than 64.
  local r
  for r in $(seq 0 2 128); do spawn_wait "e$r" --name cut --n 131 --rank "$r" --quiet; done
  wait_arrived cut 65
  run -0 --separate-stderr timeout 20 "$TFB" status --name cut --json
  assert_json barriers.0.missing_truncated true
  assert_equal "$(json barriers.0.missing | tr -cd , | wc -c)" 63  # 64 ranks
  assert_json barriers.0.missing.0 1
  assert_json barriers.0.missing.63 127
  run -0 --separate-stderr timeout 20 "$TFB" status --name cut
  assert_output --partial "125,127+"
  # Uncut lists carry no such field.
  spawn_wait f1 --name whole --n 3 --rank 1
  wait_arrived whole 1
  run -0 --separate-stderr timeout 20 "$TFB" status --name whole --json
  assert_json barriers.0.missing "[0,2]"
  assert_json barriers.0.missing_truncated null
  run -0 timeout 20 "$TFB" abort --name cut
  run -0 timeout 20 "$TFB" abort --name whole
}

@test "status shows the barrier as a table, and --name adds its members" {
  start_host
  arrive tb 4 0 2
  local pid0
  pid0=$(pid_of p0)

  run -0 --separate-stderr timeout 20 "$TFB" status
  assert_line --index 0 --regexp '^SCOPE +NAME +ROUND +STATE +ARRIVED +CHIEF +VERDICT +OPEN FOR +MISSING RANKS$'
  assert_line --index 1 --regexp '^default +tb +1 +open +2/4 +no +none +[0-9]+(ms|s) +1,3$'
  [ "${#lines[@]}" -eq 2 ]

  run -0 --separate-stderr timeout 20 "$TFB" status --name tb
  assert_line --regexp "^ +rank 0 +$HOSTNAME_ pid $pid0, arrived [0-9]+(\.[0-9])?(ms|s) ago$"
  assert_line --regexp "^ +rank 2 +$HOSTNAME_ pid [0-9]+, arrived "
}

@test "status shows only its own scope: --scope other hides scope default, --all-scopes shows both" {
  start_host
  spawn_wait d --name indefault --n 2 --rank 0
  spawn_wait o --name inother --n 2 --rank 1 --scope other
  wait_arrived indefault 1
  TFBARRIER_SCOPE=other wait_arrived inother 1

  run -0 timeout 20 "$TFB" status --json
  assert_equal "$(json_each barriers name)" '"indefault"'
  run -0 timeout 20 "$TFB" status --scope other --json
  assert_equal "$(json_each barriers name)" '"inother"'
  assert_json barriers.0.scope '"other"'
  run -0 timeout 20 "$TFB" status --all-scopes --json
  assert_equal "$(json_each barriers scope)" "$(printf '"default"\n"other"')"

  # The text form filters the same way; --name does not reach into another scope.
  run -0 timeout 20 "$TFB" status --scope other
  assert_output --partial inother
  refute_output --partial indefault
  run -0 timeout 20 "$TFB" status --all-scopes
  assert_line --regexp '^default +indefault '
  assert_line --regexp '^other +inother '
  run -0 timeout 20 "$TFB" status --name inother
  refute_output --partial 'inother '
  run -0 timeout 20 "$TFB" status --scope nothing
  assert_output --partial 'no barriers in scope nothing'
}
