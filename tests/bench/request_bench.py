"""Request and idle-memory benchmark (issues #3 and #4) on the real binaries and a private dockerd.

    bazel run //tests/bench:request_bench             # requests: node path vs direct Engine API
    bazel run //tests/bench:request_bench -- --rss    # idle VmRSS/VmHWM of agent and privhelper
    bazel run -c opt //tests/bench:request_bench -- --inspect-overhead [--baseline-bins=DIR]
                                                      # node overhead on inspect vs the floor

Requests mode measures, in one run, with calls interleaved so both sides share the load:
  inspect      node: devcore admin POST /admin/v1/nodes/{id}/requests -> agent -> privhelper ->
               native helper -> Docker; direct: the provider's one Engine-API call for a
               sandbox that exists, GET /v1.41/containers/sn-<installation>-<sandbox>/json
  create       node: create request answered "running"; direct: POST /containers/create +
               POST /containers/{id}/start with the provider's body; docker run: /usr/bin/docker
               run -d --rm (Debian's 20.10 CLI; the CLI process start-up is part of its figure)
  kill         node: kill request; direct: DELETE /containers/{id}?force=1&v=1 (the provider's
               call, which kills and removes); docker: /usr/bin/docker rm -f
The node figures include the benchmark's HTTP round trip to devcore (the "Core" of this
development stack); the direct figures include the same Python client's unix-socket round trip.

Inspect-overhead mode (issue 12, target 1) measures, in rounds, the node overhead on inspect =
Core's round trip (devcore's Sn-Node-Round-Trip-Us) minus the provider's own Engine-API call for
the same lookup (engine_call, kept connection), medians of interleaved samples, and the floor of
the design from tests/bench/grpc_hop_bench run as a subprocess after every round (one WebSocket
+ one gRPC Execute + one socketpair round trip, p50s), and prints overhead / floor against the
2x target. Between the node's samples it also samples tests/bench/chain_bench: the same three
hops in series (WebSocket -> sync gRPC -> socketpair) with no node work in them, making the
same Engine-API call, so the chain's overhead is what the design's hops cost as the node pays
them (each process asleep while the others run), under the same conditions. With --baseline-bins=DIR (agent, privhelper, native_helper built from another tree),
a second stack of those binaries on the same dockerd is measured interleaved with this build's,
so before and after share the machine's load.

It needs root, dockerd (/usr/sbin/dockerd), /bin/busybox and /usr/bin/docker; without them it
exits 2 with a message. Not a test: a benchmark that prints figures.
"""

import argparse
import json
import os
import statistics
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid


from bench_stack import Asserts, harness, node_request  # noqa: E402
import bench_stack  # noqa: E402
import proc_memory  # noqa: E402

DOCKER_CLI = "/usr/bin/docker"  # Debian docker.io 20.10: speaks API 1.41 like the provider
API = "/v1.41"


def die(msg):
    bench_stack.die("request_bench", msg)


def check_environment(need_cli):
    bench_stack.check_environment(
        "request_bench", ("agent/agent", "privhelper/privhelper", "tools/devcore/devcore"))
    if need_cli and not os.access(DOCKER_CLI, os.X_OK):
        die("%s is missing (Debian's docker.io CLI, API 1.41)" % DOCKER_CLI)


def build_busybox_tar(path):
    """Debian's static busybox as a root filesystem tar (as tests/e2e/requests_test.py)."""
    with tarfile.open(path, "w") as t:
        for d in ("bin", "tmp", "etc", "data"):
            i = tarfile.TarInfo(d)
            i.type = tarfile.DIRTYPE
            i.mode = 0o755
            t.addfile(i)
        t.add("/bin/busybox", "bin/busybox")
        for tool in ("sh", "echo", "cat", "sleep", "true"):
            i = tarfile.TarInfo("bin/" + tool)
            i.type = tarfile.SYMTYPE
            i.linkname = "busybox"
            t.addfile(i)


def percentile(samples, p):
    """Nearest-rank percentile (with 15 samples, p99 is the maximum)."""
    s = sorted(samples)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


def ms(x):
    return "%8.2f ms" % (x * 1000.0)


