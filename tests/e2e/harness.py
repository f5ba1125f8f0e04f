"""End-to-end harness: runs the real binaries (devcore, privhelper, agent) and a private dockerd.

Every process gets its own short temporary directory under /tmp (unix socket paths must stay
under 108 bytes). The agent runs as an unprivileged user that this harness creates; privhelper
and dockerd run as root. The harness needs root and dockerd's binary: without them a test skips
loudly, except under CI=true, where it fails.

Generations come from signed releases (spec/wire.md §6): each Stack makes a release key
(`release keygen`), publishes the busybox image archive (what `docker save` writes, taken from
the daemon with the Engine API's GET /images/{name}/get) as a release with `release publish`,
serves it with devcore --releases-dir, and gives both the agent and privhelper the public key
(`release_public_key`). The enrolled generation's specification names that release and the
image's ID as its identity; `agent enroll` prepares it from there.

For generation management (issue 9, and the retirement tests after it): `Stack.specification`
publishes another release (`source`, `image`, `extra_artifacts` such as a `helper`),
`add_generation` posts it to devcore, `set_deployment` targets it, `observations` and
`wait_observed` read the node's last reports, `ph_record`, `progress` and `lease_holders` read
what privhelper and the agent keep on disk (and who holds a lease, from /proc/locks and
/proc/*/fd), and `Proc.kill9` kills one process alone. `make_image_archive(filler_mib=N)`
makes an image of a chosen size; `docker_load` is `docker load` through the Engine API.
"""

import fcntl
import http.client
import grp
import json
import os
import pwd
import shutil
import signal
import socket
import hashlib
import subprocess
import tarfile
import tempfile
import time
import unittest
import urllib.error
import urllib.request

AGENT_USER = "sn-e2e-agent"
# The divisor of the node's long retry waits in the end-to-end tests whose subject is a retry
# (Stack's `wait_divisor`): 4 keeps the first preparation backoff (1 minute, 15 s here) longer
# than the 10 s heartbeat period, so a `failed` state between two attempts is always reported in
# at least one heartbeat, as the tests require.
E2E_WAIT_DIVISOR = 4
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DOCKERD = shutil.which("dockerd", path=SYSTEM_PATH)


def in_ci():
    return os.environ.get("CI") == "true"


def require(cond, why):
    """Skips (or fails under CI=true) when an environment requirement is missing."""
    if cond:
        return
    if in_ci():
        raise AssertionError("required under CI=true: " + why)
    raise unittest.SkipTest("SKIPPED (not CI): " + why)


def require_stack_environment():
    """What a test with a Stack on a private dockerd and the busybox image needs (a module's
    setUpModule)."""
    require(os.geteuid() == 0, "end-to-end tests need root (privhelper, dockerd)")
    require(DOCKERD is not None, "dockerd is not installed")
    require(os.path.exists("/bin/busybox"), "busybox-static is not installed")


def test_failed(test):
    """Whether `test` (a running unittest.TestCase) has failed so far."""
    result = getattr(test._outcome, "result", None)
    if result is None:
        return False
    return any(t is test for t, _ in list(result.errors) + list(result.failures))


def runfiles_dir():
    """The runfiles tree: TEST_SRCDIR under `bazel test`; under `bazel run` of a py_binary
    (the benchmarks), RUNFILES_DIR or the .runfiles directory this file is in."""
    d = os.environ.get("TEST_SRCDIR") or os.environ.get("RUNFILES_DIR")
    if d:
        return d
    here = os.path.abspath(__file__)
    i = here.find(".runfiles" + os.sep)
    return here[:i + len(".runfiles")] if i >= 0 else None


def runfile(path):
    base = runfiles_dir()
    if base:
        p = os.path.join(base, "sandbox_node", path)
        if os.path.exists(p):
            return p
    p = os.path.join(os.path.dirname(__file__), "..", "..", "bazel-bin", path)
    return os.path.abspath(p)


def file_sha256(path):
    """The SHA-256 (hex) of the file at PATH, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


_RUNFILE_DIGESTS = {}  # (path, size, mtime_ns) -> digest: runfiles do not change in a test


def install_programs(bindir, programs):
    """Copies the node's programs ([(name, runfile path)]) into BINDIR as an installation
    holds them (tools/install): files with the same bytes — the node's one executable under
    its three names — are one file, hard-linked, so the processes share its pages. Returns
    {name: installed path}."""
    out = {}
    by_digest = {}
    for name, path in programs:
        src = runfile(path)
        st = os.stat(src)
        key = (src, st.st_size, st.st_mtime_ns)
        if key not in _RUNFILE_DIGESTS:
            _RUNFILE_DIGESTS[key] = file_sha256(src)
        digest = _RUNFILE_DIGESTS[key]
        dst = os.path.join(bindir, name)
        if digest in by_digest:
            os.link(by_digest[digest], dst)
        else:
            shutil.copy(src, dst)
            os.chmod(dst, 0o755)
            by_digest[digest] = dst
        out[name] = dst
    return out


def wait_for(pred, timeout=20.0, what="condition", interval=0.05):
    """Polls `pred` until it returns a truthy value; real processes give no other signal."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.0fs waiting for %s (last: %r)" % (timeout, what, last))


