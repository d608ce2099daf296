#!/bin/bash
# Usage: tests/infra/slurm-client.sh CMD [ARGS...]
#   e.g. timeout -k 5 60 tests/infra/slurm-client.sh srun -N3 -n6 ./build/tfbarrier ...
#
# Runs a Slurm client command (srun, sbatch, squeue, sinfo, scancel, scontrol,
# salloc, or any command that calls them) where it can reach the test cluster
# started by slurm-up.sh: it sources /tmp/tfb-slurm/slurm.env (SLURM_CONF,
# TFB_SLURM_*) and, in netns mode, execs the command inside the tfb-head
# namespace (`ip netns exec tfb-head`). In single/multi mode it just execs it.
# The caller's environment (PATH, cwd, ...) is passed through unchanged, and
# srun/sbatch hand it on to the tasks (their default is --export=ALL).
# It adds NO timeout: always wrap it, preferably with -k (srun may ignore SIGTERM).
# Exits 2 if no cluster is up (no /tmp/tfb-slurm/slurm.env).
set -euo pipefail

envfile=/tmp/tfb-slurm/slurm.env
[ $# -ge 1 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
[ -r "$envfile" ] || { echo "slurm-client: no test cluster ($envfile missing); run slurm-up.sh" >&2; exit 2; }
# shellcheck source=/dev/null
. "$envfile"
if [ -n "${TFB_SLURM_CLIENT_NS:-}" ]; then
  exec ip netns exec "$TFB_SLURM_CLIENT_NS" "$@"
fi
exec "$@"