class Bench:
    def __init__(self, args):
        self.args = args
        self.t = Asserts()
        self.dockerd = None
        self.stack = None
        self.suite_rows = []  # --suite-json

    # -- set-up --------------------------------------------------------------------------
    def start_dockerd(self):
        self.dockerd = harness.PrivateDockerd(tempfile.mkdtemp(prefix="snb-", dir="/tmp"))
        self.dockerd.start()

    def load_image(self):
        tar = os.path.join(self.dockerd.root, "busybox.tar")
        build_busybox_tar(tar)
        with open(tar, "rb") as f:
            status, _ = harness.docker_request(
                self.dockerd.sock, "POST",
                "/images/create?fromSrc=-&repo=sn-e2e/busybox&tag=1", f.read())
        if status != 200:
            die("image import failed: http %s" % status)
        status, img = harness.docker_request(self.dockerd.sock, "GET",
                                             "/images/sn-e2e/busybox:1/json")
        if status != 200:
            die("imported image not found: http %s" % status)
        return img["Id"]

    def start_stack(self, image_id, env_extra=None):
        s = harness.Stack(self.t, self.dockerd.sock)
        self.stack = s
        s.write_spec(images=[{"name": "busybox", "artifact": "busybox.tar",
                              "identities": [image_id]}])
        s.start_devcore()
        s.start_privhelper()
        if env_extra:
            # Same process as Stack.start_privhelper, with the extra environment.
            s.privhelper.stop()
            if os.path.exists(s.ph_socket):
                os.unlink(s.ph_socket)
            env = dict({"PATH": harness.SYSTEM_PATH}, **env_extra)
            s.privhelper = harness.Proc(
                "privhelper", [s.bins["privhelper"], "--config=" +
                               os.path.join(s.dirs["privhelper"], "config.json")],
                s.dirs["privhelper"], env=env)
            harness.wait_for(lambda: os.path.exists(s.ph_socket) or s.fail_dead(s.privhelper),
                             20, "privhelper socket")
        s.agent_config()
        s.enroll()
        if env_extra:
            env = dict({"PATH": harness.SYSTEM_PATH}, **env_extra)
            cfg = os.path.join(s.dirs["agent"], "config.json")
            s.agent = harness.Proc("agent", [s.bins["agent"], "run", "--config=" + cfg],
                                   s.dirs["agent"], user=s.user.pw_uid, group=s.user.pw_gid,
                                   env=env)
        else:
            s.start_agent()
        s.wait_connected()
        with open(os.path.join(s.dirs["privhelper"], "state", "installation.json")) as f:
            self.installation = json.load(f)["installation_id"]

    def stop(self):
        for stack in getattr(self, "stacks", []) or ([self.stack] if self.stack else []):
            stack.stop()
            shutil.rmtree(stack.root, ignore_errors=True)
        if self.dockerd:
            status, conts = harness.docker_request(self.dockerd.sock, "GET",
                                                   "/containers/json?all=1")
            for c in conts or []:
                harness.docker_request(self.dockerd.sock, "DELETE",
                                       "/containers/%s?force=1" % c["Id"])
            self.dockerd.stop()
            shutil.rmtree(self.dockerd.root, ignore_errors=True)

    # -- the two paths -------------------------------------------------------------------
    def node(self, operation, arguments, with_round_trip=False):
        """One request through devcore's admin route. With with_round_trip, also returns
        Core's own measurement (seconds; bench_stack.node_request)."""
        result, round_trip = node_request(self.stack, operation, arguments)
        return (result, round_trip) if with_round_trip else result

    def docker(self, method, path, body=None, want=(200,)):
        status, out = harness.docker_request(self.dockerd.sock, method, API + path, body)
        if status not in want:
            raise RuntimeError("direct %s %s: http %s %r" % (method, path, status, out))
        return out

    def inspect_target(self, sid):
        """The provider's lookup of an existing sandbox (privhelper/native/docker_ops.cc
        FindSandbox: by name; the label-filtered list only when the name is missing)."""
        return "/containers/sn-%s-%s/json" % (self.installation, sid)

    def direct_inspect(self, sid):
        out = self.docker("GET", self.inspect_target(sid))
        if out["State"]["Status"] != "running":
            raise RuntimeError("direct inspect found %r" % out["State"])
        return out

    def start_engine_calls(self):
        """Two engine_call processes: the provider's HTTP client with a kept connection (as the
        native helper uses it) and with a new connection per call."""
        tool = harness.runfile("tests/bench/engine_call")
        self.engines = {}
        for name, extra in (("kept", []), ("fresh", ["--fresh"])):
            self.engines[name] = subprocess.Popen(
                [tool, "--socket=" + self.dockerd.sock] + extra, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True, bufsize=1)

    def engine_inspect(self, name, sid):
        """One direct inspect timed inside engine_call (seconds)."""
        p = self.engines[name]
        p.stdin.write("GET %s%s\n" % (API, self.inspect_target(sid)))
        p.stdin.flush()
        fields = p.stdout.readline().split()
        if len(fields) != 3 or fields[0] != "200" or int(fields[2]) < 3:
            raise RuntimeError("engine_call %s: %r" % (name, fields))
        return int(fields[1]) / 1e6

    def stop_engine_calls(self):
        for p in getattr(self, "engines", {}).values():
            p.stdin.close()
            p.wait(timeout=10)

    def create_args(self, sid):
        return {"sandbox_id": sid, "image": "busybox", "command": ["sleep", "3600"],
                "cpu_millis": 250, "memory_bytes": 64 << 20}

    def direct_create(self, image_id):
        """The provider's create body (labels with a foreign installation), then start."""
        sid = str(uuid.uuid4())
        body = {"Image": image_id, "Env": [], "Cmd": ["sleep", "3600"],
                "Labels": {"sn.installation": "bench-direct", "sn.generation": "1",
                           "sn.sandbox": sid, "sn.args": "0" * 64},
                "HostConfig": {"NanoCpus": 250 * 1000000, "Memory": 64 << 20,
                               "NetworkMode": "none", "RestartPolicy": {"Name": "no"}}}
        created = self.docker("POST", "/containers/create?name=sn-bench-direct-" + sid, body,
                              want=(201,))
        self.docker("POST", "/containers/%s/start" % created["Id"], want=(204,))
        return created["Id"]

    def cli(self, *argv):
        env = {"PATH": harness.SYSTEM_PATH, "DOCKER_HOST": "unix://" + self.dockerd.sock}
        r = subprocess.run([DOCKER_CLI] + list(argv), env=env, capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            raise RuntimeError("docker %s: %s" % (" ".join(argv), r.stderr.strip()))
        return r.stdout.strip()

    # -- measurements --------------------------------------------------------------------
    def run_requests(self):
        t0 = time.monotonic()
        self.start_dockerd()
        image_id = self.load_image()
        self.start_stack(image_id)
        setup = time.monotonic() - t0
        a = self.args
        res = {k: [] for k in ("core_only", "node_inspect", "node_core_rt", "direct_inspect",
                               "engine_kept", "engine_fresh", "node_create", "direct_create",
                               "cli_run", "node_kill", "direct_kill", "cli_kill")}

        # (a) inspect of one running sandbox, node and direct interleaved.
        sid = str(uuid.uuid4())
        if self.node("create", self.create_args(sid))["state"] != "running":
            raise RuntimeError("sandbox not running")
        for _ in range(a.warmup):
            self.node("inspect", {"sandbox_id": sid})
            self.direct_inspect(sid)
        for _ in range(a.inspects):
            # The Core part alone: an admin read that devcore answers without the node.
            t = time.perf_counter()
            status, _ = self.stack.admin_call("GET", "/admin/v1/nodes")
            res["core_only"].append(time.perf_counter() - t)
            if status != 200:
                raise RuntimeError("GET /admin/v1/nodes: http %s" % status)
        self.start_engine_calls()
        for _ in range(a.warmup):
            self.engine_inspect("kept", sid)
            self.engine_inspect("fresh", sid)
        for i in range(a.inspects):
            for which in [(0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2)][i % 4]:
                if which == 0:
                    t = time.perf_counter()
                    r, core_rt = self.node("inspect", {"sandbox_id": sid}, with_round_trip=True)
                    res["node_inspect"].append(time.perf_counter() - t)
                    res["node_core_rt"].append(core_rt)
                    if r["state"] != "running":
                        raise RuntimeError("inspect: %r" % r)
                elif which == 1:
                    t = time.perf_counter()
                    self.direct_inspect(sid)
                    res["direct_inspect"].append(time.perf_counter() - t)
                elif which == 2:
                    res["engine_kept"].append(self.engine_inspect("kept", sid))
                else:
                    res["engine_fresh"].append(self.engine_inspect("fresh", sid))
        self.stop_engine_calls()
        self.node("kill", {"sandbox_id": sid})

        # (b) create-to-running and kill: node, direct, docker run; rotated order.
        self.cli("run", "-d", "--rm", "--network", "none", image_id, "true")  # CLI warm-up
        for i in range(a.warmup + a.creates):
            keep = i >= a.warmup
            for which in [(0, 1, 2), (1, 2, 0), (2, 0, 1)][i % 3]:
                if which == 0:
                    sid = str(uuid.uuid4())
                    t = time.perf_counter()
                    r = self.node("create", self.create_args(sid))
                    c = time.perf_counter() - t
                    if r["state"] != "running":
                        raise RuntimeError("create: %r" % r)
                    t = time.perf_counter()
                    self.node("kill", {"sandbox_id": sid})
                    k = time.perf_counter() - t
                    names = ("node_create", "node_kill")
                elif which == 1:
                    t = time.perf_counter()
                    cid = self.direct_create(image_id)
                    c = time.perf_counter() - t
                    t = time.perf_counter()
                    self.docker("DELETE", "/containers/%s?force=1&v=1" % cid, want=(204,))
                    k = time.perf_counter() - t
                    names = ("direct_create", "direct_kill")
                else:
                    t = time.perf_counter()
                    cid = self.cli("run", "-d", "--rm", "--network", "none", "--cpus", "0.25",
                                   "--memory", "64m", image_id, "sleep", "3600")
                    c = time.perf_counter() - t
                    t = time.perf_counter()
                    self.cli("rm", "-f", cid)
                    k = time.perf_counter() - t
                    names = ("cli_run", "cli_kill")
                if keep:
                    res[names[0]].append(c)
                    res[names[1]].append(k)
        self.report_requests(res, setup, time.monotonic() - t0)

    def report_requests(self, res, setup, total):
        def row(label, key):
            s = res[key]
            print("  %-44s n=%-3d p50 %s   p99 %s" % (label, len(s), ms(percentile(s, 50)),
                                                      ms(percentile(s, 99))))

        def ratio(label, num, den):
            print("  %-44s p50 %5.2fx   p99 %5.2fx" % (
                label, percentile(res[num], 50) / percentile(res[den], 50),
                percentile(res[num], 99) / percentile(res[den], 99)))

        print("request_bench: private dockerd %s, node path = HTTP to devcore (admin route, part "
              "of the Core path) -> agent -> privhelper -> native helper -> Docker"
              % self.dockerd_version())
        print("inspect (one running sandbox), as Core sees it (the target: node <= 1.2x direct):")
        row("node   (Core: request frame -> response)", "node_core_rt")
        row("direct (provider's client, kept conn.)", "engine_kept")
        ratio("node / direct", "node_core_rt", "engine_kept")
        row("direct (provider's client, new conn.)", "engine_fresh")
        ratio("node / direct with a new connection", "node_core_rt", "engine_fresh")
        print("inspect, as the benchmark's Python client sees it (each call its own connection):")
        row("node   (admin HTTP to devcore + node)", "node_inspect")
        row("direct (GET /containers/{name}/json)", "direct_inspect")
        ratio("node / direct", "node_inspect", "direct_inspect")
        row("devcore alone (GET /admin/v1/nodes)", "core_only")
        print("create-to-running:")
        row("node   (create request -> running)", "node_create")
        row("direct (POST create + POST start)", "direct_create")
        row("docker run -d --rm (20.10 CLI)", "cli_run")
        ratio("node / direct", "node_create", "direct_create")
        ratio("node / docker run", "node_create", "cli_run")
        print("kill:")
        row("node   (kill request)", "node_kill")
        row("direct (DELETE ?force=1&v=1)", "direct_kill")
        row("docker rm -f (20.10 CLI)", "cli_kill")
        ratio("node / direct", "node_kill", "direct_kill")
        print("percentiles are nearest-rank; set-up %.1f s, total %.1f s" % (setup, total))
        p50 = {k: percentile(v, 50) for k, v in res.items() if v}
        self.suite_rows += [
            suite_row("inspect, Core's round trip p50", p50["node_core_rt"] * 1e3, "ms",
                      "provider's client, kept connection", p50["engine_kept"] * 1e3,
                      "<= 1.2x", 1.2),
            suite_row("create-to-running p50", p50["node_create"] * 1e3, "ms",
                      "docker run -d (20.10 CLI)", p50["cli_run"] * 1e3, "< 1.0x", 1.0),
            suite_row("kill p50", p50["node_kill"] * 1e3, "ms", "DELETE ?force=1&v=1",
                      p50["direct_kill"] * 1e3, None, None),
        ]

    def dockerd_version(self):
        v = self.docker("GET", "/version")
        return "%s (API %s)" % (v.get("Version"), v.get("ApiVersion"))

    # -- inspect overhead (issue 12, target 1) -------------------------------------------
    def start_side(self, name, image_id, bins_dir=None):
        """One more stack on the same dockerd; with bins_dir, its agent, privhelper and
        native helper are the ones in that directory."""
        s = harness.Stack(self.t, self.dockerd.sock)
        if bins_dir:
            for b in ("agent", "privhelper", "native_helper"):
                dst = os.path.join(s.root, "bin", b)
                shutil.copy(os.path.join(bins_dir, b), dst)
                os.chmod(dst, 0o755)
        s.write_spec(images=[{"name": "busybox", "artifact": "busybox.tar",
                              "identities": [image_id]}])
        s.start_devcore()
        s.start_privhelper()
        s.agent_config()
        s.enroll()
        s.start_agent()
        s.wait_connected()
        with open(os.path.join(s.dirs["privhelper"], "state", "installation.json")) as f:
            installation = json.load(f)["installation_id"]
        sid = str(uuid.uuid4())
        r, _ = node_request(s, "create", self.create_args(sid))
        if r["state"] != "running":
            raise RuntimeError("%s: sandbox not running: %r" % (name, r))
        return {"name": name, "stack": s, "sid": sid,
                "target": "%s/containers/sn-%s-%s/json" % (API, installation, sid),
                "core": [], "engine": []}

    def floor(self):
        """One grpc_hop_bench run: (ws, grpc, socketpair, total) p50s in seconds."""
        r = subprocess.run([harness.runfile("tests/bench/grpc_hop_bench"), "--floor-line",
                            "--iterations=%d" % self.args.hop_iterations],
                           capture_output=True, text=True, timeout=120)
        lines = [line.split() for line in r.stdout.splitlines() if line.startswith("floor_us ")]
        if r.returncode != 0 or len(lines) != 1 or len(lines[0]) != 5:
            raise RuntimeError("grpc_hop_bench failed (%s): %s" % (r.returncode,
                                                                    r.stderr.strip()))
        return tuple(float(x) / 1e6 for x in lines[0][1:])

    def run_inspect_overhead(self):
        t0 = time.monotonic()
        a = self.args
        self.start_dockerd()
        image_id = self.load_image()
        sides = [self.start_side("this build", image_id)]
        if a.baseline_bins:
            sides.append(self.start_side("baseline", image_id, a.baseline_bins))
        self.stacks = [side["stack"] for side in sides]
        tool = harness.runfile("tests/bench/engine_call")
        engine = subprocess.Popen([tool, "--socket=" + self.dockerd.sock], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        self.engines = {"kept": engine}

        # The design's three hops in series with no node work in them, making the same
        # Engine-API call, sampled between the node's samples so it shares their conditions.
        chain = subprocess.Popen([harness.runfile("tests/bench/chain_bench"), "--stdin",
                                  "--engine-socket=" + self.dockerd.sock,
                                  "--engine-path=" + sides[0]["target"]],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 bufsize=1)
        self.engines["chain"] = chain
        chain_rt, chain_call, chain_bounds = [], [], []

        def one(side, keep):
            _, core_rt = node_request(side["stack"], "inspect", {"sandbox_id": side["sid"]})
            engine.stdin.write("GET %s\n" % side["target"])
            engine.stdin.flush()
            fields = engine.stdout.readline().split()
            if len(fields) != 3 or fields[0] != "200":
                raise RuntimeError("engine_call: %r" % fields)
            if keep:
                side["core"].append(core_rt)
                side["engine"].append(int(fields[1]) / 1e6)

        def one_chain(keep):
            chain.stdin.write("x\n")
            chain.stdin.flush()
            fields = chain.stdout.readline().split()
            if len(fields) != 2 or float(fields[0]) < 0:
                raise RuntimeError("chain_bench: %r" % fields)
            if keep:
                chain_rt.append(float(fields[0]) / 1e6)
                chain_call.append(float(fields[1]) / 1e6)

        floors = []
        for _ in range(a.warmup):
            for side in sides:
                one(side, False)
            one_chain(False)
        for side in sides:
            side["pids"] = node_pids(side["stack"])
            side["costs_before"] = {n: thread_costs(pid) for n, pid in side["pids"].items()}
        for rnd in range(a.rounds):
            for side in sides:
                side.setdefault("round_core", []).append(len(side["core"]))
            chain_bounds.append(len(chain_rt))
            for i in range(a.inspects):
                # Rotated, so neither side nor the direct call always goes first.
                for side in (sides if (i + rnd) % 2 == 0 else sides[::-1]):
                    one(side, True)
                one_chain(True)
            floors.append(self.floor())
        chain_bounds.append(len(chain_rt))
        self.chain = (chain_rt, chain_call, chain_bounds)
        for side in sides:
            side["costs_after"] = {n: thread_costs(pid) for n, pid in side["pids"].items()}
        self.stop_engine_calls()
        self.report_inspect_overhead(sides, floors, time.monotonic() - t0)

    def report_inspect_overhead(self, sides, floors, total):
        def us(x):
            return "%7.1f us" % (x * 1e6)

        floor = statistics.median(f[3] for f in floors)
        print("inspect overhead: node overhead = Core's round trip (devcore) - the provider's "
              "own by-name inspect (engine_call, kept connection), medians; floor = "
              "grpc_hop_bench after every round (WebSocket + fastest gRPC Execute + socketpair, "
              "p50s); %d rounds x %d inspects per side; load average %s" % (
                  len(floors), self.args.inspects, " ".join(
                      "%.2f" % x for x in os.getloadavg())))
        print("  floor per round: " + ", ".join(
            "%s (ws %s, grpc %s, socketpair %s)" % (us(f[3]), us(f[0]).strip(),
                                                    us(f[1]).strip(), us(f[2]).strip())
            for f in floors))
        rows = []
        chain_rt, chain_call, chain_bounds = self.chain
        chain_overhead = statistics.median(chain_rt) - statistics.median(chain_call)
        rows.append(suite_row("chain overhead (three hops in series, no node work)",
                              chain_overhead * 1e6, "us", "grpc_hop_bench floor, same run",
                              floor * 1e6, None, None))
        print("  chain (the three hops in series, no node work; tests/bench/chain_bench, sampled "
              "between the node's samples): round trip p50 %s, its helper's call p50 %s, "
              "overhead %s = %.2fx the floor; per round %s" % (
                  us(statistics.median(chain_rt)), us(statistics.median(chain_call)),
                  us(chain_overhead), chain_overhead / floor, " ".join(
                      "%.2fx" % ((statistics.median(chain_rt[chain_bounds[k]:chain_bounds[k + 1]])
                                  - statistics.median(
                                      chain_call[chain_bounds[k]:chain_bounds[k + 1]]))
                                 / floors[k][3]) for k in range(len(floors)))))
        for side in sides:
            bounds = side["round_core"] + [len(side["core"])]
            per_round = []
            for k in range(len(floors)):
                c = side["core"][bounds[k]:bounds[k + 1]]
                e = side["engine"][bounds[k]:bounds[k + 1]]
                per_round.append((statistics.median(c) - statistics.median(e)) / floors[k][3])
            core = statistics.median(side["core"])
            eng = statistics.median(side["engine"])
            overhead = core - eng
            side["overhead"] = overhead
            print("  %-10s Core's round trip p50 %s p99 %s; provider's call p50 %s; "
                  "overhead %s = %.2fx the floor %s (target <= %.1fx: %s); per round %s" % (
                      side["name"], us(core), us(percentile(side["core"], 99)), us(eng),
                      us(overhead), overhead / floor, us(floor), OVERHEAD_TARGET,
                      "met" if overhead / floor <= OVERHEAD_TARGET else "MISSED",
                      " ".join("%.2fx" % r for r in per_round)))
            print("  %-10s overhead / the chain's overhead: %.2fx" % (
                side["name"], overhead / chain_overhead))
            rows.append(suite_row("inspect node overhead (%s)" % side["name"], overhead * 1e6,
                                  "us", "grpc_hop_bench floor, same run", floor * 1e6,
                                  "<= %.1fx" % OVERHEAD_TARGET, OVERHEAD_TARGET))
            # Context (no target): the same overhead against the design's own hops in series.
            rows.append(suite_row("inspect node overhead (%s)" % side["name"], overhead * 1e6,
                                  "us", "chain_bench overhead, same run", chain_overhead * 1e6,
                                  None, None))
        print("  per inspect (both measured sides' processes, over all rounds; the direct call's "
              "engine_call not included): CPU time and context switches, voluntary = the "
              "thread blocked and had to be woken")
        for side in sides:
            n = len(side["core"])
            parts = []
            for proc in ("agent", "privhelper", "native_helper"):
                b, e = side["costs_before"][proc], side["costs_after"][proc]
                parts.append("%s %.0f us CPU, %.1f voluntary + %.1f involuntary switches" % (
                    proc, (e[0] - b[0]) / 1e3 / n, (e[1] - b[1]) / n, (e[2] - b[2]) / n))
            print("  %-10s %s" % (side["name"], "; ".join(parts)))
        if len(sides) == 2:
            print("  this build / baseline overhead: %.2fx" % (
                sides[0]["overhead"] / sides[1]["overhead"]))
        print("total %.1f s" % total)
        self.suite_rows.extend(rows)

    def run_rss(self):
        self.start_dockerd()
        image_id = self.load_image()
        env = {"MALLOC_ARENA_MAX": str(self.args.malloc_arena_max)} \
            if self.args.malloc_arena_max else None
        self.start_stack(image_id, env)
        # Idle: connected, heartbeats every 10 s, the agent probing privhelper meanwhile.
        time.sleep(self.args.idle_seconds)
        if not (self.stack.agent.alive() and self.stack.privhelper.alive()):
            raise RuntimeError("a process died while idle:\n" + self.stack.logs())
        print("idle memory after %d s connected%s (heartbeats every 10 s):" % (
            self.args.idle_seconds,
            ", MALLOC_ARENA_MAX=%d" % self.args.malloc_arena_max
            if self.args.malloc_arena_max else ""))
        for name, proc, target in (("agent", self.stack.agent, 16),
                                   ("privhelper", self.stack.privhelper, 8)):
            st = proc_memory.status(proc.p.pid, ("VmRSS", "VmHWM", "RssAnon", "RssFile",
                                                 "Threads"))
            rss = st["VmRSS"] / 1024.0
            print("  %-10s VmRSS %6.1f MiB  VmHWM %6.1f MiB  (RssAnon %5.1f  RssFile %5.1f MiB)"
                  "  threads %2d  target < %d MiB: %s" % (
                      name, rss, st["VmHWM"] / 1024.0, st["RssAnon"] / 1024.0,
                      st["RssFile"] / 1024.0, st["Threads"], target,
                      "met" if rss < target else "MISSED"))
            print("  %-10s Pss %6.1f MiB (shared pages split among their users); largest "
                  "file-backed mappings:" % (
                      "", proc_memory.smaps_rollup(proc.p.pid, ("Pss",))["Pss"] / 1024.0))
            for path, _, kib in sorted(proc_memory.file_mappings(proc.p.pid),
                                       key=lambda t: -t[2])[:6]:
                print("  %-12s %6.1f MiB  %s" % ("", kib / 1024.0, path))


def node_pids(stack):
    """The agent, privhelper and its (one) native helper of a stack."""
    ph = stack.privhelper.p.pid
    children = []
    for task in os.listdir("/proc/%d/task" % ph):
        with open("/proc/%d/task/%s/children" % (ph, task)) as f:
            children += [int(x) for x in f.read().split()]
    if len(children) != 1:
        raise RuntimeError("privhelper has %d children, not one native helper" % len(children))
    return {"agent": stack.agent.p.pid, "privhelper": ph, "native_helper": children[0]}


def thread_costs(pid):
    """(CPU ns, voluntary, involuntary context switches) summed over the live threads of pid."""
    cpu = vol = invol = 0
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, task)) as f:
                cpu += int(f.read().split()[0])
            with open("/proc/%d/task/%s/status" % (pid, task)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        invol += int(line.split()[1])
        except FileNotFoundError:
            pass  # the thread ended meanwhile
    return cpu, vol, invol


OVERHEAD_TARGET = 2.0  # issue 12, target 1: node overhead on inspect <= 2x the floor


# -- the benchmark suite's contract (tests/bench/suite.py): --suite-json=FILE, --quick ------
def suite_row(metric, value, unit, baseline, baseline_value, target, limit):
    """One row; `limit` None: no target (met null). A "<" target is strict."""
    ratio = value / baseline_value if baseline_value else None
    met = None
    if ratio is not None and limit is not None:
        met = ratio < limit if target.startswith("< ") else ratio <= limit
    return {"bench": "request_bench", "metric": metric, "value": round(value, 3), "unit": unit,
            "baseline": baseline, "baseline_value": round(baseline_value, 3),
            "ratio": None if ratio is None else round(ratio, 3), "target": target, "met": met}


def add_suite_arguments(p):
    p.add_argument("--suite-json", metavar="FILE",
                   help="also write the results as the suite's JSON list of rows")
    p.add_argument("--quick", action="store_true", help="fewer rounds (the suite's run)")


def apply_quick(args):
    if args.quick:
        args.rounds, args.inspects, args.warmup, args.hop_iterations = 3, 30, 3, 500
        args.creates = 5


def write_suite_json(args, rows):
    if args.suite_json:
        with open(args.suite_json, "w") as f:
            json.dump(rows, f, indent=1)
# -------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rss", action="store_true", help="measure idle memory instead of requests")
    p.add_argument("--inspect-overhead", action="store_true",
                   help="node overhead on inspect against grpc_hop_bench's floor, in rounds")
    p.add_argument("--rounds", type=int, default=5, help="--inspect-overhead: rounds")
    p.add_argument("--hop-iterations", type=int, default=1000,
                   help="--inspect-overhead: grpc_hop_bench --iterations per round")
    p.add_argument("--baseline-bins", metavar="DIR",
                   help="--inspect-overhead: also measure a stack of DIR/{agent,privhelper,"
                        "native_helper}, interleaved")
    p.add_argument("--inspects", type=int, default=50)
    p.add_argument("--creates", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--idle-seconds", type=int, default=35)
    p.add_argument("--malloc-arena-max", type=int, default=0,
                   help="--rss: run agent and privhelper with MALLOC_ARENA_MAX=N")
    add_suite_arguments(p)
    args = p.parse_args()
    apply_quick(args)
    check_environment(need_cli=not (args.rss or args.inspect_overhead))
    b = Bench(args)
    try:
        if args.rss:
            b.run_rss()
        elif args.inspect_overhead:
            b.run_inspect_overhead()
        else:
            b.run_requests()
    except (AssertionError, RuntimeError) as e:
        sys.stderr.write("request_bench: FAILED: %s\n" % e)
        return 1
    finally:
        b.stop()
    write_suite_json(args, b.suite_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
