#!/usr/bin/env bats
# Bad command lines: exit 2, nothing on stdout, a `tfbarrier: error:` line on
# stderr, and nothing reaches the host. Also --version and every --help.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  start_host
}
teardown() { teardown_common; }

# usage_error ARGS...: `tfbarrier ARGS` exits 2, prints nothing on stdout and
# starts stderr with `tfbarrier: error: `.
usage_error() {
  run -2 --separate-stderr timeout 20 "$TFB" "$@"
  if [ -n "$output" ] || [[ $stderr != "tfbarrier: error: "* ]]; then
    echo "tfbarrier $*: stdout: '$output'; stderr: '$stderr'" >&2
    return 1
  fi
}

# host_untouched: the host logged no barrier event (no arrival, conflict,
# verdict or abort), so the usage errors were caught before connecting.
host_untouched() {
  if grep -E ' (arrive|conflict|verdict|abort|leave) ' "$HOST_LOG"; then
    echo "the host heard from a bad command line" >&2
    return 1
  fi
}

@test "an empty barrier name is a usage error for wait, decide, abort and status" {
  usage_error wait --name '' --n 2
  [[ $stderr == *"--name"* ]]
  usage_error decide stop --name ''
  usage_error abort --name ''
  usage_error status --name ''
  host_untouched
}

@test "a 129-character name is a usage error, and 128 characters are accepted" {
  local n128 n129
  n128=$(printf 'a%.0s' $(seq 128))
  n129=${n128}b
  usage_error wait --name "$n129" --n 1
  [[ $stderr == *"1-128"* ]]
  usage_error abort --name "$n129"
  host_untouched
  run -0 timeout 20 "$TFB" wait --name "$n128" --n 1
}

@test "a name with a space is a usage error" {
  usage_error wait --name 'a b' --n 1
  [[ $stderr == *'--name: "a b" is not a barrier name'* ]]
  usage_error decide stop --name 'a b'
  host_untouched
}

# An escape sequence in what was typed must not reach the terminal: every
# error shows control bytes as \xNN, quoted values and CLI11's own words alike.
@test "control characters in a bad value or option are shown escaped, never raw" {
  local esc=$'\e[2J' bad
  usage_error wait --n 2 "--name=a${esc}"
  [[ $stderr == *'"a\x1b[2J" is not a barrier name'* ]]
  for bad in "--timeout=1${esc}" "--scope=s${esc}" "--bogus${esc}" "stray${esc}"; do
    usage_error wait --name x --n 2 "$bad"
    [[ $stderr == *'\x1b[2J'* ]]
    [[ $stderr != *$'\e'* ]]
  done
  usage_error decide "stop${esc}"
  [[ $stderr == *'\x1b[2J'* ]]
  [[ $stderr != *$'\e'* ]]
  TFBARRIER_NAME=$'bad\x01' usage_error wait --n 2
  [[ $stderr == *'TFBARRIER_NAME (for --name): "bad\x01" is not a barrier name'* ]]
  host_untouched
}

@test "a name with a non-ASCII letter is a usage error" {
  usage_error wait --name 'é' --n 1
  [[ $stderr == *"is not a barrier name"* ]]
  usage_error wait --name 'epoché' --n 1
  host_untouched
}

@test "n = 0 and n = 1000001 are usage errors, and n = 1000000 is accepted" {
  usage_error wait --name x --n 0
  [[ $stderr == *'--n: "0" is out of range: the number of tasks runs from 1 to 1000000'* ]]
  usage_error wait --name x --n 1000001
  [[ $stderr == *'--n: "1000001" is out of range'* ]]
  usage_error wait --name x --n six
  [[ $stderr == *'--n: "six" is not a number of tasks: the number of tasks runs from 1 to 1000000'* ]]
  usage_error decide stop --name x --n 0 --rank 0
  host_untouched
  # The largest n is a real round (it times out, as nobody else comes).
  run -124 timeout 20 "$TFB" wait --name x --n 1000000 --timeout 100ms
}

@test "a rank that is not a number is a usage error" {
  local bad
  for bad in abc 1.5 -1 ''; do
    usage_error wait --name x --n 2 --rank "$bad"
    [[ $stderr == *"--rank: \"$bad\" is not a rank: a rank runs from 0 to 999999"* ]]
  done
  usage_error decide stop --name x --n 2 --rank abc
  host_untouched
}

@test "bad durations (5x, -1s) are usage errors for every duration option" {
  local bad opt
  for bad in 5x -1s; do
    for opt in --timeout --connect-timeout --progress --keepalive; do
      usage_error wait --name x --n 2 "$opt" "$bad"
      [[ $stderr == *"$opt: \"$bad\" is not a duration"* ]]
    done
    usage_error serve --listen 127.0.0.1:0 --idle-exit "$bad"
    usage_error serve --listen 127.0.0.1:0 --forget-after "$bad"
    usage_error status --connect-timeout "$bad"
  done
  host_untouched
}

