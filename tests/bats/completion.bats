#!/usr/bin/env bats
# The shell completions: the bash one is sourced in a fresh bash and driven
# the way readline drives it (COMP_WORDS, COMP_CWORD, then _tfbarrier), and its
# lists are checked against the binary's --help so that they cannot drift; the
# zsh one is syntax-checked and checked for the same options.
load helpers

setup() {
  setup_common
  ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  BASH_COMPLETION=$ROOT/completions/tfbarrier.bash
  ZSH_COMPLETION=$ROOT/completions/_tfbarrier
}

# complete_line WORD...: the words of the command line, the last one being the word
# under the cursor (may be ""). Prints the candidates, sorted, one a line.
complete_line() {
  bash --norc --noprofile -c '
    source "$1" || exit 1
    shift
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    _tfbarrier tfbarrier "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" || exit 1
    printf "%s\n" "${COMPREPLY[@]}"' _ "$BASH_COMPLETION" "$@" | sed '/^$/d' | sort
}

# The commands listed under "Subcommands:" in tfbarrier --help, sorted.
commands() {
  "$TFB" --help | awk '/^Subcommands:/ {on = 1; next} on && NF == 0 {exit} on {print $1}' | sort
}

# The long options that `tfbarrier CMD --help` lists (--help included), sorted.
help_options() {
  "$TFB" "$1" --help | sed -nE 's/^  (-[A-Za-z],)?(--[a-z][a-z0-9-]*).*/\2/p' | sort -u
}

@test "the bash completion is valid bash and registers _tfbarrier for tfbarrier" {
  run bash -n "$BASH_COMPLETION"
  assert_success
  run bash --norc --noprofile -c 'source "$1" && complete -p tfbarrier' _ "$BASH_COMPLETION"
  assert_success
  assert_output 'complete -F _tfbarrier tfbarrier'
}

@test "tfbarrier <TAB> offers exactly the commands of tfbarrier --help, and help" {
  run complete_line tfbarrier ""
  assert_success
  assert_output "$({ commands; echo help; } | sort)"
}

@test "tfbarrier help <TAB> offers the commands, and nothing after one" {
  run complete_line tfbarrier help ""
  assert_success
  assert_output "$(commands)"
  run complete_line tfbarrier help w
  assert_output wait
  run complete_line tfbarrier help wait ""
  assert_success
  assert_output ""
  # Each one it offers is one that `tfbarrier help` shows.
  local cmd
  for cmd in $(commands); do
    run -0 "$TFB" help "$cmd"
    assert_line --partial "Usage: tfbarrier $cmd"
  done
}

@test "tfbarrier s<TAB> offers the commands that start with s" {
  run complete_line tfbarrier s
  assert_success
  assert_output "$(commands | grep '^s')"
}

@test "tfbarrier --<TAB> offers --help and --version" {
  run complete_line tfbarrier --
  assert_output "$(printf '%s\n' --help --version)"
}

@test "wait --<TAB> offers exactly the long options of wait --help" {
  run complete_line tfbarrier wait --
  assert_success
  assert_output "$(help_options wait)"
  assert_line --chief
  assert_line --timeout
}

@test "COMMAND --<TAB> offers exactly the long options of COMMAND --help, for every command" {
  local cmd
  for cmd in $(commands); do
    run complete_line tfbarrier "$cmd" --
    assert_success
    diff <(help_options "$cmd") <(echo "$output") >&2 || { echo "for $cmd" >&2; return 1; }
  done
}

@test "wait --ti<TAB> completes to --timeout" {
  run complete_line tfbarrier wait --ti
  assert_output --timeout
}

@test "decide <TAB> offers the verdicts continue and stop" {
  run complete_line tfbarrier decide ""
  assert_output "$(printf '%s\n' continue stop)"
  run complete_line tfbarrier decide s
  assert_output stop
}

@test "decide offers the verdicts after options and their values, in both spellings" {
  run complete_line tfbarrier decide --name epoch3 ""
  assert_output "$(printf '%s\n' continue stop)"
  # "--name=epoch3" reaches the function as "--name" "=" "epoch3".
  run complete_line tfbarrier decide --name = epoch3 -m hello ""
  assert_output "$(printf '%s\n' continue stop)"
}

@test "decide, once given a verdict, offers options and no second verdict" {
  run complete_line tfbarrier decide stop ""
  refute_line continue
  refute_line stop
  assert_line --message
  assert_line --no-wait
}

@test "serve --log <TAB> completes file names" {
  cd "$BATS_TEST_TMPDIR"
  touch host-a.log host-b.log other.txt
  mkdir host-dir
  run complete_line tfbarrier serve --log host
  assert_output "$(printf '%s\n' host-a.log host-b.log host-dir)"
  run complete_line tfbarrier serve --log = host-a
  assert_output host-a.log
  # With '=' left out of COMP_WORDBREAKS the word is "--log=host-a".
  run complete_line tfbarrier serve --log=host-a
  assert_output --log=host-a.log
}

@test "--secret-file and secret --file complete file names; --state-dir only directories" {
  cd "$BATS_TEST_TMPDIR"
  touch secret-a
  mkdir state-dir
  run complete_line tfbarrier wait --secret-file secret
  assert_output secret-a
  run complete_line tfbarrier secret --file secret
  assert_output secret-a
  run complete_line tfbarrier serve --state-dir s
  assert_output state-dir
}

@test "the value of an option is not completed as an option or a verdict" {
  run complete_line tfbarrier wait --timeout ""
  assert_output ""
  run complete_line tfbarrier decide --name ""
  assert_output ""
}

@test "the zsh completion passes zsh -n" {
  command -v zsh >/dev/null || skip "zsh is not installed (scripts/deps test installs it): the zsh completion is not checked"
  run zsh -n "$ZSH_COMPLETION"
  assert_success
  assert_output ""
  run head -n 1 "$ZSH_COMPLETION"
  assert_output '#compdef tfbarrier'
}

@test "the zsh completion offers every command and every long option of each command's --help" {
  local cmd opt branch missing=()
  for cmd in $(commands); do
    grep -qE "^    ['\"]$cmd:" "$ZSH_COMPLETION" || missing+=("command $cmd")
    # The command's case branch, plus the client options where it uses $client.
    branch=$(awk -v c="    $cmd)" '$0 == c {on = 1; next} on && /;;/ {exit} on {print}' "$ZSH_COMPLETION")
    [ -n "$branch" ] || { missing+=("branch $cmd"); continue; }
    if grep -q '\$client' <<<"$branch"; then
      branch+=$'\n'$(awk '/local -a client=\(/ {on = 1; next} on && /^  \)/ {exit} on {print}' "$ZSH_COMPLETION")
    fi
    grep -q '\$help' <<<"$branch" || missing+=("$cmd --help")
    for opt in $(help_options "$cmd" | grep -vx -- --help); do
      # Specs spell it '--opt[...]', '--opt=[...]', '--opt=-[...]' (an optional value) or '{-q,--opt}' / '{-m+,--opt=}'.
      grep -qE -- "$opt(=-?)?[[}]" <<<"$branch" || missing+=("$cmd $opt")
    done
  done
  grep -q "commands+=('help:" "$ZSH_COMPLETION" || missing+=("command help")
  grep -qx '    help)' "$ZSH_COMPLETION" || missing+=("branch help")
  [ ${#missing[@]} -eq 0 ] || { printf 'not in _tfbarrier: %s\n' "${missing[@]}" >&2; return 1; }
}
