#!/usr/bin/env bats
# Start-up hygiene: every `tfbarrier wait` is a process of its own, so what it
# does before its first byte is paid N times a round. On a virtual machine a
# CPUID instruction traps to the hypervisor (about 4 to 5 us here:
# build/*/bench/tfb_cpuid_cost), and tfbarrier used to run 15 of them at every
# start: 8 in OpenSSL's libcrypto constructor, 7 in std::random_device
# (docs/performance.md). These tests run real commands under gdb, with a
# breakpoint on every function of the binary that holds a CPUID instruction,
# and fail if one is entered. (The dynamic loader's own CPU probe is glibc's
# and is paid by every dynamically linked program; it is not counted here.)
load helpers

setup() {
  setup_common
  command -v gdb >/dev/null || skip "gdb is not installed (scripts/deps test installs it)"
  command -v objdump >/dev/null || skip "objdump is not installed (binutils)"
  # Where ptrace is forbidden (some containers), gdb cannot run anything.
  timeout 30 gdb -batch -nx -ex run --args /bin/true 2>&1 | grep -q 'exited normally' ||
    skip "gdb cannot run a program here (ptrace not allowed?)"
}
teardown() { teardown_common; }

# cpuid_functions: "ADDRESS NAME" of each function of $TFB that holds a CPUID.
cpuid_functions() {
  objdump -d --no-show-raw-insn "$TFB" | awk '
    /^[0-9a-f]+ <.*>:$/ { addr = $1; name = $2; next }
    /\tcpuid/ && !(addr in seen) { seen[addr] = 1; print "0x" addr, name }'
}

# no_cpuid_in CMD...: runs `$TFB CMD...` under gdb with a breakpoint on each
# such function; fails naming the function if one is entered, or if the
# command did not run to its end.
no_cpuid_in() {
  local gdb_args=(-batch -nx -ex "set pagination off" -ex "set startup-with-shell off")
  local addr name n=0
  while read -r addr name; do
    gdb_args+=(-ex "break *$addr")
    n=$((n + 1))
  done < <(cpuid_functions)
  echo "# $n function(s) of the binary hold a CPUID" >&3
  run timeout 60 gdb "${gdb_args[@]}" -ex run --args "$TFB" "$@"
  if grep -E '^(Breakpoint|Thread .* hit Breakpoint) [0-9]+, ' <<<"$output"; then
    echo "tfbarrier $* ran a CPUID (above: the function)" >&2
    return 1
  fi
  if ! grep -qE '\[Inferior 1 \(process [0-9]+\) exited (normally|with code [0-9]+)\]' <<<"$output"; then
    echo "tfbarrier $* did not run to its end under gdb:" >&2
    echo "$output" >&2
    return 1
  fi
}

@test "tfbarrier --version runs no CPUID of its own" {
  no_cpuid_in --version
}

@test "a tfbarrier wait runs no CPUID of its own" {
  start_host
  no_cpuid_in wait --name plain --n 1 --quiet
}

@test "an authenticated tfbarrier wait runs no CPUID of its own (HMAC-SHA-256 is src/sha256.cpp)" {
  "$TFB" secret >/dev/null
  start_host
  grep -q 'authentication: shared secret' "$HOST_LOG"
  no_cpuid_in wait --name sealed --n 1 --quiet
}

@test "decide, status and abort run no CPUID of their own" {
  start_host
  no_cpuid_in decide continue --name d --n 1 --quiet
  no_cpuid_in status
  no_cpuid_in abort --name a --reason test
}
