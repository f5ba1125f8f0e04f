"""Create benchmark (issue 12, target 4): a sandbox's create-to-running through the node beside
`docker run -d` of the same image with the same sandbox profile, and 32 concurrent creates
through the node beside the same 32 made through the Engine API directly.

    bazel run -c opt //tests/bench:create_bench [-- --creates=15 --batches=3] [-- --quick]

Set-up: a private dockerd 20.10 (API 1.41, no networking) with the busybox image of the e2e
tests, devcore + privhelper (max_active 64, so that 32 running sandboxes fit) + agent from
tests/e2e/harness.py. Every sandbox runs `sleep 3600` with cpu_millis 250 and 64 MiB.

The profile. Every sandbox is created with privhelper/native/sandbox_profile.cc's HostConfig;
PROFILE_FLAGS below are that HostConfig as `docker run` flags, printed at the start. The bench
checks, on the first round, that the HostConfig the daemon reports for the node's container,
for the CLI's container and for the direct one agree on every member the profile sets (limits,
swap, pids, network, restart, init, no-new-privileges, capabilities, ulimits, log driver;
seccomp is Docker's default on all three), and stops with the difference if they do not.

Serial (target: node create-to-running < docker run -d), interleaved in a rotating order so
all sides share the machine's load, each sandbox removed again afterwards (not timed):
  node        Core's round trip of a create answered "running" (devcore's measurement, its
              Sn-Node-Round-Trip-Us header: request frame handed to the connection -> response
              frame decoded); the path WebSocket -> agent -> gRPC -> privhelper -> native
              helper -> Engine API (by-name inspect, label-filtered lists, create, start)
  docker run  `/usr/bin/docker run -d PROFILE_FLAGS IMAGE sleep 3600` (Debian's 20.10 CLI),
              the CLI process's wall time, which includes its start-up
  direct      POST /containers/create with the node's body + POST /containers/{id}/start from
              a Python client on the daemon's socket (context: the floor under both)

Concurrent (target: node batch <= 1.1x the direct batch), batches alternating between sides:
  node        32 creates sent to devcore at once (32 client threads, released together), wall
              time until the last is answered "running"
  direct      the same 32 as POST create + POST start, each thread its own connection, the
              same HostConfig JSON, wall time until the last start is answered

It needs root, dockerd, /bin/busybox and /usr/bin/docker; without them it exits 2 with a
message. Not a test: it prints figures and ratios; it exits 0 when it measured (a missed
target is a result), 1 when a request failed.
"""

import argparse
import concurrent.futures
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid

from bench_stack import harness, node_request  # noqa: E402
import bench_stack  # noqa: E402
import suite_json  # noqa: E402

DOCKER_CLI = "/usr/bin/docker"  # Debian docker.io 20.10: speaks API 1.41 like the provider
API = "/v1.41"
CPU_MILLIS = 250
MEMORY_BYTES = 64 << 20
COMMAND = ["sleep", "3600"]
CONCURRENT = 32
SERIAL_TARGET = 1.0  # node < docker run -d
BATCH_TARGET = 1.1   # node <= direct + 10 %

