"""Preparation benchmark (issue #9): a generation whose image archive is 64 MiB, prepared by
the real node, beside `docker load` of the same archive through the Engine API.

    bazel run -c opt //tests/bench:prepare_bench [-- --rounds=3 --filler-mib=64]

Set-up: a private dockerd, devcore + privhelper + agent from tests/e2e/harness.py, a
generation-managing node enrolled on a small generation 1. For each round it makes an image of
its own (the busybox root filesystem plus FILLER_MIB MiB of random bytes in one layer, saved
with GET /images/{name}/get, i.e. `docker save`), then, interleaved so both share the load:

  load alone   POST /images/load of that archive, streamed from a file (what `docker load`
               does), timed from the first byte sent to the daemon's last answer byte; the image
               is removed again afterwards.
  node         a new generation naming that archive in a release of its own (so nothing of it
               is in privhelper's store yet) is added to devcore and targeted; timed from the
               agent's "preparing generation" log line to its "generation prepared" line (the
               bench reads the log as it is written): specification and release metadata
               fetched and verified, the archive streamed Core -> agent -> privhelper (verified
               by both, written and fsynced into privhelper's store) while privhelper's
               POST /images/load reads the same file behind the writer (the last 64 KiB
               withheld until the file is verified and published), then the image resolved
               and the records published. "stored -> load done" is what the load still takes
               after the commit; without the overlapped load, Finish imports from the store.

Peak memory: before each node round the bench resets the kernel's peak-RSS counter of agent
and privhelper (`echo 5 > /proc/PID/clear_refs`), so VmHWM afterwards is the peak while that
preparation ran; it also samples VmRSS every 10 ms. Targets: node <= 1.3x the load alone, and
neither process above 32 MiB.

--suite-json=FILE and --quick (2 rounds): the suite's contract, tests/bench/suite.py.

It needs root, dockerd and /bin/busybox; without them it exits 2 with a message. Not a test.
"""

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import unittest


import bench_stack
import harness  # finds this binary's runfiles itself (harness.runfiles_dir)
import suite_json

RSS_TARGET_MIB = 32
RATIO_TARGET = 1.3


class _Asserts(unittest.TestCase):
    def runTest(self):
        pass


def vm_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0])
    return out


