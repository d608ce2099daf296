#!/usr/bin/env bats
# The man pages are lint-clean and cannot drift from the program: every option
# that a command's --help lists is documented in man/tfbarrier.1 (in that
# command's subsection, or under "Client options" for a command that points
# there), every option the page documents exists, every variable tfbarrier
# reads is under ENVIRONMENT, and the exit-code tables of the page and of
# README.md are src/core/exit_codes.h's. man/tfbarrier-protocol.7 is made from
# docs/protocol.md by scripts/man-protocol (pandoc), and must be what it makes.
# shellcheck disable=SC2154  # $stderr is set by `run --separate-stderr`
load helpers

setup() {
  setup_common
  ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  MAN1=$ROOT/man/tfbarrier.1
  MAN7=$ROOT/man/tfbarrier-protocol.7
}

# need TOOL PACKAGE: skip, saying how to get it, when TOOL is not installed.
need() {
  command -v "$1" >/dev/null || skip "$1 is not installed (package $2; scripts/deps test installs it)"
}

# The commands listed under "Subcommands:" in tfbarrier --help.
commands() {
  "$TFB" --help | awk '/^Subcommands:/ {on = 1; next} on && NF == 0 {exit} on {print $1}'
}

# The long options (not --help) that `tfbarrier CMD --help` lists, one a line.
help_options() {
  "$TFB" "$1" --help | sed -nE 's/^  (-[A-Za-z],)?(--[a-z][a-z0-9-]*).*/\2/p' | grep -vx -- --help | sort -u
}

# The roff text of one subsection (.SS NAME) or section (.SH NAME) of a page, "\-" read as "-".
section() {  # section PAGE MACRO NAME
  awk -v head="$2 $3" -v qhead="$2 \"$3\"" '
    $0 == head || $0 == qhead {on = 1; next}
    on && /^\.S[HS]( |$)/ && !($0 ~ /^\.SS/ && head ~ /^\.SH/) {exit}
    on {print}' "$1" | sed 's/\\-/-/g'
}

