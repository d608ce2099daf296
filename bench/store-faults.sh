#!/usr/bin/env bash
# The store under faults, outside CI (issue #20, docs/store.md): prints its figures.
#
#   bench/store-faults.sh [TFBARRIER_BIN] [ROUNDS=200]
#
# 1. The fault harness's store mode (tests/faults/harness.py --store): a real
#    3-member etcd on loopback, three hosts `serve --store` (lease 2 s), the
#    participants of each round spread over them; per round a participant
#    killed (and replaced) or stopped, and globally, one at a time: kill -9 of a
#    host and restart, SIGSTOP of a host up to past its lease, kill -9 of etcd's
#    leader and restart, and the etcd members restarted one by one (rolling).
#    Host 1's wall clock is an hour ahead (libfaketime; SKEW=-1h for behind).
#    The same four safety rules; it prints rounds, faults by kind, exit codes
#    and violations, and fails on any violation.
# 2. As root: one "node" cut off from etcd (bench/store-cut.sh, namespaces
#    fcut-* in 10.234.0.0/24, removed on exit).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:-${TFBARRIER_BIN:-$HERE/../build/test/tfbarrier}}
ROUNDS=${2:-200}
rc=0
echo "== fault harness, store mode: $ROUNDS rounds"
/usr/bin/python3 "$HERE/../tests/faults/harness.py" --store --bin "$BIN" --rounds "$ROUNDS" \
  --budget "$((ROUNDS * 3))" --auth secret --skew "${SKEW:-+1h}" ${SEED:+--seed "$SEED"} || rc=$?
if [ "$(id -u)" -eq 0 ]; then
  echo "== one node cut off from etcd"
  "$HERE/store-cut.sh" "$BIN" || rc=$?
else
  echo "== one node cut off from etcd: skipped (needs root)"
fi
exit "$rc"
