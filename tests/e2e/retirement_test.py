"""Issue #10 end to end: retiring a generation on a real dockerd.

A generation-managing node rolls from generation 1 to 2 (each its own signed release, so 1's
release files are private to it), Core records the drop of 1 (devcore's
POST /admin/v1/nodes/{id}/drops) and the node collects it: privhelper removes 1's release files
and keeps its identity records, writes the dropped marker, the agent never reports 1 again and
answers `unconfirmed` on it, and the Docker image stays in the daemon. `agent generations`
(run as the agent's user) explains every step. Also: a live provider call refuses the
collection until it ends; `kill -9` of agent and privhelper while a collection runs leaves a
consistent journal that only a fresh grant on a new connection finishes; the operator view
with privhelper stopped. Every wait polls real state (harness.wait_for).

Time: about 4-6 minutes in all on a loaded 2-core machine (the node asks again about a
generation Core kept only after 60 s, kRetentionCycle, and retries a grant it could not use
after 30 s, kRetentionHeldRetry; docs/protocol.md 14k).
"""

import json
import os
import signal
import threading
import time
import unittest
import urllib.request
import uuid

import harness
from harness import wait_for
from retirement_util import JournalWatcher

ROW_KEYS = {"generation", "specification_digest", "state", "roles", "references"}
OPTIONAL_ROW_KEYS = {"diagnostic", "progress"}
STATES = {"preparing", "ready", "failed", "collecting", "dropped"}


def setUpModule():
    harness.require_stack_environment()