# The options a piece of roff documents: the long options in the head line after each .TP.
documented_options() {
  awk 'prev ~ /^\.TP/ {print} {prev = $0}' | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

# src/core/exit_codes.h's table as "CODE<TAB>MEANING" lines, by code.
header_exit_codes() {
  local h=$ROOT/src/core/exit_codes.h
  join -t $'\t' \
    <(sed -nE 's/.*inline constexpr int ([a-z_]+) = ([0-9]+);.*/\1\t\2/p' "$h" | sort) \
    <(sed -nE 's/.*\{exit_code::([a-z_]+), "(.*)"\},.*/\1\t\2/p' "$h" | sort) |
    cut -f2,3 | sort -n
}

@test "tfbarrier.1 and tfbarrier-protocol.7 are lint-clean for groff -ww" {
  need groff groff-base
  local page
  for page in "$MAN1" "$MAN7"; do
    run --separate-stderr groff -man -ww -z "$page"
    assert_success
    assert_equal "$stderr" ""
    assert_output ""
  done
}

@test "tfbarrier.1 and tfbarrier-protocol.7 are lint-clean for mandoc -Tlint" {
  need mandoc mandoc
  local page
  for page in "$MAN1" "$MAN7"; do
    run mandoc -Tlint "$page"
    assert_success
    assert_output ""
  done
}

@test "both pages carry the version that tfbarrier --version prints" {
  local version
  version=$("$TFB" --version | awk '{print $2}')
  [ -n "$version" ]
  grep -qE "^\.TH TFBARRIER 1 [0-9-]+ \"tfbarrier $version\"" "$MAN1"
  # pandoc quotes every argument of .TH.
  grep -qE "^\.TH \"TFBARRIER-PROTOCOL\" \"7\" \"[0-9-]+\" \"tfbarrier $version\"" "$MAN7"
}

@test "every command of tfbarrier --help has its subsection in tfbarrier.1" {
  local cmd missing=()
  run commands
  assert_success
  [ ${#lines[@]} -ge 7 ]
  for cmd in "${lines[@]}"; do
    grep -qx "\.SS $cmd" "$MAN1" || missing+=("$cmd")
  done
  [ ${#missing[@]} -eq 0 ] || { echo "no .SS for: ${missing[*]}" >&2; return 1; }
}

@test "every option that a command's --help lists is documented for that command" {
  local cmd opt missing=() documented client
  client=$(section "$MAN1" .SS "Client options" | documented_options)
  [ -n "$client" ]
  for cmd in $(commands); do
    documented=$(section "$MAN1" .SS "$cmd" | documented_options)
    # A command whose subsection points to the client options takes those too.
    if section "$MAN1" .SS "$cmd" | grep -q 'client options'; then
      documented=$(printf '%s\n%s\n' "$documented" "$client")
    fi
    for opt in $(help_options "$cmd"); do
      grep -qxF -- "$opt" <<<"$documented" || missing+=("$cmd $opt")
    done
  done
  [ ${#missing[@]} -eq 0 ] || { printf 'not in tfbarrier.1: %s\n' "${missing[@]}" >&2; return 1; }
}

@test "every option that tfbarrier.1 documents exists in that command's --help" {
  local cmd opt extra=() client help
  client=$(section "$MAN1" .SS "Client options" | documented_options)
  for cmd in $(commands); do
    help=$(help_options "$cmd")
    for opt in $(section "$MAN1" .SS "$cmd" | documented_options); do
      grep -qxF -- "$opt" <<<"$help" || extra+=("$cmd $opt")
    done
    if section "$MAN1" .SS "$cmd" | grep -q 'client options'; then
      for opt in $client; do
        grep -qxF -- "$opt" <<<"$help" || extra+=("$cmd $opt (client options)")
      done
    fi
  done
  [ ${#extra[@]} -eq 0 ] || { printf 'not in --help: %s\n' "${extra[@]}" >&2; return 1; }
}

@test "decide's subsection documents its verdicts, continue and stop" {
  run "$TFB" decide --help
  assert_output --partial 'verdict continue|stop REQUIRED'
  local text
  text=$(section "$MAN1" .SS decide)
  grep -q '^\.B continue$' <<<"$text"
  grep -q '^\.BR stop' <<<"$text"
}

@test "every variable that --help or the settings read is under ENVIRONMENT" {
  local env var cmd missing=() vars
  # The variables named in the head lines of ENVIRONMENT's entries.
  env=$(section "$MAN1" .SH ENVIRONMENT | awk 'prev ~ /^\.TP/ {print} {prev = $0}' |
    grep -oE '[A-Z][A-Z0-9_]+' | sort -u)
  [ -n "$env" ]
  vars=$(
    {
      "$TFB" --help
      for cmd in $(commands); do "$TFB" "$cmd" --help; done
    } | grep -oE 'TFBARRIER_[A-Z_]+'
    # Quoted variable names in the settings code; RANK is the one without an underscore.
    grep -oE '"[A-Z][A-Z0-9]*_[A-Z0-9_]+"|"RANK"' "$ROOT/src/core/settings.cpp" | tr -d '"'
  )
  for var in $(sort -u <<<"$vars"); do
    grep -qxF "$var" <<<"$env" || missing+=("$var")
  done
  [ ${#missing[@]} -eq 0 ] || { echo "not under ENVIRONMENT: ${missing[*]}" >&2; return 1; }
}

@test "the EXIT STATUS table of tfbarrier.1 is src/core/exit_codes.h's" {
  run header_exit_codes
  assert_success
  [ ${#lines[@]} -ge 11 ]
  local want=$output got
  # .TP, then ".B CODE", then the meaning on one line.
  got=$(section "$MAN1" .SH "EXIT STATUS" |
    awk '/^\.TP/ {tp = 1; next} tp == 1 && /^\.B [0-9]+$/ {code = $2; tp = 2; next}
         tp == 2 {print code "\t" $0; tp = 0; next} {tp = 0}')
  diff <(echo "$want") <(echo "$got") >&2
}

@test "the exit-code table of README.md is src/core/exit_codes.h's" {
  local want got
  want=$(header_exit_codes)
  got=$(sed -nE 's/^\| *([0-9]+) *\| *(.*[^ ]) *\|$/\1\t\2/p' "$ROOT/README.md")
  diff <(echo "$want") <(echo "$got") >&2
}

@test "tfbarrier-protocol.7 is what scripts/man-protocol makes of docs/protocol.md" {
  command -v pandoc >/dev/null ||
    fail "pandoc is not installed, so the page cannot be checked: run scripts/deps test (or apt-get install pandoc)"
  run "$ROOT/scripts/man-protocol" "$BATS_TEST_TMPDIR/protocol.7"
  assert_success
  run diff -u "$MAN7" "$BATS_TEST_TMPDIR/protocol.7"
  [ "$status" -eq 0 ] || fail "man/tfbarrier-protocol.7 is not what docs/protocol.md makes: run scripts/man-protocol
and commit the page (it was made with Debian 12's pandoc 2.17; this is $(pandoc --version | head -1)).
$output"
}

@test "tfbarrier-protocol.7 lists every error kind of docs/protocol.md" {
  local kind missing=() errors
  errors=$(section "$MAN7" .SH ERRORS)
  # A .TP entry per row of the table, tagged in the constant-width font pandoc gives code.
  for kind in $(sed -nE 's/^\| `([A-Z]+)` \|.*/\1/p' "$ROOT/docs/protocol.md"); do
    grep -qxF "\f[CR]$kind\f[R]" <<<"$errors" || missing+=("$kind")
  done
  [ -n "$kind" ]
  [ ${#missing[@]} -eq 0 ] || { echo "not in tfbarrier-protocol.7 ERRORS: ${missing[*]}" >&2; return 1; }
}
