"""Issue 11 end to end: sandbox-node-install against devcore and a real dockerd, with --root.

The host program release is the Bazel-built agent, privhelper and native_helper published
with tools/release; the Runtime release is the harness's busybox image archive. The
installer runs as root, the agent as the harness's unprivileged user; where systemd is not
PID 1 (here) the test starts both processes with the two commands the installer prints.
"""

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
import unittest
import uuid

import harness
import install_harness
from harness import wait_for
from install_harness import sha256_file, tree

INSTALL_ONLY = {"var", "var/lib", "var/lib/sandbox-node", "var/lib/sandbox-node/install",
                "var/lib/sandbox-node/install/lock", "var/lib/sandbox-node/install/pending.json"}


def setUpModule():
    harness.require(os.geteuid() == 0, "installer tests need root (useradd, privhelper, dockerd)")
    harness.require(harness.DOCKERD is not None, "dockerd is not installed")


class InstallTestCase(unittest.TestCase):
    def setUp(self):
        self.dockerd = harness.PrivateDockerd(tempfile.mkdtemp(prefix="snd-", dir="/tmp"))
        self.dockerd.start()
        self.h = install_harness.Host(self, self.dockerd.sock)
        self.s = self.h.stack

    def tearDown(self):
        failed = harness.test_failed(self)
        if failed:
            print(self.s.logs())
        self.h.stop(keep=failed)
        status, conts = harness.docker_request(self.dockerd.sock, "GET", "/containers/json?all=1")
        for c in conts or []:
            harness.docker_request(self.dockerd.sock, "DELETE", "/containers/%s?force=1" % c["Id"])
        self.dockerd.destroy(keep=failed)

    def assertOk(self, r):
        self.assertEqual(r.returncode, 0, "stdout:\n%s\nstderr:\n%s" % (r.stdout, r.stderr))

    def assertRefused(self, r, reason):
        self.assertEqual(r.returncode, 3, "stdout:\n%s\nstderr:\n%s" % (r.stdout, r.stderr))
        self.assertIn(reason, r.stderr)

    def assertNothingInstalled(self, node_id=None):
        self.assertEqual(set(tree(self.h.root)), INSTALL_ONLY)
        for n in self.s.node() and [self.s.node()] or []:
            self.assertNotEqual(n.get("presence"), "connected", n)

    def printed_commands(self, stdout):
        lines = stdout.splitlines()
        i = next(i for i, l in enumerate(lines) if "start both processes by hand" in l)
        return lines[i + 1].strip(), lines[i + 2].strip()


