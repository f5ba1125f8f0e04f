"""Issue #3 end to end: an enrolled node stays connected to devcore and reports true health.

Real binaries (devcore, privhelper as root, agent as an unprivileged user) and a real dockerd
of the test's own, so stopping "the daemon" does not disturb the host's.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import unittest

import harness
from harness import wait_for


def setUpModule():
    harness.require(os.geteuid() == 0, "end-to-end tests need root (privhelper, dockerd)")
    harness.require(harness.DOCKERD is not None, "dockerd is not installed")


class StackTestCase(unittest.TestCase):
    """A private dockerd per test; the stack's logs are printed and its files kept on failure."""

    def setUp(self):
        self.dockerd = harness.PrivateDockerd(tempfile.mkdtemp(prefix="snd-", dir="/tmp"))
        self.dockerd.start()
        self.stack = None

    def tearDown(self):
        failed = harness.test_failed(self)
        if self.stack:
            if failed:
                print(self.stack.logs())
            self.stack.stop(keep=failed)
        self.dockerd.destroy(keep=failed)

    def start_stack(self, **kw):
        self.stack = harness.Stack(self, self.dockerd.sock, **kw)
        return self.stack


class ConnectTest(StackTestCase):
    def test_enrolled_node_reports_true_health_and_survives_daemon_and_core_restarts(self):
        s = self.start_stack()
        s.start_devcore()
        s.start_privhelper()
        ident = s.enroll()
        s.start_agent()
        node = s.wait_connected()
        self.assertEqual(node["provider"], "docker")
        self.assertTrue(node["backend_fingerprint"].startswith("docker/"), node)
        self.assertEqual(node["last_health"]["provider_ready"], True, node)
        host = node["last_health"]["host"]
        self.assertGreaterEqual(host["cpu_cores"], 1)
        self.assertGreater(host["memory_total_bytes"], 0)
        self.assertGreater(host["disk_total_bytes"], 0)
        first_conn = node["connection_id"]

        # Heartbeats arrive every 10 s and carry a fresh probe each time.
        beats = node["heartbeats"]
        wait_for(lambda: s.node(ident["node_id"])["heartbeats"] > beats, 25, "a heartbeat")

        # The daemon goes away: the next report says so, with the fixed code only.
        self.dockerd.stop()
        n = wait_for(lambda: (lambda h: s.node(ident["node_id"]) if h and
                              h.get("provider_ready") is False else None)(
            s.node(ident["node_id"])["last_health"]), 25, "an unready report")
        self.assertEqual(n["last_health"]["diagnostic"], "daemon_unreachable", n)
        self.assertNotIn(self.dockerd.sock, str(n))

        # ... and comes back.
        self.dockerd.start()
        wait_for(lambda: s.node(ident["node_id"])["last_health"].get("provider_ready") is True,
                 25, "a ready report after the daemon restarted")

        # Core restarts on the same address: the agent reconnects on a new connection.
        s.devcore.stop()
        s.start_devcore()
        n = s.wait_connected(40)
        self.assertNotEqual(n["connection_id"], first_conn)
        self.assertTrue(s.agent.alive(), s.agent.stderr()[-2000:])

        # The credential never appears in the agent's log.
        with open(os.path.join(s.dirs["agent"], "state", "node", "credential")) as f:
            cred = f.read().strip()
        self.assertTrue(cred)
        self.assertNotIn(cred, s.agent.stderr())
        self.assertNotIn(cred, s.devcore.stderr())

    def test_agent_waits_for_privhelper_before_connecting(self):
        s = self.start_stack()
        s.start_devcore()
        s.start_privhelper()
        ident = s.enroll()
        s.privhelper.stop()
        s.start_agent()
        wait_for(lambda: "privhelper is not reachable" in s.agent.stderr() or
                 s.fail_dead(s.agent), 20, "the agent to log that privhelper is unreachable")
        # Nothing reaches Core before privhelper answered.
        self.assertNotEqual(s.node(ident["node_id"])["presence"], "connected")
        self.assertEqual(s.node(ident["node_id"])["heartbeats"], 0)
        s.start_privhelper()
        node = s.wait_connected(40)
        self.assertEqual(node["last_health"]["provider_ready"], True, node)
        # privhelper's default limits, learned through Probe (the agent has none of its own).
        self.assertEqual((node["max_active"], node["max_retained"]), (16, 64), node)

    def test_agent_refuses_a_privhelper_of_another_installation(self):
        s = self.start_stack()
        s.start_devcore()
        s.start_privhelper()
        ident = s.enroll()
        s.privhelper.stop()
        # privhelper starts over with a fresh state directory: a new installation identity.
        state = os.path.join(s.dirs["privhelper"], "state")
        os.rename(state, state + ".enrolled")
        s.start_privhelper()
        agent = s.start_agent()
        rc = agent.p.wait(60)
        self.assertEqual(rc, 1, agent.stderr()[-2000:])
        self.assertIn("refusing to start", agent.stderr())
        self.assertIn(ident["installation_id"], agent.stderr())
        self.assertNotEqual(s.node(ident["node_id"])["presence"], "connected")

    def test_fenced_owner_epoch_is_persisted_and_used(self):
        s = self.start_stack()
        s.start_devcore()
        s.start_privhelper()
        ident = s.enroll()
        s.start_agent()
        node = s.wait_connected()
        epoch = node["owner_epoch"]
        status, body = s.admin_call("POST", "/admin/v1/nodes/%s/owner-epoch" % ident["node_id"])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["owner_epoch"], epoch + 1)
        wait_for(lambda: (lambda n: n["presence"] == "connected" and n["owner_epoch"] == epoch + 1
                          and n["connection_id"] != node["connection_id"])(
            s.node(ident["node_id"])), 40, "reconnect under the new epoch")
        path = os.path.join(s.dirs["agent"], "state", "node", "owner_epoch")
        wait_for(lambda: open(path).read().strip() == str(epoch + 1), 10,
                 "the agent to persist the higher epoch")

    def test_rejected_credential_is_permanent_exit_3(self):
        s = self.start_stack()
        s.start_devcore()
        s.start_privhelper()
        s.enroll()
        cred = os.path.join(s.dirs["agent"], "state", "node", "credential")
        with open(cred, "w") as f:
            f.write("0" * 64)
        agent = s.start_agent()
        rc = agent.p.wait(60)
        self.assertEqual(rc, 3, agent.stderr()[-2000:])
        self.assertIn("401", agent.stderr())

    def test_privhelper_refuses_a_peer_with_another_uid(self):
        s = self.start_stack()
        s.start_devcore()
        s.start_privhelper()
        # This test process is root, not the agent's uid: privhelper must refuse it.
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(10)
        c.connect(s.ph_socket)
        try:
            c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            data = c.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        c.close()
        self.assertEqual(data, b"", "privhelper answered a refused peer")
        wait_for(lambda: "uid=0" in s.privhelper.stderr() or "uid\":0" in s.privhelper.stderr(),
                 10, "privhelper to log the refused peer")
        # The real agent (right uid) still enrolls: the refusal is per peer.
        s.enroll()

    def test_the_enrollment_token_never_shows_in_the_command_line_another_user_reads(self):
        # The audit's attack: any local user reads /proc/<pid>/cmdline of `agent enroll`.
        s = self.start_stack()
        s.start_devcore()
        s.start_privhelper()
        status, body = s.admin_call("POST", "/admin/v1/enrollment-tokens", {})
        self.assertEqual(status, 201, body)
        token = body["token"]
        cfg = s.agent_config()
        # --token= is a usage error before anything is done: the token is not spent.
        r = s.run_as_agent([s.bins["agent"], "enroll", "--config=" + cfg, "--token=" + token])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--token-file", r.stderr)
        self.assertNotIn(token, r.stderr)
        self.assertIsNone(s.node())
        # --token-file=-: the agent waits for the token on its standard input; meanwhile
        # another user (nobody) reads its command line, and finds no token there.
        proc = subprocess.Popen([s.bins["agent"], "enroll", "--config=" + cfg, "--token-file=-"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, user=s.user.pw_uid, group=s.user.pw_gid,
                                extra_groups=[], cwd=s.dirs["agent"],
                                env={"PATH": "/usr/bin:/bin"})
        try:
            harness.wait_for_arguments(proc)
            seen = subprocess.run(["cat", "/proc/%d/cmdline" % proc.pid], capture_output=True,
                                  timeout=30, user=65534, group=65534, extra_groups=[],
                                  env={"PATH": "/usr/bin:/bin"})
            out, err = proc.communicate(token.encode() + b"\n", timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(seen.returncode, 0, "another user cannot read the command line here "
                         "(hidepid?): %r" % seen.stderr)
        self.assertIn(b"--token-file=-", seen.stdout)
        self.assertNotIn(token.encode(), seen.stdout)
        self.assertEqual(proc.returncode, 0, err.decode(errors="replace"))
        self.assertNotIn(token.encode(), out + err)
        # The token reached Core: it enrolled the node.
        with open(os.path.join(s.dirs["agent"], "state", "node", "identity.json")) as f:
            ident = json.load(f)
        self.assertIsNotNone(s.node(ident["node_id"]))
        # The harness's own way (a file of the agent's user, 0600) for every other test.
        st = os.stat(s.token_file("unused"))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (s.user.pw_uid, 0o600))


class TlsTest(StackTestCase):
    def test_wss_with_the_configured_ca_bundle_connects(self):
        s = self.start_stack(tls=True)
        s.agent_ca = s.make_tls()
        s.start_devcore()
        self.assertTrue(s.origin.startswith("https://"))
        s.start_privhelper()
        s.enroll()
        s.start_agent()
        node = s.wait_connected()
        self.assertEqual(node["last_health"]["provider_ready"], True)

    def test_certificate_from_another_ca_is_refused(self):
        s = self.start_stack(tls=True)
        s.make_tls()
        # A second, unrelated CA for the agent's trust.
        other = os.path.join(s.root, "other")
        os.makedirs(other)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=other-ca", "-keyout", "o.key", "-out", "o.pem"],
                       cwd=other, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        os.chmod(other, 0o755)
        os.chmod(os.path.join(other, "o.pem"), 0o644)
        s.agent_ca = os.path.join(other, "o.pem")
        s.start_devcore()
        s.start_privhelper()
        status, body = s.admin_call("POST", "/admin/v1/enrollment-tokens", {})
        self.assertEqual(status, 201)
        cfg = s.agent_config()
        r = s.run_as_agent(s.enroll_argv(body["token"], cfg))
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr.lower(), "certificate|verify|tls")
        status, body = s.admin_call("GET", "/admin/v1/nodes")
        self.assertEqual(body["nodes"], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
