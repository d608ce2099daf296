#!/bin/sh
# One participant of a barrier on redis (bench/compare.sh):
#   redis.sh PORT KEY N
# INCR KEY; the one that makes it N pushes N tokens to KEY:go; everyone
# takes one with BLPOP (blocking until there is one). redis-cli on 127.0.0.1.
port=$1 key=$2 n=$3
count=$(redis-cli -h 127.0.0.1 -p "$port" INCR "$key") || exit 1
if [ "$count" -eq "$n" ]; then
  tokens='' i=0
  while [ "$i" -lt "$n" ]; do tokens="$tokens 1"; i=$((i + 1)); done
  # shellcheck disable=SC2086
  redis-cli -h 127.0.0.1 -p "$port" RPUSH "$key:go" $tokens >/dev/null || exit 1
fi
out=$(redis-cli -h 127.0.0.1 -p "$port" BLPOP "$key:go" 0) || exit 1
[ -n "$out" ]
