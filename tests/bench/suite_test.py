"""The suite's own logic, with stand-in benchmark executables in a temporary runfiles tree:
rows collected, a crash or a missing row list is a failure, a missed target is not, a
benchmark that predates the contract or is not built in is skipped; and the row format."""

import json
import os
import shutil
import stat
import tempfile
import unittest

import suite
import suite_json


def write_bench(root, name, body):
    """An executable tests/bench/NAME in runfiles ROOT running the shell script BODY."""
    d = os.path.join(root, "ws", "tests", "bench")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, stat.S_IRWXU)


# Writes one row whose target is missed to the --suite-json file; answers --help with the flag.
MISSED = r'''
case "$1" in --help) echo "usage: --suite-json=FILE --quick"; exit 0;; esac
for a in "$@"; do case "$a" in --suite-json=*) out="${a#--suite-json=}";; esac; done
echo '[{"bench":"create_bench","metric":"m","value":2,"unit":"s","baseline":"b",'\
'"baseline_value":1,"ratio":2,"target":"<= 1.1x","met":false}]' > "$out"
echo "args: $*" >&2
'''


class SuiteTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="suite-test-")
        self.old = os.environ.get("RUNFILES_DIR")
        os.environ["RUNFILES_DIR"] = self.root

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)
        if self.old is None:
            del os.environ["RUNFILES_DIR"]
        else:
            os.environ["RUNFILES_DIR"] = self.old

    def test_missed_target_is_a_row_not_a_failure(self):
        write_bench(self.root, "create_bench", MISSED)
        rows, summary, failed = suite.run_suite(["create_bench"], quick=True)
        self.assertFalse(failed)
        self.assertEqual([r["met"] for r in rows], [False])
        self.assertEqual(summary[0][1], "ok")

    def test_crash_and_missing_rows_fail_the_suite(self):
        write_bench(self.root, "wire_bench", "exit 3")
        write_bench(self.root, "prepare_bench",
                    'case "$1" in --help) echo --suite-json --quick; exit 0;; esac\nexit 0')
        rows, summary, failed = suite.run_suite(["wire_bench", "prepare_bench"], quick=True)
        self.assertTrue(failed)
        self.assertEqual(rows, [])
        self.assertEqual(summary[0][1], "FAILED: exit status 3")
        self.assertTrue(summary[1][1].startswith("FAILED: no rows"), summary[1][1])

    def test_benchmark_without_the_contract_or_not_built_is_skipped(self):
        write_bench(self.root, "request_bench", 'echo "usage: --inspects N"; exit 0')
        rows, summary, failed = suite.run_suite(["request_bench", "memory_bench"], quick=True)
        self.assertFalse(failed)
        self.assertEqual(rows, [])
        self.assertIn("does not accept --suite-json --quick --inspect-overhead", summary[0][1])
        self.assertIn("not in the suite's runfiles", summary[1][1])

    def test_a_mode_flag_the_benchmark_lacks_skips_it_and_one_it_has_is_passed(self):
        write_bench(self.root, "request_bench",
                    'case "$1" in --help) echo "--suite-json --quick"; exit 0;; esac\nexit 9')
        _, summary, failed = suite.run_suite(["request_bench"], quick=True)
        self.assertFalse(failed)
        self.assertEqual(summary[0][1], "skipped: does not accept --inspect-overhead yet")
        log = os.path.join(self.root, "args")
        write_bench(self.root, "request_bench",
                    MISSED.replace("--quick", "--quick --inspect-overhead") +
                    'echo "$*" >> ' + log)
        rows, summary, failed = suite.run_suite(["request_bench"], quick=True)
        self.assertFalse(failed, summary)
        with open(log) as f:
            self.assertEqual(f.read().split()[0], "--inspect-overhead")

    def test_quick_is_passed_only_without_full(self):
        log = os.path.join(self.root, "args")
        write_bench(self.root, "create_bench", MISSED + 'echo "$*" >> ' + log)
        suite.run_suite(["create_bench"], quick=True)
        suite.run_suite(["create_bench"], quick=False)
        with open(log) as f:
            lines = f.read().splitlines()
        self.assertIn("--quick", lines[0].split())
        self.assertNotIn("--quick", lines[1].split())


class RowTest(unittest.TestCase):
    def test_targets_are_checked_against_the_ratio(self):
        self.assertTrue(suite_json.meets(2.0, "<= 2.0x"))
        self.assertFalse(suite_json.meets(2.01, "<= 2.0x"))
        self.assertFalse(suite_json.meets(1.5, "< 1.5x"))
        self.assertIsNone(suite_json.meets(1.0, "<= 32 MiB"))
        self.assertIsNone(suite_json.meets(None, "<= 1x"))

    def test_row_has_every_field_and_its_ratio(self):
        r = suite_json.row("b", "m", 3.0, "s", "base", 2.0, "<= 1.1x")
        self.assertEqual(set(r), set(suite_json.FIELDS))
        self.assertEqual(r["ratio"], 1.5)
        self.assertFalse(r["met"])
        self.assertIsNone(suite_json.row("b", "m", 3.0, "s")["ratio"])

    def test_write_refuses_an_incomplete_row_and_leaves_no_file(self):
        d = tempfile.mkdtemp(prefix="suite-test-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "rows.json")
        with self.assertRaises(ValueError):
            suite_json.write(path, [{"bench": "b"}])
        self.assertFalse(os.path.exists(path))
        suite_json.write(path, [suite_json.row("b", "m", 1.0, "s")])
        with open(path) as f:
            self.assertEqual(json.load(f)[0]["bench"], "b")


if __name__ == "__main__":
    unittest.main()
