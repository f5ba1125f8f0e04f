"""Idle memory (issue #12, target 3): proportional and anonymous memory of agent, privhelper and
one idle native helper, on the real binaries against a private dockerd.

    bazel run -c opt //tests/bench:memory_bench [-- --idle-heartbeats=3 --malloc-arena-max=N]

It starts a private dockerd 20.10 (API 1.41, no networking) with the busybox image of the e2e
tests and devcore + privhelper + agent from tests/e2e/harness.py (bench_stack.py), enrolls,
connects, makes one create and one inspect (so privhelper has started one native helper, which
stays until helper_idle_seconds, default 600 s), then waits idle until devcore has counted
--idle-heartbeats more heartbeats (10 s apart) and reads, for each of the three processes,
/proc/PID/smaps_rollup (Pss, Pss_Anon, Pss_File, Anonymous) and the thread count
(/proc/PID/status). The sandbox is killed and everything removed afterwards.

Targets: Pss of the three together <= 16 MiB; Anonymous of each <= 3 MiB. Pss splits a shared
page among the processes mapping it, so the three Pss add up to what the node costs the host.

With --suite-json=FILE it also writes the rows of tests/bench/suite.py's contract (bench,
metric, value, unit, baseline, baseline_value, ratio, target, met); --quick waits for two
heartbeats instead of three. It needs root, dockerd and /bin/busybox; without them it exits 2.
Exit status 0 when the figures were taken (a missed target is a result), 1 when the stack
failed.
"""

import argparse
import ctypes
import json
import os
import struct
import sys
import time
import uuid


from bench_stack import harness, node_request  # noqa: E402
import bench_stack  # noqa: E402
import proc_memory  # noqa: E402

PROG = "memory_bench"
TARGET_PSS_TOTAL_MIB = 16.0
TARGET_ANON_MIB = 3.0
RELEASE_AFTER_S = 30  # common/process_init.h, kReleaseStartupPagesAfterSeconds


def largest_file_mappings(pid, n=4):
    """[(path, Pss KiB, Rss KiB)] of the largest file-backed mappings by Pss, largest first."""
    return proc_memory.file_mappings(pid)[:n]


