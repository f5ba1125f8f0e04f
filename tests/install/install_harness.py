"""What the installer's end-to-end tests add to tests/e2e/harness.py (imported, not edited).

- Host: a Stack whose console also serves a host program release (the Bazel-built agent,
  privhelper and native_helper published with tools/release), and runs sandbox-node-install
  with --root into a directory of its own.
- CurrentFlippingProxy: a TCP relay in front of devcore that sees the request line of every
  connection (the installer and the agent open one connection per request) and, at the first
  download of a host program artifact, makes another release current. The relay passes bytes
  through untouched, WebSocket upgrades included.
"""

import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading

import harness

HOST_ARTIFACTS = (("agent", "agent"), ("privhelper", "privhelper"),
                  ("native_helper", "native_helper"))
METADATA = ("manifest.json", "manifest.json.sig", "SHA256SUMS")


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tree(root):
    """{relative path: (kind, mode, uid, sha256 or None)} of everything under ROOT."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if os.path.isdir(p) and not os.path.islink(p):
                out[rel] = ("dir", st.st_mode & 0o7777, st.st_uid, None)
            elif os.path.isfile(p) and not os.path.islink(p):
                out[rel] = ("file", st.st_mode & 0o7777, st.st_uid, sha256_file(p))
            else:
                out[rel] = ("other", st.st_mode & 0o7777, st.st_uid, None)
    return out


class CurrentFlippingProxy:
    def __init__(self, upstream_host, upstream_port, on_first_artifact=None, source=None):
        self.upstream = (upstream_host, upstream_port)
        self.on_first_artifact = on_first_artifact
        self.source = source
        self.requests = []  # (method, path) of each connection's first request
        self.flipped = False
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.closed = True
        self.sock.close()

    def paths(self):
        with self.lock:
            return [p for _, p in self.requests]

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _hook(self, path):
        if self.on_first_artifact is None or self.source is None:
            return
        prefix = "/releases/%s/" % self.source
        if not path.startswith(prefix) or path[len(prefix):] in METADATA:
            return
        with self.lock:
            if self.flipped:
                return
            self.flipped = True
        self.on_first_artifact()

    def _serve(self, conn):
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    conn.close()
                    return
                data += chunk
            method, path = data.split(b"\r\n", 1)[0].decode().split(" ")[:2]
            with self.lock:
                self.requests.append((method, path))
            self._hook(path)
            up = socket.create_connection(self.upstream)
            up.sendall(data)
        except OSError:
            conn.close()
            return

        def pump(a, b):
            try:
                while True:
                    chunk = a.recv(65536)
                    if not chunk:
                        break
                    b.sendall(chunk)
            except OSError:
                pass
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        t = threading.Thread(target=pump, args=(up, conn), daemon=True)
        t.start()
        pump(conn, up)
        t.join()
        conn.close()
        up.close()


class Host:
    """A Stack (devcore, releases, key) plus an installation root for sandbox-node-install."""

    def __init__(self, test, docker_sock, provider="docker"):
        self.test = test
        self.docker_sock = docker_sock
        self.stack = harness.Stack(test, docker_sock, provider=provider)
        s = self.stack
        self.installer = os.path.join(s.root, "bin", "sandbox-node-install")
        shutil.copy(harness.runfile("tools/install/sandbox-node-install"), self.installer)
        os.chmod(self.installer, 0o755)
        # The microVM store is <root>/var/lib/sandbox-node/vm, at most 49 bytes (its VMs' channel
        # sockets must fit a unix socket's address): a short root of its own under /tmp.
        self.root = (tempfile.mkdtemp(prefix="r", dir="/tmp") if provider == "microvm"
                     else tempfile.mkdtemp(prefix="r-", dir=s.root))
        os.chmod(self.root, 0o755)
        self.proxy = None

    def host_artifacts(self, directory=None):
        d = directory or os.path.join(self.stack.root, "bin")
        return [(kind, os.path.join(d, name)) for kind, name in HOST_ARTIFACTS]

    def publish_host(self, source, directory=None, make_current=True):
        return self.stack.publish(source, self.host_artifacts(directory), make_current)

    def other_agent_dir(self, tag):
        """A copy of the host program whose agent differs by trailing bytes (still runs)."""
        d = os.path.join(self.stack.root, "host-" + tag)
        os.makedirs(d)
        for _, name in HOST_ARTIFACTS:
            shutil.copy(os.path.join(self.stack.root, "bin", name), os.path.join(d, name))
        with open(os.path.join(d, "agent"), "ab") as f:
            f.write(b"\0other host program " + tag.encode())
        return d

    def token(self):
        status, body = self.stack.admin_call("POST", "/admin/v1/enrollment-tokens", {})
        self.test.assertEqual(status, 201, body)
        return body["token"]

    def origin(self):
        return self.proxy.url if self.proxy else self.stack.origin

    def token_file(self, token):
        """TOKEN (and a newline) in a file of root's alone (0600): what --token-file accepts
        from a root installer (common/token_file.h)."""
        d = tempfile.mkdtemp(prefix="token-", dir=self.stack.root)
        path = os.path.join(d, "token")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return path

    def install(self, token, *extra, timeout=300):
        argv = [self.installer, "--core-origin=" + self.origin(),
                "--token-file=" + self.token_file(token),
                "--release-public-key=" + self.stack.release_public_key,
                "--insecure-allow-http", "--root=" + self.root,
                "--agent-user=" + harness.AGENT_USER]
        if self.docker_sock:
            argv.append("--docker-socket=" + self.docker_sock)
        argv += list(extra)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={"PATH": harness.SYSTEM_PATH})

    def path(self, rel):
        return os.path.join(self.root, rel.lstrip("/"))

    def stop(self, keep=False):
        if self.proxy:
            self.proxy.close()
        self.stack.stop(keep=keep)
        if not keep and not self.root.startswith(self.stack.root + "/"):
            shutil.rmtree(self.root, ignore_errors=True)
