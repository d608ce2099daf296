#!/usr/bin/env bash
# torchrun.sh: one rank of an epoch loop under torchrun. torchrun starts one
# process per rank and sets RANK, WORLD_SIZE, MASTER_ADDR and
# TORCHELASTIC_RUN_ID in each; tfbarrier reads them, so there is no --n,
# --rank or --addr below and no host to start:
#   n      WORLD_SIZE
#   rank   RANK
#   host   MASTER_ADDR, port 30000 + uid % 2768, the user's own (MASTER_PORT is
#          torchrun's own store; set TFBARRIER_PORT if that one is taken)
#   scope  torchrun-<TORCHELASTIC_RUN_ID>.<TORCHELASTIC_RESTART_COUNT>: a
#          restarted group never meets the one before it
# Rank 0 starts the host when none answers (log in
# ~/.tfbarrier/serve-NODE.log; it leaves after 10 idle minutes).
# `tfbarrier config` in here shows what each rank resolved.
#
# One node, 4 ranks (--no_python: this is a shell script, not Python):
#   torchrun --standalone --nproc_per_node=4 --no_python examples/torchrun.sh
# Two nodes (run on both; the rendezvous is torchrun's):
#   torchrun --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d \
#     --rdzv_endpoint=node01:29400 --rdzv_id=job42 --no_python examples/torchrun.sh
# (Debian 12's torch 1.13 under Python 3.11 fails on its default output
# redirection: add --redirects 1 --tee 1 --log_dir DIR.)
# Beyond one node the host authenticates (MUNGE, else ~/.tfbarrier/secret
# through the shared home): see docs/security.md.
#
# Knobs: TFBARRIER (the binary, default tfbarrier on PATH), EPOCHS (default 5),
# STOP_AT (the epoch the chief stops at, default 3).
set -euo pipefail

tfb=${TFBARRIER:-tfbarrier}
epochs=${EPOCHS:-5}
stop_at=${STOP_AT:-3}

for ((e = 1; e <= epochs; e++)); do
  # One epoch of training would go here, e.g.: python train.py --epoch "$e"
  sleep 0.2

  if [ "$RANK" -eq 0 ]; then
    # The chief: back as soon as all WORLD_SIZE ranks have arrived.
    "$tfb" wait --name "epoch$e" --chief --quiet
    if ((e >= stop_at)); then verdict='stop'; else verdict='continue'; fi
    echo "rank 0: epoch $e: all $WORLD_SIZE here: $verdict"
    "$tfb" decide "$verdict" --name "epoch$e" --message "epoch $e: $verdict" --quiet
    [ "$verdict" = continue ] || exit 0
  else
    rc=0
    msg=$("$tfb" wait --name "epoch$e" --quiet) || rc=$?
    echo "rank $RANK: $msg (exit $rc)"
    case $rc in
      0) ;;            # go on
      1) exit 0 ;;     # the chief said stop: a normal end, so torchrun sees success
      *) exit "$rc" ;; # host lost, aborted, timed out...: torchrun sees the failure
    esac
  fi
done
