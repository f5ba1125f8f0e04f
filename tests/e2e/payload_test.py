"""An honest burst of large payloads through Core (docs/protocol.md 23a): ten concurrent 48 MiB
write_file requests all succeed. privhelper admits the Execute calls of at most 128 MiB of
request bytes at once (two such writes); the agent keeps the others waiting, not started,
until privhelper's answers free room, instead of sending them to be refused `unavailable`.

Requests naming one sandbox run one at a time anyway (spec §4 ordering), so the burst names ten
sandboxes: that is what made eight of ten fail before the agent waited. The ten writes are made
ready to start at the same moment (each behind an exec holding its sandbox), so the burst
reaches privhelper's bound however slowly devcore relays 64 MiB requests."""

import base64
import http.client
import json
import os
import threading
import unittest
import urllib.request
import uuid

import harness

MIB = 1 << 20
PAYLOAD = 48 * MIB  # spec §5: write_file content <= 48 MiB decoded
BURST = 10


def setUpModule():
    harness.require_stack_environment()


class PayloadBurstTest(harness.DockerdTestCase):
    def setUp(self):
        self.s = harness.Stack(self, self.dockerd.sock, image=self.image)
        self.s.write_spec(images=[{"name": "busybox", "artifact": "busybox.tar",
                                   "identities": [self.image_id]}])
        self.s.start_devcore()
        self.s.start_privhelper(max_active=BURST + 2, max_retained=BURST + 2)
        self.ident = self.s.enroll()
        self.s.start_agent()
        self.s.wait_connected()

    def request(self, operation, arguments, timeout_ms=60000):
        """Like Stack.request, with an HTTP timeout above the budget: devcore answers when the
        node does, and a write waiting behind others is silent meanwhile."""
        body = json.dumps({"generation": 1, "operation": operation, "timeout_ms": timeout_ms,
                           "arguments": arguments}).encode()
        req = urllib.request.Request(
            self.s.origin + "/admin/v1/nodes/%s/requests" % self.ident["node_id"], data=body,
            method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout_ms / 1000 + 60) as r:
            self.assertEqual(r.status, 200)
            return json.loads(r.read())

    def accepted(self, operation):
        """How many requests of `operation` the agent has accepted (its log)."""
        return sum(1 for line in self.s.agent.stderr().splitlines()
                   if 'msg="request accepted"' in line and line.endswith("operation=" + operation))

    def engine_exec(self, sid, argv):
        """Runs argv in the sandbox's container through the Engine API itself (not through the
        node, where the sandbox's order would queue it)."""
        name = "sn-%s-%s" % (self.ident["installation_id"], sid)
        status, e = harness.docker_request(self.dockerd.sock, "POST",
                                           "/containers/%s/exec" % name, {"Cmd": argv})
        self.assertEqual(status, 201, e)
        status, out = harness.docker_request(self.dockerd.sock, "POST",
                                             "/exec/%s/start" % e["Id"], {"Detach": True})
        self.assertEqual(status, 200, out)

    def test_ten_concurrent_48_mib_writes_all_succeed(self):
        sids = [str(uuid.uuid4()) for _ in range(BURST)]
        for sid in sids:
            r = self.request("create", {"sandbox_id": sid, "image": "busybox",
                                        "command": ["sleep", "3600"], "cpu_millis": 250,
                                        "memory_bytes": 64 * MIB})
            self.assertNotIn("error_code", r, r)

        # Ten writes that become ready at once: each sandbox first runs an exec that holds it
        # until /data/go exists, so each write waits behind it in its sandbox's order (spec §4)
        # until the test, once the node holds all ten writes, creates /data/go everywhere.
        # (devcore checks and relays one 64 MiB request at a time, slower than privhelper
        # writes one; without the holds the writes would never overlap.)
        holds = [None] * BURST

        def hold(i):
            try:
                holds[i] = self.request("exec", {
                    "sandbox_id": sids[i], "output_limit_bytes": 100,
                    "argv": ["sh", "-c", "while [ ! -e /data/go ]; do sleep 0.05; done"]},
                    timeout_ms=600000)
            except Exception as e:
                holds[i] = {"exception": repr(e)}

        hold_threads = [threading.Thread(target=hold, args=(i,)) for i in range(BURST)]
        for t in hold_threads:
            t.start()
        harness.wait_for(lambda: self.accepted("exec") >= BURST, 120, "the ten holds")

        content = os.urandom(PAYLOAD)
        head = content[:4096]
        encoded = base64.b64encode(content)
        del content
        # One request at a time reaches the node: the next body is sent once the agent accepted
        # the previous write (devcore checks a 64 MiB request off its event loop, on one thread,
        # in seconds of CPU; ten bodies at once would only be ten times its memory). The holds
        # keep every accepted write from starting, so all ten are held at once anyway; then all
        # ten wait for the node's answers together.
        host, port = self.s.origin.split("://", 1)[1].rsplit(":", 1)
        path = "/admin/v1/nodes/%s/requests" % self.ident["node_id"]
        conns = []
        for sid in sids:
            body = b"".join([
                b'{"generation": 1, "operation": "write_file", "timeout_ms": 600000, '
                b'"arguments": {"sandbox_id": "', sid.encode(),
                b'", "path": "/data/blob", "mode": 384, "content": "', encoded, b'"}}'])
            c = http.client.HTTPConnection(host, int(port), timeout=900)
            try:
                c.request("POST", path, body=body,
                          headers={"Content-Type": "application/json"})
            except BrokenPipeError:  # devcore answered before reading the body: say what
                r = c.getresponse()
                self.fail("devcore refused write %d: %s %s" % (len(conns), r.status, r.read()))
            conns.append(c)
            harness.wait_for(lambda: self.accepted("write_file") >= len(conns), 300,
                             "the agent to accept write %d" % len(conns))
        del encoded
        results = [None] * BURST
        errors = [None] * BURST

        def answer(i):
            try:
                r = conns[i].getresponse()
                results[i] = (r.status, json.loads(r.read()))
            except Exception as e:  # reported below, with the index
                errors[i] = e
            finally:
                conns[i].close()

        threads = [threading.Thread(target=answer, args=(i,)) for i in range(BURST)]
        for t in threads:
            t.start()
        self.assertEqual(self.accepted("write_file"), BURST)
        go_errors = []

        def go(sid):
            try:
                self.engine_exec(sid, ["sh", "-c", ": > /data/go"])
            except Exception as e:  # reported below; the stack's stop then ends the holds
                go_errors.append(repr(e))

        go_threads = [threading.Thread(target=go, args=(sid,)) for sid in sids]
        for t in go_threads:
            t.start()
        for t in go_threads:
            t.join(120)
        self.assertEqual(go_errors, [])
        for t in hold_threads + threads:
            t.join(900)
        for i in range(BURST):
            self.assertIsNotNone(holds[i], "hold %d never answered" % i)
            self.assertNotIn("exception", holds[i], holds[i])
            self.assertNotIn("error_code", holds[i], holds[i])
        for i in range(BURST):
            self.assertIsNone(errors[i], "write %d: %r" % (i, errors[i]))
            self.assertIsNotNone(results[i], "write %d never answered" % i)
            status, r = results[i]
            self.assertEqual(status, 200, "write %d: %s" % (i, r))
            self.assertNotIn("error_code", r, "write %d: %s" % (i, r))
            self.assertEqual(r["result"]["size"], PAYLOAD)

        # Every file holds the content (its size, and its first 4 KiB).
        for sid in sids:
            r = self.request("read_file", {"sandbox_id": sid, "path": "/data/blob",
                                           "max_bytes": 4096})
            self.assertNotIn("error_code", r, r)
            self.assertEqual((r["result"]["size"], r["result"]["truncated"]), (PAYLOAD, True))
            self.assertEqual(base64.b64decode(r["result"]["content"]), head)

        # The path this test is about was taken: some writes waited in the agent, and
        # privhelper refused none of them.
        agent_log = self.s.agent.stderr()
        self.assertIn("payload waits for privhelper's admission bound", agent_log)
        self.assertNotIn("REFUSAL_ADMISSION", agent_log)


if __name__ == "__main__":
    unittest.main()
