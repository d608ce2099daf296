#!/usr/bin/python3
"""Where a process takes its page faults: counts by mapping and access.

    bench/fault_map.py -- COMMAND [ARGS...]

Runs COMMAND twice with address-space randomisation off (so the two runs map
alike): once under gdb, stopped at exit_group to read its mappings, once
under `perf record -e exceptions:page_fault_user`. Each fault's address is
then put in its mapping and counted as R (read), W (write) or X (execute).
Needs gdb, perf and setarch; COMMAND must behave the same both times (for a
`tfbarrier wait --n 1`, a host on TFBARRIER_ADDR: a round of one each).
"""
import collections
import os
import re
import subprocess
import sys
import tempfile


def mappings(cmd):
    out = subprocess.run(["gdb", "-q", "-batch", "-ex", "set debuginfod enabled off", "-ex", "catch syscall exit_group",
                          "-ex", "run", "-ex", "info proc mappings", "--args", *cmd],
                         capture_output=True, text=True, check=True).stdout
    maps = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0].startswith("0x") and f[1].startswith("0x"):
            name = f[-1] if len(f) >= 6 and not f[-1].startswith("0x") else "[anon]"
            maps.append((int(f[0], 16), int(f[1], 16), os.path.basename(name) if name.startswith("/") else name))
    if not maps:
        sys.exit("fault_map: gdb printed no mappings:\n" + out[-2000:])
    return maps


def faults(cmd):
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        subprocess.run(["setarch", "-R", "perf", "record", "-q", "-o", data, "-e", "exceptions:page_fault_user", "--", *cmd],
                       stdout=subprocess.DEVNULL, check=True)
        out = subprocess.run(["perf", "script", "-i", data, "-F", "trace"], capture_output=True, text=True,
                             check=True).stdout
    for m in re.finditer(r"address=0x([0-9a-f]+)\s+ip=0x[0-9a-f]+\s+error_code=0x([0-9a-f]+)", out):
        yield int(m.group(1), 16), int(m.group(2), 16)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit(__doc__)
    maps = mappings(args)
    count = collections.Counter()
    for addr, err in faults(args):
        name = next((n for lo, hi, n in maps if lo <= addr < hi), "?")
        kind = "W" if err & 2 else "X" if err & 16 else "R"  # x86 error code: bit 1 write, bit 4 fetch
        count[(name, kind)] += 1
    by_map = collections.Counter()
    for (name, _), v in count.items():
        by_map[name] += v
    for name, total in by_map.most_common():
        kinds = " ".join(f"{k} {count[(name, k)]}" for k in "RWX" if count[(name, k)])
        print(f"{total:5d}  {name}  ({kinds})")
    print(f"{sum(by_map.values()):5d}  total")


main()
