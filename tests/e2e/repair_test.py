"""Issue #11 end to end: restart recovery and repair on a real dockerd.

A generation-managing node serves generation 1, whose release ("e2e-r") holds the busybox
image archive and the generation's own native helper (artifact kind `helper`, run from
privhelper's store). Each kind of Runtime file is deleted in turn while the node is stopped —
the helper in privhelper's store, the image archive in the store, the Docker image itself from
the private dockerd — then privhelper and the agent start again. The node must report the
generation unready with the diagnostic that names what is missing (runtime_missing or
image_missing) in its heartbeats and refuse `create` on it; it repairs exactly what is missing
(the other stored files keep their inodes, the final configuration its bytes), re-imports the
image from the stored archive when the daemon lost it, runs the provider's readiness probe,
and is ready again, serving `create`. So that the unready state is observable, devcore's copy
of the release is hidden during the first repair attempt (which then fails and backs off one
minute). A file whose bytes changed refuses the generation instead: failed with
configuration_invalid, and nothing is deleted or rewritten.
"""

import hashlib
import json
import os
import re
import uuid

import harness
from harness import wait_for

SOURCE = "e2e-r"


def setUpModule():
    harness.require_stack_environment()


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class RepairTest(harness.DockerdTestCase):
    def setUp(self):
        self.s = harness.Stack(self, self.dockerd.sock, generation_management=True,
                               image=self.image, wait_divisor=harness.E2E_WAIT_DIVISOR)
        helper = os.path.join(self.s.root, "bin", "native_helper")
        self.assertTrue(os.path.exists(helper), "the native helper must be a runfile")
        doc = self.s.specification(generation=1, source=SOURCE,
                                   extra_artifacts=[("helper", helper)])
        with open(self.s.spec_path, "w") as f:
            f.write(json.dumps(doc, separators=(",", ":")))
        self.archive_name = os.path.basename(self.image[0])
        self.s.start_devcore()
        self.s.start_privhelper()
        self.s.enroll()
        self.s.start_agent()
        self.s.wait_connected()
        self.s.wait_observed(1, "ready", timeout=120)
        self.s.set_deployment(1, 1)
        self.create_ok()

    # -- helpers ---------------------------------------------------------------------------
    def create_ok(self):
        sid = str(uuid.uuid4())
        r = self.s.request("create", {"sandbox_id": sid, "image": "busybox",
                                      "command": ["sleep", "3600"], "cpu_millis": 250,
                                      "memory_bytes": 64 << 20}, generation=1)
        self.assertNotIn("error_code", r, r)
        self.assertEqual(r["result"]["state"], "running", r)
        return sid

    def remove_containers(self):
        _, conts = harness.docker_request(self.dockerd.sock, "GET", "/containers/json?all=1")
        for c in conts or []:
            harness.docker_request(self.dockerd.sock, "DELETE",
                                   "/containers/%s?force=1" % c["Id"])

    def store_files(self):
        """{name: (inode, sha256)} of privhelper's stored files of the release."""
        d = self.s.ph_release_dir(SOURCE)
        out = {}
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if os.path.isfile(path) and not os.path.islink(path):
                out[name] = (os.stat(path).st_ino, sha256_of(path))
        return out

    def stop_node(self):
        self.s.agent.stop()
        self.s.privhelper.stop()

    def start_node(self):
        self.s.start_privhelper()
        self.s.start_agent()
        self.s.wait_connected()

    def image_present(self):
        status, _ = harness.docker_request(self.dockerd.sock, "GET",
                                           "/images/%s/json" % self.image[1])
        return status == 200

    def check_repair(self, delete, diagnostic, repaired_file):
        s = self.s
        final_before = open(os.path.join(s.ph_generations_dir(), "1.json"), "rb").read()
        files_before = self.store_files()
        self.stop_node()
        delete()
        log_start = len(s.privhelper.stderr())  # privhelper's log is appended across restarts
        releases = os.path.join(s.releases_dir, SOURCE)
        os.rename(releases, releases + ".hidden")
        self.start_node()
        # Unready with what is missing, in the node's heartbeats; create waits for readiness.
        obs = wait_for(lambda: (lambda o: o if o and o["state"] == "failed" else None)(
            s.observations().get(1)), 60, "generation 1 observed failed", interval=0.5)
        self.assertEqual(obs.get("diagnostic"), diagnostic, obs)
        r = s.request("create", {"sandbox_id": str(uuid.uuid4()), "image": "busybox",
                                 "command": ["sleep", "1"], "cpu_millis": 250,
                                 "memory_bytes": 64 << 20}, generation=1)
        self.assertEqual(r.get("error_code"), "unconfirmed", r)
        self.assertIn("needs repair", s.privhelper.stderr())
        # The release comes back; the repair runs after its one-minute backoff.
        os.rename(releases + ".hidden", releases)
        wait_for(lambda: (lambda o: o if o and o["state"] == "ready" else None)(
            s.observations().get(1)), 180, "generation 1 observed ready again", interval=0.5)
        self.assertIn("generation repaired and ready", s.privhelper.stderr())
        # Exactly the missing file was stored again, with its bytes; nothing else changed.
        files_after = self.store_files()
        self.assertEqual(set(files_after), set(files_before))
        for name, (ino, digest) in files_before.items():
            self.assertEqual(files_after[name][1], digest, name)
            if name == repaired_file:
                # Not by its inode number: the filesystem may give the new file the number of
                # the one deleted. privhelper logs every artifact it stores.
                stored = re.compile(r'msg="artifact stored".* artifact=' + re.escape(name) + r'( |$)',
                                    re.M)
                self.assertRegex(s.privhelper.stderr()[log_start:], stored,
                                 name + " was stored again")
            else:
                self.assertEqual(files_after[name][0], ino, name + " was kept")
        self.assertEqual(open(os.path.join(s.ph_generations_dir(), "1.json"), "rb").read(),
                         final_before, "the final configuration is kept")
        self.assertTrue(self.image_present())
        self.create_ok()

    # -- tests -----------------------------------------------------------------------------
    def test_each_missing_runtime_file_is_repaired_exactly_and_ready_only_after_the_probe(self):
        store = self.s.ph_release_dir(SOURCE)
        # The generation's own helper in privhelper's store.
        self.check_repair(lambda: os.unlink(os.path.join(store, "native_helper")),
                          "runtime_missing", "native_helper")
        # The image archive in the store.
        self.check_repair(lambda: os.unlink(os.path.join(store, self.archive_name)),
                          "runtime_missing", self.archive_name)

        # The Docker image itself, gone from the daemon: re-imported from the stored archive.
        def delete_image():
            self.remove_containers()
            status, body = harness.docker_request(self.dockerd.sock, "DELETE",
                                                  "/images/%s?force=1" % self.image[1])
            self.assertEqual(status, 200, body)
            self.assertFalse(self.image_present())

        self.check_repair(delete_image, "image_missing", None)
        self.assertIn("re-importing an image from its stored archive", self.s.privhelper.stderr())

    def test_after_a_restart_the_generation_is_ready_only_once_a_provider_probe_passed(self):
        """docs/protocol.md 20a. A crash after a repair stored the missing bytes but before its
        probe leaves exactly what any stop leaves (a repair writes no record of its own): every
        file there, the final configuration READY. So privhelper and the agent are stopped,
        the daemon too, and both start again while the daemon is down: privhelper adopts the
        generation from its records, but it is not observed ready and create is refused until
        a provider probe passes; once the daemon is back it is, without any repair."""
        s = self.s
        files_before = self.store_files()
        self.stop_node()
        self.dockerd.stop()
        try:
            self.start_node()
            obs = wait_for(lambda: (lambda o: o if o and o["state"] == "failed" else None)(
                s.observations().get(1)), 60, "generation 1 observed failed", interval=0.5)
            self.assertIn(obs.get("diagnostic"), ("daemon_unreachable", "provider_unavailable"),
                          obs)
            r = s.request("create", {"sandbox_id": str(uuid.uuid4()), "image": "busybox",
                                     "command": ["sleep", "1"], "cpu_millis": 250,
                                     "memory_bytes": 64 << 20}, generation=1)
            self.assertEqual(r.get("error_code"), "unconfirmed", r)
            self.assertNotEqual(s.observations().get(1, {}).get("state"), "ready")
        finally:
            self.dockerd.start()
        wait_for(lambda: (lambda o: o if o and o["state"] == "ready" else None)(
            s.observations().get(1)), 120, "generation 1 observed ready once the daemon is back",
            interval=0.5)
        self.assertIn("a generation adopted at start is ready", s.privhelper.stderr())
        self.assertNotIn("repair begun", s.privhelper.stderr())
        self.assertEqual(self.store_files(), files_before, "nothing was missing or rewritten")
        self.create_ok()

    def test_a_corrupted_runtime_file_refuses_the_generation_and_nothing_is_deleted(self):
        s = self.s
        path = os.path.join(s.ph_release_dir(SOURCE), "native_helper")
        size = os.path.getsize(path)
        self.stop_node()
        os.chmod(path, 0o700)
        with open(path, "r+b") as f:
            f.write(b"\0" * size)  # same size, other bytes
        os.chmod(path, 0o500)
        files_before = self.store_files()
        records_before = sorted(os.listdir(s.ph_generations_dir()))
        self.start_node()
        obs = wait_for(lambda: (lambda o: o if o and o["state"] == "failed" else None)(
            s.observations().get(1)), 60, "generation 1 observed failed", interval=0.5)
        self.assertEqual(obs.get("diagnostic"), "configuration_invalid", obs)
        self.assertIn("Runtime files changed", s.privhelper.stderr())
        r = s.request("create", {"sandbox_id": str(uuid.uuid4()), "image": "busybox",
                                 "command": ["sleep", "1"], "cpu_millis": 250,
                                 "memory_bytes": 64 << 20}, generation=1)
        self.assertEqual(r.get("error_code"), "unconfirmed", r)
        # Kept as found: nothing removed, nothing rewritten, no repair.
        self.assertEqual(self.store_files(), files_before)
        self.assertEqual(sorted(os.listdir(s.ph_generations_dir())), records_before)
        self.assertNotIn("repair begun", s.privhelper.stderr())


    def test_an_interrupted_repair_download_resumes_with_a_range_request(self):
        """The first repair attempt's download of the archive breaks mid-file (devcore's
        test-only fault); privhelper keeps what arrived as a partial, and the next attempt asks
        devcore only for the rest (Range: bytes=N-, answered 206), verifies the whole file and
        ends ready."""
        s = self.s
        store = s.ph_release_dir(SOURCE)
        target = "/releases/%s/%s" % (SOURCE, self.archive_name)
        size = os.path.getsize(os.path.join(s.releases_dir, SOURCE, self.archive_name))
        self.assertGreater(size, 1 << 20)
        self.stop_node()
        os.unlink(os.path.join(store, self.archive_name))
        status, body = s.admin_call("POST", "/admin/v1/release-faults",
                                    {"path": target, "cut_after_bytes": size // 2})
        self.assertEqual(status, 200, body)
        self.start_node()
        # The first attempt fails (the cut), the second resumes after its backoff.
        wait_for(lambda: (lambda o: o if o and o["state"] == "ready" else None)(
            s.observations().get(1)), 180, "generation 1 observed ready again", interval=0.5)
        self.assertIn("generation repaired and ready", s.privhelper.stderr())
        self.assertIn("kept as a partial", s.privhelper.stderr())
        status, body = s.admin_call("GET", "/admin/v1/release-requests")
        self.assertEqual(status, 200, body)
        asked = [r for r in body["requests"] if r["path"] == target]
        # The enrollment-time preparation fetched it whole; then the cut one; then the rest.
        self.assertGreaterEqual(len(asked), 3, asked)
        cut = [i for i, r in enumerate(asked) if r["cut"]]
        self.assertEqual(len(cut), 1, asked)
        self.assertEqual(asked[cut[0]]["range"], "", asked)
        resumed = asked[cut[0] + 1]
        self.assertTrue(resumed["range"].startswith("bytes="), asked)
        held = int(resumed["range"][len("bytes="):-1])
        self.assertTrue(resumed["range"].endswith("-"), asked)
        self.assertGreater(held, 0, asked)
        self.assertLessEqual(held, size // 2, asked)
        self.assertEqual(resumed["status"], 206, asked)
        self.assertEqual(len(asked), cut[0] + 2, "nothing fetched after the resumed request")
        # The whole verified archive is stored; no partial is left.
        self.assertEqual(sha256_of(os.path.join(store, self.archive_name)),
                         sha256_of(os.path.join(s.releases_dir, SOURCE, self.archive_name)))
        self.assertEqual([n for n in os.listdir(store) if n.endswith(".partial")], [])
        self.create_ok()

if __name__ == "__main__":
    import unittest
    unittest.main()
