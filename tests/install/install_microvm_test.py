"""sandbox-node-install --provider=microvm end to end (issue 25), with --root, against devcore.

The host program release is the Bazel-built node executable published with tools/release;
the Runtime release is the microVM stack's (an ext4 busybox image, the repository's kernel and
guest agent, the host's microvm firmware). Refusals come before the token is spent: an unknown
provider is a usage error, KVM asked for where it does not run guests is refused with nothing
written. Then the installer checks qemu, writes privhelper's `microvm` object, makes the store,
the VM's user and the unit's drop-in, names the executable vm_supervisor too, and the node it
installed, started by the two printed commands, runs a sandbox in a VM through Core (qemu
under TCG here). No qemu is left afterwards.
"""

import base64
import json
import os
import pwd
import shlex
import shutil
import signal
import stat
import unittest
import uuid

import harness
import install_harness
from harness import wait_for
from install_harness import tree

STORE = "/var/lib/sandbox-node/vm"
# What a run refused before enrolling leaves: the installer's own directory and lock.
BEFORE_ENROLLING = {"var", "var/lib", "var/lib/sandbox-node", "var/lib/sandbox-node/install",
                    "var/lib/sandbox-node/install/lock"}


def setUpModule():
    harness.require(os.geteuid() == 0, "installer tests need root (useradd, privhelper)")
    harness.require(shutil.which("qemu-system-x86_64") is not None, "qemu is not installed")
    harness.require(os.path.exists("/bin/busybox"), "busybox-static is not installed")


class InstallMicrovmTest(unittest.TestCase):
    def setUp(self):
        self.h = install_harness.Host(self, None, provider="microvm")
        self.s = self.h.stack
        self.store = self.h.path(STORE)

    def tearDown(self):
        failed = harness.test_failed(self)
        if failed:
            print(self.s.logs())
        self.h.stop(keep=failed)
        left = harness.vm_processes(self.store)
        for pid in harness.vm_processes(self.store, "vm_supervisor"):
            os.kill(pid, signal.SIGKILL)
        if not failed:
            self.assertEqual(left, [], "a VM outlived the test's kill")

    def install(self, token, *extra):
        r = self.h.install(token, *extra)
        print("---- sandbox-node-install %s ----\n%s%s" % (" ".join(extra), r.stdout, r.stderr))
        return r

    def request(self, operation, arguments):
        r = self.s.request(operation, arguments, timeout_ms=120000)
        self.assertNotIn("error_code", r, r)
        return r.get("result")

    def test_refusals_spend_no_token_then_the_installed_node_runs_a_sandbox_in_a_vm(self):
        self.h.publish_host("host-1")
        self.s.start_devcore()
        token = self.h.token()

        r = self.install(token, "--provider=lxc")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--provider: must be docker or microvm", r.stderr)

        r = self.install(token, "--provider=microvm", "--microvm-accel=kvm")
        kvm_runs_guests = r.returncode == 0
        if not kvm_runs_guests:
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn("--microvm-accel=kvm: KVM does not run guests on this host", r.stderr)
            self.assertEqual(set(tree(self.h.root)), BEFORE_ENROLLING)
            self.assertIsNone(self.s.node(), "the refused run enrolled")
            # The same token still enrolls: nothing was spent.
            r = self.install(token, "--provider=microvm")
        else:
            print("KVM runs guests on this host: --microvm-accel=kvm installed (no refusal to see)")
        self.assertEqual(r.returncode, 0, "stdout:\n%s\nstderr:\n%s" % (r.stdout, r.stderr))
        self.assertRegex(r.stdout, r"microVM provider: qemu \d+\.\d+\.\d+, accelerator (kvm|tcg)")

        # privhelper's configuration, the store, the VM's user, the fourth name, the drop-in.
        with open(self.h.path("/etc/sandbox-node/privhelper.json")) as f:
            cfg = json.load(f)
        self.assertEqual(cfg["provider"], "microvm")
        self.assertNotIn("docker_socket", cfg)
        vm_user = pwd.getpwnam("sandbox-node-vm")
        self.assertEqual(cfg["microvm"]["store_dir"], self.store)
        self.assertEqual(cfg["microvm"]["vm_uid"], vm_user.pw_uid)
        self.assertNotEqual(cfg["microvm"]["vm_uid"], self.s.user.pw_uid)
        self.assertEqual(cfg["microvm"]["accel"], "kvm" if kvm_runs_guests else "auto")
        st = os.stat(self.store)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o755))
        bindir = self.h.path("/usr/lib/sandbox-node")
        self.assertEqual(os.stat(os.path.join(bindir, "vm_supervisor")).st_ino,
                         os.stat(os.path.join(bindir, "privhelper")).st_ino)
        dropin = self.h.path(
            "/etc/systemd/system/sandbox-node-privhelper.service.d/microvm.conf")
        with open(dropin) as f:
            self.assertIn("\nReadWritePaths=%s\n" % self.store, f.read())
        with open(self.h.path("/var/lib/sandbox-node/install/installed.json")) as f:
            self.assertEqual(json.load(f)["provider"], "microvm")

        # A rerun changes nothing; one with another provider is refused, naming the recorded one.
        before = tree(self.h.root)
        again = self.install("spent-token", "--provider=microvm")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("nothing changed", again.stdout)
        self.assertEqual(tree(self.h.root), before)
        other = self.install("spent-token")
        self.assertEqual(other.returncode, 3, other.stderr)
        self.assertIn("--provider=microvm", other.stderr)

        # The two printed commands start the node; a sandbox runs in a VM through Core.
        lines = r.stdout.splitlines()
        i = next(i for i, l in enumerate(lines) if "start both processes by hand" in l)
        ph_cmd, agent_cmd = lines[i + 1].strip(), lines[i + 2].strip()
        env = {"PATH": harness.SYSTEM_PATH}
        self.s.privhelper = harness.Proc("privhelper", shlex.split(ph_cmd), self.s.root, env=env)
        wait_for(lambda: os.path.exists(self.h.path("/run/sandbox-node/privhelper.sock")) or
                 self.s.fail_dead(self.s.privhelper), 20, "privhelper socket")
        self.s.agent = harness.Proc("agent", shlex.split(agent_cmd), self.s.root, env=env)
        with open(self.h.path("/var/lib/sandbox-node/agent/node/identity.json")) as f:
            self.s.identity = json.load(f)
        node = self.s.wait_connected(timeout=90)
        self.assertEqual(node["provider"], "microvm", node)
        # The enrollment's fingerprint is the installer's probe: qemu's version, the accelerator.
        self.assertRegex(node["backend_fingerprint"], r"^microvm/qemu-\d+\.\d+\.\d+ (kvm|tcg)$")
        sid = str(uuid.uuid4())
        created = self.request("create", {"sandbox_id": sid, "image": "busybox",
                                          "command": ["sleep", "100000"],
                                          "cpu_millis": 1000, "memory_bytes": 64 << 20})
        self.assertEqual(created["state"], "running", created)
        out = self.request("exec", {"sandbox_id": sid, "argv": ["uname", "-r"],
                                    "output_limit_bytes": 4096})
        release = base64.b64decode(out["stdout"]).strip()
        print("guest kernel: %s" % release.decode())
        self.assertNotEqual(release, os.uname().release.encode())
        self.assertEqual(len(harness.vm_processes(self.store)), 1)
        self.request("kill", {"sandbox_id": sid})
        self.assertEqual(self.request("inspect", {"sandbox_id": sid})["state"], "absent")
        wait_for(lambda: not harness.vm_processes(self.store), 20, "qemu to end after kill")


if __name__ == "__main__":
    unittest.main()
