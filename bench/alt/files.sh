#!/bin/sh
# One participant of a barrier of files in a shared directory (bench/compare.sh):
#   files.sh DIR N RANK
# creates DIR/RANK, then polls every 10 ms until DIR holds N files. Plain
# POSIX sh (dash): the glob and the count are builtins; only sleep forks.
dir=$1 n=$2 rank=$3
mkdir -p "$dir" && : >"$dir/$rank" || exit 1
while :; do
  set -- "$dir"/*
  [ "$#" -ge "$n" ] && exit 0
  sleep 0.01
done
