"""Issue 26 end to end: a real Prometheus (Debian's 2.42) scrapes the agent's `GET /metrics`.

A generation-managing node on a private dockerd serves its metrics on 127.0.0.1 at a port the
agent bound itself (`"metrics": "127.0.0.1:0"`, the address read from its log); a Prometheus on
loopback scrapes it every second. Once connected, the node prepares its enrolled generation,
then serves requests through devcore: each counter must have moved by exactly what was done,
as Prometheus' own HTTP API reports it, and `promtool check metrics` finds nothing wrong with
the exposition. The repository's alerting rules and example scrape configuration are checked
by promtool in //tools/prometheus:rules_test.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import unittest
import urllib.parse
import urllib.request
import uuid

import harness
from harness import wait_for

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def setUpModule():
    harness.require_stack_environment()
    harness.require(os.access(PROMETHEUS, os.X_OK) and os.access(PROMTOOL, os.X_OK),
                    "Debian's prometheus package is not installed (tools/deps.sh installs it)")


def free_port():
    """A loopback port nobody listens on now (Prometheus 2.42 cannot report a port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


class Prometheus:
    """A Prometheus on loopback scraping TARGET every second, its data in a directory of its
    own."""

    def __init__(self, root, target):
        self.dir = tempfile.mkdtemp(prefix="prom-", dir=root)
        self.port = free_port()
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: sandbox-node\n"
                    "    static_configs:\n      - targets: ['%s']\n" % target)
        self.proc = harness.Proc(
            "prometheus",
            [PROMETHEUS, "--config.file=" + config,
             "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            self.dir)

    def query(self, expr):
        """The instant vector EXPR as {frozenset(labels): value} (Prometheus' /api/v1/query)."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (
            self.port, urllib.parse.urlencode({"query": expr}))
        _, _, body = http_get(url)
        doc = json.loads(body)
        assert doc["status"] == "success", doc
        return {frozenset((k, v) for k, v in r["metric"].items() if k not in ("job", "instance")):
                float(r["value"][1]) for r in doc["data"]["result"]}

    def value(self, expr):
        """The single value of EXPR, or None when it has no sample (yet)."""
        try:
            got = self.query(expr)
        except OSError:
            return None
        return next(iter(got.values())) if len(got) == 1 else None

    def stop(self):
        self.proc.stop()


class MetricsTest(harness.DockerdTestCase):
    def setUp(self):
        self.prom = None
        self.s = harness.Stack(self, self.dockerd.sock, generation_management=True,
                               image=self.image)
        self.s.start_devcore()
        self.s.start_privhelper()
        self.s.enroll()  # writes the configuration without metrics; the run's has them
        self.s.agent_config(metrics="127.0.0.1:0")
        self.s.start_agent()
        self.s.wait_connected()

    def tearDown(self):
        if self.prom:
            if harness.test_failed(self):
                print("---- prometheus stderr ----\n" + self.prom.proc.stderr()[-3000:])
            self.prom.stop()
        super().tearDown()

    def metrics_address(self):
        m = re.search(r'msg="serving metrics" address=(\S+)', self.s.agent.stderr())
        return m.group(1) if m else None

    def req(self, operation, arguments):
        return self.s.request(operation, arguments, generation=1)

    def test_prometheus_sees_exactly_the_requests_and_the_preparation_the_node_ran(self):
        address = wait_for(self.metrics_address, 20, "the agent's metrics address in its log")
        self.assertTrue(address.startswith("127.0.0.1:"), address)
        # A generation-managing node prepares its enrolled generation once connected.
        self.s.wait_observed(1, "ready", timeout=120)
        self.s.set_deployment(1, 1)

        status, ctype, text = http_get("http://%s/metrics" % address)
        self.assertEqual(status, 200)
        self.assertEqual(ctype, "text/plain; version=0.0.4; charset=utf-8")
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                               text=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr + "\n" + text)
        self.assertEqual(check.stdout + check.stderr, "", "promtool's lint findings")
        # Nothing of a sandbox, a request or a path is a label (docs/security.md, "Metrics").
        self.assertNotIn(self.s.identity["node_id"], text)
        self.assertNotIn(self.s.root, text)

        self.prom = Prometheus(self.s.root, address)
        wait_for(lambda: self.prom.value('up{job="sandbox-node"}') == 1, 60,
                 "Prometheus to scrape the agent")
        self.assertEqual(self.prom.value('sandbox_node_preparations_total{outcome="ready"}'), 1)
        self.assertEqual(
            self.prom.value('sandbox_node_generation_state{generation="1",state="ready"}'), 1)
        self.assertEqual(self.prom.value('sandbox_node_connection_state{state="live"}'), 1)
        self.assertEqual(self.prom.value("sandbox_node_provider_ready"), 1)
        self.assertGreaterEqual(self.prom.value("sandbox_node_owner_epoch"), 1)
        self.assertGreater(
            self.prom.value('sandbox_node_process_resident_memory_bytes{process="agent"}'), 0)
        # privhelper's figures, from its Probe answer (the latest health report's).
        wait_for(lambda: self.prom.value(
            'sandbox_node_process_resident_memory_bytes{process="privhelper"}'), 30,
            "privhelper's figures to be scraped")
        self.assertEqual(self.prom.value("sandbox_node_privhelper_violations_total"), 0)
        self.assertEqual(self.prom.value(
            'sandbox_node_privhelper_refusals_total{refusal="admission"}'), 0)
        self.assertIsNotNone(self.prom.value("sandbox_node_privhelper_probe_duration_seconds"))

        # The requests: create, two execs, an exec of a sandbox that does not exist, kill.
        sid = str(uuid.uuid4())
        r = self.req("create", {"sandbox_id": sid, "image": "busybox",
                                "command": ["sleep", "3600"], "cpu_millis": 250,
                                "memory_bytes": 64 << 20})
        self.assertNotIn("error_code", r, r)
        for _ in range(2):
            r = self.req("exec", {"sandbox_id": sid, "argv": ["true"], "output_limit_bytes": 64})
            self.assertNotIn("error_code", r, r)
        r = self.req("exec", {"sandbox_id": str(uuid.uuid4()), "argv": ["true"],
                              "output_limit_bytes": 64})
        self.assertEqual(r.get("error_code"), "not_found", r)
        r = self.req("kill", {"sandbox_id": sid})
        self.assertNotIn("error_code", r, r)

        expected = {("create", "success"): 1, ("exec", "success"): 2,
                    ("exec", "not_found"): 1, ("kill", "success"): 1}
        # Wait for a scrape after the last answer (polling Prometheus, not the clock).
        wait_for(lambda: self.prom.value(
            'sandbox_node_requests_total{operation="kill",outcome="success"}') == 1, 30,
            "Prometheus to scrape the answered kill")
        got = self.prom.query("sandbox_node_requests_total")
        self.assertEqual({(dict(k)["operation"], dict(k)["outcome"]): v for k, v in got.items()},
                         expected)
        self.assertEqual(self.prom.value(
            'sandbox_node_request_duration_seconds_count{operation="exec"}'), 3)
        self.assertEqual(self.prom.value(
            'sum(sandbox_node_request_duration_seconds_bucket{le="+Inf"})'), 5)
        self.assertEqual(self.prom.value("sandbox_node_requests_in_flight"), 0)
        # The native helper that ran them holds generation 1's lease (privhelper's figures).
        wait_for(lambda: (self.prom.value('sandbox_node_generation_references{generation="1",'
                                          'kind="native_helpers"}') or 0) >= 1, 30,
                 "the native helper to be counted as a reference of generation 1")
        self.assertEqual(self.prom.value("sandbox_node_requests_pending"), 0)


    def status(self, *extra, as_root=False):
        argv = [self.s.bins["agent"], "status",
                "--config=" + os.path.join(self.s.dirs["agent"], "config.json")] + list(extra)
        if as_root:
            return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                                  env={"PATH": "/usr/bin:/bin"})
        return self.s.run_as_agent(argv)

    def test_agent_status_live_then_with_privhelper_and_the_agent_stopped(self):
        self.s.wait_observed(1, "ready", timeout=120)
        self.s.set_deployment(1, 1)
        sid = str(uuid.uuid4())
        r = self.req("create", {"sandbox_id": sid, "image": "busybox",
                                "command": ["sleep", "3600"], "cpu_millis": 250,
                                "memory_bytes": 64 << 20})
        self.assertNotIn("error_code", r, r)
        r = self.req("exec", {"sandbox_id": str(uuid.uuid4()), "argv": ["true"],
                              "output_limit_bytes": 64})
        self.assertEqual(r.get("error_code"), "not_found", r)
        # The sandbox counts are privhelper's, from the latest health report's probe (10 s).
        wait_for(lambda: "sandboxes: 1 active" in self.status().stdout, 30,
                 "a health report counting the sandbox")

        # Live, as the agent's user and as root.
        for as_root in (False, True):
            st = self.status(as_root=as_root)
            print(st.stdout + st.stderr)
            self.assertEqual(st.returncode, 0, st.stderr)
            self.assertIn("node %s  provider docker" % self.s.identity["node_id"], st.stdout)
            self.assertRegex(st.stdout, r"connection: live since \S+, owner epoch \d+")
            self.assertIn("provider: docker ready", st.stdout)
            self.assertIn("generations: serving 1, target 1", st.stdout)
            self.assertIn("sandboxes: 1 active of 16, 0 retained of 64", st.stdout)
            self.assertIn("not_found 1", st.stdout)
            self.assertIn("success ", st.stdout)
            self.assertRegex(st.stdout, r"last error: exec not_found at \S+")
        st = self.status("--json")
        self.assertEqual(st.returncode, 0, st.stderr)
        doc = json.loads(st.stdout)
        self.assertEqual(doc["agent"], "running")
        self.assertEqual(doc["privhelper"], "answering")
        self.assertEqual(doc["node"]["node_id"], self.s.identity["node_id"])
        self.assertEqual(doc["deployment"]["target"], 1)
        self.assertTrue([g for g in doc["live"]["generations"]
                         if g["generation"] == 1 and g["serving"] and g["state"] == "ready"], doc)
        self.assertEqual(doc["live"]["connection"]["state"], "live")
        self.assertEqual(doc["live"]["requests"]["last_minute"]["not_found"], 1)
        self.assertEqual(doc["live"]["sandboxes"]["active"], 1)
        self.assertEqual(doc["problems"], [])

        # privhelper stopped: said so once the agent's next probe failed (the agent answers).
        self.s.privhelper.stop()
        wait_for(lambda: "privhelper: NOT ANSWERING" in self.status().stdout, 30,
                 "agent status to say privhelper does not answer")
        st = self.status()
        print(st.stdout + st.stderr)
        self.assertEqual(st.returncode, 0, st.stderr)
        self.assertRegex(st.stdout, r"connection: \w+")

        # The agent stopped: said so, with what it left on disk.
        self.s.agent.stop()
        st = self.status("--json")
        self.assertEqual(st.returncode, 0, st.stderr)
        doc = json.loads(st.stdout)
        self.assertEqual(doc["agent"], "not running")
        self.assertIsNone(doc["live"])
        self.assertGreaterEqual(doc["owner_epoch"], 1)
        self.assertEqual(doc["deployment"]["target"], 1)
        st = self.status()
        print(st.stdout)
        self.assertIn("agent: not running", st.stdout)

        # No identity to read: exit 1. A usage error: exit 2.
        other = self.s.agent_config(state_dir=os.path.join(self.s.dirs["agent"], "empty"))
        st = self.s.run_as_agent([self.s.bins["agent"], "status", "--config=" + other])
        self.assertEqual(st.returncode, 1, st.stdout + st.stderr)
        st = self.s.run_as_agent([self.s.bins["agent"], "status"])
        self.assertEqual(st.returncode, 2, st.stderr)


if __name__ == "__main__":
    unittest.main()
