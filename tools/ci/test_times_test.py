"""tools/ci/test_times.py on a made-up bazel-testlogs tree."""

import os
import tempfile
import unittest

import test_times


def write(root, rel, seconds, mtime=None):
    d = os.path.join(root, rel)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "test.xml")
    with open(p, "w") as f:
        f.write('<?xml version="1.0"?>\n<testsuites name="x" time="%s">\n'
                '<testsuite name="y" time="1"/></testsuites>\n' % seconds)
    if mtime is not None:
        os.utime(p, (mtime, mtime))


class TestTimesTest(unittest.TestCase):
    def test_shards_and_runs_sum_and_the_longest_come_first(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "tests/e2e/payload_test", 278)
            write(d, "tests/store/crash_test/shard_1_of_2", 40.5)
            write(d, "tests/store/crash_test/shard_2_of_2", 60)
            write(d, "tests/vm/helper_test/run_1_of_2", 10)
            write(d, "tests/vm/helper_test/run_2_of_2", 12)
            times = test_times.test_times(d)
            self.assertEqual(times["tests/store/crash_test"], 100.5)
            self.assertEqual(times["tests/vm/helper_test"], 22)
            text = test_times.report(times, 2)
            self.assertIn("test time: 400 s over 3 tests; the 2 longest:", text)
            lines = text.splitlines()
            self.assertIn("//tests/e2e:payload_test", lines[1])
            self.assertIn("//tests/store:crash_test", lines[2])
            self.assertEqual(len(lines), 3)

    def test_since_leaves_out_cached_results_of_earlier_runs(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, "tests/a/old_test", 50, mtime=1000)
            write(d, "tests/a/new_test", 7, mtime=3000)
            self.assertEqual(dict(test_times.test_times(d, since=2000)),
                             {"tests/a/new_test": 7.0})


if __name__ == "__main__":
    unittest.main()
