"""What the node benchmarks share: the harness found from a `bazel run` binary's runfiles, a
TestCase for its assertions, the environment check, a stack on a private dockerd
(NodeStack), and one request through devcore's admin route with Core's own measurement of the
round trip."""

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse


def _locate_runfiles():
    """Points the harness at this binary's runfiles (it reads TEST_SRCDIR, set only for tests)."""
    d = os.environ.get("RUNFILES_DIR")
    # The main script's own path: this module may be imported through a resolved symlink.
    for here in ([] if d else [os.path.abspath(sys.argv[0]), os.path.abspath(__file__)]):
        i = here.find(".runfiles" + os.sep)
        if i >= 0:
            d = here[:i + len(".runfiles")]
            break
    if d and "TEST_SRCDIR" not in os.environ:
        os.environ["TEST_SRCDIR"] = d


_locate_runfiles()
import harness  # noqa: E402,F401  (after TEST_SRCDIR is known; re-exported)


class Asserts(unittest.TestCase):
    """The harness reports through a TestCase's assertions; a bare instance serves."""

    def runTest(self):
        pass


def die(prog, msg):
    sys.stderr.write("%s: %s\n" % (prog, msg))
    sys.exit(2)


def check_environment(prog, binaries):
    """Exits 2 with a message unless root, dockerd, /bin/busybox and `binaries` are there."""
    if os.geteuid() != 0:
        die(prog, "needs root (privhelper and a private dockerd run as root); run it as root")
    if harness.DOCKERD is None:
        die(prog, "dockerd is not installed (apt-get install docker.io)")
    if not os.path.exists("/bin/busybox"):
        die(prog, "/bin/busybox is missing (apt-get install busybox-static)")
    for path in binaries:
        if not os.path.exists(harness.runfile(path)):
            die(prog, "binary %s not found; run through `bazel run //tests/bench:%s`"
                % (path, prog))


def node_request(stack, operation, arguments):
    """One request through devcore's admin route: (result, Core's round trip in seconds), the
    latter devcore's Sn-Node-Round-Trip-Us header (from handing the request frame to the
    connection to decoding the node's response frame). Any error is a RuntimeError."""
    conn = http.client.HTTPConnection(urllib.parse.urlsplit(stack.origin).netloc, timeout=60)
    conn.request("POST", "/admin/v1/nodes/%s/requests" % stack.identity["node_id"],
                 body=json.dumps({"generation": 1, "operation": operation,
                                  "timeout_ms": 60000, "arguments": arguments}),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    raw = r.read()
    round_trip = r.getheader("Sn-Node-Round-Trip-Us")
    conn.close()
    body = json.loads(raw or b"null")
    if r.status != 200 or "error_code" in (body or {}) or round_trip is None:
        raise RuntimeError("node %s failed: %s %r\n%s" % (operation, r.status, body,
                                                          stack.logs()))
    return body.get("result"), int(round_trip) / 1e6


class NodeStack:
    """A private dockerd 20.10 (no networking) with the e2e tests' busybox image, and devcore +
    privhelper + agent from tests/e2e/harness.py on it, enrolled and connected."""

    def __init__(self):
        self.t = Asserts()
        self.dockerd = None
        self.stack = None
        self.tmpfs = None

    def start(self, data_on_tmpfs=False, agent_config=None, **privhelper_limits):
        """`privhelper_limits`: privhelper's max_active / max_retained. `agent_config`: extra
        members of the running agent's configuration (e.g. `metrics`). `data_on_tmpfs`: the
        daemon's directory (data root, exec root, socket) on a tmpfs of its own, which stop()
        unmounts: removing a daemon's thousands of container files from a disk that other
        builds keep busy can take a minute."""
        root = tempfile.mkdtemp(prefix="snb-", dir="/tmp")
        if data_on_tmpfs:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4g,mode=0700", "tmpfs", root],
                           check=True)
            self.tmpfs = root
        self.dockerd = harness.PrivateDockerd(root)
        self.dockerd.start()
        image = harness.make_image_archive(self.dockerd.sock, self.dockerd.root)
        self.image_id = image[1]
        s = harness.Stack(self.t, self.dockerd.sock, image=image)
        self.stack = s
        s.write_spec(images=[{"name": "busybox", "artifact": "busybox.tar",
                              "identities": [self.image_id]}])
        s.start_devcore()
        s.start_privhelper(**privhelper_limits)
        s.agent_config()
        s.enroll()
        if agent_config:  # members of the running agent's configuration (enroll wrote its own)
            s.agent_config(**agent_config)
        s.start_agent()
        s.wait_connected()
        with open(os.path.join(s.dirs["privhelper"], "state", "installation.json")) as f:
            self.installation = json.load(f)["installation_id"]

    def stop(self):
        """Stops the processes, removes every container left running and the directories."""
        if self.stack:
            self.stack.stop()
            shutil.rmtree(self.stack.root, ignore_errors=True)
        if self.dockerd:
            # Only running containers need removing; the rest goes with the data root.
            _, conts = harness.docker_request(self.dockerd.sock, "GET", "/containers/json")
            for c in conts or []:
                harness.docker_request(self.dockerd.sock, "DELETE",
                                       "/containers/%s?force=1&v=1" % c["Id"])
            if self.tmpfs:
                self.dockerd.stop()
                subprocess.run(["umount", self.tmpfs], check=False)
                os.rmdir(self.tmpfs)
            else:
                self.dockerd.destroy()