def wait_for_arguments(proc):
    """Wait until a just-started child's /proc/<pid>/cmdline shows its arguments.

    Popen returns when the child's close-on-exec pipe closes, which execve does before it has
    put the new program's arguments in place: until then /proc/<pid>/cmdline reads empty (a
    flake on a loaded machine). Read as root, with no sleep: the child is blocked at most in
    its first read of standard input, which the caller has not fed yet."""
    path = "/proc/%d/cmdline" % proc.pid
    for _ in range(10_000_000):
        with open(path, "rb") as f:
            if f.read():
                return
        if proc.poll() is not None:
            raise AssertionError("pid %d exited (status %s) before its arguments showed"
                                 % (proc.pid, proc.returncode))
        os.sched_yield()
    raise AssertionError("the arguments of pid %d never appeared in %s" % (proc.pid, path))


def ensure_agent_user():
    """Creates the unprivileged agent user (system account, no login) if it is missing. Under
    a lock: end-to-end tests run concurrently, and two useradd calls for one name would race."""
    with open("/tmp/sn-e2e-agent-user.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return pwd.getpwnam(AGENT_USER)
        except KeyError:
            subprocess.run(["/usr/sbin/useradd", "--system", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", AGENT_USER], check=True)
            return pwd.getpwnam(AGENT_USER)


def docker_ping(sock_path, timeout=2.0):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(sock_path)
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            data = s.recv(4096)
        return data.startswith(b"HTTP/1.") and b" 200 " in data.split(b"\r\n", 1)[0] + b" "
    except OSError:
        return False


def docker_request(sock_path, method, path, body=None, timeout=60.0):
    """One Engine API call over a unix socket; returns (status, parsed JSON or bytes)."""

    class Conn(http.client.HTTPConnection):
        def connect(self):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(sock_path)

    c = Conn("docker")
    headers = {}
    if body is not None and not isinstance(body, (bytes, bytearray)):
        body = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    elif body is not None:
        headers["Content-Type"] = "application/x-tar"
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        return r.status, json.loads(data) if data else None
    except ValueError:
        return r.status, data


def build_busybox_tar(path, filler_bytes=0):
    """A root filesystem with Debian's static busybox, as a tar for POST /images/create.
    `filler_bytes` > 0 adds /data/filler: that many random bytes (an image of a chosen size
    that no compression or deduplication shrinks)."""
    with tarfile.open(path, "w") as t:
        def add_dir(name):
            i = tarfile.TarInfo(name)
            i.type = tarfile.DIRTYPE
            i.mode = 0o755
            t.addfile(i)
        for d in ("bin", "tmp", "etc", "data"):
            add_dir(d)
        t.add("/bin/busybox", "bin/busybox")
        for tool in ("sh", "echo", "cat", "sleep", "ls", "true", "false", "ln", "mkdir"):
            i = tarfile.TarInfo("bin/" + tool)
            i.type = tarfile.SYMTYPE
            i.linkname = "busybox"
            t.addfile(i)
        if filler_bytes > 0:
            i = tarfile.TarInfo("data/filler")
            i.size = filler_bytes
            i.mode = 0o644
            with open("/dev/urandom", "rb") as r:
                t.addfile(i, _LimitedReader(r, filler_bytes))


class _LimitedReader:
    """The first `n` bytes of a file object (tarfile reads a member's bytes in pieces)."""

    def __init__(self, f, n):
        self.f, self.n = f, n

    def read(self, size=-1):
        if size < 0 or size > self.n:
            size = self.n
        data = self.f.read(size)
        self.n -= len(data)
        return data


def _stream_request(sock_path, method, path, src, length, timeout):
    """An Engine API call whose body is `length` bytes read from file object `src` in 1 MiB
    pieces (a large image never in this process's memory); returns (status, body bytes)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    try:
        s.sendall(("%s %s HTTP/1.1\r\nHost: docker\r\nContent-Type: application/x-tar\r\n"
                   "Content-Length: %d\r\nConnection: close\r\n\r\n"
                   % (method, path, length)).encode())
        while True:
            piece = src.read(1 << 20)
            if not piece:
                break
            s.sendall(piece)
        r = http.client.HTTPResponse(s)
        r.begin()
        return r.status, r.read()
    finally:
        s.close()


def docker_save(docker_sock, name, path, timeout=600.0):
    """GET /images/{name}/get (what `docker save` calls) into the file PATH, streamed."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(docker_sock)
    try:
        s.sendall(("GET /images/%s/get HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"
                   % name).encode())
        r = http.client.HTTPResponse(s)
        r.begin()
        if r.status != 200:
            raise AssertionError("docker save (GET /images/%s/get) failed: http %s"
                                 % (name, r.status))
        with open(path, "wb") as f:
            while True:
                piece = r.read(1 << 20)
                if not piece:
                    break
                f.write(piece)
    finally:
        s.close()


def docker_load(docker_sock, path, timeout=600.0):
    """POST /images/load?quiet=1 of the image archive at PATH, streamed (`docker load`);
    returns the daemon's answer (its JSON message lines) and raises unless it loaded."""
    with open(path, "rb") as f:
        status, body = _stream_request(docker_sock, "POST", "/images/load?quiet=1", f,
                                       os.path.getsize(path), timeout)
    text = body.decode(errors="replace")
    if status != 200 or '"errorDetail"' in text:
        raise AssertionError("POST /images/load failed: http %s %s" % (status, text[-500:]))
    return text


def make_image_archive(docker_sock, directory, repo="sn-e2e/busybox", tag="1", filler_mib=0,
                       archive_name="busybox.tar"):
    """Imports the busybox root filesystem (with `filler_mib` MiB of random bytes in
    /data/filler) into the daemon as REPO:TAG (unless it is there) and saves it as an image
    archive (the format `docker save` writes, through the Engine API's GET /images/{name}/get)
    to DIRECTORY/ARCHIVE_NAME. Returns (archive path, image ID)."""
    name = "%s:%s" % (repo, tag)
    status, img = docker_request(docker_sock, "GET", "/images/%s/json" % name)
    if status != 200:
        rootfs = os.path.join(directory, "rootfs-%s.tar" % tag)
        build_busybox_tar(rootfs, filler_mib << 20)
        with open(rootfs, "rb") as f:
            status, _ = _stream_request(
                docker_sock, "POST", "/images/create?fromSrc=-&repo=%s&tag=%s" % (repo, tag),
                f, os.path.getsize(rootfs), 600.0)
        os.unlink(rootfs)
        if status != 200:
            raise AssertionError("image import failed: http %s" % status)
        status, img = docker_request(docker_sock, "GET", "/images/%s/json" % name)
        if status != 200:
            raise AssertionError("imported image not found: http %s" % status)
    path = os.path.join(directory, archive_name)
    # By its ID, not its tag: tests importing at once may move the tag, and the archive must
    # produce exactly the ID returned (privhelper derives it from the archive's bytes).
    docker_save(docker_sock, img["Id"], path)
    return path, img["Id"]


def vm_processes(store, program="qemu-system"):
    """pids of the processes whose program (argv[0]'s name) starts with PROGRAM and whose
    command line names STORE (a microVM store): qemu by default, "vm_supervisor" for the
    supervisors."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if os.path.basename(argv[0]).startswith(program) and store in "\0".join(argv):
            out.append(int(pid))
    return out


def proc_lock_holders(path):
    """PIDs holding a FLOCK lock of MODE (READ or WRITE) on the inode of PATH, from
    /proc/locks: {pid: mode}. The kernel names the file by major:minor:inode."""
    st = os.stat(path)
    key = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    holders = {}
    with open("/proc/locks") as f:
        for line in f:
            parts = line.split()
            if "->" in parts:  # a waiter: "1: -> FLOCK ..."
                continue
            # "N: FLOCK  ADVISORY  READ 1234 fd:01:5678 0 EOF"
            if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == key:
                holders[int(parts[4])] = parts[3]
    return holders


def open_descriptors(path):
    """{pid: [(fd, close_on_exec)]} of every process with an open descriptor on the inode of
    PATH (scanned in /proc/*/fd, flags from /proc/*/fdinfo)."""
    st = os.stat(path)
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fd_dir = "/proc/%s/fd" % entry
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                fst = os.stat(os.path.join(fd_dir, fd))
                if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                    continue
                with open("/proc/%s/fdinfo/%s" % (entry, fd)) as f:
                    flags = [l for l in f if l.startswith("flags:")][0].split()[1]
            except (OSError, IndexError):
                continue
            found.setdefault(int(entry), []).append((int(fd), bool(int(flags, 8) & 0o2000000)))
    return found


def parent_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def exe_of(pid):
    """The executable path of process PID (None once it is gone)."""
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return None


def describe_artifact(path, kind):
    """The §6 artifact entry of the file at PATH."""
    digest = file_sha256(path)
    return {"name": os.path.basename(path), "kind": kind, "sha256": digest,
            "size": os.path.getsize(path)}


class Proc:
    """A child process whose stdout/stderr go to files in its directory."""

    def __init__(self, name, argv, cwd, user=None, group=None, env=None, append=False):
        """`append` keeps what an earlier process of the same name wrote (a restart)."""
        self.name = name
        self.argv = argv
        self.out_path = os.path.join(cwd, name + ".stdout")
        self.err_path = os.path.join(cwd, name + ".stderr")
        self.out = open(self.out_path, "ab" if append else "wb")
        self.err = open(self.err_path, "ab" if append else "wb")
        kwargs = {}
        if user is not None:
            kwargs["user"] = user
            kwargs["group"] = group
            kwargs["extra_groups"] = []
        self.p = subprocess.Popen(argv, stdout=self.out, stderr=self.err, cwd=cwd,
                                  env=env or {"PATH": SYSTEM_PATH},
                                  start_new_session=True, **kwargs)

    def stdout(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode(errors="replace")

    def alive(self):
        return self.p.poll() is None

    def kill9(self):
        """kill -9 of this process alone (not its process group: privhelper's helpers are
        its children and must cope with their parent's death themselves); reaps it."""
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)
            self.p.wait()
        self.out.close()
        self.err.close()
        return self.p.returncode

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        self.out.close()
        self.err.close()
        return self.p.returncode


class PrivateDockerd:
    """A dockerd of our own (own data root, exec root and socket, no networking), so a test can
    stop and restart 'the daemon' without disturbing the host's."""

    def __init__(self, root):
        self.root = root
        self.sock = os.path.join(root, "docker.sock")
        self.proc = None

    def start(self):
        os.makedirs(os.path.join(self.root, "data"), exist_ok=True)
        os.makedirs(os.path.join(self.root, "exec"), exist_ok=True)
        argv = [DOCKERD, "--data-root", os.path.join(self.root, "data"),
                "--exec-root", os.path.join(self.root, "exec"),
                "-H", "unix://" + self.sock, "--pidfile", os.path.join(self.root, "docker.pid"),
                "--bridge=none", "--iptables=false", "--ip-masq=false", "--ip-forward=false"]
        self.proc = Proc("dockerd", argv, self.root)
        wait_for(lambda: docker_ping(self.sock), 60, "private dockerd to answer")

    def stop(self):
        if self.proc:
            self.proc.stop(timeout=30)
            self.proc = None

    def destroy(self, keep=False):
        """Stops the daemon and removes its directory (kept when `keep`, for inspection)."""
        self.stop()
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)


class DockerdTestCase(unittest.TestCase):
    """A test class whose tests share one private dockerd (started once for the class) and the
    busybox image archive (`cls.image`, `cls.image_id`). Each test keeps its Stack in `self.s`;
    tearDown stops it (kept, with its logs printed, when the test failed) and removes every
    container the test left, through the daemon (never images)."""

    @classmethod
    def setUpClass(cls):
        cls.dockerd = PrivateDockerd(tempfile.mkdtemp(prefix="snd-", dir="/tmp"))
        cls.dockerd.start()
        cls.image = make_image_archive(cls.dockerd.sock, cls.dockerd.root)
        cls.image_id = cls.image[1]

    @classmethod
    def tearDownClass(cls):
        cls.dockerd.destroy()

    def tearDown(self):
        failed = test_failed(self)
        if failed:
            print(self.s.logs())
        self.s.stop(keep=failed)
        status, conts = docker_request(self.dockerd.sock, "GET", "/containers/json?all=1")
        for c in conts or []:
            docker_request(self.dockerd.sock, "DELETE", "/containers/%s?force=1" % c["Id"])


class Stack:
    """devcore + privhelper + agent, wired together in one temporary directory."""

    def __init__(self, test, docker_sock, generation_management=False, tls=False,
                 agent_ca=None, image=None, wait_divisor=None, provider="docker"):
        """`image` is (archive path, image ID) of a busybox image archive
        (make_image_archive); without it the stack makes one from `docker_sock`'s daemon.
        `wait_divisor` installs the test build of the node (//:sandbox-node-test-waits, in
        the test's data) and starts the agent with SN_TEST_WAIT_DIVISOR: the node's long
        retry waits (retention 60 s / 30 s, preparation backoff from 1 minute) divided by it
        (common/wait_scale.h); the spec's protocol timers (heartbeats, budgets) are not."""
        self.wait_divisor = wait_divisor
        self.provider = provider
        self.test = test
        self.root = tempfile.mkdtemp(prefix="sne-", dir="/tmp")
        os.chmod(self.root, 0o755)
        self.docker_sock = docker_sock
        self.generation_management = generation_management
        self.tls = tls
        self.agent_ca = agent_ca
        self.user = ensure_agent_user()
        self.procs = []
        self.devcore = None
        self.privhelper = None
        self.agent = None
        self.origin = None
        self.listen = "127.0.0.1:0"
        bindir = os.path.join(self.root, "bin")
        os.makedirs(bindir)
        # Copies: the agent user cannot traverse root's Bazel output tree.
        self.bins = {}
        programs = [("agent", "agent/agent"), ("privhelper", "privhelper/privhelper")]
        if os.path.exists(runfile("privhelper/native/native_helper")):
            programs.append(("native_helper", "privhelper/native/native_helper"))
        if wait_divisor is not None:
            programs = [(name, "sandbox-node-test-waits") for name, _ in programs]
        self.bins.update(install_programs(bindir, programs))
        supervisor = runfile("privhelper/native/microvm/supervisor/vm_supervisor")
        if os.path.exists(supervisor):  # beside privhelper, as an installation holds it
            self.bins.update(install_programs(
                bindir, [("vm_supervisor", "privhelper/native/microvm/supervisor/vm_supervisor")]))
        for name, path in (("devcore", "tools/devcore/devcore"),
                           ("release", "tools/release/release")):
            dst = os.path.join(bindir, name)
            shutil.copy(runfile(path), dst)
            os.chmod(dst, 0o755)
            self.bins[name] = dst
        self.dirs = {}
        for d in ("devcore", "privhelper", "agent"):
            p = os.path.join(self.root, d)
            os.makedirs(p)
            self.dirs[d] = p
        os.chown(self.dirs["agent"], self.user.pw_uid, self.user.pw_gid)
        os.chmod(self.dirs["agent"], 0o700)
        self.image = image
        self.releases_dir = os.path.join(self.dirs["devcore"], "releases")
        self.release_key = os.path.join(self.dirs["devcore"], "release.key")
        r = subprocess.run([self.bins["release"], "keygen", "--private-key=" + self.release_key],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("release keygen failed: " + r.stderr)
        self.release_public_key = r.stdout.strip()
        self.published = {}  # source -> its artifact entries
        self.spec_path = os.path.join(self.dirs["devcore"], "spec.json")
        self.write_spec()

    # -- configuration -------------------------------------------------------------------
    def image_archive(self):
        """(path, image ID) of the busybox image archive, made from the daemon once; for the
        microVM provider (path, identity) of a busybox root filesystem image (microvm_image)."""
        if self.image is None:
            self.image = (self.microvm_image() if self.provider == "microvm"
                          else make_image_archive(self.docker_sock, self.dirs["devcore"]))
        return self.image

    def microvm_image(self):
        """(path, "sha256:<hex>") of an ext4 image of a busybox tree, made by the publisher's
        `release rootfs --dir` (spec rev 5: the identity is the hash of the image's bytes)."""
        tree = os.path.join(self.dirs["devcore"], "rootfs-tree")
        for d in ("bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "root"):
            os.makedirs(os.path.join(tree, d), exist_ok=True)
        shutil.copy("/bin/busybox", os.path.join(tree, "bin", "busybox"))
        r = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True)
        for applet in r.stdout.split():
            if applet != "busybox":
                os.symlink("busybox", os.path.join(tree, "bin", applet))
        path = os.path.join(self.dirs["devcore"], "rootfs.ext4")
        r = subprocess.run([self.bins["release"], "rootfs", "--output=" + path, "--dir=" + tree,
                            "--size-mib=64"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise AssertionError("release rootfs failed: " + r.stderr)
        return path, "sha256:" + file_sha256(path)

    def microvm_boot_artifacts(self):
        """[(kind, path)] of what a microVM generation boots besides its image: the
        repository's kernel, guest agent and qemu seccomp policy, the host's microvm firmware
        (copies under devcore's directory, so the release names them by these names)."""
        out = []
        for kind, src, name in (
                ("kernel", runfile("tools/microvm/kernel/vmlinux-sandbox-node"), "vmlinux"),
                ("guest_agent", runfile("tools/microvm/guest_initramfs.cpio"), "guest-agent.cpio"),
                ("firmware", "/usr/share/qemu/bios-microvm.bin", "bios-microvm.bin"),
                ("seccomp", runfile("tools/microvm/qemu-seccomp.json"), "qemu-seccomp.json")):
            dst = os.path.join(self.dirs["devcore"], name)
            if not os.path.exists(dst):
                shutil.copy(src, dst)
            out.append((kind, dst))
        return out

    def publish(self, source, artifacts, make_current=True):
        """Publishes `artifacts` ([(kind, path)]) as release SOURCE with tools/release."""
        argv = [self.bins["release"], "publish", "--releases-dir=" + self.releases_dir,
                "--source=" + source, "--private-key=" + self.release_key]
        if make_current:
            argv.append("--make-current")
        argv += ["%s=%s" % (kind, path) for kind, path in artifacts]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise AssertionError("release publish failed: " + r.stderr)
        self.published[source] = [describe_artifact(path, kind) for kind, path in artifacts]
        return self.published[source]

    def specification(self, images=None, generation=1, source=None, image=None,
                      extra_artifacts=()):
        """A §6 specification of GENERATION whose runtime is a published release (by default
        "e2e-1", holding the busybox image archive) and whose image identity is its image ID.
        `image` is another (archive path, image ID) to publish and name; `extra_artifacts`
        ([(kind, path)]) are published beside it and named too (e.g. ("helper", path): the
        generation's own native helper). A source already published is used as it is."""
        archive, image_id = image or self.image_archive()
        source = source or "e2e-1"
        if self.provider == "microvm" and not extra_artifacts:
            extra_artifacts = self.microvm_boot_artifacts()
        if source not in self.published:
            self.publish(source, [("image", archive)] + list(extra_artifacts))
        images = images or [{"name": "busybox", "artifact": os.path.basename(archive),
                             "identities": [image_id]}]
        names = {i["artifact"] for i in images}
        names |= {os.path.basename(path) for _, path in extra_artifacts}
        return {"schema": 1, "generation": generation, "provider": self.provider,
                "runtime": {"source": source,
                            "artifacts": [a for a in self.published[source]
                                          if a["name"] in names]},
                "images": images}

    def add_generation(self, doc):
        """POST /admin/v1/generations with the specification DOC (compact JSON bytes);
        returns its specification digest."""
        body = json.dumps(doc, separators=(",", ":")).encode()
        req = urllib.request.Request(self.origin + "/admin/v1/generations", data=body,
                                     method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, answer = r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            status, answer = e.code, e.read().decode(errors="replace")
        self.test.assertIn(status, (200, 201), answer)
        self.test.assertEqual(answer["generation"], doc["generation"], answer)
        self.test.assertEqual(answer["specification_digest"], hashlib.sha256(body).hexdigest())
        return answer["specification_digest"]

    def set_deployment(self, generation, serving_generation, node_id=None):
        """PUT /admin/v1/nodes/{id}/deployment; announced in the next heartbeat_ack."""
        nid = node_id or self.identity["node_id"]
        status, body = self.admin_call("PUT", "/admin/v1/nodes/%s/deployment" % nid,
                                       {"generation": generation,
                                        "serving_generation": serving_generation})
        self.test.assertEqual(status, 200, body)
        return body

    def observations(self, node_id=None):
        """{generation: observation} of the node's last hello or heartbeat ({} before one)."""
        n = self.node(node_id or self.identity["node_id"])
        return {o["generation"]: o for o in (n.get("last_generations") or [])}

    def wait_observed(self, generation, state, timeout=120, node_id=None):
        """Waits for a hello or heartbeat that reports GENERATION in STATE; returns it."""
        return wait_for(lambda: (lambda o: o if o and o["state"] == state else None)(
            self.observations(node_id).get(generation)), timeout,
            "generation %d observed %s" % (generation, state), interval=0.5)

    # -- what the node keeps on disk (read as root) ----------------------------------------
    def ph_generations_dir(self):
        return os.path.join(self.dirs["privhelper"], "state", "node", "generations")

    def ph_record(self, name):
        """privhelper's record node/generations/NAME parsed (None when it does not exist)."""
        try:
            with open(os.path.join(self.ph_generations_dir(), name)) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def ph_release_dir(self, source):
        return os.path.join(self.dirs["privhelper"], "state", "releases", source)

    def progress(self, generation):
        """The agent's generations/<G>.progress.json (None before a preparation wrote it)."""
        path = os.path.join(self.dirs["agent"], "state", "generations",
                            "%d.progress.json" % generation)
        try:
            with open(path) as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return None

    def lease_holders(self, generation):
        """Who holds the generation's lease: (the {pid: mode} of its FLOCK locks in
        /proc/locks — the kernel names the process that took the lock — and {pid:
        (executable, [(fd, close_on_exec)])} of every process with the locked file open)."""
        path = os.path.join(self.ph_generations_dir(), "%d.lease" % generation)
        locks = proc_lock_holders(path)
        return locks, {pid: (exe_of(pid), fds) for pid, fds in open_descriptors(path).items()}

    def write_spec(self, images=None, generation=1):
        """Writes the specification devcore starts with (--specification)."""
        doc = self.specification(images=images, generation=generation)
        with open(self.spec_path, "w") as f:
            f.write(json.dumps(doc, separators=(",", ":")))

    def make_tls(self):
        """A CA and a server certificate for 127.0.0.1 made with the openssl CLI."""
        d = self.dirs["devcore"]

        def run(*a):
            subprocess.run(a, check=True, cwd=d, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=sn-e2e-ca", "-keyout", "ca.key", "-out", "ca.pem")
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "server.key", "-out", "server.csr")
        with open(os.path.join(d, "ext.cnf"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem")
        for n in ("ca.pem",):
            os.chmod(os.path.join(d, n), 0o644)
        return os.path.join(d, "ca.pem")

    # -- processes -----------------------------------------------------------------------
    def start_devcore(self):
        argv = [self.bins["devcore"], "--listen=" + self.listen,
                "--state-dir=" + self.dirs["devcore"], "--specification=" + self.spec_path,
                "--releases-dir=" + self.releases_dir]
        if self.tls:
            argv += ["--tls-cert=" + os.path.join(self.dirs["devcore"], "server.pem"),
                     "--tls-key=" + os.path.join(self.dirs["devcore"], "server.key")]
        self.devcore = Proc("devcore", argv, self.dirs["devcore"])
        line = wait_for(lambda: self.devcore.stdout().split("\n", 1)[0]
                        if "\n" in self.devcore.stdout() else (
                            self.fail_dead(self.devcore) or None), 20, "devcore to listen")
        self.test.assertRegex(line, r"^listening on https?://127\.0\.0\.1:\d+$")
        url = line.split(" ", 2)[2]
        self.admin = "http://" + url.split("://", 1)[1] if not self.tls else url
        self.origin = url
        self.listen = url.split("://", 1)[1]  # restart on the same port
        return url

    def fail_dead(self, proc):
        if not proc.alive():
            raise AssertionError("%s exited (%s): %s" % (proc.name, proc.p.returncode,
                                                         proc.stderr()[-3000:]))
        return None

    def admin_call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.origin + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        ctx = None
        if self.tls:
            import ssl
            ctx = ssl.create_default_context(cafile=os.path.join(self.dirs["devcore"], "ca.pem"))
        try:
            with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def node(self, node_id=None):
        status, body = self.admin_call("GET", "/admin/v1/nodes")
        self.test.assertEqual(status, 200, body)
        nodes = body["nodes"]
        if node_id is None:
            return nodes[0] if nodes else None
        for n in nodes:
            if n["node_id"] == node_id:
                return n
        return None

    def start_privhelper(self, **extra):
        """Starts privhelper; `extra` adds configuration members (max_active, max_retained,
        helper_idle_seconds: privhelper's own limits, which the agent learns through Probe).
        A restart keeps the same configuration unless `extra` changes it."""
        cfg = {"socket": os.path.join(self.dirs["privhelper"], "ph.sock"),
               "agent_uid": self.user.pw_uid,
               "state_dir": os.path.join(self.dirs["privhelper"], "state"),
               "provider": self.provider, "release_public_key": self.release_public_key}
        if self.provider == "docker":
            cfg["docker_socket"] = self.docker_sock
        else:
            # The VM store; qemu runs as nobody, which must traverse the stack's root (0755).
            # TCG unless a caller (microvm_bench --accel) asks for KVM: then qemu's group is
            # Debian's `kvm`, which may open /dev/kvm.
            accel = getattr(self, "microvm_accel", "tcg")
            gid = 65534
            if accel != "tcg":
                try:
                    gid = grp.getgrnam("kvm").gr_gid
                except KeyError:
                    pass
            cfg["microvm"] = {"store_dir": os.path.join(self.root, "vm"), "accel": accel,
                              "vm_uid": 65534, "vm_gid": gid,
                              # Every disk is reserved in full (docs/protocol.md 24j): 256 MiB
                              # each keeps 16 VMs (the benchmark's) within 4.1 GiB of /tmp.
                              "disk_bytes": 256 << 20, "free_space_floor_bytes": 0}
        cfg.update(getattr(self, "privhelper_extra", {}))
        cfg.update(extra)
        self.privhelper_extra = {k: cfg[k] for k in cfg
                                 if k in ("max_active", "max_retained", "helper_idle_seconds")}
        os.makedirs(cfg["state_dir"], mode=0o700, exist_ok=True)
        # The agent user must reach the socket's directory.
        os.chmod(self.dirs["privhelper"], 0o755)
        path = os.path.join(self.dirs["privhelper"], "config.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        self.ph_socket = cfg["socket"]
        if os.path.exists(cfg["socket"]):  # left by a privhelper this stack stopped
            os.unlink(cfg["socket"])
        self.privhelper = Proc("privhelper", [self.bins["privhelper"], "--config=" + path],
                               self.dirs["privhelper"], append=True)
        wait_for(lambda: os.path.exists(cfg["socket"]) or self.fail_dead(self.privhelper), 20,
                 "privhelper socket")
        return cfg

    def agent_config(self, **extra):
        """Writes the agent's configuration (it has no capacity members: those are
        privhelper's, see start_privhelper)."""
        cfg = {"core_origin": self.origin, "state_dir": os.path.join(self.dirs["agent"], "state"),
               "privhelper_socket": self.ph_socket,
               "release_public_key": self.release_public_key}
        if self.origin.startswith("http://"):
            cfg["insecure_allow_http"] = True
        if self.generation_management:
            cfg["generation_management"] = True
        if self.agent_ca:
            cfg["ca_bundle"] = self.agent_ca
        cfg.update(extra)
        path = os.path.join(self.dirs["agent"], "config.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        os.chown(path, self.user.pw_uid, self.user.pw_gid)
        return path

    def run_as_agent(self, argv, timeout=60):
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[],
                              cwd=self.dirs["agent"], env={"PATH": "/usr/bin:/bin"})

    def token_file(self, token):
        """TOKEN (and a newline) in a file only the agent's user can read: its own, 0600. What
        `agent enroll --token-file=` accepts (common/token_file.h); never --token=, which
        every local user could read in /proc/<pid>/cmdline."""
        path = os.path.join(self.dirs["agent"], "enroll-token")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.fchmod(fd, 0o600)
        os.fchown(fd, self.user.pw_uid, self.user.pw_gid)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return path

    def enroll_argv(self, token, cfg=None):
        """`agent enroll` with TOKEN in a token file (token_file)."""
        cfg = cfg or os.path.join(self.dirs["agent"], "config.json")
        return [self.bins["agent"], "enroll", "--config=" + cfg,
                "--token-file=" + self.token_file(token)]

    def enroll(self):
        status, body = self.admin_call("POST", "/admin/v1/enrollment-tokens", {})
        self.test.assertEqual(status, 201, body)
        cfg = self.agent_config()
        r = self.run_as_agent(self.enroll_argv(body["token"], cfg))
        self.test.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.dirs["agent"], "state", "node", "identity.json")) as f:
            self.identity = json.load(f)
        return self.identity

    def request(self, operation, arguments, generation=1, timeout_ms=60000, node_id=None):
        """A provider request through devcore; returns the node's response frame."""
        nid = node_id or self.identity["node_id"]
        status, body = self.admin_call("POST", "/admin/v1/nodes/%s/requests" % nid,
                                       {"generation": generation, "operation": operation,
                                        "timeout_ms": timeout_ms, "arguments": arguments})
        self.test.assertEqual(status, 200, body)
        return body

    def start_agent(self):
        cfg = os.path.join(self.dirs["agent"], "config.json")
        env = {"PATH": SYSTEM_PATH}
        if self.wait_divisor is not None:
            env["SN_TEST_WAIT_DIVISOR"] = str(self.wait_divisor)
        self.agent = Proc("agent", [self.bins["agent"], "run", "--config=" + cfg],
                          self.dirs["agent"], user=self.user.pw_uid, group=self.user.pw_gid,
                          env=env, append=True)
        return self.agent

    def wait_connected(self, timeout=30):
        nid = self.identity["node_id"]
        return wait_for(lambda: (lambda n: n if n and n["presence"] == "connected" and
                                 n.get("last_health") else None)(self.node(nid)),
                        timeout, "the node to be connected with a health report")

    def stop(self, keep=False):
        """Stops every process; removes the stack's directory unless `keep` (a failed test
        keeps it for inspection)."""
        for p in (self.agent, self.privhelper, self.devcore):
            if p:
                p.stop()
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def logs(self):
        out = []
        for p in (self.devcore, self.privhelper, self.agent):
            if p:
                out.append("---- %s stderr ----\n%s" % (p.name, p.stderr()[-4000:]))
        return "\n".join(out)
