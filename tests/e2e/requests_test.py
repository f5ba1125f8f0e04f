"""Issue #4 end to end: Core's provider requests run on a real dockerd, exactly once, with
honest outcomes. devcore sends each request on the node's live connection and returns the
node's response frame; this test checks what Core sees and what the daemon holds."""

import base64
import json
import os
import shutil
import subprocess
import threading
import unittest
import uuid

import harness
from harness import wait_for


def setUpModule():
    harness.require_stack_environment()


class RequestsTest(harness.DockerdTestCase):
    # The class's image archive (`docker save`) is what every stack publishes as its release.
    def setUp(self):
        self.s = harness.Stack(self, self.dockerd.sock, image=self.image)
        self.s.write_spec(images=[{"name": "busybox", "artifact": "busybox.tar",
                                   "identities": [self.image_id]}])
        self.s.start_devcore()
        # The limits are privhelper's; the agent learns them through Probe.
        self.s.start_privhelper(max_active=4, max_retained=8)
        self.s.agent_config()
        self.ident = self.enroll()
        self.s.start_agent()
        self.s.wait_connected()

    def enroll(self):
        status, body = self.s.admin_call("POST", "/admin/v1/enrollment-tokens", {})
        self.assertEqual(status, 201)
        cfg = os.path.join(self.s.dirs["agent"], "config.json")
        r = self.s.run_as_agent(self.s.enroll_argv(body["token"], cfg))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.s.dirs["agent"], "state", "node", "identity.json")) as f:
            self.s.identity = json.load(f)
        return self.s.identity


    # -- helpers ---------------------------------------------------------------------------
    def req(self, operation, arguments, generation=1, timeout_ms=60000):
        status, body = self.s.admin_call(
            "POST", "/admin/v1/nodes/%s/requests" % self.ident["node_id"],
            {"generation": generation, "operation": operation, "timeout_ms": timeout_ms,
             "arguments": arguments})
        self.assertEqual(status, 200, body)
        return body

    def ok(self, operation, arguments, **kw):
        r = self.req(operation, arguments, **kw)
        self.assertNotIn("error_code", r, r)
        return r.get("result")

    def err(self, operation, arguments, **kw):
        r = self.req(operation, arguments, **kw)
        self.assertIn("error_code", r, r)
        return r["error_code"]

    def create_args(self, sid, **over):
        a = {"sandbox_id": sid, "image": "busybox", "command": ["sleep", "3600"],
             "cpu_millis": 250, "memory_bytes": 64 << 20}
        a.update(over)
        return a

    def containers_labelled(self, sid):
        status, conts = harness.docker_request(self.dockerd.sock, "GET",
                                               "/containers/json?all=1")
        self.assertEqual(status, 200)
        return [c for c in conts if sid in json.dumps(c.get("Labels") or {})]

    # -- tests -----------------------------------------------------------------------------
    def test_sandbox_lifecycle_follows_the_state_operation_table(self):
        sid = str(uuid.uuid4())
        created = self.ok("create", self.create_args(sid))
        self.assertEqual(created["sandbox_id"], sid)
        self.assertEqual(created["state"], "running")
        native = created["native_id"]
        # Same arguments: the existing sandbox; different: conflict.
        self.assertEqual(self.ok("create", self.create_args(sid))["native_id"], native)
        self.assertEqual(self.err("create", self.create_args(sid, cpu_millis=500)), "conflict")
        self.assertEqual(len(self.containers_labelled(sid)), 1)

        ins = self.ok("inspect", {"sandbox_id": sid})
        self.assertEqual((ins["state"], ins["native_id"]), ("running", native))

        ex = self.ok("exec", {"sandbox_id": sid, "argv": ["sh", "-c", "cat; echo err >&2; exit 3"],
                              "stdin": base64.b64encode(b"hello\n").decode(),
                              "output_limit_bytes": 1024})
        self.assertEqual(ex["exit_code"], 3)
        self.assertEqual(base64.b64decode(ex["stdout"]), b"hello\n")
        self.assertEqual(base64.b64decode(ex["stderr"]), b"err\n")
        self.assertFalse(ex["truncated"])
        ex = self.ok("exec", {"sandbox_id": sid, "argv": ["sh", "-c", "echo 0123456789"],
                              "output_limit_bytes": 4})
        self.assertTrue(ex["truncated"])
        self.assertEqual(base64.b64decode(ex["stdout"]), b"0123")

        content = os.urandom(100000)
        w = self.ok("write_file", {"sandbox_id": sid, "path": "/data/blob", "mode": 0o600,
                                   "content": base64.b64encode(content).decode()})
        self.assertEqual(w["size"], len(content))
        r = self.ok("read_file", {"sandbox_id": sid, "path": "/data/blob", "max_bytes": 10})
        self.assertEqual((r["size"], r["truncated"]), (len(content), True))
        self.assertEqual(base64.b64decode(r["content"]), content[:10])
        r = self.ok("read_file", {"sandbox_id": sid, "path": "/data/blob",
                                  "max_bytes": 1 << 20})
        self.assertEqual(base64.b64decode(r["content"]), content)
        self.assertEqual(self.err("read_file", {"sandbox_id": sid, "path": "/data/none",
                                                "max_bytes": 10}), "failed")

        self.assertIsNone(self.ok("kill_compute", {"sandbox_id": sid}))
        self.assertEqual(self.ok("inspect", {"sandbox_id": sid})["state"], "retained")
        self.assertIsNone(self.ok("kill_compute", {"sandbox_id": sid}))
        self.assertEqual(self.err("exec", {"sandbox_id": sid, "argv": ["true"],
                                           "output_limit_bytes": 0}), "conflict")
        self.assertEqual(self.err("create", self.create_args(sid)), "conflict")
        res = self.ok("resume", {"sandbox_id": sid, "reconciliation_only": True})
        self.assertEqual(res["state"], "retained")
        res = self.ok("resume", {"sandbox_id": sid, "reconciliation_only": False})
        self.assertEqual((res["state"], res["native_id"]), ("running", native))
        self.assertEqual(self.err("delete_retained", {"sandbox_id": sid}), "conflict")

        self.assertIsNone(self.ok("kill", {"sandbox_id": sid}))
        self.assertEqual(self.ok("inspect", {"sandbox_id": sid}), {"sandbox_id": sid,
                                                                   "state": "absent"})
        self.assertEqual(self.containers_labelled(sid), [])
        self.assertEqual(self.err("kill", {"sandbox_id": sid}), "not_found")
        self.assertEqual(self.err("resume", {"sandbox_id": sid, "reconciliation_only": False}),
                         "not_found")
        # Killed within the record window: a new create of the same id is a conflict.
        self.assertEqual(self.err("create", self.create_args(sid)), "conflict")

        # The images are never removed.
        status, _ = harness.docker_request(self.dockerd.sock, "GET",
                                           "/images/sn-e2e/busybox:1/json")
        self.assertEqual(status, 200)

    def test_delete_retained_and_not_found(self):
        sid = str(uuid.uuid4())
        self.ok("create", self.create_args(sid))
        self.ok("kill_compute", {"sandbox_id": sid})
        self.assertIsNone(self.ok("delete_retained", {"sandbox_id": sid}))
        self.assertEqual(self.ok("inspect", {"sandbox_id": sid})["state"], "absent")
        other = str(uuid.uuid4())
        for op in ("kill", "kill_compute", "delete_retained"):
            self.assertEqual(self.err(op, {"sandbox_id": other}), "not_found")
        self.assertEqual(self.err("exec", {"sandbox_id": other, "argv": ["true"],
                                           "output_limit_bytes": 0}), "not_found")

    def test_invalid_unconfirmed_and_capacity_outcomes(self):
        sid = str(uuid.uuid4())
        self.assertEqual(self.err("create", self.create_args(sid, image="not-in-spec")), "invalid")
        self.assertEqual(self.err("create", self.create_args(sid, cpu_millis=0)), "invalid")
        self.assertEqual(self.err("create", {"sandbox_id": sid}), "invalid")
        self.assertEqual(self.err("teleport", {"sandbox_id": sid}), "invalid")
        self.assertEqual(self.err("read_file", {"sandbox_id": sid, "path": "/a/../etc/passwd",
                                                "max_bytes": 1}), "invalid")
        # A node without generation management serves only its enrolled generation.
        self.assertEqual(self.err("inspect", {"sandbox_id": sid}, generation=2), "unconfirmed")
        self.assertEqual(self.containers_labelled(sid), [])
        # Another installation's running sandbox on the same daemon: never counted, never
        # capacity for this node.
        foreign = str(uuid.uuid4())
        status, c = harness.docker_request(
            self.dockerd.sock, "POST", "/containers/create",
            {"Image": "sn-e2e/busybox:1", "Cmd": ["sleep", "3600"],
             "Labels": {"sn.installation": str(uuid.uuid4()), "sn.generation": "1",
                        "sn.sandbox": foreign},
             "HostConfig": {"NetworkMode": "none"}})
        self.assertEqual(status, 201, c)
        status, _ = harness.docker_request(self.dockerd.sock, "POST",
                                           "/containers/%s/start" % c["Id"])
        self.assertEqual(status, 204)
        # privhelper's max_active = 4, which the node reported in hello.
        node = self.s.node(self.ident["node_id"])
        self.assertEqual((node["max_active"], node["max_retained"]), (4, 8), node)
        for _ in range(4):
            self.ok("create", self.create_args(str(uuid.uuid4())))
        self.assertEqual(self.err("create", self.create_args(str(uuid.uuid4()))), "capacity")
        # Health reports this installation's true counts (privhelper's probe), not 0.
        wait_for(lambda: (lambda h: h["host"]["sandboxes_active"] == 4 and
                          h["host"]["sandboxes_retained"] == 0)(
            self.s.node(self.ident["node_id"])["last_health"]), 30,
            "a heartbeat that counts the 4 running sandboxes")
        self.assertEqual(self.ok("inspect", {"sandbox_id": foreign})["state"], "absent")

    def test_observe_answers_from_the_durable_record(self):
        sid = str(uuid.uuid4())
        r = self.req("create", self.create_args(sid))
        obs = self.ok("observe", {"operation_id": r["id"]})
        self.assertEqual(obs["state"], "completed")
        self.assertEqual(obs["operation"], "create")
        self.assertEqual(obs["response"]["result"]["native_id"], r["result"]["native_id"])
        ex = self.req("exec", {"sandbox_id": sid, "argv": ["sh", "-c", "echo secret; exit 7"],
                               "output_limit_bytes": 100})
        obs = self.ok("observe", {"operation_id": ex["id"]})
        self.assertEqual(obs["response"]["result"]["exit_code"], 7)
        self.assertEqual(obs["response"]["result"]["stdout"], "")
        self.assertTrue(obs["response"]["result"]["truncated"])
        # Reads are not recorded; unknown ids are "unknown", never absent.
        ins = self.req("inspect", {"sandbox_id": sid})
        self.assertEqual(self.ok("observe", {"operation_id": ins["id"]}),
                         {"operation_id": ins["id"], "state": "unknown"})
        # Across an agent restart the record still answers, and no argument was persisted.
        self.s.agent.stop()
        self.s.start_agent()
        self.s.wait_connected(40)
        obs = self.ok("observe", {"operation_id": r["id"]})
        self.assertEqual(obs["state"], "completed")
        state = subprocess.run(["grep", "-r", "secret", os.path.join(self.s.dirs["agent"],
                                                                    "state")],
                               capture_output=True)
        self.assertEqual(state.returncode, 1, "exec arguments were persisted")

    def test_thirty_two_concurrent_requests_complete(self):
        sid = str(uuid.uuid4())
        self.ok("create", self.create_args(sid))
        results = [None] * 32
        def run(i):
            results[i] = self.req("exec", {"sandbox_id": sid,
                                           "argv": ["sh", "-c", "echo %d" % i],
                                           "output_limit_bytes": 100})
        threads = [threading.Thread(target=run, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for i, r in enumerate(results):
            self.assertIsNotNone(r, i)
            self.assertEqual(base64.b64decode(r["result"]["stdout"]), b"%d\n" % i, r)

    def test_daemon_stopped_is_unavailable_never_not_found(self):
        sid = str(uuid.uuid4())
        self.ok("create", self.create_args(sid))
        self.dockerd.stop()
        try:
            self.assertIn(self.err("inspect", {"sandbox_id": sid}), ("unavailable",))
            self.assertIn(self.err("kill", {"sandbox_id": sid}), ("unavailable", "uncertain"))
            self.assertIn(self.err("create", self.create_args(str(uuid.uuid4()))),
                          ("unavailable", "uncertain"))
        finally:
            self.dockerd.start()
        # Stopping the daemon stopped the container (no restart policy): the sandbox is
        # retained, never lost, and resumes.
        self.assertEqual(self.ok("inspect", {"sandbox_id": sid})["state"], "retained")
        self.assertEqual(self.ok("resume", {"sandbox_id": sid,
                                            "reconciliation_only": False})["state"], "running")

    def test_daemon_stopped_mid_exec_is_killed_or_uncertain(self):
        sid = str(uuid.uuid4())
        native = self.ok("create", self.create_args(sid))["native_id"]
        box = {}
        def send():
            box["r"] = self.req("exec", {"sandbox_id": sid, "argv": ["sleep", "30"],
                                         "output_limit_bytes": 100})
        t = threading.Thread(target=send)
        t.start()
        # The exec is running inside the container when the daemon goes away.
        wait_for(lambda: (harness.docker_request(self.dockerd.sock, "GET",
                                                 "/containers/%s/json" % native)[1] or {})
                 .get("ExecIDs"), 30, "the exec to start")
        self.dockerd.stop()
        try:
            t.join(90)
            # Stopping the daemon kills the container and so the command. The answer is the
            # daemon's own exec record while it still answers (exit 137, SIGKILL), otherwise
            # uncertain: never a clean result, never not_found or unavailable (it had started).
            r = box["r"]
            if "error_code" in r:
                self.assertEqual(r["error_code"], "uncertain", r)
            else:
                self.assertEqual(r["result"]["exit_code"], 137, r)
            obs = self.ok("observe", {"operation_id": r["id"]})
            self.assertEqual(obs["state"], "completed", obs)
            self.assertEqual(obs["response"].get("error_code"), r.get("error_code"), obs)
        finally:
            self.dockerd.start()

    def test_agent_killed_mid_create_observe_tells_the_truth_and_nothing_is_created_twice(self):
        sid = str(uuid.uuid4())
        box = {}
        def send():
            box["r"] = self.s.admin_call(
                "POST", "/admin/v1/nodes/%s/requests" % self.ident["node_id"],
                {"generation": 1, "operation": "create", "timeout_ms": 60000,
                 "arguments": self.create_args(sid)})
        t = threading.Thread(target=send)
        t.start()
        # Kill the agent as soon as the daemon has the container (the create is in flight or
        # just answered), then restart it.
        wait_for(lambda: self.containers_labelled(sid), 30, "the native create")
        self.s.agent.stop(sig=9)
        t.join(90)
        self.s.start_agent()
        self.s.wait_connected(40)
        status, body = box["r"]
        request_id = body.get("id") or body.get("request_id")
        self.assertTrue(request_id, body)
        obs = self.ok("observe", {"operation_id": request_id})
        self.assertEqual(obs["state"], "completed", obs)
        # Either the create finished before the agent died, or the restart completed the
        # started mutation as uncertain: never a claim that nothing happened.
        self.assertIn(obs["response"].get("error_code"), (None, "uncertain"), obs)
        # Core's reconciliation: inspect tells the truth about the one native object.
        conts = self.containers_labelled(sid)
        self.assertEqual(len(conts), 1)
        ins = self.ok("inspect", {"sandbox_id": sid})
        self.assertIn(ins["state"], ("running", "retained"))
        self.assertEqual(ins["native_id"], conts[0]["Id"])
        # A create of the same sandbox never makes a second one: the existing sandbox (same
        # arguments, running) or conflict (its compute was stopped by the interruption).
        again = self.req("create", self.create_args(sid))
        if "error_code" in again:
            self.assertEqual(again["error_code"], "conflict", again)
        else:
            self.assertEqual(again["result"]["native_id"], conts[0]["Id"])
        self.assertEqual(len(self.containers_labelled(sid)), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
