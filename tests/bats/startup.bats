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
  # The breakpoints are link-time addresses: a PIE (-DTFB_PIE=ON) would need its load base.
  [[ $(readelf -h "$TFB") == *"EXEC (Executable file)"* ]] || skip "$TFB is position-independent (TFB_PIE=ON)"
  # Where ptrace is forbidden (some containers), gdb cannot run anything.
  timeout 30 gdb -batch -nx -ex run --args /bin/true 2>&1 | grep -q 'exited normally' ||
    skip "gdb cannot run a program here (ptrace not allowed?)"
}
teardown() { teardown_common; }

# cpuid_breakpoints PROGRAM: a gdb command "break *0xADDRESS" for each function
# of a position-dependent PROGRAM that holds a CPUID, one per line. Fails if objdump
# fails or finds no main (a stripped binary would make every check pass).
cpuid_breakpoints() {
  local dis
  dis=$(objdump -d --no-show-raw-insn "$1") || { echo "objdump failed on $1" >&2; return 1; }
  grep -q '^[0-9a-f]* <main>:$' <<<"$dis" || { echo "no main in $1: stripped?" >&2; return 1; }
  awk '/^[0-9a-f]+ <.*>:$/ { addr = $1; next }
       /\tcpuid/ && !(addr in seen) { seen[addr] = 1; print "break *0x" addr }' <<<"$dis"
}

# gdb_run PROGRAM ARGS...: runs PROGRAM under gdb with those breakpoints. Sets
# GDB_OUT (gdb's output) and GDB_BREAKS (how many breakpoints).
gdb_run() {
  local gdb_args=(-batch -nx -iex "set debuginfod enabled off" -ex "set pagination off"
                  -ex "set startup-with-shell off")
  local line bps
  bps=$(cpuid_breakpoints "$1") || return 1
  GDB_BREAKS=0
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    gdb_args+=(-ex "$line")
    GDB_BREAKS=$((GDB_BREAKS + 1))
  done <<<"$bps"
  GDB_OUT=$(timeout 60 gdb "${gdb_args[@]}" -ex run --args "$@" 2>&1 3>&-) || true
}

# no_cpuid_in CMD...: `$TFB CMD...` enters no function that holds a CPUID and
# exits 0 (so the code under test did run).
no_cpuid_in() {
  gdb_run "$TFB" "$@" || return 1
  echo "# $GDB_BREAKS function(s) of the binary hold a CPUID" >&3
  if grep -E '^Breakpoint [0-9]+, ' <<<"$GDB_OUT"; then
    echo "tfbarrier $* ran a CPUID (above: the function)" >&2
    return 1
  fi
  if ! grep -qE '^\[Inferior 1 \(process [0-9]+\) exited normally\]' <<<"$GDB_OUT"; then
    echo "tfbarrier $* did not run to a successful end under gdb:" >&2
    echo "$GDB_OUT" >&2
    return 1
  fi
}

@test "the check sees a CPUID where there is one (bench/cpuid_cost.c)" {
  local probe
  probe=$(dirname "$TFB")/bench/tfb_cpuid_cost
  [ -x "$probe" ] || skip "no $probe (built with TFB_BENCH=ON on x86)"
  gdb_run "$probe" 10
  [ "$GDB_BREAKS" -ge 1 ]
  grep -E '^Breakpoint [0-9]+, (0x[0-9a-f]+ in )?main ' <<<"$GDB_OUT" || { echo "$GDB_OUT" >&2; return 1; }
}

@test "tfbarrier --version runs no CPUID of its own" {
  no_cpuid_in --version
}

@test "a tfbarrier wait runs no CPUID of its own" {
  start_host
  no_cpuid_in wait --name plain --n 1 --quiet
}

@test "an authenticated tfbarrier wait runs no CPUID of its own (HMAC-SHA-256 is src/core/sha256.cpp)" {
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