# privhelper/native/sandbox_profile.{h,cc}, as the HostConfig JSON it creates (keep in step:
# the bench compares it with what the daemon reports for the node's own container).
CAPABILITIES = ["CHOWN", "FOWNER", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID"]


def profile_host_config():
    return {"NanoCpus": CPU_MILLIS * 1000000, "Memory": MEMORY_BYTES,
            "MemorySwap": MEMORY_BYTES, "PidsLimit": 256, "NetworkMode": "none",
            "RestartPolicy": {"Name": "no"}, "Init": True,
            "SecurityOpt": ["no-new-privileges:true"], "CapDrop": ["ALL"],
            "CapAdd": list(CAPABILITIES),
            "Ulimits": [{"Name": "nofile", "Soft": 1024, "Hard": 1024},
                        {"Name": "core", "Soft": 0, "Hard": 0}],
            "LogConfig": {"Type": "none", "Config": {}}}


# The same profile as `docker run` flags.
PROFILE_FLAGS = (["--cpus", "%g" % (CPU_MILLIS / 1000.0), "--memory", "%dm" % (MEMORY_BYTES >> 20),
                  "--memory-swap", "%dm" % (MEMORY_BYTES >> 20), "--pids-limit", "256",
                  "--network", "none", "--restart", "no", "--init",
                  "--security-opt", "no-new-privileges:true", "--cap-drop", "ALL"]
                 + [a for c in CAPABILITIES for a in ("--cap-add", c)]
                 + ["--ulimit", "nofile=1024:1024", "--ulimit", "core=0:0",
                    "--log-driver", "none"])


def profile_view(hc):
    """The members of an inspected HostConfig the profile sets, normalized (capability names
    with or without CAP_, in any order)."""
    def caps(v):
        return sorted(c.upper().replace("CAP_", "", 1) for c in (v or []))
    return {"NanoCpus": hc.get("NanoCpus"), "Memory": hc.get("Memory"),
            "MemorySwap": hc.get("MemorySwap"), "PidsLimit": hc.get("PidsLimit"),
            "NetworkMode": hc.get("NetworkMode"),
            "RestartPolicy": (hc.get("RestartPolicy") or {}).get("Name") or "no",
            "Init": bool(hc.get("Init")), "SecurityOpt": sorted(hc.get("SecurityOpt") or []),
            "CapDrop": caps(hc.get("CapDrop")), "CapAdd": caps(hc.get("CapAdd")),
            "Ulimits": sorted((u["Name"], u["Soft"], u["Hard"]) for u in hc.get("Ulimits") or []),
            "LogConfig": (hc.get("LogConfig") or {}).get("Type")}


def percentile(samples, p):
    """Nearest-rank percentile."""
    s = sorted(samples)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


class Bench(bench_stack.NodeStack):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.profile_checked = False

    def start(self):
        super().start(max_active=2 * CONCURRENT, max_retained=2 * CONCURRENT)

    # -- the three ways to create --------------------------------------------------------
    def node_create(self):
        """(sandbox id, Core's round trip in seconds)."""
        sid = str(uuid.uuid4())
        r, rt = node_request(self.stack, "create",
                             {"sandbox_id": sid, "image": "busybox", "command": COMMAND,
                              "cpu_millis": CPU_MILLIS, "memory_bytes": MEMORY_BYTES})
        if r.get("state") != "running":
            raise RuntimeError("node create answered %r" % r)
        return sid, rt

    def node_kill(self, sid):
        node_request(self.stack, "kill", {"sandbox_id": sid})

    def docker(self, method, path, body=None, want=(200,)):
        status, out = harness.docker_request(self.dockerd.sock, method, API + path, body)
        if status not in want:
            raise RuntimeError("direct %s %s: http %s %r" % (method, path, status, out))
        return out

    def direct_create(self):
        """The node's create body (labels of another installation), then start: the id."""
        sid = str(uuid.uuid4())
        body = {"Image": self.image_id, "Env": [], "Cmd": COMMAND,
                "Labels": {"sn.installation": "bench-direct", "sn.generation": "1",
                           "sn.sandbox": sid, "sn.args": "0" * 64},
                "HostConfig": profile_host_config()}
        created = self.docker("POST", "/containers/create?name=sn-bench-direct-" + sid, body,
                              want=(201,))
        self.docker("POST", "/containers/%s/start" % created["Id"], want=(204,))
        return created["Id"]

    def direct_remove(self, cid):
        self.docker("DELETE", "/containers/%s?force=1&v=1" % cid, want=(204,))

    def cli(self, *argv):
        env = {"PATH": harness.SYSTEM_PATH, "DOCKER_HOST": "unix://" + self.dockerd.sock}
        r = subprocess.run([DOCKER_CLI] + list(argv), env=env, capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise RuntimeError("docker %s: %s" % (" ".join(argv), r.stderr.strip()))
        return r.stdout.strip()

    def cli_run(self):
        sid = str(uuid.uuid4())
        return self.cli("run", "-d", "--name", "sn-bench-cli-" + sid,
                        "--label", "sn.installation=bench-cli", "--label", "sn.generation=1",
                        "--label", "sn.sandbox=" + sid, "--label", "sn.args=" + "0" * 64,
                        *PROFILE_FLAGS, self.image_id, *COMMAND)

    def check_profile(self, node_sid, cli_id, direct_id):
        """All three containers carry the profile (see the module's docstring)."""
        want = profile_view(profile_host_config())
        for who, ref in (("node", "sn-%s-%s" % (self.installation, node_sid)),
                         ("docker run", cli_id),
                         ("direct", direct_id)):
            got = profile_view(self.docker("GET", "/containers/%s/json" % ref)["HostConfig"])
            diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
            if diff:
                raise RuntimeError("the %s container's HostConfig differs from the profile "
                                   "(got, expected): %r" % (who, diff))
        self.profile_checked = True

    # -- measurements --------------------------------------------------------------------
    def serial(self, rounds, warmup):
        res = {"node": [], "cli": [], "direct": []}
        for i in range(warmup + rounds):
            made = {}
            for which in (("node", "cli", "direct"), ("cli", "direct", "node"),
                          ("direct", "node", "cli"))[i % 3]:
                t = time.perf_counter()
                if which == "node":
                    made[which], el = self.node_create()
                elif which == "cli":
                    made[which] = self.cli_run()
                    el = time.perf_counter() - t
                else:
                    made[which] = self.direct_create()
                    el = time.perf_counter() - t
                if i >= warmup:
                    res[which].append(el)
            if not self.profile_checked:
                self.check_profile(made["node"], made["cli"], made["direct"])
            self.node_kill(made["node"])
            self.direct_remove(made["cli"])
            self.direct_remove(made["direct"])
        return res

    def batch(self, side):
        """CONCURRENT creates at once on one side: (wall seconds, per-create seconds)."""
        start = threading.Barrier(CONCURRENT + 1)

        def one(_):
            start.wait()
            t = time.perf_counter()
            made = self.node_create()[0] if side == "node" else self.direct_create()
            return made, time.perf_counter() - t

        with concurrent.futures.ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
            futures = [pool.submit(one, i) for i in range(CONCURRENT)]
            start.wait()
            t0 = time.perf_counter()
            done = [f.result() for f in futures]
            wall = time.perf_counter() - t0
        # Removed again (not timed), a few at a time.
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            remove = self.node_kill if side == "node" else self.direct_remove
            list(pool.map(remove, [m for m, _ in done]))
        return wall, [el for _, el in done]

    def concurrent(self, batches):
        res = {"node": [], "direct": [], "node_each": [], "direct_each": []}
        for i in range(batches):
            for side in (("node", "direct") if i % 2 == 0 else ("direct", "node")):
                wall, each = self.batch(side)
                res[side].append(wall)
                res[side + "_each"].extend(each)
                print("  batch %d %-6s %d creates in %6.2f s" % (i + 1, side, CONCURRENT, wall),
                      flush=True)
        return res


def report(serial, conc, args, setup, total):
    def ms(x):
        return "%7.1f ms" % (x * 1e3)

    print()
    print("create-to-running, %d rounds interleaved (p50 / p99, nearest rank):"
          % len(serial["node"]))
    for label, key in (("node (Core's round trip)", "node"),
                       ("docker run -d, same profile (CLI)", "cli"),
                       ("direct: POST create + start", "direct")):
        s = serial[key]
        print("  %-36s %s / %s" % (label, ms(percentile(s, 50)), ms(percentile(s, 99))))
    r50 = percentile(serial["node"], 50) / percentile(serial["cli"], 50)
    r99 = percentile(serial["node"], 99) / percentile(serial["cli"], 99)
    d50 = percentile(serial["node"], 50) / percentile(serial["direct"], 50)
    print("  node / docker run: p50 %.2fx, p99 %.2fx (target < %.1fx: %s); node / direct: "
          "p50 %.2fx" % (r50, r99, SERIAL_TARGET, "met" if r50 < SERIAL_TARGET else "MISSED", d50))
    print("%d concurrent creates, %d batches per side, alternating (median wall time):"
          % (CONCURRENT, len(conc["node"])))
    nb, db = statistics.median(conc["node"]), statistics.median(conc["direct"])
    print("  %-36s %6.2f s (each create p50 %s)" % ("node", nb,
                                                    ms(percentile(conc["node_each"], 50))))
    print("  %-36s %6.2f s (each create p50 %s)" % ("direct Engine API, same HostConfig", db,
                                                    ms(percentile(conc["direct_each"], 50))))
    print("  node / direct: %.2fx (target <= %.2fx: %s)" % (
        nb / db, BATCH_TARGET, "met" if nb / db <= BATCH_TARGET else "MISSED"))
    print("set-up %.0f s, total %.0f s" % (setup, total))

    # -- suite rows (tests/bench/suite.py's contract) -------------------------------------
    rows = [
        suite_json.row("create_bench", "create-to-running p50", percentile(serial["node"], 50),
                       "s", "docker run -d, same profile", percentile(serial["cli"], 50),
                       "< %.1fx" % SERIAL_TARGET),
        suite_json.row("create_bench", "create-to-running p50 (vs Engine API)",
                       percentile(serial["node"], 50), "s", "POST create + start",
                       percentile(serial["direct"], 50)),
        suite_json.row("create_bench", "%d concurrent creates, wall" % CONCURRENT, nb, "s",
                       "the same %d through the Engine API" % CONCURRENT, db,
                       "<= %.1fx" % BATCH_TARGET),
    ]
    suite_json.write(args.suite_json, rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--creates", type=int, default=15, help="serial rounds per side")
    p.add_argument("--batches", type=int, default=3, help="concurrent batches per side")
    p.add_argument("--warmup", type=int, default=2)
    suite_json.add_arguments(p)
    args = p.parse_args()
    if args.quick:
        args.creates, args.batches, args.warmup = 5, 3, 1
    bench_stack.check_environment(
        "create_bench", ("agent/agent", "privhelper/privhelper", "tools/devcore/devcore",
                         "tools/release/release"))
    if not os.access(DOCKER_CLI, os.X_OK):
        bench_stack.die("create_bench", "%s is missing (Debian's docker.io CLI, API 1.41)"
                        % DOCKER_CLI)
    print("docker run profile flags (privhelper/native/sandbox_profile.cc as CLI flags):")
    print("  " + " ".join(PROFILE_FLAGS))
    t0 = time.monotonic()
    b = Bench(args)
    try:
        b.start()
        setup = time.monotonic() - t0
        b.cli("run", "--rm", *PROFILE_FLAGS, b.image_id, "true")  # CLI and page-cache warm-up
        serial = b.serial(args.creates, args.warmup)
        print("serial rounds done (profile checked on the node's, the CLI's and the direct "
              "container)", flush=True)
        conc = b.concurrent(args.batches)
        report(serial, conc, args, setup, time.monotonic() - t0)
    except (AssertionError, RuntimeError) as e:
        sys.stderr.write("create_bench: FAILED: %s\n" % e)
        if b.stack:
            sys.stderr.write(b.stack.logs() + "\n")
        return 1
    finally:
        b.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