def cpu_seconds(pid):
    """User + system CPU time of a process so far (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class LogClock:
    """Timestamps (monotonic) the lines a process appends to its log file, read as they are
    written (polled every 2 ms): the agent's log lines carry no time of their own."""

    def __init__(self, path):
        self.path = path
        self.lines = []  # (monotonic, text)
        self.stop = threading.Event()
        self.offset = os.path.getsize(path)
        self.partial = b""
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            while not self.stop.is_set():
                data = f.read()
                if data:
                    now = time.monotonic()
                    data = self.partial + data
                    *whole, self.partial = data.split(b"\n")
                    for line in whole:
                        self.lines.append((now, line.decode(errors="replace")))
                else:
                    time.sleep(0.002)

    def wait(self, needle, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, line in list(self.lines):
                if needle in line:
                    return at
            time.sleep(0.01)
        raise RuntimeError("no log line %r within %.0f s" % (needle, timeout))

    def close(self):
        self.stop.set()
        self.t.join(5)


class RssSampler:
    """VmRSS of some processes every 10 ms: {name: peak KiB}."""

    def __init__(self, pids):
        self.pids = pids
        self.peak = {n: 0 for n in pids}
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            for n, pid in self.pids.items():
                try:
                    self.peak[n] = max(self.peak[n], vm_status(pid)["VmRSS"])
                except OSError:
                    pass
            time.sleep(0.01)

    def close(self):
        self.stop.set()
        self.t.join(5)
        return self.peak


class Bench:
    def __init__(self, args):
        self.args = args
        self.t = _Asserts()
        self.dockerd = None
        self.s = None

    def setup(self):
        self.dockerd = harness.PrivateDockerd(tempfile.mkdtemp(prefix="snb-", dir="/tmp"))
        self.dockerd.start()
        self.work = os.path.join(self.dockerd.root, "archives")
        os.makedirs(self.work)
        small = harness.make_image_archive(self.dockerd.sock, self.work)
        s = harness.Stack(self.t, self.dockerd.sock, generation_management=True, image=small)
        self.s = s
        s.start_devcore()
        s.start_privhelper()
        s.enroll()
        s.start_agent()
        s.wait_connected()
        s.wait_observed(1, "ready", timeout=120)
        s.set_deployment(1, 1)

    def make_archive(self, i):
        """Round i's image (its own random bytes), saved; removed from the daemon."""
        path, image_id = harness.make_image_archive(
            self.dockerd.sock, self.work, repo="sn-bench/big", tag=str(i),
            filler_mib=self.args.filler_mib, archive_name="big-%d.tar" % i)
        self.remove_image(image_id)
        return path, image_id

    def remove_image(self, image_id):
        status, body = harness.docker_request(self.dockerd.sock, "DELETE",
                                              "/images/%s?force=1" % image_id)
        if status != 200:
            raise RuntimeError("DELETE image %s: http %s %r" % (image_id, status, body))

    def load_alone(self, path, image_id):
        t0 = time.monotonic()
        harness.docker_load(self.dockerd.sock, path)
        elapsed = time.monotonic() - t0
        status, _ = harness.docker_request(self.dockerd.sock, "GET", "/images/%s/json" % image_id)
        if status != 200:
            raise RuntimeError("the loaded image %s is not in the daemon" % image_id)
        self.remove_image(image_id)
        return elapsed

    def node_prepare(self, generation, image):
        s = self.s
        pids = {"agent": s.agent.p.pid, "privhelper": s.privhelper.p.pid}
        for pid in pids.values():
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
        before = {n: vm_status(pid)["VmRSS"] for n, pid in pids.items()}
        cpu_pids = dict(pids, devcore=s.devcore.p.pid, dockerd=self.dockerd.proc.p.pid)
        cpu0 = {n: cpu_seconds(pid) for n, pid in cpu_pids.items()}
        agent_log = LogClock(s.agent.err_path)
        ph_log = LogClock(s.privhelper.err_path)
        sampler = RssSampler(pids)
        try:
            doc = s.specification(generation=generation, source="bench-%d" % generation,
                                  image=image)
            s.add_generation(doc)
            s.set_deployment(generation, 1)
            g = " generation=%d " % generation
            start = agent_log.wait('msg="preparing generation"' + g, 60)
            end = agent_log.wait('msg="generation prepared"' + g, 600)
            upload = agent_log.wait('msg="preparation progress"' + g + "phase=upload", 5)
            stored = ph_log.wait('msg="artifact stored"' + g, 5)
            # The overlapped load (privhelper/store/overlapped_load.h) ends after the commit;
            # without it (or after its failure) Finish imports from the store.
            overlapped = any('msg="the image was loaded while it streamed' in line and g in line
                             for _, line in ph_log.lines)
            if overlapped:
                loaded = ph_log.wait('msg="overlapped image load completed"' + g, 5)
            else:
                ph_log.wait('msg="importing an image"' + g, 5)
                loaded = ph_log.wait('msg="generation ready"' + g, 5)
        finally:
            peaks = sampler.close()
            agent_log.close()
            ph_log.close()
        hwm = {n: vm_status(pid)["VmHWM"] for n, pid in pids.items()}
        cpu = {n: cpu_seconds(pid) - cpu0[n] for n, pid in cpu_pids.items()}
        final = s.ph_record("%d.json" % generation)
        if final is None or final["images"][0]["native_image"] != image[1]:
            raise RuntimeError("generation %d is not published with image %s: %r"
                               % (generation, image[1], final))
        return {"total": end - start, "overlapped": overlapped,
                "metadata": upload - start, "stream": stored - upload,
                "load_after_store": loaded - stored, "publish": end - loaded,
                "hwm": hwm, "sampled": peaks, "before": before, "cpu": cpu}

    def run(self):
        t0 = time.monotonic()
        self.setup()
        size = None
        rows = []
        for i in range(self.args.rounds):
            image = self.make_archive(i)
            size = os.path.getsize(image[0])
            base = self.load_alone(*image)
            node = self.node_prepare(2 + i, image)
            rows.append((base, node))
            print("round %d: load alone %6.2f s | node %6.2f s | ratio %.2f | peak RSS agent "
                  "%5.1f MiB, privhelper %5.1f MiB" % (
                      i + 1, base, node["total"], node["total"] / base,
                      node["hwm"]["agent"] / 1024.0, node["hwm"]["privhelper"] / 1024.0),
                  flush=True)
            print("         node: metadata and plan %5.2f s, stream into the store %5.2f s "
                  "(%.1f MiB/s), stored -> load done %5.2f s (%s), publish %5.2f s" % (
                      node["metadata"], node["stream"], size / 1048576.0 / node["stream"],
                      node["load_after_store"],
                      "overlapped with the stream" if node["overlapped"]
                      else "imported from the store", node["publish"]), flush=True)
            print("         CPU time during the node's preparation: " + ", ".join(
                "%s %.2f s" % (n, c) for n, c in sorted(node["cpu"].items())), flush=True)
            os.unlink(image[0])
        base_med = statistics.median(b for b, _ in rows)
        node_med = statistics.median(n["total"] for _, n in rows)
        ratio_med = statistics.median(n["total"] / b for b, n in rows)
        print()
        print("image archive: %d bytes (%.1f MiB; %d MiB of random bytes in one layer), "
              "%d rounds, dockerd %s" % (size, size / 1048576.0, self.args.filler_mib,
                                         self.args.rounds, self.dockerd_version()))
        print("median load alone %.2f s (%.1f MiB/s), median node %.2f s (%.1f MiB/s)" % (
            base_med, size / 1048576.0 / base_med, node_med, size / 1048576.0 / node_med))
        print("median ratio node / load alone: %.2f  (target <= %.1f: %s)" % (
            ratio_med, RATIO_TARGET, "met" if ratio_med <= RATIO_TARGET else "MISSED"))
        for n in ("agent", "privhelper"):
            hwm = max(r["hwm"][n] for _, r in rows) / 1024.0
            sampled = max(r["sampled"][n] for _, r in rows) / 1024.0
            before = max(r["before"][n] for _, r in rows) / 1024.0
            print("peak RSS %-10s VmHWM %5.1f MiB (sampled VmRSS %5.1f, before %5.1f)  "
                  "target <= %d MiB: %s" % (n, hwm, sampled, before, RSS_TARGET_MIB,
                                            "met" if hwm <= RSS_TARGET_MIB else "MISSED"))
        print("total %.0f s" % (time.monotonic() - t0))
        self.write_suite_rows(rows, ratio_med, base_med, node_med)

    def write_suite_rows(self, rows, ratio_med, base_med, node_med):
        """The suite's rows (tests/bench/suite.py's contract): the median ratio, the peaks."""
        prep = suite_json.row("prepare_bench", "preparation of a %d MiB-filler image, median of "
                              "%d" % (self.args.filler_mib, len(rows)), node_med, "s",
                              "POST /images/load of the same archive", base_med)
        prep.update(ratio=ratio_med, target="<= %.1fx" % RATIO_TARGET,
                    met=ratio_med <= RATIO_TARGET)
        out = [prep]
        for n in ("agent", "privhelper"):
            hwm = max(r["hwm"][n] for _, r in rows) / 1024.0
            out.append(suite_json.row("prepare_bench", "peak RSS of %s while preparing" % n, hwm,
                                      "MiB", target="<= %d MiB" % RSS_TARGET_MIB,
                                      met=hwm <= RSS_TARGET_MIB))
        suite_json.write(self.args.suite_json, out)

    def dockerd_version(self):
        status, v = harness.docker_request(self.dockerd.sock, "GET", "/version")
        return "%s (API %s)" % (v.get("Version"), v.get("ApiVersion"))

    def stop(self):
        if self.s:
            self.s.stop()
        if self.dockerd:
            self.dockerd.destroy()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--filler-mib", type=int, default=64)
    suite_json.add_arguments(p)
    args = p.parse_args()
    if args.quick:
        args.rounds = 2
    bench_stack.check_environment("prepare_bench", [])
    b = Bench(args)
    try:
        b.run()
    except (AssertionError, RuntimeError) as e:
        sys.stderr.write("prepare_bench: FAILED: %s\n" % e)
        if b.s:
            sys.stderr.write(b.s.logs() + "\n")
        return 1
    finally:
        b.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
