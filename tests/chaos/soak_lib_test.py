"""The chaos soak's pure helpers: schedule, slopes, Docker-event checks, table."""

import json
import os
import tempfile
import unittest

import soak_lib


def ev(action, sid, t=1.0):
    return {"Action": action, "timeNano": int(t * 1e9),
            "Actor": {"Attributes": {"sn.sandbox": sid, "sn.installation": "i"}}}


class ScheduleTest(unittest.TestCase):
    def test_same_seed_same_schedule_and_every_kind_once(self):
        a = soak_lib.fault_schedule(7, 120)
        self.assertEqual(a, soak_lib.fault_schedule(7, 120))
        self.assertNotEqual(a, soak_lib.fault_schedule(8, 120))
        self.assertEqual(sorted(k for _, k in a), sorted(soak_lib.FAULT_KINDS))
        self.assertTrue(all(10 <= t <= 100 for t, _ in a), a)
        self.assertEqual(a, sorted(a))

    def test_short_run_kills_processes_early(self):
        for seed in range(20):
            for t, k in soak_lib.fault_schedule(seed, 120):
                if k in soak_lib.PROCESS_KILLS:
                    self.assertLessEqual(t, 10 + 0.4 * 90)

    def test_long_run_has_more_faults_and_bounded_rollouts(self):
        s = soak_lib.fault_schedule(1, 7200, per_minute=4)
        self.assertEqual(len(s), 480)
        self.assertLessEqual(sum(1 for _, k in s if k == "rollout"), 12)


    def test_an_explicit_schedule_parses_sorted_and_refuses_unknown_kinds(self):
        self.assertEqual(soak_lib.parse_schedule("45.5:kill_agent, 20:fill_disk"),
                         [(20.0, "fill_disk"), (45.5, "kill_agent")])
        for bad in ("20", "20:nap", "x:kill_agent", ""):
            with self.assertRaises(ValueError, msg=bad):
                soak_lib.parse_schedule(bad)


class SlopeTest(unittest.TestCase):
    def test_linear_slope(self):
        self.assertAlmostEqual(soak_lib.linear_slope([(0, 1), (1, 3), (2, 5)]), 2.0)
        self.assertIsNone(soak_lib.linear_slope([(0, 1), (1, 2)]))
        self.assertIsNone(soak_lib.linear_slope([(1, 1), (1, 2), (1, 3)]))

    def test_longest_segment_after_warmup(self):
        # pid 1: 20 s; pid 2: 200 s, RSS +10 KiB per minute, fds flat, a spike in warm-up.
        samples = [(t, 1, 100, 5) for t in range(0, 20, 2)]
        samples += [(t, 2, 5000 if t < 130 else 1000 + (t - 100) / 6.0, 9)
                    for t in range(100, 300, 2)]
        r = soak_lib.resource_slopes(samples, warmup=30, min_span=60)
        self.assertEqual(r["pid"], 2)
        self.assertAlmostEqual(r["rss_kib_per_min"], 10.0, places=6)
        self.assertAlmostEqual(r["fds_per_min"], 0.0, places=6)
        self.assertTrue(r["enforced"])
        self.assertFalse(soak_lib.resource_slopes(samples, 30, 1000)["enforced"])
        self.assertIsNone(soak_lib.resource_slopes([], 30, 60))


class EventChecksTest(unittest.TestCase):
    def test_double_mutations(self):
        events = [ev("create", "a"), ev("start", "a"), ev("kill", "a"), ev("start", "a"),
                  ev("destroy", "a"), ev("create", "b"), ev("create", "b"),
                  ev("exec_start: sh -c echo tok1", "a"), ev("exec_start: sh -c echo tok2", "a"),
                  ev("exec_start: sh -c echo tok2", "a")]
        v = soak_lib.double_mutations(events, {"a": 1}, {"tok1", "tok2"})
        self.assertEqual(v, ["sandbox b created 2 times", "exec tok2 started 2 times"])
        v = soak_lib.double_mutations(events, {}, set())
        self.assertIn("sandbox a started 2 times (1 create + 0 resumes sent)", v)

    def test_unexplained_destroys(self):
        events = [ev("destroy", "a", 10.0), ev("destroy", "b", 10.0), ev("destroy", "c", 10.0),
                  ev("die", "d", 10.0)]
        v = soak_lib.unexplained_destroys(events, {"a": 9.5, "b": 11.0},
                                          {"a", "b", "d"})
        self.assertEqual(len(v), 1)
        self.assertIn("sandbox b", v[0])


