"""Flat on a busy host (issue #12, target 2): Core's round trip for inspect, exec and kill on an
empty daemon and on one that also holds 1,000 unrelated containers and 100 of this
installation's.

    bazel run -c opt //tests/bench:busy_host_bench [-- --inspects=60 --execs=30 --kills=15]

It starts two stacks side by side, each a private dockerd 20.10 (API 1.41, no networking) with
the busybox image of the e2e tests and its own devcore + privhelper + agent from
tests/e2e/harness.py, and interleaves every measurement between them, so that both sides share
whatever else the machine is doing. Each figure is devcore's own measurement of Core's round
trip (its Sn-Node-Round-Trip-Us header: from handing the request frame to the node's
connection to decoding the response frame), median over the samples:

  inspect  of one running sandbox
  exec     `true` in that sandbox
  kill     of a sandbox created for it (the create is not timed)

With --quick (20 inspects, 10 execs, 8 kills) both daemons keep their directories on a tmpfs
of their own, so that the clean-up of 1,100 containers takes seconds, not a minute.

Side "empty": the daemon holds only the benchmark's own sandboxes. Side "busy": it also holds
1,000 containers of no installation (created, not running; other labels, other names) and 100
containers of this installation (created, not running: retained sandboxes, labelled and named
exactly as privhelper names its own, made through the Engine API to keep the set-up short).
For context it also times, with the same Python client, the two Engine-API calls a lookup can
make: the by-name inspect and the label-filtered list of the sandbox.

It needs root, dockerd and /bin/busybox; without them it exits 2. Not a test: it prints
figures and the busy/empty ratios (target < 1.5x) and exits 0 when they are met, 1 when not
(with --suite-json, 0 whenever it measured: the rows say whether the targets were met).
"""

import argparse
import concurrent.futures
import json
import statistics
import sys
import time
import urllib.parse
import uuid


from bench_stack import harness, node_request  # noqa: E402
import bench_stack  # noqa: E402
import suite_json  # noqa: E402

API = "/v1.41"
TARGET = 1.5


class Side(bench_stack.NodeStack):
    """One private dockerd with its own devcore + privhelper + agent."""

    def __init__(self, name, data_on_tmpfs):
        super().__init__()
        self.name = name
        self.data_on_tmpfs = data_on_tmpfs

    def start(self):
        # Room for the 100 retained sandboxes of the busy side beside the benchmark's own.
        super().start(data_on_tmpfs=self.data_on_tmpfs, max_active=16, max_retained=256)

    def fill(self):
        """1,000 unrelated containers and 100 of this installation's, created, not running."""
        def create(i):
            if i < 1000:
                name = "busy-%04d" % i
                labels = {"com.example.app": "busy", "com.example.index": str(i)}
            else:
                sid = str(uuid.uuid4())
                name = "sn-%s-%s" % (self.installation, sid)
                labels = {"sn.installation": self.installation, "sn.generation": "1",
                          "sn.sandbox": sid, "sn.args": "0" * 64}
            status, out = harness.docker_request(
                self.dockerd.sock, "POST", API + "/containers/create?name=" + name,
                {"Image": self.image_id, "Cmd": ["true"], "Labels": labels,
                 "HostConfig": {"NetworkMode": "none"}})
            if status != 201:
                raise RuntimeError("create %s: http %s %r" % (name, status, out))

        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(create, range(1100)))
        _, conts = harness.docker_request(self.dockerd.sock, "GET", API + "/containers/json?all=1")
        print("filled the busy daemon in %.0f s: %d containers" % (time.monotonic() - t,
                                                                   len(conts)))

    # -- requests ------------------------------------------------------------------------
    def node(self, operation, arguments):
        return node_request(self.stack, operation, arguments)

    def create(self):
        sid = str(uuid.uuid4())
        r, _ = self.node("create", {"sandbox_id": sid, "image": "busybox",
                                    "command": ["sleep", "3600"], "cpu_millis": 250,
                                    "memory_bytes": 64 << 20})
        if r["state"] != "running":
            raise RuntimeError("create: %r" % r)
        return sid

    def direct(self, path):
        t = time.perf_counter()
        status, out = harness.docker_request(self.dockerd.sock, "GET", API + path)
        elapsed = time.perf_counter() - t
        if status != 200:
            raise RuntimeError("GET %s: http %s" % (path, status))
        return out, elapsed

    def prepare(self):
        """The sandbox the reads and execs use, and the two Engine-API paths of a lookup."""
        self.sid = self.create()
        self.name_path = "/containers/sn-%s-%s/json" % (self.installation, self.sid)
        filters = json.dumps({"label": ["sn.installation=" + self.installation,
                                        "sn.sandbox=" + self.sid]}, separators=(",", ":"))
        self.list_path = "/containers/json?all=1&filters=" + urllib.parse.quote(filters, safe="")
        self.res = {k: [] for k in ("inspect", "exec", "kill", "by_name", "list")}

    def sample(self, which, keep):
        """One measurement of kind `which` on this side."""
        if which == "inspect":
            r, el = self.node("inspect", {"sandbox_id": self.sid})
            if r["state"] != "running":
                raise RuntimeError("inspect: %r" % r)
        elif which == "exec":
            r, el = self.node("exec", {"sandbox_id": self.sid, "argv": ["true"],
                                       "output_limit_bytes": 1024})
            if r["exit_code"] != 0:
                raise RuntimeError("exec: %r" % r)
        elif which == "kill":
            victim = self.create()  # not timed
            _, el = self.node("kill", {"sandbox_id": victim})
        elif which == "by_name":
            _, el = self.direct(self.name_path)
        else:
            out, el = self.direct(self.list_path)
            if len(out) != 1:
                raise RuntimeError("list: %r" % out)
        if keep:
            self.res[which].append(el)


