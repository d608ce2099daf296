#!/usr/bin/env bats
# scripts/demo, the README's first command (the main job): a host, several
# workers and a chief gating epochs with one `wait --decide-by` line each.
# Run with the binary under test (TFBARRIER_BIN: no build).
load helpers

setup() { setup_common; }
teardown() { teardown_common; }

@test "scripts/demo (the README's first command) runs its epochs and every rank stops at the chief's verdict" {
  run -0 timeout 120 env TFBARRIER_BIN="$TFB" "$BATS_TEST_DIRNAME/../../scripts/demo" 4 3
  assert_output --partial "== 4 workers, the chief stops the job at epoch 3"
  assert_line --partial "[rank 1] epoch 2: exit 0: epoch 2 ok (loss 86)"
  assert_line --partial "[rank 3] epoch 3: exit 1: stop at epoch 3: validation loss 119 went up"
  assert_line --partial "[chief ] epoch 3: all 4 here; validation loss 119 went up: stop"
  assert_output --partial "== exit codes by rank: 1 1 1 1"
  assert_output --partial "== done"
  # the host it started is gone with it
  local pid
  pid=$(sed -n 's/^host pid \([0-9]*\) at .*/\1/p' <<<"$output")
  [ -n "$pid" ]
  wait_gone "$pid" 5
}
