#!/usr/bin/env bats
# The code a short command runs is grouped on a few pages: CMakeLists.txt
# links tfbarrier with lld and --symbol-ordering-file=bench/link-order.txt
# (written by bench/link-order.sh), and a `wait` then takes 8 page faults in
# its own code instead of 24 (docs/performance.md). These tests check that
# the list still names tfbarrier's functions, and that the linker placed them
# together.
load helpers

setup() {
  setup_common
  command -v nm >/dev/null || skip "nm is not installed (binutils)"
  LIST=$BATS_TEST_DIRNAME/../../bench/link-order.txt
}
teardown() { teardown_common; }

# grouping BINARY LIST: prints "present P of L, span S KiB for K KiB of code"
# for the functions of LIST (one mangled name a line, # comments) in BINARY,
# and fails when fewer than 70% of them are there or they lie spread out
# (their span more than 1.25 times their size, plus 64 KiB).
grouping() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import subprocess, sys
binary, listfile = sys.argv[1], sys.argv[2]
want = [l.strip() for l in open(listfile) if l.strip() and not l.startswith("#")]
syms = {}
nm = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
for line in nm.splitlines():
    f = line.split()
    if len(f) == 4 and f[2] in "tTwW":
        syms.setdefault(f[3], []).append((int(f[0], 16), int(f[1], 16)))
if not syms:
    sys.exit(f"no function symbols in {binary}: stripped?")
present = [w for w in want if w in syms]
spans = [a for w in present for a in syms[w]]
lo, hi = min(a for a, _ in spans), max(a + s for a, s in spans)
size = sum(s for _, s in spans)
print(f"present {len(present)} of {len(want)}, span {(hi - lo) >> 10} KiB for {size >> 10} KiB of code")
if len(present) < 0.7 * len(want):
    sys.exit("most of these functions are gone from the binary: run bench/link-order.sh")
if hi - lo > 1.25 * size + 65536:
    sys.exit("these functions are spread out: was the binary linked with lld and bench/link-order.txt?")
EOF
}

@test "bench/link-order.txt still names the functions tfbarrier has" {
  run grouping "$TFB" "$LIST"
  echo "# $output" >&3
  [[ "$output" == *"present"* ]]
  [[ "$output" != *"functions are gone"* ]]
}

@test "the functions of bench/link-order.txt lie together in the binary (linked with lld)" {
  [[ $(readelf -p .comment "$TFB" 2>/dev/null) == *LLD* ]] ||
    skip "$TFB was not linked with lld (apt-get install lld, or -DTFB_LINK_ORDER=OFF)"
  run grouping "$TFB" "$LIST"
  echo "# $output" >&3
  assert_success
}

@test "the check sees functions that were not grouped" {
  # As many functions that are not in the list, from all over the binary.
  local other=$BATS_TEST_TMPDIR/other.txt
  nm --defined-only "$TFB" | awk '$2 == "t" || $2 == "T" {print $3}' | sort -u |
    grep -vxF -f <(grep -v '^#' "$LIST") | awk 'NR % 10 == 0' >"$other"
  [ "$(wc -l <"$other")" -gt 100 ]
  run grouping "$TFB" "$other"
  assert_failure
  assert_output --partial "spread out"
}

# Each shared library the binary needs is loaded, relocated and bound by every
# `tfbarrier wait`: libm once came in with one std::lround in `report`, and
# cost every wait 30,000 instructions and 15 page faults (bench/startup-cost.sh).
@test "the binary needs libc and its loader only (no libm, no libstdc++: every wait would load them)" {
  local needed
  needed=$(readelf -d "$TFB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
  echo "# NEEDED: $needed" >&3
  [[ $needed =~ ^(ld-linux[^ ]*\ )?libc\.so\.6\ (ld-linux[^ ]*\ )?$ ]] || { echo "needs: $needed" >&2; false; }
}

@test "the binary imports no libc symbol beyond bench/imports.txt (each is looked up at every start: BIND_NOW)" {
  # 13 came in unnoticed with the metrics and status --watch (opendir,
  # sigwait, tcsetattr, ...): +3.8% instructions for every start. Use
  # src/sys/no_new_imports.h, or add the name here on purpose (and measure
  # with bench/startup-cost.sh).
  local allowed=$BATS_TEST_DIRNAME/../../bench/imports.txt extra
  extra=$(nm -D --undefined-only "$TFB" | awk '{print $NF}' | sort | comm -23 - <(grep -v '^#' "$allowed" | sort))
  [ -z "$extra" ] || { echo "new imports: $extra" >&2; false; }
}

@test "no code of tfbarrier's own runs before main beyond its three known initializers (each runs at every start)" {
  # A table built at start-up (settings.cpp's launcher table, before it was
  # constexpr) cost every wait 0.3% more instructions and a page fault.
  # Make such a table constexpr; a new initializer here is on purpose.
  local found
  found=$(nm "$TFB" | awk '$3 ~ /^_GLOBAL__sub_I__ZN3tfb/ && $3 !~ /\.cold$/ {print $3}' | sort)
  want=$(printf '%s\n' _GLOBAL__sub_I__ZN3tfb18parse_command_lineEiPPcb \
    _GLOBAL__sub_I__ZN3tfb20make_tcp_coordinatorENS_15connect_optionsE \
    _GLOBAL__sub_I__ZN3tfb8run_hostERKNS_12host_optionsE | sort)
  [ "$found" = "$want" ] || { echo "initializers: $found" >&2; false; }
}
