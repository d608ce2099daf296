#!/usr/bin/env bash
# epochs.sh: WORKERS processes "train" in epochs on this machine. After each
# epoch they meet at a barrier, and the chief (rank 0) looks at the validation
# loss and decides whether they all go on or stop: every rank runs the same
# `tfbarrier wait --decide-by CMD` line. Plain shell, no launcher.
#
#   examples/epochs.sh                          # 4 workers, the chief stops at epoch 3
#   WORKERS=8 STOP_AT=5 examples/epochs.sh
#   TFBARRIER=build/release/tfbarrier examples/epochs.sh
#
# What a worker's `tfbarrier wait` returns: 0 go on, 1 the chief said stop,
# anything else an error (3 aborted, 69 host lost, 124 timed out, ...: see
# EXIT STATUS in tfbarrier(1)). It prints the chief's message on stdout.
set -euo pipefail

tfb=${TFBARRIER:-tfbarrier}
workers=${WORKERS:-4}    # participants, the chief included
epochs=${EPOCHS:-10}     # epochs at most
stop_at=${STOP_AT:-3}    # the epoch at which the loss goes up

# A host of our own on a free loopback port. --daemon detaches and prints
#   TFBARRIER_ADDR=127.0.0.1:PORT; export TFBARRIER_ADDR; TFBARRIER_PID=...
# so every tfbarrier below finds it. --idle-exit makes it leave by itself
# should this script die before it kills it.
log=$(mktemp "${TMPDIR:-/tmp}/epochs-host.XXXXXX")
eval "$("$tfb" serve --daemon --listen 127.0.0.1:0 --idle-exit 5m --quiet --log "$log")"
trap 'kill "$TFBARRIER_PID" 2>/dev/null; rm -f "$log"' EXIT

# Every participant counts the same n. (Under Slurm, torchrun or MPI this, the
# ranks and the address all come from the launcher.)
export TFBARRIER_N=$workers

train() { sleep "0.$((RANDOM % 5 + 1))"; }                           # one epoch of "work"
loss() { echo $((100 - $1 * 10 + ($1 >= stop_at ? 50 : 0))); }   # the chief's evaluation

# The chief's evaluation of epoch $1, as the command `wait --decide-by` runs
# (through /bin/sh -c, on the chief only, once everyone has arrived): it
# prints the message every participant prints, and exits 0 to go on or 1 to stop.
evaluate() {
  local e=$1 l
  l=$(loss "$e")
  if ((e >= stop_at)); then
    echo "echo 'epoch $e: loss $l went up'; exit 1"
  else
    echo "echo 'epoch $e: loss $l'"
  fi
}

worker() {
  local rank=$1 e msg rc
  for ((e = 1; e <= epochs; e++)); do
    train
    rc=0
    # One line for every rank: rank 0 (the chief) runs the command once all
    # are here; the others ignore it. Should the chief die meanwhile, everyone
    # exits 3 at once; --decide-timeout bounds the command.
    msg=$("$tfb" wait --name "epoch$e" --rank "$rank" --decide-by "$(evaluate "$e")" --decide-timeout 1m \
      --timeout 5m --quiet) || rc=$?
    case $rc in
      0) echo "rank $rank: $msg: going on" ;;
      1) echo "rank $rank: $msg: stopping"; return 0 ;;
      *) echo "rank $rank: tfbarrier wait exited $rc" >&2; return "$rc" ;;
    esac
  done
}

pids=()
for ((r = 0; r < workers; r++)); do
  worker "$r" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
echo "all $workers done, exit $status"
exit "$status"