@test "durations too short to be sane are usage errors: --keepalive 0 or --progress 0.05s flooded the host" {
  # --keepalive 0 sent PINGs without pause, --progress 0 a STATUS per loop turn.
  local v
  for v in 0 99ms; do
    usage_error wait --name x --n 2 --keepalive "$v"
    [[ $stderr == *"--keepalive: \"$v\" is too short: use at least 100ms"* ]]
    usage_error decide stop --name x --keepalive "$v"
  done
  # From the environment, the error names the variable to fix.
  TFBARRIER_KEEPALIVE=0 usage_error wait --name x --n 2
  [[ $stderr == *'TFBARRIER_KEEPALIVE (for --keepalive): "0" is too short: use at least 100ms'* ]]
  TFBARRIER_TIMEOUT=5x usage_error wait --name x --n 2
  [[ $stderr == *'TFBARRIER_TIMEOUT (for --timeout): "5x" is not a duration'* ]]
  TFBARRIER_KEEPALIVE=0 usage_error wait --name x --n 2 --keepalive=0  # typed too: the option is named
  [[ $stderr == *'error: --keepalive: "0" is too short'* ]]
  usage_error wait --name x --n 2 --progress 50ms
  [[ $stderr == *'--progress: "50ms" is too short: use at least 100ms, or 0 for none'* ]]
  usage_error wait --name x --n 2 --connect-timeout 0
  [[ $stderr == *'--connect-timeout: "0" is too short: use at least 1ms'* ]]
  usage_error status --connect-timeout 0ms
  usage_error wait --name x --n 2 --timeout 101d
  [[ $stderr == *'--timeout: "101d" is longer than 100 days, the longest duration'* ]]
  usage_error wait --name x --n 2 --timeout 99999999999999999999d
  [[ $stderr == *'is longer than 100 days'* ]]
  host_untouched
}

@test "an option before the command is a usage error that shows the command line in the right order" {
  usage_error --addr 127.0.0.1:1 status
  [[ $stderr == *'options go after the command: "--addr" comes before status; run: tfbarrier status --addr 127.0.0.1:1'* ]]
  usage_error -q wait --name 'a b' --n 2
  [[ $stderr == *"run: tfbarrier wait -q --name 'a b' --n 2"* ]]
  host_untouched
}

@test "--max-connections and --max-per-address take 1 to a billion: -1 and 0 are usage errors" {
  local opt v
  for opt in --max-connections --max-per-address; do
    for v in 0 -1 abc 1000000001; do
      usage_error serve --listen 127.0.0.1:0 "$opt" "$v"
      [[ $stderr == *"$opt: \"$v\" is not a number from 1 to 1000000000"* ]]
    done
  done
}

@test "serve with an address it cannot parse is a usage error (2), not an unreachable host (69)" {
  local a
  for a in garbage 127.0.0.1:99999 :abc '[::1]7727'; do
    usage_error serve --listen "$a"
    [[ $stderr == *"is not an address to listen on: use HOST:PORT"* ]]
  done
  TFBARRIER_LISTEN=nonsense usage_error serve
  [[ $stderr == *'TFBARRIER_LISTEN="nonsense" is not an address to listen on'* ]]
}

@test "serve --forget-after below 1s is a usage error: 0 spun the host at 100% CPU" {
  local v
  for v in 0 999ms; do
    usage_error serve --listen 127.0.0.1:0 --forget-after "$v"
    [[ $stderr == *"--forget-after: \"$v\" is too short: use at least 1s"* ]]
  done
}

@test "--help says what each option takes (DUR, FILE, HOST:PORT), not CLI11's TEXT:DUR" {
  run -0 "$TFB" wait --help
  assert_line --regexp '^  --timeout DUR \(env TFBARRIER_TIMEOUT\)$'
  assert_line --regexp '^  --name NAME REQUIRED \(env TFBARRIER_NAME\)$'
  assert_line --regexp '^  --n N +Participants'
  assert_line --regexp '^  --addr HOST:PORT +Host address'
  assert_line --regexp '^  --secret-file FILE \(env TFBARRIER_SECRET_FILE\)$'
  run -0 "$TFB" serve --help
  assert_line --regexp '^  --state-dir DIR \(env TFBARRIER_STATE_DIR\)$'
  run -0 bash -c 'for c in serve wait decide abort status config secret; do "$1" "$c" --help; done' _ "$TFB"
  refute_output --regexp 'TEXT:|UINT|in \['
}

