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
preparation ran (the kernel's own counter: nothing samples during the round). The bench's
observer of the logs sleeps in inotify until a log is written, so the measured side pays for no
polling (a 2 ms poll took ~0.5 s of CPU per round). Targets: node <= 1.3x the load alone, and
neither process above 32 MiB.

--suite-json=FILE and --quick (2 rounds): the suite's contract, tests/bench/suite.py.

It needs root, dockerd and /bin/busybox; without them it exits 2 with a message. Not a test.
"""

import argparse
import ctypes
import os
import select
import statistics
import struct
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


def context_switches(pid):
    """{thread id: (name, voluntary + involuntary context switches so far)} of a process."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
            total = 0
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
            out[tid] = (name, total)
        except OSError:
            pass
    return out


def switches_since(before, after):
    """(total, [(switches, thread name)] busiest first) between two context_switches()."""
    per = sorted(((n - before.get(tid, (name, 0))[1], name) for tid, (name, n) in after.items()),
                 reverse=True)
    return sum(n for n, _ in per), [p for p in per if p[0] > 0]


class LogClock:
    """Timestamps (monotonic) the lines processes append to their log files, read as they are
    written: the agent's log lines carry no time of their own. It sleeps in inotify until a
    file is written (no polling: an observer that wakes every few milliseconds took ~0.5 s of
    CPU per round from the two vCPUs the node's stream and the daemon share, and the load
    alone has no observer)."""

    IN_MODIFY = 0x2
    IN_CLOEXEC = 0o2000000

    def __init__(self, paths):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(self.IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.files = {}  # watch descriptor -> [file object, partial line, path]
        self.lines = []  # (monotonic, path, text)
        self.cv = threading.Condition()
        for path in paths:
            wd = libc.inotify_add_watch(self.fd, path.encode(), self.IN_MODIFY)
            if wd < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch " + path)
            f = open(path, "rb")
            f.seek(0, os.SEEK_END)
            self.files[wd] = [f, b"", path]
        self.stop_r, self.stop_w = os.pipe()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while True:
            ready, _, _ = select.select([self.fd, self.stop_r], [], [])
            if self.stop_r in ready:
                return
            events = os.read(self.fd, 65536)
            now = time.monotonic()
            wds = set()
            off = 0
            while off + 16 <= len(events):  # struct inotify_event and its name (none: files)
                wd, _, _, name_len = struct.unpack_from("iIII", events, off)
                wds.add(wd)
                off += 16 + name_len
            for wd in wds:
                entry = self.files.get(wd)
                if entry is None:
                    continue
                data = entry[0].read()
                if not data:
                    continue
                *whole, entry[1] = (entry[1] + data).split(b"\n")
                with self.cv:
                    for line in whole:
                        self.lines.append((now, entry[2], line.decode(errors="replace")))
                    self.cv.notify_all()

    def wait(self, path, needle, timeout):
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for at, p, line in self.lines:
                    if p == path and needle in line:
                        return at
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError("no log line %r in %s within %.0f s"
                                       % (needle, path, timeout))
                self.cv.wait(left)

    def has(self, path, predicate):
        with self.cv:
            return any(p == path and predicate(line) for _, p, line in self.lines)

    def close(self):
        os.write(self.stop_w, b"x")
        self.t.join(5)
        for f, _, _ in self.files.values():
            f.close()
        os.close(self.fd)
        os.close(self.stop_r)
        os.close(self.stop_w)


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
        c0 = time.process_time()
        harness.docker_load(self.dockerd.sock, path)
        elapsed = time.monotonic() - t0
        self.load_bench_cpu = time.process_time() - c0
        status, _ = harness.docker_request(self.dockerd.sock, "GET", "/images/%s/json" % image_id)
        if status != 200:
            raise RuntimeError("the loaded image %s is not in the daemon" % image_id)
        self.remove_image(image_id)
        return elapsed

    def node_prepare(self, generation, image):
        s = self.s
        # The release is published (and its artifact hashed by the harness) before anything
        # is measured: Core's side of a rollout, not the node's.
        doc = s.specification(generation=generation, source="bench-%d" % generation,
                              image=image)
        pids = {"agent": s.agent.p.pid, "privhelper": s.privhelper.p.pid}
        for pid in pids.values():
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
        before = {n: vm_status(pid)["VmRSS"] for n, pid in pids.items()}
        cpu_pids = dict(pids, devcore=s.devcore.p.pid, dockerd=self.dockerd.proc.p.pid)
        cpu0 = {n: cpu_seconds(pid) for n, pid in cpu_pids.items()}
        cs0 = {n: context_switches(pid) for n, pid in pids.items()}
        bench0 = time.process_time()
        agent, ph = s.agent.err_path, s.privhelper.err_path
        logs = LogClock([agent, ph])
        try:
            s.add_generation(doc)
            s.set_deployment(generation, 1)
            g = " generation=%d " % generation
            start = logs.wait(agent, 'msg="preparing generation"' + g, 60)
            end = logs.wait(agent, 'msg="generation prepared"' + g, 600)
            upload = logs.wait(agent, 'msg="preparation progress"' + g + "phase=upload", 5)
            stored = logs.wait(ph, 'msg="artifact stored"' + g, 5)
            # The overlapped load (privhelper/store/overlapped_load.h) ends after the commit;
            # without it (or after its failure) Finish imports from the store.
            overlapped = logs.has(ph, lambda line: 'msg="the image was loaded while it '
                                  'streamed' in line and g in line)
            if overlapped:
                loaded = logs.wait(ph, 'msg="overlapped image load completed"' + g, 5)
            else:
                logs.wait(ph, 'msg="importing an image"' + g, 5)
                loaded = logs.wait(ph, 'msg="generation ready"' + g, 5)
        finally:
            logs.close()
        hwm = {n: vm_status(pid)["VmHWM"] for n, pid in pids.items()}
        cpu = {n: cpu_seconds(pid) - cpu0[n] for n, pid in cpu_pids.items()}
        cpu["bench"] = time.process_time() - bench0
        switches = {n: switches_since(cs0[n], context_switches(pid)) for n, pid in pids.items()}
        final = s.ph_record("%d.json" % generation)
        if final is None or final["images"][0]["native_image"] != image[1]:
            raise RuntimeError("generation %d is not published with image %s: %r"
                               % (generation, image[1], final))
        return {"total": end - start, "overlapped": overlapped,
                "metadata": upload - start, "stream": stored - upload,
                "load_after_store": loaded - stored, "publish": end - loaded,
                "hwm": hwm, "before": before, "cpu": cpu, "switches": switches}

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
                "%s %.2f s" % (n, c) for n, c in sorted(node["cpu"].items()))
                + " (bench during the load alone %.2f s)" % self.load_bench_cpu, flush=True)
            print("         context switches during it (busiest threads): " + "; ".join(
                "%s %d (%s)" % (n, total, ", ".join("%s %d" % (t, c) for c, t in per[:4]))
                for n, (total, per) in sorted(node["switches"].items())), flush=True)
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
            before = max(r["before"][n] for _, r in rows) / 1024.0
            print("peak RSS %-10s VmHWM %5.1f MiB (before %5.1f)  "
                  "target <= %d MiB: %s" % (n, hwm, before, RSS_TARGET_MIB,
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