def run(args):
    t0 = time.monotonic()
    # --quick (the suite's runs) keeps both daemons' files on a tmpfs: removing the busy one's
    # 1,100 containers from a disk other builds keep busy took 10-75 s.
    empty, busy = Side("empty", args.quick), Side("busy", args.quick)
    sides = (empty, busy)
    try:
        for side in sides:
            side.start()
        print("stacks up in %.0f s" % (time.monotonic() - t0))
        busy.fill()
        for side in sides:
            side.prepare()
        # Interleaved: every kind alternates between the two sides, in a rotating order, so
        # both share whatever else the machine is doing.
        kinds = ("inspect", "by_name", "list", "exec")
        for i in range(args.warmup + args.inspects):
            for k in range(len(kinds)):
                which = kinds[(i + k) % len(kinds)]
                if which == "exec" and i >= args.warmup + args.execs:
                    continue
                for side in (sides if (i + k) % 2 == 0 else sides[::-1]):
                    side.sample(which, i >= args.warmup)
        for i in range(args.warmup + args.kills):
            for side in (sides if i % 2 == 0 else sides[::-1]):
                side.sample("kill", i >= args.warmup)
        for side in sides:
            side.node("kill", {"sandbox_id": side.sid})
        print("measured in %.0f s" % (time.monotonic() - t0), flush=True)
    finally:
        for side in sides:
            side.stop()
    print()
    print("Core's round trip (devcore's measurement), median of the samples; the Engine-API")
    print("rows are one Python client's call to the same daemons, for context. The two stacks")
    print("ran side by side, their calls interleaved.")
    print("%-34s %7s %11s %11s %8s" % ("", "samples", "empty", "busy", "busy/empty"))
    ok = True
    suite_rows = []
    rows = (("inspect (node)", "inspect", True), ("exec `true` (node)", "exec", True),
            ("kill (node)", "kill", True),
            ("  Engine: by-name inspect", "by_name", False),
            ("  Engine: label-filtered list", "list", False))
    for label, key, target in rows:
        e, b = statistics.median(empty.res[key]), statistics.median(busy.res[key])
        ratio = b / e
        verdict = ""
        if target:
            met = ratio < TARGET
            ok = ok and met
            verdict = "  target < %.1fx: %s" % (TARGET, "met" if met else "MISSED")
        print("%-34s %7d %8.2f ms %8.2f ms %7.2fx%s" % (
            label, len(busy.res[key]), e * 1e3, b * 1e3, ratio, verdict))
        suite_rows.append(suite_json.row(
            "busy_host_bench", label.strip() + ", p50, busy daemon", b * 1e3, "ms",
            "the same on an empty daemon", e * 1e3, "< %.1fx" % TARGET if target else None))
    print("total %.0f s" % (time.monotonic() - t0))
    suite_json.write(args.suite_json, suite_rows)
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--inspects", type=int, default=60)
    p.add_argument("--execs", type=int, default=30)
    p.add_argument("--kills", type=int, default=15)
    p.add_argument("--warmup", type=int, default=10)
    suite_json.add_arguments(p)
    args = p.parse_args()
    if args.quick:
        args.inspects, args.execs, args.kills, args.warmup = 20, 10, 8, 3
    bench_stack.check_environment(
        "busy_host_bench", ("agent/agent", "privhelper/privhelper", "tools/devcore/devcore",
                            "tools/release/release"))
    try:
        ok = run(args)
    except (AssertionError, RuntimeError) as e:
        sys.stderr.write("busy_host_bench: FAILED: %s\n" % e)
        return 1
    # For the suite a missed target is a result (tests/bench/suite.py), not a failure.
    return 0 if ok or args.suite_json else 1


if __name__ == "__main__":
    sys.exit(main())