@test "serve --help shows --store, --metrics and --log whole and current (issue 30 item 10)" {
  run -0 "$TFB" serve --help
  # A label with a colon was cut at its last one: "PORT...][/PREFIX]", "PORT".
  assert_line --regexp '^  --store etcd://HOST:PORT\[,HOST:PORT\.\.\.\]\[/PREFIX\] \(env TFBARRIER_STORE\)$'
  assert_line --regexp '^  --metrics HOST:PORT \(env TFBARRIER_METRICS\)$'
  refute_output --regexp -- '--(store|metrics) PORT'
  # --log's default is the private directory's file, not $TMPDIR.
  refute_output --partial 'TMPDIR'
  run -0 "$TFB" report --help
  assert_line --regexp '^  --last K +Only the last K rounds$'
  run -0 bash -c '"$1" serve --help | tr -s " \n" " "' _ "$TFB"
  assert_output --partial "--log FILE Append the log to FILE, made mode 0600; a symlink or another user's file is refused (default: stderr; with --daemon ~/.tfbarrier/serve-NODE[-JOB].log"
}

@test "no command, or an option without its value, is a usage error in plain words" {
  usage_error
  [[ $stderr == "tfbarrier: error: a command is required; the commands are serve, wait, decide, abort, status, report, config, secret"* ]]
  usage_error wait --n 2 --name
  [[ $stderr == "tfbarrier: error: --name needs a value"* ]]
  usage_error wait --name x --n 2 stray
  [[ $stderr == "tfbarrier: error: the following argument was not expected: stray"* ]]
  host_untouched
}

@test "unknown options are usage errors that name the option" {
  local cmd
  for cmd in "wait --name x --n 1" "decide stop" "abort --name x" "status" "serve --listen 127.0.0.1:0" "config"; do
    # shellcheck disable=SC2086  # $cmd is words on purpose
    usage_error $cmd --bogus
    [[ $stderr == *"--bogus"* ]]
  done
  usage_error --bogus wait --name x --n 1
  [[ $stderr == *"--bogus"* ]]
  host_untouched
}

@test "a mistyped option is named, even when it leaves a required one out; extras keep their order" {
  usage_error wait --nme x --n 2
  [[ $stderr == "tfbarrier: error: the following arguments were not expected: --nme x"* ]]
  usage_error wait --bogus
  [[ $stderr == "tfbarrier: error: the following argument was not expected: --bogus"* ]]
  usage_error abort --reson hi
  [[ $stderr == "tfbarrier: error: the following arguments were not expected: --reson hi"* ]]
  usage_error decide --name x
  [[ $stderr == "tfbarrier: error: the verdict is missing: give continue (exit 0 for all) or stop (exit 1 for all)"* ]]
  usage_error decide --name x --   # as `decide -- $V` with V empty
  [[ $stderr == "tfbarrier: error: the verdict is missing: give continue (exit 0 for all) or stop (exit 1 for all)"* ]]
  usage_error wait --name x --n 2 a1 a2
  [[ $stderr == "tfbarrier: error: the following arguments were not expected: a1 a2"* ]]
  # CLI11 hands what follows -- to the top level, reversed: all of it is listed, in order
  usage_error wait --name x --n 2 a1 -- a2 a3
  [[ $stderr == "tfbarrier: error: the following arguments were not expected: a1 a2 a3"$'\n'* ]]
  usage_error decide stop --name x -- a1 a2
  [[ $stderr == "tfbarrier: error: the following arguments were not expected: a1 a2"$'\n'* ]]
  host_untouched
}

@test "a mistyped option or command gets a 'did you mean' when one is near, and only then" {
  usage_error wait --name x --n 2 --chef
  [[ $stderr == "tfbarrier: error: the following argument was not expected: --chef (did you mean --chief?)"$'\n'* ]]
  usage_error wait --name x --n 2 --rnak=1
  [[ $stderr == *"--rnak=1 (did you mean --rank?)"$'\n'* ]]
  usage_error wait --name x --n 2 --time 5s   # cut short: the one option it begins
  [[ $stderr == *"--time 5s (did you mean --timeout?)"$'\n'* ]]
  usage_error status --jsno                   # two letters swapped
  [[ $stderr == *"--jsno (did you mean --json?)"$'\n'* ]]
  usage_error serve --lisen 127.0.0.1:0
  [[ $stderr == *"(did you mean --listen?)"$'\n'* ]]
  usage_error wait --name x --n 2 --bogus
  [[ $stderr == "tfbarrier: error: the following argument was not expected: --bogus"$'\n'* ]]
  usage_error wait --name x --n 2 --c         # too short to guess
  [[ $stderr != *"did you mean"* ]]
  usage_error wiat --name x --n 2
  [[ $stderr == "tfbarrier: error: unknown command 'wiat' (did you mean wait?); the commands are"* ]]
  usage_error foo
  [[ $stderr != *"did you mean"* ]]
  host_untouched
}

