#!/usr/bin/python3
"""Fault-injection harness for tfbarrier: many rounds of real participants over
real TCP, with faults injected while they wait, and the safety rules checked
from what every process did.

    /usr/bin/python3 tests/faults/harness.py [--rounds 40] [--budget 60] [--seed S]
    /usr/bin/python3 tests/faults/harness.py --store [--rounds 200] ...   # three hosts over etcd

Store mode (--store, issue #20, docs/store.md): a real 3-member etcd
(tests/tools/etcd-cluster, on loopback), three hosts `serve --store` sharing
it (lease --store-lease, default 2s), and each rank of a round on one of the
three hosts (a replacement on the same one). Everything on loopback. The global
faults are then the store's:
  store      host_kill          kill -9 one of the hosts, restart it on the same port 0.2-1.5 s later
             host_stop          SIGSTOP one host for 0.3 s to lease + 2 s (past its lease: fenced), then SIGCONT
             etcd_leader_kill   kill -9 etcd's leader, restart it 0.5-3 s later
             etcd_rolling       restart the three etcd members one by one (kill -9, 0.3-1 s, restart, healthy)
             etcd_freeze        SIGSTOP one etcd member (the leader one time in three) for 0.5-4 s, then SIGCONT:
                                it holds its connections and answers nothing (issue #31 item 7)
With --etcd-auth, etcd has authentication on and the hosts log in as a user
whose role may read and write the job's prefix only.
etcd runs with progress notifications every 500 ms and compacts its history
every minute (auto-compaction, periodic 1m), as docs/store.md's recipe asks.
A death is hidden from the others until the fault that covered it ends plus
the lease and its slack (a withdrawal is applied when the lease expires).

Every participant is a real `tfbarrier wait` (or `decide`) process; the host is
a real `tfbarrier serve --state-dir DIR`. As root the host runs in a network
namespace of its own (tfbf<PID>-h, 10.239.X.254) and the participants in three
others (tfbf<PID>-p1..p3, 10.239.X.1..3), all on one bridge; otherwise
everything runs on loopback. The namespaces and the /24 are this run's own (the
/24 guarded in the root namespace by an unreachable route, added first), so
two runs never meet and tests/infra's tfb-* namespaces are never touched; they
are removed on exit, and --cleanup removes what a killed run left.

Faults (see docs/reliability.md):
  per round  participant_kill   kill -9 a waiting participant, start a replacement (same rank, new process)
             participant_stop   SIGSTOP a waiting participant for 0.3-2.5 s, then SIGCONT
  global     host_kill          kill -9 the host, restart it on the same address 0.2-1.5 s later
             host_stop          SIGSTOP the host for 0.3-2.5 s, then SIGCONT
             link_down          (netns) `ip link set eth0 down` in the host's or a participant's namespace, 0.5-2.5 s
             drop               (netns) iptables DROP in the host's namespace of all packets from one participant namespace
             loss               (netns) iptables statistic-match: drop 30 % of packets into the host's namespace, 3 s
Global faults are injected one at a time, at random gaps, while rounds run;
each round is charged with the global faults that overlapped it.

The safety rules, checked from the record (arrival = the process was started,
exit = the harness saw it exit):
  1. No participant is released before n participants of its round were present
     at the same moment: before its exit there was an instant at which every
     rank 0..n-1 had a live process (a killed one counts as gone from its kill,
     plus the host's detection window if a link or host fault hid its death).
  2. Every participant released from one round got the same outcome (exit code
     and stdout), and it is one that was given: continue with no message when
     there is no chief, else the chief's verdict and message.
  3. Every process ends, with the round's outcome or a documented error code,
     within its timeout plus a bound (timeout + 2 x connect timeout + 3
     keep-alives + 2 s): none hangs.
  4. An acknowledged verdict (decide exited 0) is never lost: every released
     participant of that round carries it.
Exit status: 0 when there are no violations, 1 otherwise, 2 on a setup error.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Each run has namespaces and a /24 of its own (so two runs on one machine never meet):
# namespaces tfbf<PID>-h, -sw, -p1..3 in 10.239.X.0/24, X picked free; the choice is
# written to STATE_DIR/<PID> so that --cleanup can undo what a killed run left.
NS_STATE_DIR = "/run/tfb-faults"
NS_NODES = 3
NS_PREFIX = NS_SUBNET = NS_NET = NS_HOST = NS_SWITCH = None


FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def configure_ns(pid, octet):
    global NS_PREFIX, NS_SUBNET, NS_NET, NS_HOST, NS_SWITCH
    NS_PREFIX = "tfbf%d" % pid
    NS_NET = "10.239.%d" % octet
    NS_SUBNET = NS_NET + ".0/24"
    NS_HOST = NS_PREFIX + "-h"
    NS_SWITCH = NS_PREFIX + "-sw"


configure_ns(os.getpid(), 0)

# Documented exit codes a participant may end with besides a release (0/1).
ERROR_CODES = {69: "host lost/unreachable", 75: "timed out, withdrawal unconfirmed", 124: "timed out", 3: "aborted", 130: "SIGINT", 143: "SIGTERM"}


def run(cmd, check=True, quiet=False):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return r


def parse_duration(s):
    s = s.strip()
    for suffix, mult in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * mult
    return float(s)


# ---------------------------------------------------------------- network namespaces


class Netns:
    """This run's private network: tfbf<PID>-h (host) and tfbf<PID>-p1..3 on a bridge in tfbf<PID>-sw."""

    def __init__(self):
        self.created = []
        self.guard = False

    @staticmethod
    def cleanup_leftovers():
        """Removes what runs that are no longer alive left behind: their tfbf<PID>-*
        namespaces (killing only processes inside them) and their guard routes."""
        runs = {}
        r = run(["ip", "netns", "list"], check=False)
        for line in r.stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith("tfbf") and "-" in name and name[4:name.index("-")].isdigit():
                runs.setdefault(int(name[4:name.index("-")]), []).append(name)
        if os.path.isdir(NS_STATE_DIR):
            for f in os.listdir(NS_STATE_DIR):
                if f.isdigit():
                    runs.setdefault(int(f), [])
        for pid, namespaces in runs.items():
            if pid != os.getpid() and os.path.exists("/proc/%d" % pid):
                continue  # a live run: not ours to touch
            for ns in namespaces:
                for p in run(["ip", "netns", "pids", ns], check=False).stdout.split():
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                run(["ip", "netns", "del", ns], check=False)
            path = os.path.join(NS_STATE_DIR, str(pid))
            try:
                with open(path) as f:
                    subnet = f.read().strip()
                if subnet and run(["ip", "route", "show", "type", "unreachable", "exact", subnet],
                                  check=False).stdout.strip():
                    run(["ip", "route", "del", "unreachable", subnet], check=False)
                os.unlink(path)
            except OSError:
                pass

    def up(self):
        Netns.cleanup_leftovers()
        # A /24 nobody routes yet; the guard first, so a command that forgets its
        # namespace fails at once instead of sending traffic off the machine.
        for attempt in range(250):
            octet = (os.getpid() + attempt) % 250 + 1
            subnet = "10.239.%d.0/24" % octet
            if run(["ip", "route", "show", "root", subnet]).stdout.strip():
                continue
            if run(["ip", "route", "add", "unreachable", subnet], check=False).returncode == 0:
                break
        else:
            raise RuntimeError("no free /24 in 10.239.0.0/16 for the test network")
        configure_ns(os.getpid(), octet)
        self.guard = True
        os.makedirs(NS_STATE_DIR, exist_ok=True)
        with open(os.path.join(NS_STATE_DIR, str(os.getpid())), "w") as f:
            f.write(NS_SUBNET + "\n")
        if run(["ip", "route", "get", NS_NET + ".1"], check=False).returncode == 0:
            raise RuntimeError("guard check failed: %s.1 is routable from the root namespace" % NS_NET)
        self._add_ns(NS_SWITCH)
        run(["ip", "-n", NS_SWITCH, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", NS_SWITCH, "link", "set", "br0", "up"])
        self._add_host(NS_HOST, 254, "swh")
        for i in range(1, NS_NODES + 1):
            self._add_host("%s-p%d" % (NS_PREFIX, i), i, "sw%d" % i)
        if run(["ip", "-n", NS_HOST, "route", "get", "8.8.8.8"], check=False).returncode == 0:
            raise RuntimeError("%s unexpectedly has a route off the machine" % NS_HOST)

    def _add_ns(self, ns):
        run(["ip", "netns", "add", ns])
        self.created.append(ns)
        run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _add_host(self, ns, idx, port):
        self._add_ns(ns)
        run(["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", NS_SWITCH])
        run(["ip", "-n", NS_SWITCH, "link", "set", port, "master", "br0"])
        run(["ip", "-n", NS_SWITCH, "link", "set", port, "up"])
        run(["ip", "-n", ns, "addr", "add", "%s.%d/24" % (NS_NET, idx), "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])

    def down(self):
        for ns in reversed(self.created):
            for p in run(["ip", "netns", "pids", ns], check=False).stdout.split():
                try:
                    os.kill(int(p), signal.SIGKILL)  # only processes in namespaces this harness made
                except (ProcessLookupError, ValueError):
                    pass
        for ns in reversed(self.created):
            run(["ip", "netns", "del", ns], check=False)
        self.created = []
        if self.guard:
            run(["ip", "route", "del", "unreachable", NS_SUBNET], check=False)
            self.guard = False
            try:
                os.unlink(os.path.join(NS_STATE_DIR, str(os.getpid())))
            except OSError:
                pass


# ---------------------------------------------------------------- processes


class Proc:
    """One real process. The PID is signalled only while it is not yet reaped."""

    def __init__(self, h, rec, argv, env):
        self.h = h
        self.rec = rec
        self.lock = threading.Lock()
        self.reaped = False
        self.done = threading.Event()
        self.on_exit = []
        base = os.path.join(h.workdir, "procs", rec["id"])
        self.out_path, self.err_path = base + ".out", base + ".err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            rec["start"] = h.now()
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                      start_new_session=True, close_fds=True)
        rec["pid"] = self.p.pid
        rec["argv"] = argv
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self):
        os.waitid(os.P_PID, self.p.pid, os.WEXITED | os.WNOWAIT)
        t = self.h.now()
        with self.lock:
            rc = self.p.wait()
            self.reaped = True
        with open(self.out_path, "rb") as f:
            out = f.read().decode("utf-8", "replace")
        with open(self.err_path, "rb") as f:
            err = f.read().decode("utf-8", "replace")
        with self.h.lock:
            self.rec["end"] = t
            self.rec["rc"] = rc
            self.rec["stdout"] = out
            self.rec["stderr"] = err[-2000:]
        for cb in self.on_exit:
            try:
                cb(self)
            except Exception as e:  # a bug in the harness must not hang it
                self.h.note("harness error in exit callback of %s: %r" % (self.rec["id"], e))
        self.done.set()

    def signal(self, sig):
        with self.lock:
            if self.reaped:
                return False
            os.kill(self.p.pid, sig)
            return True

    def alive(self):
        return not self.done.is_set()


# ---------------------------------------------------------------- the host


class Host:
    def __init__(self, h, index=0):
        self.h = h
        self.index = index
        self.proc = None
        self.addr = None
        self.incarnation = 0
        self.lock = threading.Lock()

    def argv(self, listen):
        a = [self.h.bin, "serve", "--listen", listen]
        if self.h.store:
            a += ["--store", self.h.store, "--store-lease", self.h.args.store_lease]
            if self.h.args.etcd_auth:
                a += ["--store-user", "job", "--store-password-file", self.h.etcd_password]
        if self.h.state_dir:
            a += ["--state-dir", self.h.state_dir]
        if self.h.secret:
            a += ["--secret-file", self.h.secret]
        elif self.h.netns:
            a += ["--insecure"]
        if self.h.store and self.index == 1 and self.h.args.skew:
            # Host 1's wall clock is off (libfaketime; its monotonic clock is
            # left alone): no host's clock may change the replicated state (issue #31).
            a = ["env", "LD_PRELOAD=" + FAKETIME_LIB, "FAKETIME=" + self.h.args.skew,
                 "FAKETIME_DONT_FAKE_MONOTONIC=1"] + a
        return self.h.ns_prefix(NS_HOST) + a

    def start(self):
        listen = self.addr or ("%s.254:0" % NS_NET if self.h.netns else "127.0.0.1:%d" % self.h.pick_port())
        for attempt in range(20):
            self.incarnation += 1
            rec = {"id": "host%s-%d" % (self.index if self.h.store else "", self.incarnation), "role": "host"}
            p = Proc(self.h, rec, self.argv(listen), self.h.env())
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with open(p.out_path) as f:
                    for line in f:
                        if line.startswith("TFBARRIER_ADDR="):
                            self.addr = line.strip().split("=", 1)[1]
                            self.proc = p
                            return
                if p.done.is_set():
                    break
                time.sleep(0.01)
            if p.alive():
                p.signal(signal.SIGKILL)
            p.done.wait(5)
            with open(p.err_path) as f:
                err = f.read().strip().splitlines()
            self.h.note("host start %d on %s failed (rc %s): %s" % (attempt + 1, listen, rec.get("rc"),
                                                                   err[-1] if err else "no output"))
            time.sleep(0.2)
        raise RuntimeError("the host could not be (re)started on %s" % listen)

    def kill9_and_restart(self, down_for):
        with self.lock:
            self.proc.signal(signal.SIGKILL)
            self.proc.done.wait(10)
            time.sleep(down_for)
            t = time.monotonic()
            self.start()
            return time.monotonic() - t

    def freeze(self, seconds):
        with self.lock:
            self.proc.signal(signal.SIGSTOP)
            try:
                time.sleep(seconds)
            finally:
                self.proc.signal(signal.SIGCONT)

    def stop(self):
        if self.proc and self.proc.alive():
            self.proc.signal(signal.SIGCONT)
            self.proc.signal(signal.SIGTERM)
            if not self.proc.done.wait(10):
                self.proc.signal(signal.SIGKILL)
                self.proc.done.wait(5)
        return self.proc.rec.get("rc") if self.proc else None


# ---------------------------------------------------------------- the harness


class Harness:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.bin = args.bin
        self.t0 = time.monotonic()
        self.lock = threading.RLock()
        self.workdir = args.workdir or tempfile.mkdtemp(prefix="tfb-faults-")
        os.makedirs(os.path.join(self.workdir, "procs"), exist_ok=True)
        self.home = os.path.join(self.workdir, "home")
        os.makedirs(self.home, exist_ok=True)
        self.netns = args.netns
        self.state_dir = None if args.no_state_dir or args.store else os.path.join(self.workdir, "state")
        self.store = None
        self.etcd_dir = os.path.join(self.workdir, "etcd")
        self.etcd_lock = threading.Lock()
        self.secret = None
        if args.auth == "secret":
            self.secret = os.path.join(self.workdir, "secret")
            run([self.bin, "secret", "--file", self.secret])
        self.ka = parse_duration(args.keepalive)
        self.ct = parse_duration(args.connect_timeout)
        self.timeout = parse_duration(args.timeout)
        self.bound = self.timeout + 2 * self.ct + 3 * self.ka + 2.0
        self.procs = []          # every Proc ever started
        self.rounds = []         # round records
        self.global_faults = []  # {kind, start, end, detail}
        self.notes = []
        self.stop_faults = threading.Event()
        self.hosts = [Host(self, i) for i in range(3 if args.store else 1)]
        self.host = self.hosts[0]
        self.lease = parse_duration(args.store_lease) if args.store else 0.0
        self.scope = "faults-%d" % args.seed
        self.netns_obj = None
        self.fault_state = {"links_down": set(), "rules": []}

    def now(self):
        return round(time.monotonic() - self.t0, 4)

    def note(self, text):
        with self.lock:
            self.notes.append("%.2f %s" % (self.now(), text))
        if self.args.verbose:
            print("[%.2f] %s" % (self.now(), text), file=sys.stderr, flush=True)

    def env(self):
        e = {"PATH": "/usr/bin:/bin", "HOME": self.home, "LANG": "C.UTF-8",
             "TFBARRIER_KEEPALIVE": self.args.keepalive, "TFBARRIER_CONNECT_TIMEOUT": self.args.connect_timeout}
        if self.secret:
            e["TFBARRIER_SECRET_FILE"] = self.secret
        elif self.netns:
            e["TFBARRIER_INSECURE"] = "1"  # the host runs serve --insecure beyond loopback
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):  # for a sanitizer build (--bin)
            if k in os.environ:
                e[k] = os.environ[k]
        return e

    def ns_prefix(self, ns):
        return ["ip", "netns", "exec", ns] if self.netns and ns else []

    def pick_port(self):
        # Below the ephemeral range, so that no client's source port can ever be the host's
        # port (a reconnecting client could otherwise connect to itself while the host is down).
        lo = 32768
        try:
            with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
                lo = int(f.read().split()[0])
        except (OSError, ValueError):
            pass
        for _ in range(100):
            port = self.rng.randint(max(1024, lo - 12000), lo - 1)
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
            finally:
                s.close()
        raise RuntimeError("no free port below the ephemeral range")

    def start_proc(self, rnd, rank, role, argv, ns):
        with self.lock:
            idx = len(rnd["procs"])
            rec = {"id": "%s-%d-%s%s" % (rnd["name"], idx, role, "" if rank is None else rank), "round": rnd["index"],
                   "rank": rank, "role": role, "ns": ns, "killed_at": None, "stops": [], "replacement_of": None}
            rnd["procs"].append(rec)
        p = Proc(self, rec, self.ns_prefix(ns) + argv, self.env())
        with self.lock:
            self.procs.append(p)
            rnd["live"].append(p)
        return p

    # ------------------------------------------------------------ one round

    def common(self, host=0):
        return ["--addr", self.hosts[host].addr, "--scope", self.scope, "-q"]

    def pick_host(self, rng):
        return rng.randrange(len(self.hosts))

    def node_ns(self):
        return "%s-p%d" % (NS_PREFIX, self.rng.randint(1, NS_NODES)) if self.netns else None

    def run_round(self, index, name):
        rng = random.Random(self.rng.random())
        n = rng.randint(self.args.min_n, self.args.max_n)
        mode = rng.choices(["plain", "chief", "chief_nowait", "advance"], [35, 25, 15, 25])[0]
        verdict = rng.choice(["stop", "continue"]) if mode != "plain" else None
        message = "round %d %s %08x" % (index, verdict, rng.getrandbits(32)) if verdict else None
        faults = []
        r = rng.random()
        if r < 0.35:
            faults.append("participant_kill")
        elif r < 0.65:
            faults.append("participant_stop")
        elif r < 0.75:
            faults += ["participant_kill", "participant_stop"]
        rnd = {"index": index, "name": name, "n": n, "mode": mode, "verdict": verdict, "message": message,
               "faults": faults, "procs": [], "live": [], "deciders_launched": 0, "pending": 0,
               "start": self.now(), "ns": {}, "host": {}}
        with self.lock:
            self.rounds.append(rnd)
        cond = threading.Condition(self.lock)
        rnd["cond"] = cond

        def busy(delta):
            with cond:
                rnd["pending"] += delta
                cond.notify_all()

        def launch(rank, role, replacement_of=None, attempt=0):
            ns = rnd["ns"].setdefault(rank, self.node_ns()) if rank is not None else self.node_ns()
            host = rnd["host"].setdefault(rank, self.pick_host(rng))  # a replacement: the same host
            if role == "advance":
                argv = [self.bin, "decide", verdict, "--name", name, "--no-wait", "--n", str(n), "--rank", "0",
                        "-m", message] + self.common(host)
            else:
                argv = [self.bin, "wait", "--name", name, "--n", str(n), "--rank", str(rank),
                        "--timeout", self.args.timeout] + self.common(host)
                if role == "chief":
                    argv.append("--chief")
            p = self.start_proc(rnd, rank, role, argv, ns)
            p.rec["replacement_of"] = replacement_of
            p.rec["attempt"] = attempt
            if replacement_of is not None:
                p.on_exit.append(lambda q: replacement_refused(q, rank, role, attempt))
            if role == "chief":
                p.on_exit.append(chief_done)
            return p

        def replacement_refused(q, rank, role, attempt):
            # The host may still count the killed process (its death was hidden by a link
            # or host fault): it refuses the replacement's rank with ERR CONFLICT (exit 4).
            # A supervisor would try again; so do we, a few times.
            if q.rec["rc"] == 4 and "already held" in q.rec["stderr"] and attempt < 4:
                busy(+1)

                def again():
                    try:
                        time.sleep(0.5)
                        launch(rank, role, replacement_of=q.rec["replacement_of"], attempt=attempt + 1)
                    finally:
                        busy(-1)
                threading.Thread(target=again, daemon=True).start()

        def chief_done(q):
            if q.rec["rc"] != 0 or mode not in ("chief", "chief_nowait"):
                return
            with self.lock:
                if rnd["deciders_launched"]:
                    return
                rnd["deciders_launched"] = 1
            argv = [self.bin, "decide", verdict, "--name", name, "-m", message] + self.common(self.pick_host(rng))
            if mode == "chief_nowait":
                argv.append("--no-wait")
            if rng.random() < 0.5:
                argv += ["--n", str(n), "--rank", "0"]
            self.start_proc(rnd, None, "decider", argv, self.node_ns())

        # Arrivals, staggered.
        offsets = sorted((rng.uniform(0, self.args.stagger), rank) for rank in range(n))
        # Faults strike while the round is in flight: after the first arrival, before the last.
        first = offsets[0][0]
        if offsets[-1][0] < first + 0.3:
            offsets[-1] = (first + 0.3, offsets[-1][1])
        fault_plan = [(rng.uniform(first + 0.05, offsets[-1][0]), f) for f in faults]
        busy(+1)

        def inject(at, kind):
            try:
                time.sleep(max(0, at - (self.now() - rnd["start"])))
                with self.lock:
                    targets = [p for p in rnd["live"] if p.alive() and p.rec["role"] in ("worker", "chief", "advance")
                               and p.rec["killed_at"] is None]
                if not targets:
                    self.note("round %d (%s): %s skipped (nobody waiting)" % (index, name, kind))
                    rnd.setdefault("skipped", []).append(kind)
                    return
                victim = rng.choice(targets)
                if kind == "participant_kill":
                    t = self.now()
                    victim.signal(signal.SIGCONT)  # (if it was also stopped)
                    if victim.signal(signal.SIGKILL):
                        victim.rec["killed_at"] = t
                        self.record_fault(rnd, kind, t, t, victim.rec["id"])
                        victim.done.wait(10)
                        time.sleep(rng.uniform(0, 0.3))
                        launch(victim.rec["rank"], victim.rec["role"], replacement_of=victim.rec["id"])
                else:
                    length = rng.uniform(0.3, 2.5)
                    t = self.now()
                    if victim.signal(signal.SIGSTOP):
                        try:
                            time.sleep(length)
                        finally:
                            victim.signal(signal.SIGCONT)
                        victim.rec["stops"].append((t, self.now()))
                        self.record_fault(rnd, kind, t, self.now(), victim.rec["id"])
            except Exception as e:
                self.note("harness error injecting %s in %s: %r" % (kind, name, e))
            finally:
                busy(-1)

        for at, kind in fault_plan:
            busy(+1)
            threading.Thread(target=inject, args=(at, kind), daemon=True).start()
        try:
            for off, rank in offsets:
                time.sleep(max(0, off - (self.now() - rnd["start"])))
                if rank == 0 and mode == "advance":
                    launch(0, "advance")
                elif rank == 0 and mode in ("chief", "chief_nowait"):
                    launch(0, "chief")
                else:
                    launch(rank, "worker")
        finally:
            busy(-1)
        # Wait until every process of the round has ended and nothing more is to come.
        with cond:
            while True:
                live = [p for p in rnd["live"] if p.alive()]
                if not live and rnd["pending"] == 0:
                    break
                cond.wait(0.1)
        rnd["end"] = self.now()
        del rnd["cond"], rnd["live"]
        return rnd

    def record_fault(self, rnd, kind, start, end, detail):
        with self.lock:
            rnd.setdefault("injected", []).append({"kind": kind, "start": start, "end": end, "detail": detail})

    # ------------------------------------------------------------ global faults

    def global_kinds(self):
        kinds = {"host_kill": 3, "host_stop": 3}
        if self.store:
            kinds.update({"etcd_leader_kill": 2, "etcd_rolling": 1, "etcd_freeze": 2})
        if self.netns:
            kinds.update({"link_down": 3, "drop": 2, "loss": 1})
        for k in self.args.no_fault or []:
            kinds.pop(k, None)
        return kinds

    def fault_loop(self):
        kinds = self.global_kinds()
        rng = random.Random(self.rng.random())
        while kinds and not self.stop_faults.wait(rng.uniform(self.args.fault_gap_min, self.args.fault_gap_max)):
            kind = rng.choices(list(kinds), list(kinds.values()))[0]
            start = self.now()
            try:
                detail = self.global_fault(kind, rng)
            except Exception as e:
                self.note("harness error in global fault %s: %r" % (kind, e))
                continue
            with self.lock:
                self.global_faults.append({"kind": kind, "start": start, "end": self.now(), "detail": detail})
            self.note("fault %s %s (%.2f-%.2f)" % (kind, detail, start, self.now()))

    def etcd(self, *args):
        return run([os.path.join(REPO, "tests/tools/etcd-cluster")] + list(args) + [], check=True).stdout.strip()

    ETCD_EXTRA = ("--experimental-watch-progress-notify-interval=500ms "
                  "--auto-compaction-mode=periodic --auto-compaction-retention=1m")

    def global_fault(self, kind, rng):
        host = rng.choice(self.hosts)
        which = "host %d (%s) " % (host.index, host.addr) if self.store else ""
        if kind == "host_kill":
            down = rng.uniform(0.2, 1.5)
            t = host.kill9_and_restart(down)
            return "%sdown %.2fs, then listening after %.2fs" % (which, down, t)
        if kind == "host_stop":
            length = rng.uniform(0.3, self.lease + 2.0 if self.store else 2.5)
            host.freeze(length)
            return "%sfrozen %.2fs%s" % (which, length, " (past its lease)" if self.store and length > self.lease
                                         else "")
        if kind == "etcd_leader_kill":
            with self.etcd_lock:
                leader = self.etcd("leader", self.etcd_dir)
                down = rng.uniform(0.5, 3.0)
                self.etcd("kill", self.etcd_dir, leader)
                time.sleep(down)
                self.etcd("restart", self.etcd_dir, leader)
            return "etcd member %s (the leader) down %.2fs" % (leader, down)
        if kind == "etcd_freeze":
            with self.etcd_lock:
                member = self.etcd("leader", self.etcd_dir) if rng.random() < 1 / 3 else str(rng.randrange(3))
                length = rng.uniform(0.5, 4.0)
                self.etcd("freeze", self.etcd_dir, member)
                try:
                    time.sleep(length)
                finally:
                    self.etcd("thaw", self.etcd_dir, member)
            return "etcd member %s frozen %.2fs" % (member, length)
        if kind == "etcd_rolling":
            parts = []
            with self.etcd_lock:
                for i in range(3):
                    down = rng.uniform(0.3, 1.0)
                    self.etcd("kill", self.etcd_dir, str(i))
                    time.sleep(down)
                    t = time.monotonic()
                    self.etcd("restart", self.etcd_dir, str(i))
                    parts.append("m%d down %.2fs, healthy after %.2fs" % (i, down, time.monotonic() - t))
            return "etcd members restarted one by one: " + "; ".join(parts)
        if kind == "link_down":
            ns = rng.choice([NS_HOST] + ["%s-p%d" % (NS_PREFIX, i) for i in range(1, NS_NODES + 1)])
            length = rng.uniform(0.5, 2.5)
            run(["ip", "-n", ns, "link", "set", "eth0", "down"])
            self.fault_state["links_down"].add(ns)
            try:
                time.sleep(length)
            finally:
                run(["ip", "-n", ns, "link", "set", "eth0", "up"])
                self.fault_state["links_down"].discard(ns)
            return "%s eth0 down %.2fs" % (ns, length)
        if kind in ("drop", "loss"):
            if kind == "drop":
                node = rng.randint(1, NS_NODES)
                rule = ["INPUT", "-s", "%s.%d" % (NS_NET, node), "-j", "DROP"]
                length = rng.uniform(0.5, 2.5)
                what = "packets from %s.%d dropped by %s for %.2fs" % (NS_NET, node, NS_HOST, length)
            else:
                rule = ["INPUT", "-i", "eth0", "-m", "statistic", "--mode", "random", "--probability", "0.3",
                        "-j", "DROP"]
                length = 3.0
                what = "30%% of packets into %s dropped for %.2fs" % (NS_HOST, length)
            run(["ip", "netns", "exec", NS_HOST, "iptables", "-I"] + rule)
            self.fault_state["rules"].append(rule)
            try:
                time.sleep(length)
            finally:
                run(["ip", "netns", "exec", NS_HOST, "iptables", "-D"] + rule)
                self.fault_state["rules"].remove(rule)
            return what
        raise ValueError(kind)

    def restore_network(self):
        for ns in list(self.fault_state["links_down"]):
            run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=False)
        for rule in list(self.fault_state["rules"]):
            run(["ip", "netns", "exec", NS_HOST, "iptables", "-D"] + rule, check=False)

    # ------------------------------------------------------------ watchdog

    def watchdog(self):
        """Ends (and reports) any process that outlives its bound: rule 3."""
        while not self.stop_watchdog.wait(0.2):
            with self.lock:
                procs = list(self.procs)
            for p in procs:
                if p.rec["role"] == "host" or not p.alive():
                    continue
                age = self.now() - p.rec["start"]
                if age > self.bound + 3 and not p.rec.get("hung"):
                    p.rec["hung"] = self.now()
                    self.note("%s still running after %.1fs: SIGTERM" % (p.rec["id"], age))
                    p.signal(signal.SIGCONT)
                    p.signal(signal.SIGTERM)
                elif p.rec.get("hung") and self.now() - p.rec["hung"] > 3:
                    p.signal(signal.SIGKILL)

    # ------------------------------------------------------------ main loop

    def start_store(self):
        os.environ["ETCD_EXTRA"] = self.ETCD_EXTRA  # for start, and restart after a kill
        eps = self.etcd("start", self.etcd_dir, "3").splitlines()[-1]
        prefix = "faults-%d" % self.args.seed
        self.store = "etcd://%s/%s" % (eps.replace("http://", ""), prefix)
        self.note("etcd at %s" % eps)
        if self.args.etcd_auth:
            # etcd's own access control (issue #31 item 9): a user whose role
            # may read and write the job's prefix only; root for the tools.
            ctl = ["etcdctl", "--endpoints=" + eps]
            env = dict(os.environ, ETCDCTL_API="3")
            for cmd in (["user", "add", "root:rootpw"], ["user", "grant-role", "root", "root"],
                        ["role", "add", "job"], ["role", "grant-permission", "job", "--prefix=true", "readwrite",
                                                 "/" + prefix + "/"],
                        ["user", "add", "job:Job-pw-%d" % self.args.seed], ["user", "grant-role", "job", "job"],
                        ["auth", "enable"]):
                subprocess.run(ctl + cmd, env=env, check=True, stdout=subprocess.DEVNULL)
            os.environ["ETCDCTL_USER"] = "root:rootpw"  # etcd-cluster's health checks log in
            self.etcd_password = os.path.join(self.workdir, "etcd-password")
            fd = os.open(self.etcd_password, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, ("Job-pw-%d\n" % self.args.seed).encode())
            os.close(fd)
            self.note("etcd auth on: user job, role readwrite /%s/" % prefix)

    def stop_store(self):
        if os.path.isdir(self.etcd_dir):
            run([os.path.join(REPO, "tests/tools/etcd-cluster"), "stop", self.etcd_dir], check=False)

    def run(self):
        if self.args.store:
            self.start_store()
        for host in self.hosts:
            host.start()
            self.note("host %d at %s" % (host.index, host.addr))
        self.stop_watchdog = threading.Event()
        threading.Thread(target=self.watchdog, daemon=True).start()
        faulter = threading.Thread(target=self.fault_loop, daemon=True)
        faulter.start()
        sem = threading.Semaphore(self.args.parallel)
        lanes = {}  # lane -> (barrier name, reusable)
        lane_free = [threading.Lock() for _ in range(self.args.parallel)]
        threads = []
        started = 0
        while started < self.args.rounds and self.now() < self.args.budget:
            sem.acquire()
            if self.now() >= self.args.budget:
                sem.release()
                break
            lane = next(i for i, l in enumerate(lane_free) if l.acquire(blocking=False))
            index = started
            started += 1
            name, reusable = lanes.get(lane, (None, False))
            if not reusable or self.rng.random() < 0.3:
                name = "b%d" % index  # a fresh barrier; else the lane's next round (gen G+1)

            def body(index=index, name=name, lane=lane):
                try:
                    rnd = self.run_round(index, name)
                    clean = name_reusable(rnd["procs"])
                    lanes[lane] = (name, clean)
                except Exception as e:
                    self.note("harness error in round %d: %r" % (index, e))
                    lanes[lane] = (None, False)
                finally:
                    lane_free[lane].release()
                    sem.release()
            t = threading.Thread(target=body, daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        self.stop_faults.set()
        faulter.join()
        self.restore_network()
        self.stop_watchdog.set()
        self.host_rcs = [host.stop() for host in self.hosts]
        self.host_rc = self.host_rcs[0]

    def kill_all(self):
        for p in self.procs:
            if p.alive():
                p.signal(signal.SIGCONT)
                p.signal(signal.SIGKILL)
        for p in self.procs:
            p.done.wait(5)


# ---------------------------------------------------------------- the checks


def check(h):
    """Returns a list of violations (rule, round, text) from the record."""
    violations = []
    detect = 3 * h.ka + 0.5 + 0.3  # the host's silence window, plus scheduling slack
    store = getattr(h, "store", None)
    if store:
        # A host killed, frozen or cut off from etcd: its participants count until its lease
        # expires (etcd checks leases about every 0.5 s), and a leave written during an etcd
        # fault is applied once a member answers (a client tries each endpoint in turn).
        detect = max(detect, getattr(h, "lease", 2.0) + 2.5)

    def hidden_until(t):
        # A death at t may be hidden from the host until the last global fault
        # that covers it ends (+ its silence window). The last, not the first
        # listed: a kill during a link fault that began inside an earlier host
        # freeze's window stays hidden until the link is back (seed 871770664).
        until = t + 0.05
        for f in h.global_faults:
            if f["kind"] == "host_kill" and not store:
                continue
            if f["start"] - 0.05 <= t <= f["end"] + detect:
                until = max(until, f["end"] + detect)
        return until

    for rnd in h.rounds:
        n, name = rnd["n"], rnd["name"]
        procs = rnd["procs"]
        arrivals = [p for p in procs if p["role"] in ("worker", "chief", "advance")]
        for p in arrivals:
            if p["killed_at"] is not None:
                p["gone_at"] = hidden_until(p["killed_at"])
            elif p["role"] == "advance":
                p["gone_at"] = float("inf")  # an acknowledged chief arrival is counted for good
            else:
                p["gone_at"] = p.get("end", float("inf"))
        released = [p for p in procs if p["killed_at"] is None and
                    ((p["role"] == "worker" and p.get("rc") in (0, 1)) or (p["role"] == "chief" and p.get("rc") == 0))]
        # Rule 1: an instant before the release at which every rank had a live process.
        for p in released:
            ok = False
            for t in sorted({q["start"] for q in arrivals if q["start"] <= p["end"]}):
                if all(any(q["rank"] == r and q["start"] <= t <= q["gone_at"] for q in arrivals) for r in range(n)):
                    ok = True
                    break
            if not ok:
                last = max((q["start"] for q in arrivals), default=0)
                violations.append((1, name, "%s (rank %s) exited %s at %.3f, but the %d ranks were never all "
                                   "present before that (last arrival started %.3f)" %
                                   (p["id"], p["rank"], p.get("rc"), p["end"], n, last)))
        # Rule 2: one outcome, and one that was given.
        workers = [p for p in released if p["role"] == "worker"]
        outcomes = {(p["rc"], p["stdout"]) for p in workers}
        if len(outcomes) > 1:
            violations.append((2, name, "released with different outcomes: %s" %
                               "; ".join("%s exit %s stdout %r" % (p["id"], p["rc"], p["stdout"]) for p in workers)))
        if rnd["mode"] == "plain":
            expected = (0, "")
        else:
            expected = (1 if rnd["verdict"] == "stop" else 0, rnd["message"] + "\n")
        for p in workers:
            if (p["rc"], p["stdout"]) != expected:
                violations.append((2, name, "%s released with exit %s stdout %r; the only outcome given was "
                                   "exit %s stdout %r" % (p["id"], p["rc"], p["stdout"], expected[0], expected[1])))
        # Rule 4: an acknowledged verdict is carried by every released participant.
        acked = [p for p in procs if p["role"] in ("advance", "decider") and p.get("rc") == 0
                 and p["killed_at"] is None]
        rnd["acknowledged"] = bool(acked)
        if acked:
            for p in workers:
                if (p["rc"], p["stdout"]) != expected:
                    violations.append((4, name, "verdict %s %r acknowledged to %s at %.3f, but %s got exit %s "
                                       "stdout %r" % (rnd["verdict"], rnd["message"], acked[0]["id"],
                                                      acked[0]["end"], p["id"], p["rc"], p["stdout"])))
        # Rule 3: every process ends, in time, with an outcome or a documented error.
        for p in procs:
            if p["killed_at"] is not None:
                continue
            rc = p.get("rc")
            took = p.get("end", h.now()) - p["start"]
            waiting_decide = p["role"] == "decider" and "--no-wait" not in p["argv"]
            if waiting_decide and (p.get("hung") or took > h.bound):
                # `decide` without --no-wait has no --timeout: when the round it decides never
                # fills again it waits for ever. Counted apart (see docs/reliability.md).
                rnd.setdefault("decide_blocked", []).append(p["id"])
                continue
            if p.get("hung") or rc is None or took > h.bound:
                violations.append((3, name, "%s ran %.1fs (bound %.1fs), exit %s: %s" %
                                   (p["id"], took, h.bound, rc, p.get("stderr", "").strip()[-300:])))
                continue
            allowed = set(ERROR_CODES) | ({0, 1} if p["role"] == "worker" else {0})
            if p["role"] in ("decider", "advance"):
                allowed |= {2, 4}  # NEEDN/CONFLICT: the round the verdict was for is gone (see reliability.md)
            if p.get("replacement_of") and rc == 4 and "already held" in p.get("stderr", ""):
                allowed.add(4)  # the host still counted the killed process; tried again
            if rc not in allowed:
                violations.append((3, name, "%s exited %s (not a documented outcome for a %s): %s" %
                                   (p["id"], rc, p["role"], p.get("stderr", "").strip()[-300:])))
    return violations


def name_reusable(procs):
    """May the next round of a lane reuse this round's barrier name (its next generation)?

    Only when the round left nothing behind on the host: every process released (0 or 1) or
    killed, and no advance decider killed. A killed advance decider's DECIDE may already sit in
    the host's socket buffer (the host frozen); it then releases the round, and the harness's
    replacement, arriving after the release, is the chief's arrival of the *next* round with this
    round's n (protocol.md, "DECIDE"). Seen once in CI (seed 1989588224): the next round on the
    name asked for another n, and its workers exited 4.
    """
    return all(p.get("rc") in (0, 1) or p.get("killed_at") is not None for p in procs) and \
        not any(p["role"] == "advance" and p.get("killed_at") is not None for p in procs)


def self_test():
    """Feeds the checker records that break each rule, and one that breaks none."""

    class Fake:
        ka, bound, global_faults = 0.3, 20.0, []

        def now(self):
            return 100.0

    def proc(pid, rank, role, start, end, rc, out="", **kw):
        p = {"id": pid, "rank": rank, "role": role, "start": start, "end": end, "rc": rc, "stdout": out,
             "stderr": "", "killed_at": None, "stops": [], "replacement_of": None, "argv": []}
        p.update(kw)
        return p

    def rnd(mode, procs, verdict=None, message=None, n=3):
        return {"index": 0, "name": "t", "n": n, "mode": mode, "verdict": verdict, "message": message, "procs": procs}

    ok = [proc("a", 0, "worker", 0.0, 2.0, 0), proc("b", 1, "worker", 0.5, 2.0, 0), proc("c", 2, "worker", 1.0, 2.0, 0)]
    cases = {
        "clean": (rnd("plain", ok), set()),
        # rank 2 starts after the others were released
        "early release": (rnd("plain", [proc("a", 0, "worker", 0.0, 1.0, 0), proc("b", 1, "worker", 0.1, 1.0, 0),
                                        proc("c", 2, "worker", 1.5, 1.6, 0)]), {1}),
        # rank 1 was killed before rank 2 arrived: never all present at once
        "dead member counted": (rnd("plain", [proc("a", 0, "worker", 0.0, 3.0, 0),
                                              proc("b", 1, "worker", 0.1, 0.2, -9, killed_at=0.2),
                                              proc("c", 2, "worker", 1.0, 3.0, 0)]), {1}),
        "split outcome": (rnd("chief", [proc("k", 0, "chief", 0.0, 1.0, 0), proc("b", 1, "worker", 0.1, 2.0, 1, "m\n"),
                                        proc("c", 2, "worker", 0.2, 2.0, 0, ""), proc("d", None, "decider", 1.0, 2.0, 0)],
                                  "stop", "m"), {2, 4}),
        "invented verdict": (rnd("plain", [proc("a", 0, "worker", 0.0, 2.0, 1, "x\n"),
                                           proc("b", 1, "worker", 0.1, 2.0, 1, "x\n"),
                                           proc("c", 2, "worker", 0.2, 2.0, 1, "x\n")]), {2}),
        "lost verdict": (rnd("advance", [proc("k", 0, "advance", 0.0, 0.1, 0), proc("b", 1, "worker", 0.1, 2.0, 0),
                                         proc("c", 2, "worker", 0.2, 2.0, 0)], "stop", "m"), {2, 4}),
        "hang": (rnd("plain", ok[:2] + [proc("c", 2, "worker", 1.0, 40.0, 124)]), {3}),
        # rank 1 was killed at 1.0, inside a host freeze's window (until 2.2) and
        # a link fault (until 5.2): the host may count it until 5.2, so a
        # release after rank 2's arrival at 2.5 is no violation.
        "kill hidden twice": (dict(rnd("plain", [proc("a", 0, "worker", 0.0, 3.0, 0),
                                                 proc("b", 1, "worker", 0.1, 1.0, -9, killed_at=1.0),
                                                 proc("c", 2, "worker", 2.5, 3.0, 0)]),
                                   faults=[{"kind": "host_stop", "start": 0.0, "end": 0.5},
                                           {"kind": "link_down", "start": 0.9, "end": 3.5}]), set()),
        "undocumented exit": (rnd("plain", ok[:2] + [proc("c", 2, "worker", 1.0, 2.0, 70)]), {3}),
    }
    failed = 0
    reuse = {
        "all released": (ok, True),
        "a worker killed": (ok[:2] + [proc("c", 2, "worker", 1.0, 1.1, -9, killed_at=1.1)], True),
        "a worker timed out": (ok[:2] + [proc("c", 2, "worker", 1.0, 9.0, 3)], False),
        "an advance decider killed": ([proc("k", 0, "advance", 0.0, 0.1, -9, killed_at=0.1),
                                       proc("k2", 0, "advance", 0.2, 0.3, 0, replacement_of="k")] + ok[1:], False),
    }
    for name, (procs, want) in reuse.items():
        got = name_reusable(procs)
        failed += got != want
        print("self-test name reuse: %-26s reusable: %-5s expected: %-5s %s" % (
            name, got, want, "ok" if got == want else "FAILED"))
    for name, (r, want) in cases.items():
        h = Fake()
        h.global_faults = r.pop("faults", [])
        h.rounds = [r]
        got = {v[0] for v in check(h)}
        status = "ok" if got == want else "FAILED"
        failed += got != want
        print("self-test %-20s rules broken: %-8s expected: %-8s %s" % (name, sorted(got), sorted(want), status))
    return 1 if failed else 0


def summarize(h, violations, elapsed):
    procs = [p.rec for p in h.procs if p.rec["role"] != "host"]
    by_fault = {}
    for rnd in h.rounds:
        for f in rnd.get("injected", []):
            by_fault[f["kind"]] = by_fault.get(f["kind"], 0) + 1
    for f in h.global_faults:
        by_fault[f["kind"]] = by_fault.get(f["kind"], 0) + 1
    codes = {}
    for p in procs:
        key = "killed" if p["killed_at"] is not None else str(p.get("rc"))
        codes.setdefault(p["role"], {}).setdefault(key, 0)
        codes[p["role"]][key] += 1
    complete = 0
    incomplete = []
    for rnd in h.rounds:
        # Complete: every rank's last process was released (a chief: told ALLHERE).
        last = {}
        for p in rnd["procs"]:
            if p["role"] in ("worker", "chief", "advance"):
                last[p["rank"]] = p
        ok = len(last) == rnd["n"] and all(p.get("rc") in (0, 1) and p["killed_at"] is None for p in last.values())
        if ok:
            complete += 1
        else:
            overlapping = [f["kind"] for f in h.global_faults if f["start"] <= rnd["end"] and f["end"] >= rnd["start"]]
            incomplete.append("%s (mode %s, n %d; round faults %s; global faults %s; exits %s)" % (
                rnd["name"], rnd["mode"], rnd["n"], [f["kind"] for f in rnd.get("injected", [])] or "none",
                overlapping or "none",
                ",".join("%s:%s" % (p["rank"] if p["rank"] is not None else "d",
                                    "k" if p["killed_at"] is not None else p.get("rc")) for p in rnd["procs"])))
    rules = {r: sum(1 for v in violations if v[0] == r) for r in (1, 2, 3, 4)}
    verdict_rounds = [r for r in h.rounds if r["mode"] != "plain"]
    lines = [
        "tfbarrier fault harness: seed %d; %s; auth %s; state dir %s; keepalive %s, connect timeout %s, "
        "timeout %s" % (h.args.seed, "store: 3 hosts over a 3-member etcd, loopback" if getattr(h, "store", None)
                        else "host in %s, participants in %s-p1..%d (%s)" % (NS_HOST, NS_PREFIX, NS_NODES,
                                                                                    NS_SUBNET)
                        if h.netns else "loopback", h.args.auth, "yes" if h.state_dir else "NO", h.args.keepalive,
                        h.args.connect_timeout, h.args.timeout),
        "rounds run: %d (n %d-%d, %d processes; %d rounds with a chief's verdict, %d acknowledged; %d on a "
        "reused barrier name)" % (len(h.rounds), h.args.min_n, h.args.max_n, len(procs), len(verdict_rounds),
                                   sum(1 for r in verdict_rounds if r.get("acknowledged")),
                                   sum(1 for r in h.rounds if r["name"] != "b%d" % r["index"])),
        "faults injected: %d (%s)" % (sum(by_fault.values()),
                                      ", ".join("%s %d" % (k, v) for k, v in sorted(by_fault.items()))),
    ] + ([
        "store faults: host_stop past the lease %d of %d; etcd members restarted %d (leader kills %d, rolling %d x 3)" % (
            sum(1 for f in h.global_faults if f["kind"] == "host_stop" and "past its lease" in f["detail"]),
            by_fault.get("host_stop", 0), by_fault.get("etcd_leader_kill", 0) + 3 * by_fault.get("etcd_rolling", 0),
            by_fault.get("etcd_leader_kill", 0), by_fault.get("etcd_rolling", 0))
    ] if getattr(h, "store", None) else []) + [
        "exit codes: %s" % "; ".join("%s %s" % (role, " ".join("%s:%d" % kv for kv in sorted(c.items())))
                                     for role, c in sorted(codes.items())),
        "rounds completed (every rank released): %d/%d" % (complete, len(h.rounds)),
    ]
    for text in incomplete[:30]:
        lines.append("  not completed: " + text)
    undelivered = [r["name"] for r in h.rounds if r.get("acknowledged") and not any(
        p["role"] == "worker" and p.get("rc") in (0, 1) and p["killed_at"] is None for p in r["procs"])]
    lines.append("acknowledged verdicts that reached no participant (the round never completed): %d%s" % (
        len(undelivered), " (%s)" % ", ".join(undelivered) if undelivered else ""))
    blocked = sum(len(r.get("decide_blocked", [])) for r in h.rounds)
    lines.append("waiting decides ended by the harness at their bound (decide has no --timeout): %d" % blocked)
    if getattr(h, "store", None):
        lines.append("hosts: %s (store %s, lease %s)" % (
            "; ".join("host %d: %d incarnations, final exit %s" % (x.index, x.incarnation, rc)
                      for x, rc in zip(h.hosts, getattr(h, "host_rcs", [None] * len(h.hosts)))),
            h.store, h.args.store_lease))
    else:
        lines.append("host: %d incarnations, final exit %s" % (h.host.incarnation, h.host_rc))
    lines.append("violations: %d (rule 1: %d, rule 2: %d, rule 3: %d, rule 4: %d)" % (
        len(violations), rules[1], rules[2], rules[3], rules[4]))
    for rule, name, text in violations[:50]:
        lines.append("  VIOLATION rule %d, barrier %s: %s" % (rule, name, text))
    lines.append("elapsed: %.1f s; record: %s" % (elapsed, os.path.join(h.workdir, "record.json")))
    return "\n".join(lines), by_fault


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("TFBARRIER_BIN", os.path.join(REPO, "build/dev/tfbarrier")))
    ap.add_argument("--rounds", type=int, default=40, help="rounds to run (default 40)")
    ap.add_argument("--budget", type=float, default=60, help="start no round after this many seconds (default 60)")
    ap.add_argument("--parallel", type=int, default=3, help="rounds in flight at once (default 3)")
    ap.add_argument("--min-n", type=int, default=3)
    ap.add_argument("--max-n", type=int, default=8)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--timeout", default="8s", help="each participant's --timeout (default 8s)")
    ap.add_argument("--connect-timeout", default="5s", help="each client's --connect-timeout (default 5s)")
    ap.add_argument("--keepalive", default="300ms", help="TFBARRIER_KEEPALIVE (default 300ms)")
    ap.add_argument("--stagger", type=float, default=1.0, help="arrivals spread over this many seconds")
    ap.add_argument("--fault-gap-min", type=float, default=0.3, help="seconds between global faults, at least")
    ap.add_argument("--fault-gap-max", type=float, default=1.5, help="seconds between global faults, at most")
    ap.add_argument("--netns", choices=["auto", "on", "off"], default="auto",
                    help="host and participants in network namespaces (auto: when root)")
    ap.add_argument("--auth", choices=["auto", "none", "secret"], default="auto",
                    help="shared-secret authentication (auto: with --netns)")
    ap.add_argument("--store", action="store_true", help="three hosts sharing a real 3-member etcd "
                    "(tests/tools/etcd-cluster); store faults (see above)")
    ap.add_argument("--skew", default=None, metavar="OFFSET",
                    help="store mode: host 1's wall clock off by OFFSET (libfaketime, e.g. +1h or -1h)")
    ap.add_argument("--etcd-auth", action="store_true", help="store mode: etcd with authentication on, the hosts "
                    "logged in as a user whose role has only the job's prefix (issue #31 item 9)")
    ap.add_argument("--store-lease", default="2s", help="the hosts' --store-lease in store mode (default 2s)")
    ap.add_argument("--no-state-dir", action="store_true", help="run the host without --state-dir (shows what a "
                    "crash loses: expect violations)")
    ap.add_argument("--no-fault", action="append", metavar="KIND", help="leave out a global fault kind")
    ap.add_argument("--workdir", help="keep records here (default: a new temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory even when all is well")
    ap.add_argument("--cleanup", action="store_true", help="only remove the namespaces and guard route left "
                    "by runs that were killed (never those of a live run), then exit")
    ap.add_argument("--self-test", action="store_true", help="only check that the checker finds each kind of "
                    "violation in made-up records")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.cleanup:
        if os.geteuid() == 0:
            Netns.cleanup_leftovers()
        return 0
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    if not os.access(args.bin, os.X_OK):
        print("harness: tfbarrier binary not found at %s (set --bin or TFBARRIER_BIN)" % args.bin, file=sys.stderr)
        return 2
    if args.store:
        args.netns = "off"  # the hosts and etcd on loopback (a node cut off: bench/store-faults.sh)
    if args.netns == "auto":
        args.netns = os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("iptables") is not None
    else:
        args.netns = args.netns == "on"
    if args.auth == "auto":
        # A store's hosts MAC their inputs with a key (docs/store.md, "Authorization").
        args.auth = "secret" if args.netns or args.store else "none"
    args.min_n = max(1, args.min_n)
    args.max_n = max(args.min_n, args.max_n)

    h = Harness(args)
    ok = False
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    start = time.monotonic()
    try:
        if args.netns:
            h.netns_obj = Netns()
            h.netns_obj.up()
        h.run()
        ok = True
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
    except RuntimeError as e:
        print("harness: setup error: %s" % e, file=sys.stderr)
        h.kill_all()
        for host in h.hosts:
            if host.proc and host.proc.alive():
                host.stop()
        h.stop_store()
        if h.netns_obj:
            h.netns_obj.down()
        return 2
    finally:
        h.stop_faults.set()
        if h.netns_obj:
            h.restore_network()
        h.kill_all()
        for host in h.hosts:
            if host.proc and host.proc.alive():
                host.stop()
        h.stop_store()
        if h.netns_obj:
            h.netns_obj.down()
    elapsed = time.monotonic() - start
    violations = check(h)
    text, by_fault = summarize(h, violations, elapsed)
    record = {"seed": args.seed, "args": {k: v for k, v in vars(args).items()}, "rounds": h.rounds,
              "global_faults": h.global_faults, "notes": h.notes, "violations": violations,
              "faults_by_kind": by_fault, "elapsed": elapsed}
    with open(os.path.join(h.workdir, "record.json"), "w") as f:
        json.dump(record, f, indent=1, default=str)
    print(text, flush=True)
    if h.notes and args.verbose:
        print("\n".join(h.notes), file=sys.stderr)
    if not ok:
        return 2
    if violations:
        print("harness: FAILED; seed %d; records kept in %s" % (args.seed, h.workdir))
        return 1
    if not args.keep and not args.workdir:
        shutil.rmtree(h.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