class RetirementTest(harness.DockerdTestCase):
    def setUp(self):
        self.s = harness.Stack(self, self.dockerd.sock, generation_management=True,
                               image=self.image, wait_divisor=harness.E2E_WAIT_DIVISOR)
        self.s.start_devcore()
        self.s.start_privhelper(helper_idle_seconds=2)
        self.ident = self.s.enroll()
        self.nid = self.ident["node_id"]
        self.d1 = self.ident["specification_digest"]
        self.s.start_agent()
        self.s.wait_connected()
        self.ph_state = os.path.join(self.s.dirs["privhelper"], "state")
        self.ph_gens = self.s.ph_generations_dir()
        self.agent_cfg = os.path.join(self.s.dirs["agent"], "config.json")
        # A generation-managing agent prepares its enrolled generation once connected.
        self.wait_row(1, lambda r: r["state"] == "ready", 120, "generation 1 ready")


    # -- the operator's view -----------------------------------------------------------------
    def generations_json(self):
        """`agent generations --json` as the agent's user: (exit code, document, stderr); the
        document is checked against the shape issue #10 prescribes."""
        r = self.s.run_as_agent([self.s.bins["agent"], "generations",
                                 "--config=" + self.agent_cfg, "--json"])
        doc = json.loads(r.stdout)
        self.assertEqual(set(doc), {"generations"}, doc)
        for row in doc["generations"]:
            self.assertTrue(ROW_KEYS <= set(row) <= ROW_KEYS | OPTIONAL_ROW_KEYS, row)
            self.assertIsInstance(row["generation"], int)
            self.assertRegex(row["specification_digest"], r"^[0-9a-f]{64}$")
            self.assertIn(row["state"], STATES, row)
            self.assertIn(row["roles"], ([], ["target"], ["serving"], ["target", "serving"]))
            self.assertTrue(all(isinstance(x, str) for x in row["references"]), row)
            if "diagnostic" in row:
                self.assertIsInstance(row["diagnostic"], str)
            if "progress" in row:
                self.assertIsInstance(row["progress"], dict)
        return r.returncode, doc, r.stderr

    def generations_text(self):
        r = self.s.run_as_agent([self.s.bins["agent"], "generations",
                                 "--config=" + self.agent_cfg])
        return r.returncode, r.stdout

    def row(self, g):
        _, doc, _ = self.generations_json()
        for x in doc["generations"]:
            if x["generation"] == g:
                return x
        return None

    def wait_row(self, g, pred, timeout, what):
        seen = []

        def check():
            r = self.row(g)
            seen[:] = [r]
            return r if r is not None and pred(r) else None
        try:
            return wait_for(check, timeout, what, interval=0.5)
        except AssertionError as e:
            raise AssertionError("%s; generation %d's row: %r" % (e, g, seen)) from None

    # -- Core's side ---------------------------------------------------------------------------
    def admin(self, method, path, body=None, expect=200):
        status, resp = self.s.admin_call(method, path, body)
        self.assertEqual(status, expect, resp)
        return resp

    def announce_generation_2(self):
        """Generation 2: the same image from its own release "e2e-2" (so no release file of 1
        is shared with it). Returns its digest."""
        return self.s.add_generation(self.s.specification(generation=2, source="e2e-2"))

    def deploy(self, generation, serving):
        return self.s.set_deployment(generation, serving)

    def drop(self, generation, digest, expect=200):
        return self.admin("POST", "/admin/v1/nodes/%s/drops" % self.nid,
                          {"generation": generation, "specification_digest": digest}, expect)

    def reported(self):
        """(heartbeats, generation numbers of the node's last hello/heartbeat)."""
        n = self.s.node(self.nid)
        return n["heartbeats"], sorted(o["generation"] for o in (n.get("last_generations") or []))

    def assert_not_reported_over_heartbeats(self, g, count=3):
        # The report current now may predate the collection; every later one must omit g.
        start, _ = self.reported()

        def next_beats():
            beats, gens = self.reported()
            if beats > start:
                self.assertNotIn(g, gens, "generation %d reported again (heartbeat %d)" % (
                    g, beats))
            return beats >= start + count
        wait_for(next_beats, 15 * count + 15, "%d more heartbeats" % count, interval=0.5)

    def request(self, generation, operation, arguments):
        return self.s.request(operation, arguments, generation=generation)

    def create_sandbox(self, generation):
        sid = str(uuid.uuid4())
        r = self.request(generation, "create",
                         {"sandbox_id": sid, "image": "busybox", "command": ["sleep", "3600"],
                          "cpu_millis": 250, "memory_bytes": 64 << 20})
        self.assertNotIn("error_code", r, r)
        return sid

    # -- privhelper's records ----------------------------------------------------------------
    def record(self, name):
        r = self.s.ph_record(name)
        self.assertIsNotNone(r, "privhelper's %s is missing" % name)
        return r

    def has(self, name):
        return os.path.exists(os.path.join(self.ph_gens, name))

    def release_files(self, g):
        """Absolute paths of generation g's release files (its final configuration's)."""
        return [os.path.join(self.ph_state, a["path"]) for a in self.record("%d.json" % g)["artifacts"]]

    def retention_entry(self, g):
        path = os.path.join(self.s.dirs["agent"], "state", "node", "retention.json")
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return None
        for e in doc["generations"]:
            if e["generation"] == g:
                return e
        return None

    def assert_identity_records_kept(self, g, digest):
        lease = os.path.join(self.ph_gens, "%d.lease" % g)
        self.assertTrue(os.path.isfile(lease), lease)
        self.assertEqual(os.path.getsize(lease), 0)
        ident = self.record("%d.lease-identity" % g)
        st = os.stat(lease)
        self.assertEqual((ident["generation"], ident["specification_digest"]), (g, digest))
        self.assertEqual((ident["device"], ident["inode"]), (st.st_dev, st.st_ino))
        cfg = self.record("%d.json" % g)
        self.assertEqual((cfg["generation"], cfg["specification_digest"]), (g, digest))
        return ident["installation_id"]

    def assert_dropped_on_disk(self, g, digest, files, reclaimed=True):
        """`reclaimed`: privhelper finished the collection or started since (not right after a
        kill -9 that may have hit between the marker and the removals after it)."""
        for p in files:
            self.assertFalse(os.path.exists(p), "release file %s of %d still there" % (p, g))
        installation = self.assert_identity_records_kept(g, digest)
        self.assertEqual(self.record("%d.dropped" % g),
                         {"schema": 1, "installation_id": installation, "generation": g,
                          "specification_digest": digest})
        if reclaimed:
            self.assertFalse(self.has("%d.collecting" % g), "journal left beside the marker")
            # Issue #23, finding 3: what a dropped generation no longer needs is reclaimed once
            # its marker is durable; the final configuration, lease and identity stay.
            for name in ("specification", "preparing", "images"):
                self.assertFalse(self.has("%d.%s" % (g, name)),
                                 "%d.%s left beside the marker" % (g, name))

    def assert_image_in_daemon(self):
        status, img = harness.docker_request(self.dockerd.sock, "GET",
                                             "/images/%s/json" % self.image_id)
        self.assertEqual(status, 200, "collection removed the image from the daemon")
        self.assertEqual(img["Id"], self.image_id)

    def roll_and_serve_2(self):
        d2 = self.announce_generation_2()
        self.deploy(2, None)
        self.wait_row(2, lambda r: r["state"] == "ready", 180, "generation 2 ready")
        self.deploy(2, 2)
        self.wait_row(2, lambda r: r["roles"] == ["target", "serving"], 60, "serving pin on 2")
        return d2

    def drop_1_killing_at_the_journal(self, procs):
        """Announces generation 2, makes it the target and drops 1 at once (so the node's first
        question about 1 is granted); SIGKILLs `procs` (harness.Proc) the instant privhelper
        publishes 1's collection journal and reaps them."""
        self.announce_generation_2()
        watcher = JournalWatcher(self.ph_gens, "1.collecting", [p.p.pid for p in procs])
        watcher.start()
        try:
            self.deploy(2, None)
            self.drop(1, self.d1)
            wait_for(lambda: watcher.fired, 90, "the collection journal of generation 1",
                     interval=0.1)
        finally:
            watcher.stop()
        for p in procs:
            p.p.wait(10)
            self.assertEqual(p.p.returncode, -signal.SIGKILL, p.name)
            p.stop()

    # -- tests ---------------------------------------------------------------------------------
    def test_rolled_back_generation_is_collected_after_core_drops_it(self):
        t0 = time.monotonic()
        rc, doc, err = self.generations_json()
        self.assertEqual(rc, 0, err)
        [g1] = doc["generations"]
        self.assertEqual((g1["generation"], g1["state"], g1["roles"]), (1, "ready", ["target"]))
        self.assertIn("target", g1["references"])
        files1 = self.release_files(1)
        self.assertTrue(files1 and all(os.path.isfile(p) for p in files1), files1)

        d2 = self.roll_and_serve_2()
        files2 = self.release_files(2)
        self.assertTrue(set(files1).isdisjoint(files2), (files1, files2))
        # Nothing local holds 1 any more; Core has not dropped it: asked, kept.
        g1 = self.wait_row(1, lambda r: any(x.startswith("no drop grant yet (Core kept it")
                                            for x in r["references"]),
                           60, "Core's keep of generation 1")
        self.assertEqual((g1["state"], g1["roles"]), ("ready", []), g1)
        g2 = self.row(2)
        self.assertEqual(g2["state"], "ready")
        self.assertEqual(g2["references"][:2], ["serving pin", "target"], g2)
        self.assertTrue(all(os.path.isfile(p) for p in files1))
        self.assertFalse(self.has("1.dropped"))
        # Core refuses to drop what it serves.
        self.drop(2, d2, expect=409)

        self.drop(1, self.d1)
        self.drop(1, self.d1)  # the same drop again
        # Asked again after kRetentionCycle (60 s) at a heartbeat tick.
        g1 = self.wait_row(1, lambda r: r["state"] == "dropped", 120, "generation 1 dropped")
        self.assertEqual((g1["roles"], g1["references"]), ([], []), g1)
        self.assertNotIn("diagnostic", g1)
        self.assert_dropped_on_disk(1, self.d1, files1)
        self.assertTrue(all(os.path.isfile(p) for p in files2))
        self.assertEqual(self.row(2)["state"], "ready")
        rc, text = self.generations_text()
        self.assertEqual(rc, 0, text)
        self.assertRegex(text, r"generation 1  %s  dropped\n    held by: nothing\n" % self.d1[:12])
        self.assertRegex(text, r"generation 2  %s  ready  \[target, serving\]\n"
                               r"    held by: serving pin\n    held by: target\n" % d2[:12])

        self.assert_not_reported_over_heartbeats(1)
        r = self.request(1, "inspect", {"sandbox_id": str(uuid.uuid4())})
        self.assertEqual(r.get("error_code"), "unconfirmed", r)
        r = self.request(2, "inspect", {"sandbox_id": str(uuid.uuid4())})
        self.assertNotEqual(r.get("error_code"), "unconfirmed", r)
        self.create_sandbox(2)  # generation 2 still usable: none of its files went
        self.assert_image_in_daemon()
        print("rollout, drop and collection: %.0f s" % (time.monotonic() - t0))

    def test_a_running_exec_holds_its_generation_until_it_ends(self):
        t0 = time.monotonic()
        sid = self.create_sandbox(1)
        files1 = self.release_files(1)
        result = {}

        def run_exec():
            # harness.Stack.admin_call gives up after 30 s; this call runs longer.
            req = urllib.request.Request(
                self.s.origin + "/admin/v1/nodes/%s/requests" % self.nid,
                data=json.dumps({"generation": 1, "operation": "exec", "timeout_ms": 60000,
                                 "arguments": {"sandbox_id": sid, "argv": ["sleep", "45"],
                                               "output_limit_bytes": 4096}}).encode(),
                method="POST", headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=120) as r:
                    result["r"] = (r.status, json.loads(r.read()))
            except Exception as e:  # reported by the assertions below
                result["r"] = (None, repr(e))
        exec_thread = threading.Thread(target=run_exec, daemon=True)
        exec_thread.start()
        self.wait_row(1, lambda r: "1 call in flight in privhelper" in r["references"], 30,
                      "the exec in flight on generation 1")
        # Generation 1 leaves target; Core drops it at once: the first grant meets the call.
        self.announce_generation_2()
        self.deploy(2, None)
        self.drop(1, self.d1)
        entry = wait_for(lambda: (lambda e: e if e and e["granted_at"] and
                                  e["collection"] in ("held locally", "held") else None)(
                                      self.retention_entry(1)),
                         60, "the grant of generation 1 refused by its live call", interval=0.2)
        self.assertTrue(exec_thread.is_alive(), "the exec ended before the grant: %r" % result)
        self.assertTrue(all(os.path.isfile(p) for p in files1), "collected under a live call")
        self.assertFalse(self.has("1.collecting") or self.has("1.dropped"))
        g1 = self.row(1)
        self.assertEqual(g1["state"], "ready", g1)
        self.assertIn("1 call in flight in privhelper", g1["references"], g1)
        self.assertTrue(any(x.startswith("drop granted at") and "a new grant is needed" in x
                            for x in g1["references"]), g1)
        print("grant held while the exec ran: %s" % entry)

        exec_thread.join(70)
        self.assertFalse(exec_thread.is_alive())
        status, body = result["r"]
        self.assertEqual(status, 200, body)
        self.assertNotIn("error_code", body, body)
        self.assertEqual(body["result"]["exit_code"], 0, body)
        # A fresh grant after kRetentionHeldRetry (30 s) finds nothing holding it.
        self.wait_row(1, lambda r: r["state"] == "dropped", 90, "generation 1 dropped")
        self.assert_dropped_on_disk(1, self.d1, files1)
        self.assert_image_in_daemon()
        print("live reference then collection: %.0f s" % (time.monotonic() - t0))

    def test_kill_9_during_collection_resumes_only_through_a_fresh_grant(self):
        t0 = time.monotonic()
        files1 = self.release_files(1)
        self.drop_1_killing_at_the_journal([self.s.privhelper, self.s.agent])

        # Whatever instant the kill hit: lease and identity intact, journal or marker consistent.
        installation = self.assert_identity_records_kept(1, self.d1)
        interrupted = self.has("1.collecting")
        if interrupted:
            j = self.record("1.collecting")
            self.assertEqual((j["installation_id"], j["generation"], j["specification_digest"],
                              j["source"]), (installation, 1, self.d1, "e2e-1"), j)
            self.assertEqual(sorted(os.path.join(self.ph_state, f["path"]) for f in j["files"]),
                             sorted(files1), j)
        else:
            self.assert_dropped_on_disk(1, self.d1, files1, reclaimed=False)
        print("killed with the journal %s (native_done %s); files left: %d of %d" % (
            "still there" if interrupted else "already removed (dropped)",
            self.record("1.collecting")["native_done"] if interrupted else "-",
            sum(os.path.exists(p) for p in files1), len(files1)))

        # Both down, and Core down too: no grant can come. The view still answers (privhelper
        # unreachable), from what the agent alone knows.
        self.s.devcore.stop()
        rc, doc, err = self.generations_json()
        self.assertEqual(rc, 1)
        self.assertIn("privhelper unreachable", err)
        self.assertNotIn(1, [r["generation"] for r in doc["generations"]
                             if r["state"] in ("ready", "preparing")], doc)
        rc, text = self.generations_text()
        self.assertEqual(rc, 1)
        self.assertTrue(text.startswith("privhelper: UNREACHABLE ("), text)

        self.s.start_privhelper()
        self.s.start_agent()
        wait_for(lambda: "cannot reach Core; retrying" in self.s.agent.stderr(), 60,
                 "the restarted agent to try Core", interval=0.2)
        g1 = self.wait_row(1, lambda r: r["state"] in ("collecting", "dropped"), 30,
                           "privhelper's view of generation 1")
        if interrupted:
            # Not finished without a grant: the journal waits, unchanged in what it binds.
            self.assertEqual(g1["state"], "collecting", g1)
            self.assertTrue(any(x.startswith("collection journal: ") for x in g1["references"]),
                            g1)
            self.assertTrue(self.has("1.collecting"))
            self.assertFalse(self.has("1.dropped"))
            self.assertEqual(self.record("1.collecting")["specification_digest"], self.d1)
        self.s.start_devcore()
        self.s.wait_connected(60)
        self.assertNotIn(1, self.reported()[1], "generation 1 reported after the restart")
        g1 = self.wait_row(1, lambda r: r["state"] == "dropped", 60, "generation 1 dropped")
        self.assertEqual(g1["references"], [], g1)
        self.assert_dropped_on_disk(1, self.d1, files1)
        if interrupted:
            entry = self.retention_entry(1)
            # A fresh grant on this connection finished it (the entry goes once dropped).
            self.assertTrue(entry is None or entry["collection"] == "dropped", entry)
            log = self.s.agent.stderr()
            self.assertIn("asking Core about retention", log)
        self.assert_not_reported_over_heartbeats(1, count=2)
        r = self.request(1, "inspect", {"sandbox_id": str(uuid.uuid4())})
        self.assertEqual(r.get("error_code"), "unconfirmed", r)
        # Nothing generation 2 references went: it still prepares and serves.
        self.wait_row(2, lambda r: r["state"] == "ready", 180, "generation 2 ready")
        for p in self.release_files(2):
            self.assertTrue(os.path.isfile(p), p)
        self.create_sandbox(2)
        self.assert_image_in_daemon()
        print("kill -9 during collection and resumption: %.0f s" % (time.monotonic() - t0))

    def test_kill_9_of_the_agent_after_the_grant_leaves_privhelper_to_finish(self):
        # Past its reference check the collection no longer depends on its caller: privhelper
        # finishes it alone, and the restarted agent finds generation 1 dropped.
        files1 = self.release_files(1)
        self.drop_1_killing_at_the_journal([self.s.agent])
        g1 = self.wait_row(1, lambda r: r["state"] == "dropped", 30,
                           "privhelper to finish the collection alone")
        self.assertEqual(g1["references"], [], g1)
        self.assert_dropped_on_disk(1, self.d1, files1)
        self.assertTrue(self.s.privhelper.alive())
        self.s.start_agent()
        self.s.wait_connected(60)
        self.assertNotIn(1, self.reported()[1], "generation 1 reported after the restart")
        r = self.request(1, "inspect", {"sandbox_id": str(uuid.uuid4())})
        self.assertEqual(r.get("error_code"), "unconfirmed", r)
        self.wait_row(2, lambda r: r["state"] == "ready", 180, "generation 2 ready")
        self.assert_not_reported_over_heartbeats(1, count=2)
        self.assert_image_in_daemon()

    def test_generations_view_with_privhelper_stopped_shows_what_the_agent_knows(self):
        self.s.privhelper.stop()
        rc, doc, err = self.generations_json()
        self.assertEqual(rc, 1)
        self.assertIn("agent generations: privhelper unreachable (", err)
        self.assertIn("showing what the agent alone knows", err)
        [g1] = doc["generations"]
        self.assertEqual((g1["generation"], g1["specification_digest"], g1["roles"]),
                         (1, self.d1, ["target"]), g1)
        self.assertEqual((g1["state"], g1.get("diagnostic")), ("failed", "provider_unavailable"))
        self.assertIn("target", g1["references"])
        rc, text = self.generations_text()
        self.assertEqual(rc, 1)
        self.assertTrue(text.startswith("privhelper: UNREACHABLE ("), text)
        self.assertIn("the rows below are what the agent alone knows", text)
        self.assertIn("generation 1  %s  failed  [target]  diagnostic provider_unavailable\n"
                      "    held by: target\n" % self.d1[:12], text)
        # Back: privhelper's answer again.
        self.s.start_privhelper()
        self.wait_row(1, lambda r: r["state"] == "ready", 30, "generation 1 ready again")
        rc, text = self.generations_text()
        self.assertEqual(rc, 0, text)
        self.assertTrue(text.startswith("privhelper: reachable; collection running: no"), text)


if __name__ == "__main__":
    unittest.main()