def executable_segments(pid):
    """[(permissions, size KiB, Rss KiB, Pss KiB, Anonymous KiB)] of the mappings of the process's
    own executable, in address order: which of its segments are resident."""
    exe = harness.exe_of(pid)
    out = []
    cur = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:
                cur = None
                if len(fields) >= 6 and fields[5] == exe:
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    cur = [fields[1], (hi - lo) // 1024, 0, 0, 0]
                    out.append(cur)
            elif cur is not None and fields[0] in ("Rss:", "Pss:", "Anonymous:"):
                cur[{"Rss:": 2, "Pss:": 3, "Anonymous:": 4}[fields[0]]] = int(fields[1])
    return [tuple(c) for c in out]


def page_out(pid):
    """process_madvise(MADV_PAGEOUT) of every file-backed mapping of process PID (Linux 5.10+):
    the kernel drops those pages from the process, which faults back only what it touches. An
    analysis aid (--working-set): what the idle process really uses of the pages it maps."""
    libc = ctypes.CDLL(None, use_errno=True)

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    vecs = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith("/"):
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                vecs.append(IoVec(lo, hi - lo))
    pidfd = os.pidfd_open(pid)
    try:
        for v in vecs:  # one at a time: the kernel stops at the first mapping it refuses
            libc.syscall(440, pidfd, ctypes.byref(v), 1, 21, 0)  # process_madvise, PAGEOUT
    finally:
        os.close(pidfd)


def resident_pages(pid):
    """The set of physical page frames resident in process PID (/proc/PID/pagemap, root)."""
    frames = set()
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/pagemap" % pid, "rb") as pm:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo >= 1 << 47:  # [vsyscall]
                continue
            pm.seek(lo // 4096 * 8)
            raw = pm.read((hi - lo) // 4096 * 8)
            for (entry,) in struct.iter_unpack("<Q", raw):
                if entry >> 63:
                    frames.add(entry & ((1 << 55) - 1))
    return frames


def native_helpers(privhelper_pid):
    """PIDs of privhelper's children that run the native helper."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if harness.parent_of(pid) != privhelper_pid:
                continue
        except OSError:
            continue
        exe = harness.exe_of(pid) or ""
        if os.path.basename(exe).startswith("native_helper"):
            found.append(pid)
    return sorted(found)


def with_environment(extra, names):
    """Makes harness.Proc start the processes called `names` with `extra` in their environment
    (the native helper inherits privhelper's)."""
    init = harness.Proc.__init__

    def patched(self, name, argv, cwd, env=None, **kw):
        if name in names:
            env = dict(env or {"PATH": harness.SYSTEM_PATH}, **extra)
        init(self, name, argv, cwd, env=env, **kw)
    harness.Proc.__init__ = patched


class Bench:
    def __init__(self, args):
        self.args = args
        self.node = bench_stack.NodeStack()
        self.stack = None

    def start(self):
        if self.args.malloc_arena_max:
            with_environment({"MALLOC_ARENA_MAX": str(self.args.malloc_arena_max)},
                             ("agent", "privhelper"))
        self.node.start()
        self.stack = self.node.stack
        self.connected_at = time.monotonic()  # the agent started shortly before

    def stop(self):
        self.node.stop()

    def heartbeats(self):
        return self.stack.node(self.stack.identity["node_id"])["heartbeats"]

    def run(self):
        t0 = time.monotonic()
        self.start()
        sid = str(uuid.uuid4())
        r, _ = node_request(self.stack, "create", {
            "sandbox_id": sid, "image": "busybox", "command": ["sleep", "3600"],
            "cpu_millis": 250, "memory_bytes": 64 << 20})
        if r["state"] != "running":
            raise RuntimeError("create: %r" % r)
        node_request(self.stack, "inspect", {"sandbox_id": sid})
        ph_pid = self.stack.privhelper.p.pid
        helpers = native_helpers(ph_pid)
        if len(helpers) != 1:
            raise RuntimeError("expected one native helper after a request, found %r\n%s"
                               % (helpers, self.stack.logs()))
        # Agent and privhelper hand their start-up pages back 30 s after they start
        # (kReleaseStartupPagesAfterSeconds, common/process_init.h); idle is after that.
        time.sleep(max(0.0, self.connected_at + RELEASE_AFTER_S + 2 - time.monotonic()))
        # Idle: connected, nothing in flight; heartbeats every 10 s (a benchmark may wait).
        start_hb = self.heartbeats()
        want = self.args.idle_heartbeats
        harness.wait_for(lambda: self.heartbeats() >= start_hb + want, 15.0 * want + 10,
                         "%d idle heartbeats" % want, interval=0.5)
        procs = [("agent", self.stack.agent.p.pid), ("privhelper", ph_pid),
                 ("native_helper", helpers[0])]
        for name, pid in procs:
            if harness.exe_of(pid) is None:
                raise RuntimeError("%s died while idle:\n%s" % (name, self.stack.logs()))
        rows = [(name, pid, proc_memory.smaps_rollup(pid), proc_memory.threads(pid),
                 largest_file_mappings(pid))
                for name, pid in procs]
        union = set()
        for _, pid in procs:
            union |= resident_pages(pid)
        self.union_kib = len(union) * 4
        if self.args.segments:
            for name, pid in procs:
                print("%s: own executable's segments (perm, size, Rss, Pss, Anonymous KiB):"
                      % name)
                for seg in executable_segments(pid):
                    print("  %s %8d %8d %8d %8d" % seg)
        if self.args.working_set:
            for _, pid in procs:
                page_out(pid)
            start_hb = self.heartbeats()
            harness.wait_for(lambda: self.heartbeats() >= start_hb + want, 15.0 * want + 10,
                             "%d idle heartbeats" % want, interval=0.5)
            print("after paging out the file-backed mappings and %d more heartbeats:" % want)
            for name, pid in procs:
                r = proc_memory.smaps_rollup(pid)
                print("  %-14s Rss %5.1f MiB  Pss %5.1f MiB  Pss_File %5.1f MiB" % (
                    name, mib(r["Rss"]), mib(r["Pss"]), mib(r["Pss_File"])))
        now = native_helpers(ph_pid)
        if now != helpers:
            raise RuntimeError("the native helper changed while idle: %r -> %r" % (helpers, now))
        node_request(self.stack, "kill", {"sandbox_id": sid})
        return rows, time.monotonic() - t0


def mib(kib):
    return kib / 1024.0


def report(rows, union_kib, args, wall):
    env = (", MALLOC_ARENA_MAX=%d" % args.malloc_arena_max) if args.malloc_arena_max else ""
    print("idle memory after %d heartbeats connected%s, one native helper started by a create"
          % (args.idle_heartbeats, env))
    print("%-14s %9s %9s %9s %9s %9s %8s" % ("process", "Rss", "Pss", "Pss_Anon", "Pss_File",
                                            "Anonymous", "threads"))
    for name, _, r, th, _ in rows:
        print("%-14s %5.1f MiB %5.1f MiB %5.1f MiB %5.1f MiB %5.1f MiB %8d" % (
            name, mib(r["Rss"]), mib(r["Pss"]), mib(r["Pss_Anon"]), mib(r["Pss_File"]),
            mib(r["Anonymous"]), th))
    total = sum(r["Pss"] for _, _, r, _, _ in rows)
    print("%-14s %9s %5.1f MiB" % ("total", "", mib(total)))
    print("distinct resident pages of the three together: %.1f MiB (a page shared with other "
          "processes, e.g. of libc, counts whole; Pss splits it among all its users)"
          % mib(union_kib))
    print("largest file-backed mappings (Pss / Rss):")
    for name, _, _, _, maps in rows:
        print("  %-13s %s" % (name, ", ".join("%s %.1f/%.1f" % (os.path.basename(p), mib(k),
                                                                 mib(r)) for p, k, r in maps)))
    checks = [("Pss agent + privhelper + native helper", mib(total), TARGET_PSS_TOTAL_MIB)]
    checks += [("Anonymous %s" % name, mib(r["Anonymous"]), TARGET_ANON_MIB)
               for name, _, r, _, _ in rows]
    print("targets:")
    for what, value, limit in checks:
        print("  %-40s %5.1f MiB <= %4.1f MiB: %s" % (what, value, limit,
                                                      "met" if value <= limit else "MISSED"))
    print("wall time %.0f s" % wall)

    suite = [{"bench": PROG, "metric": "idle Pss, agent + privhelper + native helper",
              "value": round(mib(total), 2), "unit": "MiB", "baseline": "target",
              "baseline_value": TARGET_PSS_TOTAL_MIB,
              "ratio": round(mib(total) / TARGET_PSS_TOTAL_MIB, 3),
              "target": "<= %g MiB" % TARGET_PSS_TOTAL_MIB,
              "met": mib(total) <= TARGET_PSS_TOTAL_MIB}]
    suite.append({"bench": PROG, "metric": "idle distinct resident pages of the three",
                  "value": round(mib(union_kib), 2), "unit": "MiB", "baseline": None,
                  "baseline_value": None, "ratio": None, "target": None, "met": None})
    for name, _, r, th, _ in rows:
        anon = mib(r["Anonymous"])
        suite.append({"bench": PROG, "metric": "idle Anonymous, %s" % name,
                      "value": round(anon, 2), "unit": "MiB", "baseline": "target",
                      "baseline_value": TARGET_ANON_MIB, "ratio": round(anon / TARGET_ANON_MIB, 3),
                      "target": "<= %g MiB" % TARGET_ANON_MIB, "met": anon <= TARGET_ANON_MIB})
        suite.append({"bench": PROG, "metric": "idle Pss, %s" % name,
                      "value": round(mib(r["Pss"]), 2), "unit": "MiB", "baseline": None,
                      "baseline_value": None, "ratio": None, "target": None, "met": None})
        suite.append({"bench": PROG, "metric": "idle threads, %s" % name, "value": th,
                      "unit": "threads", "baseline": None, "baseline_value": None,
                      "ratio": None, "target": None, "met": None})
    if args.suite_json:
        with open(args.suite_json, "w") as f:
            json.dump(suite, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--idle-heartbeats", type=int, default=3,
                   help="heartbeats to wait idle after the requests (10 s apart)")
    p.add_argument("--malloc-arena-max", type=int, default=0,
                   help="run agent and privhelper with MALLOC_ARENA_MAX=N")
    p.add_argument("--segments", action="store_true",
                   help="also print which segments of each executable are resident")
    p.add_argument("--working-set", action="store_true",
                   help="then page out the file-backed mappings and measure what is touched "
                   "again while idle")
    p.add_argument("--quick", action="store_true", help="wait two heartbeats (the suite)")
    p.add_argument("--suite-json", metavar="FILE",
                   help="also write the suite's rows (tests/bench/suite.py) to FILE")
    args = p.parse_args()
    if args.quick:
        args.idle_heartbeats = min(args.idle_heartbeats, 2)
    bench_stack.check_environment(PROG, ("agent/agent", "privhelper/privhelper",
                                         "privhelper/native/native_helper",
                                         "tools/devcore/devcore"))
    b = Bench(args)
    try:
        rows, wall = b.run()
    except (AssertionError, RuntimeError) as e:
        sys.stderr.write("%s: FAILED: %s\n" % (PROG, e))
        return 1
    finally:
        b.stop()
    report(rows, b.union_kib, args, wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
