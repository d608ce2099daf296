# bash completion for tfbarrier(1)                         -*- shell-script -*-
# Installed as share/bash-completion/completions/tfbarrier, where the
# bash-completion package loads it on first use; or source it from ~/.bashrc.
# It needs nothing from bash-completion itself.
#
# The option lists repeat each command's --help: tests/bats/completion.bats
# checks that they agree.

_tfbarrier_commands="serve wait decide abort status report config secret"

# _tfbarrier_options COMMAND: the options COMMAND takes, long ones first.
_tfbarrier_options() {
  local client="--addr --scope --connect-timeout --quiet --secret-file --keepalive --insecure --help -q -h"
  case $1 in
    serve) echo "--listen --daemon --log --idle-exit --forget-after --quiet --state-dir --max-connections" \
      "--max-per-address --max-barriers --secret-file --no-munge --insecure --metrics --metrics-token-file" \
      "--metrics-textfile --history --history-file --store --store-lease --store-snapshot-every --store-ca --store-cert --store-key --store-user --store-password-file --help -q -h" ;;
    wait) echo "--name --n --rank --chief --decide-by --decide-timeout --decide-within --timeout --progress $client" ;;
    decide) echo "--name --message --no-wait --timeout --n --rank --store $client -m" ;;
    abort) echo "--name --reason --store $client" ;;
    status) echo "--name --json --all-scopes --watch --store $client" ;;
    report) echo "--name --last --file --json --csv --svg --all-scopes --all-runs --run $client" ;;
    config) echo "--n --rank --json --store $client" ;;
    secret) echo "--file --force --help -h" ;;
  esac
}

# _tfbarrier_takes_value OPTION: true when OPTION is followed by a value.
_tfbarrier_takes_value() {
  case $1 in
    --listen | --log | --idle-exit | --forget-after | --state-dir | --max-connections | --max-per-address | --max-barriers | \
      --secret-file | --name | --n | --rank | --timeout | --progress | --decide-by | --decide-timeout | --decide-within | --addr | --scope | --connect-timeout | \
      --keepalive | --message | -m | --reason | --file | --metrics | --metrics-token-file | --metrics-textfile | --history | --history-file | --last | --svg | --store | --store-lease | --store-snapshot-every) return 0 ;;
  esac
  return 1
}

_tfbarrier() {
  local cword=$COMP_CWORD
  local cur=${COMP_WORDS[cword]} prev='' prefix='' i word cmd='' cmd_at=0
  [ "$cword" -gt 0 ] && prev=${COMP_WORDS[cword - 1]}
  COMPREPLY=()

  # --opt=value: with '=' in COMP_WORDBREAKS the words are "--opt" "=" "value".
  if [[ $cur == = ]]; then
    cur=
  elif [[ $prev == = && $cword -ge 2 ]]; then
    prev=${COMP_WORDS[cword - 2]}
  elif [[ $cur == --*=* ]]; then
    prev=${cur%%=*}
    prefix=$prev=
    cur=${cur#*=}
  fi

  # The subcommand: the first word after "tfbarrier" that is not an option.
  for ((i = 1; i < cword; i++)); do
    word=${COMP_WORDS[i]}
    if [[ $word != -* ]]; then
      cmd=$word
      cmd_at=$i
      break
    fi
  done

  if [ -z "$cmd" ]; then
    if [[ $cur == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "--help --version" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -W "$_tfbarrier_commands help" -- "$cur")
    fi
    return 0
  fi

  # `tfbarrier help COMMAND`: one command, nothing after it.
  if [ "$cmd" = help ]; then
    if [ "$cword" -eq $((cmd_at + 1)) ] && [[ $cur != -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$_tfbarrier_commands" -- "$cur")
    fi
    return 0
  fi

  # The value of an option.
  if _tfbarrier_takes_value "$prev"; then
    case $prev in
      --log | --secret-file | --file | --history-file | --svg | --metrics-token-file | --metrics-textfile | --store-ca | --store-cert | --store-key | --store-password-file)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        ;;
      --state-dir)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        ;;
    esac
    if [ -n "$prefix" ] && [ ${#COMPREPLY[@]} -gt 0 ]; then
      COMPREPLY=("${COMPREPLY[@]/#/$prefix}")
    fi
    return 0
  fi

  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_tfbarrier_options "$cmd")" -- "$cur")
    return 0
  fi

  # decide's verdict, unless it was given already.
  if [ "$cmd" = decide ]; then
    local have_verdict=
    for ((i = cmd_at + 1; i < cword; i++)); do
      word=${COMP_WORDS[i]}
      if [[ $word == -* ]]; then
        if [[ $word != *=* ]] && _tfbarrier_takes_value "$word"; then
          # Skip the value, and the "=" of "--name=epoch3".
          if [[ ${COMP_WORDS[i + 1]:-} == = ]]; then ((i += 2)); else ((i += 1)); fi
        fi
      else
        have_verdict=$word
      fi
    done
    if [ -z "$have_verdict" ]; then
      mapfile -t COMPREPLY < <(compgen -W "continue stop" -- "$cur")
      return 0
    fi
  fi
  mapfile -t COMPREPLY < <(compgen -W "$(_tfbarrier_options "$cmd")" -- "$cur")
  return 0
}

complete -F _tfbarrier tfbarrier