@test "tfbarrier help [COMMAND] prints what --help prints" {
  run -0 "$TFB" help
  [ "$output" = "$("$TFB" --help)" ]
  [[ $output == *"'tfbarrier help COMMAND'"* ]]
  local cmd
  for cmd in serve wait decide abort status config secret; do
    run -0 "$TFB" help "$cmd"
    [ "$output" = "$("$TFB" "$cmd" --help)" ]
  done
  usage_error help wiat
  [[ $stderr == "tfbarrier: error: unknown command 'wiat' (did you mean wait?)"* ]]
  usage_error help wait extra
  [[ $stderr == "tfbarrier: error: help takes one command at most, not 'wait extra'"$'\n'* ]]
  host_untouched
}

@test "decide --nme x stop names the typo, not x as a bad verdict" {
  # CLI11 takes x, the typo's value, as the verdict and rejects it first
  usage_error decide --nme x stop
  [[ $stderr == "tfbarrier: error: unknown option --nme (did you mean --name?)"$'\n'* ]]
  usage_error decide --nme x
  [[ $stderr == "tfbarrier: error: unknown option --nme (did you mean --name?)"$'\n'* ]]
  usage_error decide maybe                    # a bad verdict alone is still one
  [[ $stderr == 'tfbarrier: error: verdict: "maybe" is not a verdict'* ]]
  host_untouched
}

@test "an unknown command or a lone unknown option is a usage error that names it" {
  usage_error wiat --name x
  echo "tfbarrier wiat: $stderr"
  [[ $stderr == *wiat* ]]
  usage_error --bogus
  echo "tfbarrier --bogus: $stderr"
  [[ $stderr == *"--bogus"* ]]
  host_untouched
}

@test "wait and abort without --name are usage errors that say --name is required" {
  usage_error wait --n 2
  [[ $stderr == *"--name is required"* ]]
  usage_error abort --reason why
  [[ $stderr == *"--name is required"* ]]
  host_untouched
}

@test "a verdict other than continue or stop is a usage error, and so is none" {
  local bad
  for bad in maybe STOP Continue ''; do
    usage_error decide "$bad" --name x
    [[ $stderr == "tfbarrier: error: verdict: \"$bad\" is not a verdict: use continue (exit 0 for all) or stop (exit 1 for all)"* ]]
  done
  usage_error decide --name x
  [[ $stderr == *"the verdict is missing"* ]]
  host_untouched
}

@test "--version prints the version and the protocol version" {
  run -0 --separate-stderr "$TFB" --version
  assert_output --regexp '^tfbarrier [0-9]+\.[0-9]+\.[0-9]+ \(protocol 2\)$'
  assert_equal "$stderr" ""
}

@test "--help of every command shows examples and the whole exit-code table" {
  # The table as src/core/exit_codes.h has it: "%5d  meaning" per row.
  local header=$BATS_TEST_DIRNAME/../../src/core/exit_codes.h table
  table=$(/usr/bin/python3 - "$header" <<'EOF'
import re, sys
src = open(sys.argv[1]).read()
codes = dict(re.findall(r'constexpr int (\w+) = (\d+);', src))
for name, text in re.findall(r'\{exit_code::(\w+), "([^"]*)"\}', src):
    print("%5d  %s" % (int(codes[name]), text))
EOF
  )
  [ "$(wc -l <<<"$table")" -eq 12 ]
  local cmd line
  for cmd in "" serve wait decide abort status config secret; do
    # shellcheck disable=SC2086  # $cmd is one word or none
    run -0 --separate-stderr "$TFB" $cmd --help
    assert_line --regexp '^Examples?:$'
    assert_line 'Exit codes:'
    while IFS= read -r line; do
      assert_line "$line"
    done <<<"$table"
  done
}

@test "every --help sets the exit-code table off its examples with a blank line" {
  local cmd
  for cmd in "" serve wait decide abort status config secret; do
    # shellcheck disable=SC2086  # "" is the top level
    run -0 "$TFB" $cmd --help
    [[ $output == *$'\n\nExit codes:\n'* ]] || { echo "tfbarrier $cmd --help:"; echo "$output"; return 1; }
  done
}

@test "every --help has one blank line between sections and none at the end" {
  # CLI11 ends an option group with a blank line and starts the footer with
  # another; serve's hidden option group added a third.
  local cmd
  for cmd in "" serve wait decide abort status config secret; do
    # shellcheck disable=SC2086  # "" is the top level
    "$TFB" $cmd --help >"$BATS_TEST_TMPDIR/help"
    run -0 awk 'NR > 1 && $0 == "" && prev == "" { print "two blank lines before line " NR; bad = 1 }
                { prev = $0 } END { if (prev == "") print "a blank line at the end"; exit bad || prev == "" }' \
      "$BATS_TEST_TMPDIR/help"
  done
  run -0 "$TFB" help serve
  assert_line --index 0 'Run the rendezvous host'
}
