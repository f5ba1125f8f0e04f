"""Metrics benchmark (issue 26): serving `GET /metrics` does not delay the request path.

    bazel run -c opt //tests/bench:metrics_bench [-- --rounds=4 --window-seconds=5] [-- --quick]

One node (a private dockerd, devcore + privhelper + agent from tests/e2e/harness.py) with its
metrics listener on 127.0.0.1 (a port the agent binds), one running sandbox. Inspects of that
sandbox are sent back to back, one at a time, in windows of --window-seconds; windows alternate
between "scraped" (a scraper GETs /metrics every second, as a Prometheus with a 1 s interval
would) and "not scraped", in --rounds pairs, so both sides share the machine's load. The figure
is Core's round trip of an inspect (devcore's Sn-Node-Round-Trip-Us), p50 and p99 per side; the
target: scraped p50 <= 1.05x not scraped (a scrape is rendered on the event loop: one pass over
the agent's counters and /proc/self, then one small write). It also prints a scrape's own time
and the exposition's size.

It needs root, dockerd and /bin/busybox; without them it exits 2 with a message. Not a test: it
prints figures; it exits 0 when it measured (a missed target is a result), 1 when a request
failed.
"""

import argparse
import re
import statistics
import threading
import time
import urllib.request
import uuid

from bench_stack import node_request  # noqa: E402
import bench_stack  # noqa: E402
import suite_json  # noqa: E402

TARGET = 1.05


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


class Scraper(threading.Thread):
    """GETs URL every `interval` seconds until stopped; keeps each scrape's time and size."""

    def __init__(self, url, interval=1.0):
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.stop_event = threading.Event()
        self.times, self.sizes = [], []

    def run(self):
        while not self.stop_event.is_set():
            t0 = time.monotonic()
            with urllib.request.urlopen(self.url, timeout=10) as r:
                body = r.read()
            self.times.append(time.monotonic() - t0)
            self.sizes.append(len(body))
            self.stop_event.wait(self.interval)

    def stop(self):
        self.stop_event.set()
        self.join()


def window(stack, sid, seconds):
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        _, rt = node_request(stack, "inspect", {"sandbox_id": sid})
        out.append(rt)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="pairs of windows")
    p.add_argument("--window-seconds", type=float, default=5.0)
    suite_json.add_arguments(p)
    args = p.parse_args()
    if args.quick:
        args.rounds, args.window_seconds = 3, 4.0
    bench_stack.check_environment(
        "metrics_bench", ("agent/agent", "privhelper/privhelper", "tools/devcore/devcore",
                          "tools/release/release"))
    node = bench_stack.NodeStack()
    try:
        node.start(agent_config={"metrics": "127.0.0.1:0"})
        s = node.stack
        m = bench_stack.harness.wait_for(
            lambda: re.search(r'msg="serving metrics" address=(\S+)', s.agent.stderr()), 20,
            "the metrics address in the agent's log")
        url = "http://%s/metrics" % m.group(1)
        sid = str(uuid.uuid4())
        node_request(s, "create", {"sandbox_id": sid, "image": "busybox",
                                   "command": ["sleep", "3600"], "cpu_millis": 250,
                                   "memory_bytes": 64 << 20})
        window(s, sid, 1.0)  # warm-up
        samples = {"scraped": [], "plain": []}
        scrape_times, sizes = [], []
        for i in range(args.rounds):
            for side in (("scraped", "plain") if i % 2 == 0 else ("plain", "scraped")):
                scraper = Scraper(url) if side == "scraped" else None
                if scraper:
                    scraper.start()
                samples[side] += window(s, sid, args.window_seconds)
                if scraper:
                    scraper.stop()
                    scrape_times += scraper.times
                    sizes += scraper.sizes
        node_request(s, "kill", {"sandbox_id": sid})
    finally:
        node.stop()
    sp50, pp50 = percentile(samples["scraped"], 50), percentile(samples["plain"], 50)
    sp99, pp99 = percentile(samples["scraped"], 99), percentile(samples["plain"], 99)
    ratio = sp50 / pp50
    print("inspect, Core's round trip (%d rounds of %.0f s windows; %d + %d inspects):"
          % (args.rounds, args.window_seconds, len(samples["scraped"]), len(samples["plain"])))
    print("  scraped every 1 s   p50 %6.2f ms  p99 %6.2f ms" % (sp50 * 1e3, sp99 * 1e3))
    print("  not scraped         p50 %6.2f ms  p99 %6.2f ms" % (pp50 * 1e3, pp99 * 1e3))
    print("  scraped / not: p50 %.3fx, p99 %.3fx (target p50 <= %.2fx: %s)"
          % (ratio, sp99 / pp99, TARGET, "met" if ratio <= TARGET else "MISSED"))
    print("a scrape: %d, p50 %.2f ms, max %.2f ms, %d bytes"
          % (len(scrape_times), statistics.median(scrape_times) * 1e3, max(scrape_times) * 1e3,
             max(sizes)))
    suite_json.write(args.suite_json, [
        suite_json.row("metrics_bench", "inspect p50 while scraped every 1 s", sp50, "s",
                       "inspect p50 not scraped, same run", pp50, "<= %.2fx" % TARGET)])


if __name__ == "__main__":
    main()