class InstallTest(InstallTestCase):
    def test_fresh_install_pins_the_current_release_reruns_as_a_no_op_and_serves_a_create(self):
        host1 = self.h.publish_host("host-1")
        other = self.h.other_agent_dir("2")
        host2 = self.h.publish_host("host-2", other, make_current=False)
        self.assertNotEqual(host1[0]["sha256"], host2[0]["sha256"])
        self.s.start_devcore()
        current = os.path.join(self.s.releases_dir, "current")
        manifest2 = os.path.join(self.s.releases_dir, "host-2", "manifest.json")
        with open(manifest2, "rb") as f:
            manifest2_bytes = f.read()

        # The console's current release changes while the installer downloads the host program:
        # re-publishing host-2 with --make-current (idempotent: no byte of it changes).
        def flip():
            self.h.publish_host("host-2", other, make_current=True)
        addr = self.s.origin.split("://", 1)[1]
        self.h.proxy = install_harness.CurrentFlippingProxy(
            "127.0.0.1", int(addr.rsplit(":", 1)[1]), flip, source="host-1")

        began = time.monotonic()
        r = self.h.install(self.h.token())
        lasted = time.monotonic() - began
        print("---- first run ----\n" + r.stdout + r.stderr)
        self.assertOk(r)
        self.assertTrue(self.h.proxy.flipped, self.h.proxy.paths())
        with open(current) as f:
            self.assertEqual(f.read(), "host-2\n")
        with open(manifest2, "rb") as f:
            self.assertEqual(f.read(), manifest2_bytes)
        paths = self.h.proxy.paths()
        self.assertEqual(paths.count("/releases/current"), 1, paths)
        self.assertFalse([p for p in paths if p.startswith("/releases/host-2/")], paths)
        self.assertIn("host program release host-1 (the console's current release, pinned)",
                      r.stdout)
        # Each download showed its progress while it ran, at a bounded rate (a line per tenth
        # of the bytes or per 5 s, and the end), counted by root (tools/install/download_progress.h).
        for art, (kind, name) in zip(host1, install_harness.HOST_ARTIFACTS):
            said = [l for l in r.stdout.splitlines()
                    if l.startswith("sandbox-node-install: %s: downloaded " % name)]
            self.assertIn("sandbox-node-install: %s: downloaded %d of %d bytes (100 %%)"
                          % (name, art["size"], art["size"]), said, r.stdout)
            self.assertLessEqual(len(said), 12 + int(lasted / 5), said)

        # The tree: the pinned release's bytes, configuration naming the tree, both units.
        for art, (kind, name) in zip(host1, install_harness.HOST_ARTIFACTS):
            self.assertEqual(sha256_file(self.h.path("/usr/lib/sandbox-node/" + name)),
                             art["sha256"], kind)
        with open(self.h.path("/var/lib/sandbox-node/host-program.json")) as f:
            self.assertEqual(json.load(f)["source"], "host-1")
        with open(self.h.path("/var/lib/sandbox-node/privhelper.runtime.json")) as f:
            runtime = json.load(f)
        self.assertEqual(runtime["source"], "e2e-1")
        self.assertEqual(runtime["generation"], 1)
        self.assertEqual([a["sha256"] for a in runtime["files"]],
                         [a["sha256"] for a in self.s.published["e2e-1"]])
        _, image_id = self.s.image_archive()
        self.assertEqual([i["identities"] for i in runtime["images"]], [[image_id]])
        with open(self.h.path("/etc/sandbox-node/agent.json")) as f:
            agent_cfg = json.load(f)
        self.assertEqual(agent_cfg["state_dir"], self.h.path("/var/lib/sandbox-node/agent"))
        for unit in ("sandbox-node-agent.service", "sandbox-node-privhelper.service"):
            with open(self.h.path("/etc/systemd/system/" + unit)) as f:
                text = f.read()
            execs = [l.split("=", 1)[1].split() for l in text.splitlines()
                     if l.startswith("ExecStart=")]
            self.assertEqual(len(execs), 1, unit)
            self.assertTrue(execs[0][0].startswith(self.h.root + "/usr/lib/sandbox-node/"))
            self.assertTrue(os.access(execs[0][0], os.X_OK), execs[0])
            config = [a for a in execs[0] if a.startswith("--config=")][0].split("=", 1)[1]
            self.assertTrue(os.path.isfile(config) and config.startswith(self.h.root), config)
            self.assertIn("User=" + harness.AGENT_USER if "agent" in unit else "", text)
        with open(self.h.path("/var/lib/sandbox-node/agent/node/identity.json")) as f:
            identity = json.load(f)
        self.assertFalse(os.path.exists(self.h.path("/var/lib/sandbox-node/install/pending.json")))
        with open(self.h.path("/var/lib/sandbox-node/install/installed.json")) as f:
            self.assertNotIn("credential", json.load(f))

        # A second run changes nothing and says so (and never talks to Core).
        before = tree(self.h.root)
        seen = len(self.h.proxy.paths())
        again = self.h.install("spent-token")
        print("---- second run ----\n" + again.stdout + again.stderr)
        self.assertOk(again)
        self.assertIn("nothing changed", again.stdout)
        self.assertEqual(tree(self.h.root), before)
        self.assertEqual(len(self.h.proxy.paths()), seen)

        # The two printed commands start the node by hand; it connects and serves a create.
        ph_cmd, agent_cmd = self.printed_commands(r.stdout)
        self.assertEqual(self.printed_commands(again.stdout), (ph_cmd, agent_cmd))
        env = {"PATH": harness.SYSTEM_PATH}
        self.s.privhelper = harness.Proc("privhelper", shlex.split(ph_cmd), self.s.root, env=env)
        wait_for(lambda: os.path.exists(self.h.path("/run/sandbox-node/privhelper.sock")) or
                 self.s.fail_dead(self.s.privhelper), 20, "privhelper socket")
        self.s.agent = harness.Proc("agent", shlex.split(agent_cmd), self.s.root, env=env)
        self.s.identity = identity
        node = self.s.wait_connected(timeout=60)
        self.assertEqual(node["installation_id"], identity["installation_id"])
        sid = str(uuid.uuid4())
        status, body = self.s.admin_call(
            "POST", "/admin/v1/nodes/%s/requests" % identity["node_id"],
            {"generation": 1, "operation": "create", "timeout_ms": 60000,
             "arguments": {"sandbox_id": sid, "image": "busybox", "command": ["sleep", "3600"],
                           "cpu_millis": 250, "memory_bytes": 64 << 20}})
        self.assertEqual(status, 200, body)
        self.assertNotIn("error_code", body, body)
        self.assertEqual(body["result"]["state"], "running", body)

    def test_missing_retained_runtime_release_refuses_with_nothing_written_then_resumes(self):
        self.h.publish_host("host-1")
        self.s.start_devcore()
        kept = os.path.join(self.s.root, "e2e-1.kept")
        shutil.move(os.path.join(self.s.releases_dir, "e2e-1"), kept)
        token = self.h.token()
        r = self.h.install(token)
        print(r.stdout + r.stderr)
        self.assertRefused(r, "the console does not retain Runtime release e2e-1")
        self.assertIn("the current Runtime is never substituted", r.stderr)
        self.assertNothingInstalled()
        self.assertEqual(os.stat(self.h.path(
            "/var/lib/sandbox-node/install/pending.json")).st_mode & 0o777, 0o600)

        # The console serves the release again: the next run resumes from the pending file
        # (the token was spent; Core would refuse it).
        shutil.move(kept, os.path.join(self.s.releases_dir, "e2e-1"))
        again = self.h.install(token)
        self.assertOk(again)
        self.assertIn("the token is not used again", again.stdout)
        self.assertTrue(os.path.exists(self.h.path(
            "/var/lib/sandbox-node/agent/node/identity.json")))

    def test_a_run_interrupted_while_importing_is_refused_on_a_changed_file_and_finished_next(self):
        self.h.publish_host("host-1")
        self.s.start_devcore()
        token = self.h.token()
        # The daemon goes away after enrollment: every file is in place, the import fails.
        self.dockerd.stop()
        r = self.h.install(token)
        print(r.stdout + r.stderr)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("agent enroll --resume exited", r.stderr)
        identity = self.h.path("/var/lib/sandbox-node/agent/node/identity.json")
        self.assertFalse(os.path.exists(identity))
        self.assertTrue(os.path.exists(self.h.path("/var/lib/sandbox-node/install/pending.json")))

        # A file the next run would write differently is refused, naming it, and kept.
        cfg = self.h.path("/etc/sandbox-node/agent.json")
        with open(cfg) as f:
            original = f.read()
        with open(cfg, "w") as f:
            f.write(original.replace("agent", "agentX", 1))
        self.dockerd.start()
        r = self.h.install(token)
        self.assertRefused(r, cfg + " exists with other contents")
        self.assertFalse(os.path.exists(identity))

        # Restored, the next run finishes the installation (without enrolling again).
        with open(cfg, "w") as f:
            f.write(original)
        r = self.h.install(token)
        self.assertOk(r)
        self.assertIn("the token is not used again", r.stdout)
        self.assertTrue(os.path.exists(identity))
        self.assertFalse(os.path.exists(self.h.path("/var/lib/sandbox-node/install/pending.json")))

    def test_a_bundle_holding_both_releases_supplies_the_host_program(self):
        host1 = self.h.publish_host("host-1")
        self.s.start_devcore()
        bundle = os.path.join(self.s.root, "bundle")
        shutil.copytree(self.s.releases_dir, bundle)
        r = self.h.install(self.h.token(), "--bundle=" + bundle)
        self.assertOk(r)
        self.assertIn("the bundle holds the same release", r.stdout)
        for art, (kind, name) in zip(host1, install_harness.HOST_ARTIFACTS):
            self.assertIn("copied %s %s" % (kind, name), r.stdout)
            self.assertEqual(sha256_file(self.h.path("/usr/lib/sandbox-node/" + name)),
                             art["sha256"], kind)

    def test_a_bundle_with_only_another_runtime_refuses_and_republishing_adds_nothing(self):
        host1 = self.h.publish_host("host-1")
        self.s.start_devcore()
        bundle = os.path.join(self.s.root, "bundle")
        archive, _ = self.s.image_archive()
        r = subprocess.run([self.s.bins["release"], "publish", "--releases-dir=" + bundle,
                            "--source=other-1", "--private-key=" + self.s.release_key,
                            "--make-current", "image=" + archive],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.h.install(self.h.token(), "--bundle=" + bundle)
        print(r.stdout + r.stderr)
        self.assertRefused(r, "holds only release(s) other-1, not Runtime release e2e-1")
        self.assertNothingInstalled()

        # Re-publishing host-1 with the same bytes changes nothing; a conflicting artifact
        # (other bytes under a declared name) exits non-zero and adds nothing.
        rel = os.path.join(self.s.releases_dir, "host-1")
        before = tree(rel)
        self.h.publish_host("host-1", make_current=False)
        self.assertEqual(tree(rel), before)
        other = self.h.other_agent_dir("conflict")
        r = subprocess.run([self.s.bins["release"], "publish",
                            "--releases-dir=" + self.s.releases_dir, "--source=host-1",
                            "--private-key=" + self.s.release_key]
                           + ["%s=%s" % a for a in self.h.host_artifacts(other)],
                           capture_output=True, text=True, timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(tree(rel), before)
        self.assertEqual(host1[0]["sha256"], sha256_file(os.path.join(rel, "agent")))


if __name__ == "__main__":
    unittest.main()
