"""The enrollment token never on a command line (security audit, Medium).

/proc/<pid>/cmdline is readable by every local user, so a token given as `--token=TOKEN` was
disclosed to all of them while sandbox-node-install or `agent enroll` ran. Both now take it
only from `--token-file=PATH` or `--token-file=-` (standard input), read by
common/token_file.h, and refuse `--token=` as a usage error naming --token-file.

This test runs both real programs and performs the attack: another user (nobody) reads the
running program's command line. No Core and no dockerd are needed: a run whose token is
accepted stops at the next check, which names something else (the installer: an invalid
--release-public-key; the agent: a missing --config), so "accepted" and "refused" are told
apart by the message; both exit 2. Everything lives in a temporary directory.
"""

import os
import shutil
import subprocess
import tempfile
import unittest

import harness

TOKEN = "5ecret-enrollment-token-0123456789abcdef"
NOBODY = 65534


def setUpModule():
    harness.require(os.geteuid() == 0,
                    "the installer runs as root, and the attacker is another uid (nobody)")


class Program:
    """One program that takes a token: its argv without the token option, and the message of
    the check that follows the token's (which shows that the token was accepted)."""

    def __init__(self, name, argv, accepted):
        self.name, self.argv, self.accepted = name, argv, accepted


class TokenFileTest(unittest.TestCase):
    def setUp(self):
        # In /tmp, not TEST_TMPDIR: the installer refuses a --root whose socket path would
        # pass 107 bytes, and Bazel's temporary directory is long.
        self.dir = tempfile.mkdtemp(prefix="tf-", dir="/tmp")
        installer = harness.runfile("tools/install/sandbox-node-install")
        agent = harness.runfile("agent/agent")
        self.programs = [
            Program("sandbox-node-install",
                    [installer, "--core-origin=http://127.0.0.1:9", "--insecure-allow-http",
                     "--release-public-key=not-a-key", "--root=" + self.dir],
                    "sandbox-node-install: --release-public-key:"),
            Program("agent enroll",
                    [agent, "enroll", "--config=" + os.path.join(self.dir, "absent.json")],
                    "invalid configuration"),
        ]

    def tearDown(self):
        shutil.rmtree(self.dir)

    def token_file(self, name, contents, mode=0o600, owner=0):
        path = os.path.join(self.dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, contents.encode())
        os.fchmod(fd, mode)
        os.fchown(fd, owner, owner)
        os.close(fd)
        return path

    def run_program(self, p, token_arg, stdin=b""):
        return subprocess.run(p.argv + [token_arg], input=stdin, capture_output=True,
                              timeout=60, env={"PATH": harness.SYSTEM_PATH})

    def assertAccepted(self, p, r):
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 2, "%s: %s" % (p.name, err))
        self.assertIn(p.accepted, err, p.name)
        self.assertNotIn("--token", err, p.name)
        self.assertNotIn(TOKEN, err + r.stdout.decode(errors="replace"), p.name)

    def assertRefused(self, p, r, *why):
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 2, "%s: %s" % (p.name, err))
        self.assertIn("--token-file", err, p.name)
        for w in why:
            self.assertIn(w, err, p.name)
        self.assertNotIn(p.accepted, err, "%s went past the token: %s" % (p.name, err))
        self.assertNotIn(TOKEN, err + r.stdout.decode(errors="replace"), p.name)

    def cmdline_as_nobody(self, pid):
        r = subprocess.run(["cat", "/proc/%d/cmdline" % pid], capture_output=True, timeout=30,
                           user=NOBODY, group=NOBODY, extra_groups=[],
                           env={"PATH": harness.SYSTEM_PATH})
        self.assertEqual(r.returncode, 0, "another user cannot read /proc/<pid>/cmdline here "
                         "(hidepid?): %s" % r.stderr)
        return r.stdout

    def test_the_token_given_on_standard_input_never_shows_in_the_command_line_nobody_reads(self):
        for p in self.programs:
            proc = subprocess.Popen(p.argv + ["--token-file=-"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env={"PATH": harness.SYSTEM_PATH})
            try:
                # Alive: it cannot go on before the token arrives on its standard input.
                harness.wait_for_arguments(proc)
                seen = self.cmdline_as_nobody(proc.pid)
                self.assertIn(b"--token-file=-", seen, p.name)
                out, err = proc.communicate(TOKEN.encode() + b"\n", timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self.assertNotIn(TOKEN.encode(), seen, p.name)
            self.assertAccepted(p, subprocess.CompletedProcess(proc.args, proc.returncode,
                                                               out, err))

    def test_a_token_file_of_its_owner_alone_is_accepted_and_only_its_path_is_on_the_command_line(
            self):
        path = self.token_file("token", TOKEN + "\n")
        for p in self.programs:
            proc = subprocess.Popen(p.argv + ["--token-file=" + path], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env={"PATH": harness.SYSTEM_PATH})
            out, err = proc.communicate(timeout=60)
            self.assertNotIn(TOKEN, " ".join(proc.args), p.name)
            self.assertAccepted(p, subprocess.CompletedProcess(proc.args, proc.returncode,
                                                               out, err))

    def test_token_on_the_command_line_is_a_usage_error_naming_token_file(self):
        for p in self.programs:
            for arg in ("--token=" + TOKEN, "--token"):
                r = self.run_program(p, arg)
                self.assertRefused(p, r, "--token= is refused", "--token-file=PATH",
                                   "--token-file=-")

    def test_a_symbolic_link_to_a_good_token_file_is_refused(self):
        target = self.token_file("token", TOKEN + "\n")
        link = os.path.join(self.dir, "link")
        os.symlink(target, link)
        for p in self.programs:
            self.assertRefused(p, self.run_program(p, "--token-file=" + link), link,
                               "is a symbolic link")

    def test_a_token_file_readable_by_group_or_others_is_refused(self):
        for mode in (0o640, 0o604):
            path = self.token_file("token-%o" % mode, TOKEN + "\n", mode)
            for p in self.programs:
                self.assertRefused(p, self.run_program(p, "--token-file=" + path), path,
                                   "mode %04o" % mode)

    def test_a_token_file_of_another_user_is_refused(self):
        path = self.token_file("token-nobody", TOKEN + "\n", owner=NOBODY)
        for p in self.programs:
            self.assertRefused(p, self.run_program(p, "--token-file=" + path), path,
                               "owned by uid %d" % NOBODY)

    def test_a_token_file_of_257_bytes_or_an_empty_one_is_refused(self):
        big = self.token_file("big", "x" * 257)
        empty = self.token_file("empty", "")
        newline = self.token_file("newline", "\n")
        for p in self.programs:
            self.assertRefused(p, self.run_program(p, "--token-file=" + big), big,
                               "more than 256 bytes")
            self.assertRefused(p, self.run_program(p, "--token-file=" + empty), empty,
                               "holds no token")
            self.assertRefused(p, self.run_program(p, "--token-file=" + newline), newline,
                               "holds no token")
            self.assertRefused(p, self.run_program(p, "--token-file=" + self.dir + "/absent"),
                               "cannot be opened")

    def test_standard_input_of_257_bytes_or_none_is_refused(self):
        for p in self.programs:
            self.assertRefused(p, self.run_program(p, "--token-file=-", b"x" * 257),
                               "standard input holds more than 256 bytes")
            self.assertRefused(p, self.run_program(p, "--token-file=-", b""),
                               "standard input holds no token")

    def test_agent_enroll_resume_takes_no_token_file(self):
        agent = self.programs[1]
        path = self.token_file("token", TOKEN + "\n")
        r = subprocess.run(agent.argv + ["--resume", "--token-file=" + path],
                           capture_output=True, timeout=60, env={"PATH": harness.SYSTEM_PATH})
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"--resume and --token-file exclude each other", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
