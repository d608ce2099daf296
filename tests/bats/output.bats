#!/usr/bin/env bats
# Output that cannot be written: the terminal of an ssh session that ended, a
# pipe whose reader has exited, a full disk (/dev/full). A write that fails is
# dropped; it must not end the host (it died with SIGABRT at its next log line,
# or hung with its idle timer gone) nor change a participant's exit code (134
# instead of 124).
load helpers

setup() { setup_common; }
teardown() { teardown_common; }

# on_full CMD...: runs CMD with its stderr on /dev/full (bats' run would
# otherwise capture it); sets status.
on_full() {
  run timeout 20 bash -c '"$@" 2>/dev/full' on_full "$@"
}

@test "a wait whose stderr cannot be written still exits with its own code (124)" {
  start_host
  on_full "$TFB" wait --name full --n 2 --timeout 1s
  [ "$status" -eq 124 ]
}

@test "an unreachable host is still 69 with stderr on /dev/full" {
  on_full "$TFB" status --addr "127.0.0.1:$(free_port)" --connect-timeout 200ms
  [ "$status" -eq 69 ]
}

@test "a host whose log cannot be written serves rounds and stays up" {
  local out=$BATS_TEST_TMPDIR/host.out
  timeout 60 "$TFB" serve --listen 127.0.0.1:0 >"$out" 2>/dev/full 3>&- &
  HOST_PIDS+=("$!")
  local host_pid=$! i
  for i in $(seq 200); do
    TFBARRIER_ADDR=$(sed -n 's/^TFBARRIER_ADDR=//p' "$out")
    [ -n "$TFBARRIER_ADDR" ] && break
    sleep 0.05
  done
  export TFBARRIER_ADDR
  [ -n "$TFBARRIER_ADDR" ]
  for i in 1 2 3; do
    run timeout 20 "$TFB" wait --name logfull --n 1 --quiet
    [ "$status" -eq 0 ]
  done
  alive "$host_pid"
}

@test "a host logging into a pipe whose reader has gone still exits on --idle-exit" {
  SECONDS=0
  # head reads the address line and exits; every later log line meets a closed pipe.
  run bash -c "timeout 20 '$TFB' serve --listen 127.0.0.1:0 --idle-exit 1s 2>&1 | head -n 1; exit \${PIPESTATUS[0]}"
  [ "$status" -eq 0 ]
  [ "$SECONDS" -le 10 ]
}
