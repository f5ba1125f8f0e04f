"""The microVM provider end to end (issue 25): devcore, privhelper with provider "microvm" (its
VM host, under the capability set it keeps), the unprivileged agent and qemu (TCG here). A
generation whose signed release carries the repository's kernel, guest agent and qemu seccomp
policy, the host's microvm firmware and an ext4 root filesystem made by `release rootfs` is
prepared through the agent as a Docker generation is; then Core's requests run in a VM: create
(and its repeat), exec (the guest's own kernel), the VM surviving SIGKILL of privhelper and the
agent, files, kill_compute keeping the state, resume, kill, and absent / not_found only from the
store's complete inventory. No qemu is left afterwards. A release without the seccomp policy
leaves an unready placeholder: the node connected, its provider unready with runtime_missing,
no VM booted."""

import base64
import json
import os
import shutil
import signal
import subprocess
import unittest
import uuid

import harness


def setUpModule():
    harness.require(os.geteuid() == 0, "the microVM end-to-end test needs root (privhelper)")
    harness.require(shutil.which("qemu-system-x86_64") is not None, "qemu is not installed")
    harness.require(os.path.exists("/bin/busybox"), "busybox-static is not installed")


class MicrovmTest(unittest.TestCase):
    def setUp(self):
        self.s = harness.Stack(self, None, provider="microvm")
        self.store = os.path.join(self.s.root, "vm")
        # The sandboxes' VMs: their command lines name <store>/vms/<id>/. The usability probe's
        # throwaway VM (<store>/probe/vms/<id>/) may be booting beside them when a probe runs
        # late on a loaded machine; it is not a sandbox, and tearDown checks it is gone too.
        self.vms = os.path.join(self.store, "vms") + "/"

    def start(self):
        self.s.start_devcore()
        self.s.start_privhelper(max_active=2, max_retained=2)
        self.s.agent_config()
        self.s.enroll()
        self.s.start_agent()
        # Enrolment prepared generation 1 (the release's image and boot files into privhelper's
        # store); connected with a health report, the node serves it.
        self.s.wait_connected(timeout=60)

    def tearDown(self):
        failed = harness.test_failed(self)
        if failed:
            print(self.s.logs())
        self.s.stop(keep=failed)
        left = harness.vm_processes(self.store)
        # A failed test may leave its VM: killed here (its supervisor takes qemu with it).
        for pid in harness.vm_processes(self.store, "vm_supervisor"):
            os.kill(pid, signal.SIGKILL)
        if not failed:
            self.assertEqual(left, [], "a VM outlived the test's kills")

    def req(self, operation, arguments, timeout_ms=120000):
        return self.s.request(operation, arguments, timeout_ms=timeout_ms)

    def ok(self, operation, arguments):
        r = self.req(operation, arguments)
        self.assertNotIn("error_code", r, r)
        return r.get("result")

    def err(self, operation, arguments):
        r = self.req(operation, arguments)
        self.assertIn("error_code", r, r)
        return r["error_code"]

    def exec_out(self, sid, argv, stdin=b""):
        r = self.ok("exec", {"sandbox_id": sid, "argv": argv,
                             "stdin": base64.b64encode(stdin).decode(),
                             "output_limit_bytes": 4096})
        return r["exit_code"], base64.b64decode(r["stdout"])

    def test_a_sandbox_lives_in_a_vm_through_core(self):
        self.start()
        sid = str(uuid.uuid4())
        self.assertEqual(self.ok("inspect", {"sandbox_id": sid})["state"], "absent")
        self.assertEqual(self.err("kill", {"sandbox_id": sid}), "not_found")

        args = {"sandbox_id": sid, "image": "busybox",
                "command": ["sh", "-c", "echo \"$GREETING\" > /root/mark; exec sleep 100000"],
                "env": {"GREETING": "hello from the main process"},
                "cpu_millis": 1000, "memory_bytes": 16 << 20}
        created = self.ok("create", args)
        self.assertEqual(created["state"], "running")
        self.assertEqual(created["native_id"], "vm-" + sid)
        self.assertEqual(self.ok("create", args)["native_id"], "vm-" + sid)
        self.assertEqual(self.err("create", dict(args, cpu_millis=500)), "conflict")
        self.assertEqual(len(harness.vm_processes(self.vms)), 1)

        # The guest runs its own kernel, not the host's.
        code, release = self.exec_out(sid, ["uname", "-r"])
        self.assertEqual(code, 0)
        self.assertNotEqual(release.strip(), os.uname().release.encode())
        print("guest kernel: %s" % release.decode().strip())
        code, mark = self.exec_out(
            sid, ["sh", "-c", "while [ ! -s /root/mark ]; do sleep 0.05; done; cat /root/mark"])
        self.assertEqual(mark, b"hello from the main process\n")
        self.assertEqual(self.exec_out(sid, ["cat"], b"through stdin")[1], b"through stdin")
        # The guest's disk is disk_bytes (256 MiB here), not the image's few MiB: the guest agent
        # grew the release's ext4 (made by `release rootfs`) to it at boot (protocol.md 24j).
        code, out = self.exec_out(sid, ["sh", "-c", "dd if=/dev/zero of=/root/fill bs=1M count=64 "
                                        "2>/dev/null && rm /root/fill && echo grown"])
        self.assertEqual((code, out), (0, b"grown\n"))

        # The VM outlives the node's processes: SIGKILL of privhelper (its native helper ends at
        # its socket's EOF) and of the agent; both restarted find it running, by its records
        # and its supervisor's pidfd, and it still answers.
        qemu = harness.vm_processes(self.vms)
        self.s.privhelper.kill9()
        self.s.agent.kill9()
        self.s.start_privhelper(max_active=2, max_retained=2)
        self.s.start_agent()
        self.s.wait_connected(timeout=60)
        harness.wait_for(lambda: "error_code" not in self.req("inspect", {"sandbox_id": sid}),
                         60, "the node to answer after its restart", interval=0.5)
        self.assertEqual(self.ok("inspect", {"sandbox_id": sid})["state"], "running")
        self.assertEqual(harness.vm_processes(self.vms), qemu)
        self.assertEqual(self.exec_out(sid, ["cat", "/root/mark"])[1],
                         b"hello from the main process\n")

        content = base64.b64encode(b"kept across kill_compute").decode()
        self.ok("write_file", {"sandbox_id": sid, "path": "/root/note", "content": content,
                               "mode": 0o644})
        read = self.ok("read_file", {"sandbox_id": sid, "path": "/root/note",
                                     "max_bytes": 1024})
        self.assertEqual(base64.b64decode(read["content"]), b"kept across kill_compute")

        self.ok("kill_compute", {"sandbox_id": sid})
        self.assertEqual(self.ok("inspect", {"sandbox_id": sid})["state"], "retained")
        self.assertEqual(harness.vm_processes(self.vms), [])
        self.assertEqual(self.ok("resume", {"sandbox_id": sid, "reconciliation_only": False})["state"], "running")
        read = self.ok("read_file", {"sandbox_id": sid, "path": "/root/note",
                                     "max_bytes": 1024})
        self.assertEqual(base64.b64decode(read["content"]), b"kept across kill_compute")

        self.ok("kill", {"sandbox_id": sid})
        self.assertEqual(self.ok("inspect", {"sandbox_id": sid})["state"], "absent")
        self.assertFalse(os.path.exists(os.path.join(self.store, "vms", sid)))

    def test_a_release_without_a_seccomp_policy_leaves_an_unready_placeholder(self):
        """The requirements: missing seccomp bytes may leave an unready provider placeholder. A
        generation whose (valid, signed) release has no `seccomp` artifact is prepared, but no
        VM of it boots: the node connects and reports its provider unready with
        runtime_missing, the generation is not ready, a create is refused before any VM
        exists, and no qemu runs."""
        s = self.s
        boot = [(k, p) for k, p in s.microvm_boot_artifacts() if k != "seccomp"]
        doc = s.specification(source="e2e-no-seccomp", extra_artifacts=boot)
        self.assertNotIn("seccomp", [a["kind"] for a in doc["runtime"]["artifacts"]])
        with open(s.spec_path, "w") as f:
            f.write(json.dumps(doc, separators=(",", ":")))
        self.start()
        nid = s.identity["node_id"]
        health = harness.wait_for(
            lambda: (lambda h: h if h and h.get("provider_ready") is False else None)(
                s.node(nid).get("last_health")), 60, "an unready health report")
        self.assertEqual(health.get("diagnostic"), "runtime_missing", health)
        self.assertIn("has no seccomp artifact", s.privhelper.stderr())
        sid = str(uuid.uuid4())
        r = self.req("create", {"sandbox_id": sid, "image": "busybox", "command": ["sleep", "60"],
                                "cpu_millis": 1000, "memory_bytes": 64 << 20})
        # The agent answers for an unready provider before privhelper is asked (privhelper
        # itself refuses the boot `unavailable`: microvm_helper_test).
        self.assertEqual(r.get("error_code"), "unconfirmed", r)
        self.assertNotEqual(s.observations().get(1, {}).get("state"), "ready")
        self.assertFalse(os.path.exists(os.path.join(self.store, "vms", sid)))
        self.assertEqual(harness.vm_processes(self.vms), [])
        # The placeholder stays: still connected, still reporting why.
        self.assertEqual(s.node(nid)["presence"], "connected")
        self.assertEqual(s.node(nid)["last_health"].get("diagnostic"), "runtime_missing")


if __name__ == "__main__":
    unittest.main()
