"""The node's long retry waits cannot be shortened on a host: the shipped executable
(//:sandbox-node) refuses to start with SN_TEST_WAIT_DIVISOR set, whatever program it is started
as; only the testonly build (//:sandbox-node-test-waits) takes it, and only a decimal from 1 to
60 (common/wait_scale.h)."""

import os
import shutil
import subprocess
import tempfile
import unittest

import harness

DISPATCH = "run it as agent, privhelper, native_helper or vm_supervisor"


class TestWaitsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sn-waits-")
        self.addCleanup(shutil.rmtree, self.dir)

    def run_as(self, build, name, divisor):
        """Runs BUILD (a runfile) under the program NAME with SN_TEST_WAIT_DIVISOR=divisor
        (None: unset); returns (exit status, stderr)."""
        path = os.path.join(self.dir, build, name)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(harness.runfile(build), path)
        env = {"PATH": "/usr/bin:/bin"}
        if divisor is not None:
            env["SN_TEST_WAIT_DIVISOR"] = divisor
        r = subprocess.run([path, "--no-such-flag"], env=env, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        return r.returncode, r.stderr

    def test_the_shipped_executable_refuses_the_divisor_as_every_program(self):
        for name in ("agent", "privhelper", "native_helper", "something-else"):
            for divisor in ("4", "1", ""):
                rc, err = self.run_as("sandbox-node", name, divisor)
                self.assertEqual(rc, 2, (name, divisor, err))
                self.assertIn("SN_TEST_WAIT_DIVISOR is set", err, (name, divisor))
                self.assertIn("only the test build shortens waits", err)

    def test_without_the_variable_the_shipped_executable_runs_its_program(self):
        rc, err = self.run_as("sandbox-node", "something-else", None)
        self.assertEqual(rc, 2, err)
        self.assertIn(DISPATCH, err)
        self.assertNotIn("SN_TEST_WAIT_DIVISOR", err)

    def test_the_test_build_takes_a_decimal_from_1_to_60_only(self):
        for divisor in ("0", "61", "100", "-4", "4 ", " 4", "4s", "0x4", "", "04x"):
            rc, err = self.run_as("sandbox-node-test-waits", "something-else", divisor)
            self.assertEqual(rc, 2, (divisor, err))
            self.assertIn("a decimal from 1 to 60 is required", err, divisor)
            self.assertNotIn(DISPATCH, err, divisor)
        for divisor in ("1", "4", "60", None):
            rc, err = self.run_as("sandbox-node-test-waits", "something-else", divisor)
            self.assertEqual(rc, 2, (divisor, err))
            self.assertIn(DISPATCH, err, divisor)


if __name__ == "__main__":
    unittest.main()