class TableTest(unittest.TestCase):
    def test_one_table(self):
        t = soak_lib.format_table([("faults", [("ws_drop", 3)]), ("result", [("ok", 1)])])
        lines = t.splitlines()
        self.assertEqual(len({len(l) for l in lines}), 1, t)
        self.assertIn("FAULTS", t)



class OperationRecordTest(unittest.TestCase):
    """The journal reader mirrors agent/requests/operation_record.cc's (docs/formats.md)."""

    def seg(self, d, seq, seals, lines, tail=b""):
        header = {"journal": "sandbox-node operations", "segment": seq, "seals": seals}
        data = (json.dumps(header) + "\n").encode()
        for rec in lines:
            data += (json.dumps(rec) + "\n").encode()
        with open(os.path.join(d, "journal-%020d.jsonl" % seq), "wb") as f:
            f.write(data + tail)
        return len(data)

    def test_last_line_wins_sealed_lengths_and_torn_tails(self):
        with tempfile.TemporaryDirectory() as d:
            a = {"id": "a", "state": "queued"}
            n1 = self.seg(d, 1, None, [a, dict(a, state="running")],
                          tail=b'{"id":"b","state":"completed"}\n')  # past the seal
            self.seg(d, 2, {"segment": 1, "bytes": n1},
                     [dict(a, state="completed", response='{"id":"a","error_code":"uncertain"}'),
                      {"id": "c", "state": "queued"}],
                     tail=b'{"id":"c","sta')  # torn: the newest
            with open(os.path.join(d, "%s.json" % ("d" * 36)), "w") as f:
                json.dump({"id": "d" * 36, "state": "completed"}, f)
            table, problems = soak_lib.read_operation_record(d)
            self.assertEqual(problems, [])
            self.assertEqual(table["a"]["state"], "completed")
            self.assertEqual(table["a"]["response"]["error_code"], "uncertain")
            self.assertNotIn("b", table)
            self.assertEqual(table["c"]["state"], "queued")
            self.assertIn("d" * 36, table)

    def test_damage_in_a_sealed_segment_is_a_problem(self):
        with tempfile.TemporaryDirectory() as d:
            n1 = self.seg(d, 1, None, [{"id": "a", "state": "queued"}])
            self.seg(d, 2, {"segment": 1, "bytes": n1 + 5}, [])
            _, problems = soak_lib.read_operation_record(d)
            self.assertEqual(len(problems), 1)

class RecordAgreementTest(unittest.TestCase):
    def test_the_record_agrees_with_cores_final_outcome_or_says_how_not(self):
        done = {"state": "completed", "response": {"id": "a"}}
        refused = {"state": "completed", "response": {"error_code": "conflict"}}
        agree = soak_lib.record_disagrees
        self.assertIsNone(agree("kill", "a", "ok", done))
        self.assertIsNone(agree("kill", "a", "conflict", refused))
        # Left running / queued: what the next start completes it as.
        self.assertIsNone(agree("kill", "a", "uncertain", {"state": "running"}))
        self.assertIsNone(agree("kill", "a", "unavailable", {"state": "queued"}))
        # No record: only an ok needs one.
        self.assertIsNone(agree("kill", "a", "unavailable", None))
        self.assertIn("no durable record", agree("kill", "a", "ok", None))
        # The 2-hour soak's false violation had this shape: a `running` record read before
        # the completion Core then learned. check_outcomes now takes the outcome first.
        self.assertIn("Core's outcome ok, the record's uncertain",
                      agree("write_file", "a", "ok", {"state": "running"}))
        self.assertIn("observed unknown", agree("kill", "a", "never_ran", done))
        self.assertIn("record", agree("kill", "a", "ok", {"state": "bogus"}))


if __name__ == "__main__":
    unittest.main()
