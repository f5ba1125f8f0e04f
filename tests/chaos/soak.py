"""Chaos soak on the real node (issue #27, part 2).

    bazel run //tests/chaos:soak -- --minutes=M [--seed=S] [--workers=N]

As root: a private dockerd (its own data root and socket: restarting it disturbs no other
daemon on the host), devcore, privhelper (root) and the agent (an unprivileged user, its
configuration's Core URL a loopback proxy of the soak's own) from tests/e2e/harness.py, the
agent's and privhelper's state directories on a tmpfs of the soak's own (64 MiB + 8 MiB per minute of load). A driver sends
a mixed load through devcore's admin route (create, exec, write_file, read_file,
kill_compute, resume, kill, observe; N workers, near the 32 pending requests devcore allows)
while a seeded fault injector SIGKILLs the agent, privhelper or a native helper, restarts
dockerd, drops or stalls the WebSocket in the proxy, fills the state tmpfs to its last byte
(the docker provider has no free-space floor of its own: its floor is 0) and rolls the node to
a new generation and drops the old one. The invariants are checked every 30 s and at the end;
one table is printed; the exit code is 0 only when every check passed. Everything the soak
made is removed at the end (the tmpfs unmounted, the stack and its dockerd stopped); the
host's own dockerd is never touched.
"""

import argparse
import base64
import collections
import http.client
import json
import os
import random
import shutil
import signal
import socket
import select
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest
import uuid


def _locate_runfiles():
    d = os.environ.get("RUNFILES_DIR")
    for here in ([] if d else [os.path.abspath(sys.argv[0]), os.path.abspath(__file__)]):
        i = here.find(".runfiles" + os.sep)
        if i >= 0:
            d = here[:i + len(".runfiles")]
            break
    if d and "TEST_SRCDIR" not in os.environ:
        os.environ["TEST_SRCDIR"] = d


_locate_runfiles()
import harness  # noqa: E402
import soak_lib  # noqa: E402

MUTATIONS = {"create", "resume", "kill", "kill_compute", "delete_retained", "exec",
             "write_file"}
# The agent's reconnect backoff (agent/connection/backoff.h, spec/wire.md §1): full jitter,
# ceiling 1 s doubling to 60 s. A reconnect within the backoff is at most the cap plus the
# time a connection takes (TCP, upgrade, hello/welcome, first health report): 15 s here.
BACKOFF_CAP_S = 60.0
CONNECT_SLACK_S = 15.0
# Everything after the load stops (workers finishing, pending observes, the final kills) has
# this long in all.
FINAL_PHASE_S = 420.0
# The node's state disk: room for generation 1's and 2's releases (~25 MiB) and for the agent's
# operation records, kept 48 hours (docs/formats.md): one 4 KiB tmpfs page or more each, at the
# soak's ~20 requests a second ~5 MiB a minute. A 64 MiB disk filled up in a 25-minute run and
# stayed full (docs/reliability.md, soak finding 3); fill_disk fills whatever is left.
STATE_TMPFS_BASE_MIB = 64
STATE_TMPFS_MIB_PER_MINUTE = 8


def state_tmpfs_mib(minutes):
    return int(STATE_TMPFS_BASE_MIB + STATE_TMPFS_MIB_PER_MINUTE * minutes)


class Asserts(unittest.TestCase):
    def runTest(self):
        pass


def log(msg):
    sys.stdout.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stdout.flush()


# -- the WebSocket's loopback proxy -------------------------------------------------------------
class Proxy:
    """A TCP proxy on 127.0.0.1 in front of devcore. `drop()` closes every connection on both
    sides; `stall(T)` stops forwarding (both directions, new connections too) for T seconds."""

    def __init__(self, upstream):
        self.upstream = upstream  # (host, port)
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs = []
        self.stall_until = 0.0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.upstream, timeout=5)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            pair = [c, u]
            with self.lock:
                self.pairs.append(pair)
            threading.Thread(target=self._pump, args=(c, u, pair), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, pair), daemon=True).start()

    def _pump(self, src, dst, pair):
        try:
            while not self.closed:
                if time.monotonic() < self.stall_until:
                    time.sleep(0.05)
                    continue
                r, _, _ = select.select([src], [], [], 0.2)
                if not r:
                    continue
                if time.monotonic() < self.stall_until:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except (OSError, ValueError):
            pass
        self._close(pair)

    def _close(self, pair):
        with self.lock:
            if pair in self.pairs:
                self.pairs.remove(pair)
        for s in pair:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def drop(self):
        with self.lock:
            pairs = list(self.pairs)
        for p in pairs:
            self._close(p)
        return len(pairs)

    def stall(self, seconds):
        self.stall_until = time.monotonic() + seconds

    def close(self):
        self.closed = True
        self.ls.close()
        self.drop()


# -- one request through devcore ------------------------------------------------------------
class Req:
    __slots__ = ("n", "op", "sid", "gen", "t_sent", "t_done", "status", "body", "id",
                 "outcome", "final", "token")

    def __init__(self, n, op, sid, gen):
        self.n, self.op, self.sid, self.gen = n, op, sid, gen
        self.t_sent = self.t_done = None
        self.status = self.body = self.id = self.outcome = self.final = self.token = None


def outcome_of(status, body):
    if status == 200:
        return body.get("error_code") or "ok"
    return "http_%s" % status


class Soak:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.rng = random.Random(self.seed)
        self.t = Asserts()
        self.stop_load = threading.Event()
        self.stop_all = threading.Event()
        self.lock = threading.Lock()
        self.requests = []
        self.req_counter = 0
        self.sandboxes = {}  # sid -> {gen, created_ok, killed}
        self.resumes_sent = collections.Counter()
        self.deletions_sent = {}
        self.exec_tokens = set()
        self.exec_not_run = 0  # exec answered ok with a non-zero exit code
        self.exits_seen = set()  # pids of agent/privhelper found exited by themselves
        self.pending_observe = []
        self.faults = collections.Counter()
        self.fault_log = []
        self.checks = collections.Counter()  # (name, passed|failed) -> count
        self.violations = []
        self.reconnects = []  # (kind, seconds)
        self.presence = []  # (t, connected)
        self.samples = {"agent": [], "privhelper": []}
        self.events = []
        self.event_keys = set()
        self.events_lock = threading.Lock()
        self.create_gen = 1
        self.retiring = set()
        self.generation = 1
        self.digests = {}
        self.rollouts = collections.Counter()
        self.proc_lock = threading.Lock()  # restarts of agent/privhelper
        self.dockerd_lock = threading.Lock()
        self.root = None
        self.dockerd = None
        self.s = None
        self.proxy = None
        self.statefs = None
        self.mounts = []
        self.filler = None
        self.events_proc = None
        self.installation = None
        self.t0 = None

    # -- set-up ------------------------------------------------------------------------------
    def setup(self):
        self.root = tempfile.mkdtemp(prefix="snc-", dir="/tmp")
        self.dockerd = harness.PrivateDockerd(os.path.join(self.root, "dockerd"))
        self.dockerd.start()
        image = harness.make_image_archive(self.dockerd.sock, self.dockerd.root)
        s = harness.Stack(self.t, self.dockerd.sock, generation_management=True, image=image)
        self.s = s
        # The node's own state disk: one small tmpfs holding the agent's and privhelper's
        # state directories (bind-mounted where the harness keeps them).
        self.statefs = os.path.join(self.root, "statefs")
        os.makedirs(self.statefs)
        mib = state_tmpfs_mib(self.args.minutes)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0755" % mib,
                        "sn-chaos-state", self.statefs], check=True)
        self.mounts.append(self.statefs)
        for name, owner in (("agent", s.user), ("privhelper", None)):
            src = os.path.join(self.statefs, name)
            dst = os.path.join(s.dirs[name], "state")
            os.makedirs(src, mode=0o700)
            os.makedirs(dst, mode=0o700)
            if owner is not None:
                os.chown(src, owner.pw_uid, owner.pw_gid)
                os.chown(dst, owner.pw_uid, owner.pw_gid)
            subprocess.run(["mount", "--bind", src, dst], check=True)
            self.mounts.append(dst)
        s.start_devcore()
        host, port = s.listen.rsplit(":", 1)
        self.proxy = Proxy((host, int(port)))
        s.start_privhelper(max_active=128, max_retained=256, helper_idle_seconds=600)
        # Enrolled through the proxy: the agent's Core URL is the proxy's.
        status, body = s.admin_call("POST", "/admin/v1/enrollment-tokens", {})
        assert status == 201, body
        cfg = s.agent_config(core_origin=self.proxy.url())
        r = s.run_as_agent(s.enroll_argv(body["token"], cfg))
        if r.returncode != 0:
            raise RuntimeError("enroll failed: " + r.stderr)
        with open(os.path.join(s.dirs["agent"], "state", "node", "identity.json")) as f:
            s.identity = json.load(f)
        self.nid = s.identity["node_id"]
        self.digests[1] = s.identity["specification_digest"]
        s.start_agent()
        s.wait_connected(60)
        s.wait_observed(1, "ready", timeout=180)
        s.set_deployment(1, 1)
        with open(os.path.join(s.dirs["privhelper"], "state", "installation.json")) as f:
            self.installation = json.load(f)["installation_id"]
        self.t0 = time.time()
        self.start_events()

    # -- Docker events of the run's label ----------------------------------------------------
    def start_events(self):
        threading.Thread(target=self._events_loop, daemon=True).start()

    def _events_loop(self):
        since = "%.9f" % (self.t0 - 5)
        while not self.stop_all.is_set():
            if not harness.docker_ping(self.dockerd.sock):
                time.sleep(0.2)
                continue
            p = subprocess.Popen(
                ["docker", "-H", "unix://" + self.dockerd.sock, "events", "--since", since,
                 "--filter", "type=container",
                 "--filter", "label=sn.installation=" + self.installation,
                 "--format", "{{json .}}"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.events_proc = p
            for line in p.stdout:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                key = (ev.get("timeNano"), ev.get("id"), ev.get("Action"))
                with self.events_lock:
                    if key in self.event_keys:
                        continue
                    self.event_keys.add(key)
                    self.events.append(ev)
                since = "%.9f" % (ev.get("timeNano", 0) / 1e9)
            p.wait()
            time.sleep(0.2)

    def stop_events(self):
        self.stop_all.set()
        p = self.events_proc
        if p and p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()

    def events_until(self, until):
        """The events so far, after letting the follower catch up to `until` (unix s)."""
        deadline = time.time() + 5
        while time.time() < deadline:
            with self.events_lock:
                if self.events and self.events[-1].get("timeNano", 0) / 1e9 >= until:
                    break
            time.sleep(0.2)
        with self.events_lock:
            return list(self.events)

    # -- requests -----------------------------------------------------------------------------
    def call(self, op, sid, gen, arguments, timeout_ms=30000):
        with self.lock:
            self.req_counter += 1
            rq = Req(self.req_counter, op, sid, gen)
            self.requests.append(rq)
            if op == "resume" and not arguments.get("reconciliation_only"):
                self.resumes_sent[sid] += 1
            if op in ("kill", "delete_retained") and sid not in self.deletions_sent:
                self.deletions_sent[sid] = time.time()
        rq.t_sent = time.time()
        try:
            conn = http.client.HTTPConnection(self.s.listen, timeout=timeout_ms / 1000 + 30)
            conn.request("POST", "/admin/v1/nodes/%s/requests" % self.nid,
                         body=json.dumps({"generation": gen, "operation": op,
                                          "timeout_ms": timeout_ms, "arguments": arguments}),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            raw = r.read()
            conn.close()
            rq.status = r.status
            try:
                rq.body = json.loads(raw or b"null") or {}
            except ValueError:
                rq.body = {}
        except OSError as e:
            rq.status, rq.body = 0, {"exception": str(e)}
        rq.t_done = time.time()
        rq.id = rq.body.get("id") or rq.body.get("request_id")
        rq.outcome = outcome_of(rq.status, rq.body) if rq.status else "exception"
        if rq.status == 200:
            rq.final = rq.outcome
        elif rq.id and op in MUTATIONS:
            # Sent, no response (the connection closed, or no answer in time): Core observes
            # it after the reconnect; the observed outcome is its final one.
            with self.lock:
                self.pending_observe.append(rq)
        else:
            rq.final = rq.outcome  # never reached the node, or a read: nothing to observe
        return rq

    # -- the load --------------------------------------------------------------------------------
    def create_args(self, sid):
        return {"sandbox_id": sid, "image": "busybox", "command": ["sleep", "3600"],
                "cpu_millis": 100, "memory_bytes": 32 << 20}

    def worker(self, wid):
        rng = random.Random("%s-%d" % (self.seed, wid))
        while not self.stop_load.is_set():
            try:
                self.lifecycle(rng)
            except Exception:  # a bug of the soak itself: loud, and a violation
                self.violation("driver", "worker %d: %s" % (wid, traceback.format_exc()))
                time.sleep(1)

    def lifecycle(self, rng):
        sid = str(uuid.uuid4())
        gen = self.create_gen
        with self.lock:
            self.sandboxes[sid] = {"gen": gen, "created_ok": False, "killed": False}
        box = self.sandboxes[sid]
        # create (the same arguments again after a doubtful answer: the protocol's idempotence)
        for _ in range(6):
            if self.stop_load.is_set():
                break
            rq = self.call("create", sid, gen, self.create_args(sid))
            if rq.outcome == "ok":
                box["created_ok"] = True
                break
            if rq.outcome in ("conflict", "failed"):
                break  # e.g. a doubtful create that stopped: kill it below
            self.pause(rng, rq)
        written = None
        steps = rng.randint(3, 10)
        for _ in range(steps):
            if self.stop_load.is_set() or gen in self.retiring or not box["created_ok"]:
                break
            op = rng.choices(["exec", "write_file", "read_file", "kill_compute", "observe",
                              "inspect"], [5, 3, 3, 1, 1, 1])[0]
            if op == "read_file" and written is None:
                op = "write_file"  # a read of what this sandbox holds
            if op == "exec":
                tok = "t" + uuid.uuid4().hex[:16]
                with self.lock:
                    self.exec_tokens.add(tok)
                rq = self.call("exec", sid, gen, {"sandbox_id": sid,
                                                  "argv": ["sh", "-c", "echo " + tok],
                                                  "output_limit_bytes": 256})
                rq.token = tok
                if rq.outcome == "ok":
                    # exit 0: the command ran, and printed exactly its token. Any other exit
                    # code is an honest answer that it did not run to its end (e.g. Docker's
                    # "cannot exec in a stopped state" while a dockerd restart stops the
                    # container): counted, not compared.
                    res = rq.body["result"]
                    out = base64.b64decode(res["stdout"])
                    if res.get("exit_code") != 0:
                        with self.lock:
                            self.exec_not_run += 1
                    elif out != (tok + "\n").encode():
                        self.violation("outputs", "exec %s exited 0 and printed %r" % (tok, out))
                    else:
                        self.passed("outputs")
            elif op == "write_file":
                content = os.urandom(rng.randint(1, 4096))
                rq = self.call("write_file", sid, gen, {
                    "sandbox_id": sid, "path": "/tmp/soak", "mode": 0o600,
                    "content": base64.b64encode(content).decode()})
                written = content if rq.outcome == "ok" else None
            elif op == "read_file":
                rq = self.call("read_file", sid, gen, {"sandbox_id": sid, "path": "/tmp/soak",
                                                       "max_bytes": 8192})
                if rq.outcome == "ok" and written is not None:
                    got = base64.b64decode(rq.body["result"]["content"])
                    if got != written:
                        self.violation("outputs", "read_file of %s: %d bytes, not the %d "
                                       "written" % (sid, len(got), len(written)))
                    else:
                        self.passed("outputs")
            elif op == "kill_compute":
                rq = self.call("kill_compute", sid, gen, {"sandbox_id": sid})
                if rq.outcome == "ok":
                    rq = self.call("resume", sid, gen, {"sandbox_id": sid,
                                                        "reconciliation_only": False})
            elif op == "observe":
                with self.lock:
                    done = [r for r in self.requests[-2000:]
                            if r.op in MUTATIONS and r.status == 200 and r.id]
                if not done:
                    continue
                past = rng.choice(done)
                rq = self.call("observe", sid, self.generation, {"operation_id": past.id})
                if rq.outcome == "ok":
                    self.compare_observed(past, rq.body["result"])
            else:
                rq = self.call("inspect", sid, gen, {"sandbox_id": sid})
            if rq.outcome in ("conflict", "unavailable", "uncertain", "unconfirmed") or \
                    rq.outcome.startswith("http_") or rq.outcome == "exception":
                self.pause(rng, rq)
                self.reconcile(sid, gen, rng)
        self.kill(sid, gen, rng)

    def pause(self, rng, rq):
        # unconfirmed: no generation is ready on the node (e.g. until privhelper's probe passes
        # again after a restart): as long a pause as for unavailable.
        if rq.outcome in ("http_409", "http_502", "http_504", "exception", "unavailable",
                          "unconfirmed"):
            time.sleep(rng.uniform(0.5, 2.0))
        else:
            time.sleep(rng.uniform(0.05, 0.3))

    def reconcile(self, sid, gen, rng):
        """After a doubtful answer: inspect, and resume a sandbox whose compute stopped (a
        dockerd restart stops every container)."""
        for _ in range(5):
            if self.stop_load.is_set():
                return
            rq = self.call("inspect", sid, gen, {"sandbox_id": sid})
            if rq.outcome != "ok":
                time.sleep(rng.uniform(0.5, 2.0))
                continue
            state = rq.body["result"]["state"]
            if state == "retained":
                r = self.call("resume", sid, gen, {"sandbox_id": sid,
                                                   "reconciliation_only": False})
                if r.outcome == "ok":
                    return
                time.sleep(rng.uniform(0.2, 1.0))
                continue
            return

    def kill(self, sid, gen, rng, attempts=20):
        """kill until the node says it is done (ok) or there is nothing (not_found)."""
        box = self.sandboxes[sid]
        for i in range(attempts):
            if i >= 3 and self.stop_load.is_set() and threading.current_thread().name != \
                    "final":
                return False  # the final phase kills what a worker left
            rq = self.call("kill", sid, gen, {"sandbox_id": sid})
            if rq.outcome in ("ok", "not_found"):
                box["killed"] = True
                return True
            time.sleep(rng.uniform(0.5, 2.0) if i < 5 else 3.0)
        return False

    def compare_observed(self, past, obs):
        """observe of a request whose answer Core had: the record must say the same."""
        name = "observe_agrees"
        if obs.get("state") == "unknown":
            if past.final == "ok":
                self.violation(name, "%s %s answered ok but observe says unknown"
                               % (past.op, past.id))
            else:
                self.passed(name)
            return
        if obs.get("state") != "completed":
            self.violation(name, "%s %s answered but recorded %s" % (past.op, past.id,
                                                                      obs.get("state")))
            return
        code = (obs.get("response") or {}).get("error_code") or "ok"
        if code != past.final:
            self.violation(name, "%s %s answered %s, observe says %s" % (past.op, past.id,
                                                                         past.final, code))
        else:
            self.passed(name)

    # -- Core's observe of requests it had no answer for -------------------------------------------
    def observer(self):
        while not self.stop_all.is_set():
            with self.lock:
                todo = list(self.pending_observe)
            for rq in todo:
                if self.stop_all.is_set():
                    break
                self.observe_once(rq)
            time.sleep(1.0)

    def observe_once(self, rq):
        r = self.call("observe", rq.sid, self.generation, {"operation_id": rq.id})
        if r.outcome != "ok":
            return False
        res = r.body["result"]
        if res["state"] == "completed":
            rq.final = (res.get("response") or {}).get("error_code") or "ok"
        elif res["state"] == "unknown":
            rq.final = "never_ran"
        else:
            return False
        if rq.op == "create" and rq.final == "ok":
            self.sandboxes[rq.sid]["created_ok"] = True
        with self.lock:
            if rq in self.pending_observe:
                self.pending_observe.remove(rq)
        return True

    # -- presence and resources ---------------------------------------------------------------------
    def sampler(self):
        last_rss = 0.0
        while not self.stop_all.is_set():
            now = time.time()
            try:
                n = self.s.node(self.nid)
                self.presence.append((now, n["presence"] == "connected"))
            except Exception:
                pass
            self.check_alive()
            if now - last_rss >= self.args.sample_seconds:
                last_rss = now
                for name in ("agent", "privhelper"):
                    p = getattr(self.s, name)
                    if p is None or not p.alive():
                        continue
                    try:
                        with open("/proc/%d/status" % p.p.pid) as f:
                            rss = int([l for l in f if l.startswith("VmRSS:")][0].split()[1])
                        fds = len(os.listdir("/proc/%d/fd" % p.p.pid))
                    except (OSError, IndexError):
                        continue
                    self.samples[name].append((now, p.p.pid, rss, fds))
            time.sleep(0.5)

    def check_alive(self):
        """agent and privhelper end only when the soak kills them (under proc_lock, restarted
        at once); one that exits by itself is a violation, with the end of its log."""
        if not self.proc_lock.acquire(blocking=False):
            return  # a kill and restart is under way
        try:
            for name in ("agent", "privhelper"):
                p = getattr(self.s, name)
                if p is None or p.alive() or p.p.pid in self.exits_seen:
                    continue
                self.exits_seen.add(p.p.pid)
                self.violation("processes_alive", "%s (pid %d) exited by itself, status %s; "
                               "its log ends:\n%s" % (name, p.p.pid, p.p.returncode,
                                                      p.stderr()[-1500:]))
        finally:
            self.proc_lock.release()

    def connection_id(self):
        try:
            return self.s.node(self.nid)["connection_id"]
        except Exception:
            return None

    def connected_since(self, t, old_connection=None):
        """Waits until devcore sees the node connected (with a connection other than
        `old_connection` when one is given); returns seconds from t, None after the backoff's
        cap and the slack and 30 s more."""
        deadline = time.time() + BACKOFF_CAP_S + CONNECT_SLACK_S + 30
        while time.time() < deadline:
            try:
                n = self.s.node(self.nid)
                if n["presence"] == "connected" and n["connection_id"] and \
                        n["connection_id"] != old_connection:
                    return time.time() - t
            except Exception:
                pass
            time.sleep(0.1)
        return None

    # -- faults --------------------------------------------------------------------------------
    def injector(self, schedule):
        for offset, kind in schedule:
            while time.time() < self.t0 + offset:
                if self.stop_load.wait(0.2):
                    return
            if self.stop_load.is_set():
                return
            try:
                detail = getattr(self, "fault_" + kind)()
            except Exception:
                self.violation("driver", "fault %s: %s" % (kind, traceback.format_exc()))
                detail = "error"
            self.fault_log.append((round(time.time() - self.t0, 1), kind, detail))
            log("fault %-18s %s" % (kind, detail))

    def count(self, kind):
        with self.lock:
            self.faults[kind] += 1

    def reconnect(self, kind, t, old_connection=None):
        took = self.connected_since(t, old_connection)
        limit = BACKOFF_CAP_S + CONNECT_SLACK_S
        self.reconnects.append((kind, took))
        if took is None or took > limit:
            self.violation("reconnect_within_backoff",
                           "%s: not connected %s s after (limit %.0f s)" % (kind, took, limit))
        else:
            self.passed("reconnect_within_backoff")
        return took

    def restart_agent(self, kind, max_pause):
        """SIGKILL of the agent, a restart 0.2-`max_pause` s later; seconds until it is
        connected again (checked as reconnect_within_backoff under `kind`), or None."""
        old = self.connection_id()
        with self.proc_lock:
            self.s.agent.kill9()
            t = time.time()
            time.sleep(self.rng.uniform(0.2, max_pause))
            self.s.start_agent()
        return self.reconnect(kind, t, old)

    def fault_kill_agent(self):
        self.count("kill_agent")
        took = self.restart_agent("kill_agent", 2.0)
        return "reconnected in %.1f s" % (took or -1)

    def fault_kill_privhelper(self):
        with self.proc_lock:
            self.s.privhelper.kill9()
            self.count("kill_privhelper")
            time.sleep(self.rng.uniform(0.2, 2.0))
            self.s.start_privhelper()
        return "restarted"

    def fault_kill_native_helper(self):
        ph = self.s.privhelper.p.pid
        kids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if harness.parent_of(int(pid)) == ph and \
                        "native_helper" in (harness.exe_of(int(pid)) or "") + \
                        open("/proc/%s/cmdline" % pid, "rb").read().decode(errors="replace"):
                    kids.append(int(pid))
            except (OSError, ValueError):
                continue
        if not kids:
            # None running at this moment (idle): the fault is retried once a second later.
            time.sleep(1)
            return self.fault_kill_native_helper() if self.rng.random() < 0.9 else "none running"
        pid = self.rng.choice(sorted(kids))
        os.kill(pid, signal.SIGKILL)
        self.count("kill_native_helper")
        return "pid %d of %d" % (pid, len(kids))

    def fault_restart_dockerd(self):
        with self.dockerd_lock:
            t = time.time()
            self.dockerd.stop()
            self.count("restart_dockerd")
            self.dockerd.start()
        return "down %.1f s" % (time.time() - t)

    def fault_ws_drop(self):
        old = self.connection_id()
        n = self.proxy.drop()
        self.count("ws_drop")
        t = time.time()
        took = self.reconnect("ws_drop", t, old)
        return "%d connections cut, reconnected in %.1f s" % (n, took or -1)

    def fault_ws_stall(self):
        secs = self.rng.uniform(2.0, 15.0)
        self.proxy.stall(secs)
        self.count("ws_stall")
        time.sleep(secs)
        t = time.time()
        took = self.reconnect("ws_stall", t)
        return "stalled %.1f s, connected %.1f s after" % (secs, took or -1)

    def fault_fill_disk(self):
        path = os.path.join(self.statefs, "filler")
        self.filler = path
        written = 0
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            chunk = b"\0" * (1 << 20)
            while True:
                try:
                    written += os.write(fd, chunk)
                except OSError:
                    break
            while True:  # the last partial blocks
                try:
                    if os.write(fd, b"\0" * 4096) <= 0:
                        break
                    written += 4096
                except OSError:
                    break
        finally:
            os.close(fd)
        self.count("fill_disk")
        st = os.statvfs(self.statefs)
        full_since = time.time()
        hold = self.rng.uniform(3.0, 10.0)
        restart = ""
        if self.rng.random() < 0.5:
            # The agent restarts on the full disk (soak finding 3): it must still start and
            # connect (answering what needs a record unavailable) while the disk stays full.
            took = self.restart_agent("restart_on_full_disk", 1.0)
            left = os.statvfs(self.statefs)
            restart = ", agent restarted on it: connected in %.1f s with %d KiB free" % (
                took or -1, left.f_bavail * left.f_frsize >> 10)
        else:
            time.sleep(hold)
        os.unlink(path)
        self.filler = None
        return "%d MiB filler, %d KiB left, held %.1f s%s" % (
            written >> 20, st.f_bavail * st.f_frsize >> 10, time.time() - full_since, restart)

    def fault_rollout(self):
        if self.rollouts["started"] > self.rollouts["dropped"]:
            return "a rollout is still running: skipped"
        self.count("rollout")
        self.rollouts["started"] += 1
        threading.Thread(target=self._rollout, daemon=True).start()
        return "to generation %d (in the background)" % (self.generation + 1)

    def _rollout(self):
        old, new = self.generation, self.generation + 1
        try:
            doc = self.s.specification(generation=new, source="e2e-%d" % new)
            self.digests[new] = self.s.add_generation(doc)
            self.s.set_deployment(new, old)
            self.s.wait_observed(new, "ready", timeout=600)
            self.rollouts["ready"] += 1
            self.s.set_deployment(new, new)
            self.generation = new
            self.create_gen = new
            # The old generation's sandboxes are killed by their workers, then Core drops it.
            self.retiring.add(old)
            deadline = time.time() + 180
            while time.time() < deadline:
                with self.lock:
                    live = [s for s, b in self.sandboxes.items()
                            if b["gen"] == old and not b["killed"]]
                if not live:
                    break
                time.sleep(1)
            status, body = self.s.admin_call(
                "POST", "/admin/v1/nodes/%s/drops" % self.nid,
                {"generation": old, "specification_digest": self.digests[old]})
            if status != 200:
                raise RuntimeError("drop %d: %s %s" % (old, status, body))
            self.rollouts["dropped"] += 1
            log("rollout: generation %d serving, %d dropped (%d of its sandboxes not killed)"
                % (new, old, len(live)))
        except Exception:
            self.violation("driver", "rollout: " + traceback.format_exc())
            self.rollouts["dropped"] += 1  # do not block later rollouts

    # -- invariants ---------------------------------------------------------------------------------
    def passed(self, name):
        with self.lock:
            self.checks[(name, "passed")] += 1

    def violation(self, name, msg):
        with self.lock:
            self.checks[(name, "failed")] += 1
            self.violations.append("%s: %s" % (name, msg))
        log("VIOLATION %s: %s" % (name, msg[:2000]))

    def records(self):
        """The node's durable operation record: {id: last state} (soak_lib reads the journal)."""
        ops = os.path.join(self.s.dirs["agent"], "state", "operations")
        table, problems = soak_lib.read_operation_record(ops)
        for p in problems:
            self.violation("exactly_one_final_outcome", "the operation record: " + p)
        return table

    def check_outcomes(self, final):
        """exactly_one_final_outcome: every request Core sent has one final outcome, and for a
        mutation it is what the node's durable operation record holds."""
        name = "exactly_one_final_outcome"
        # Each request's final outcome is taken before the record is read: the node makes an
        # outcome durable before Core can learn it (answer or observe), so an outcome known
        # before the read is in what the read returns. Read in the other order, a mutation
        # that completed in between (its observe answered a moment after the read) looked
        # recorded `running` but answered ok (the 2-hour soak of 2026-12-07, 06:28:29: a false
        # violation; the record held the completion from that same second).
        with self.lock:
            reqs = [(r, r.final) for r in self.requests if r.t_done is not None]
        bad = 0
        now = time.time()
        table = self.records()
        for rq, final_outcome in reqs:
            if final_outcome is None:
                # Sent and not answered: observed later. At the end it must be resolved.
                if final or now - rq.t_done > 300:
                    bad += 1
                    self.violation(name, "%s %s (%s) has no final outcome"
                                   % (rq.op, rq.id, rq.outcome))
                continue
            if rq.op not in MUTATIONS or not rq.id:
                continue
            problem = soak_lib.record_disagrees(rq.op, rq.id, final_outcome, table.get(rq.id))
            if problem:
                bad += 1
                self.violation(name, problem)
        # Records of requests Core never sent.
        sent = {r.id for r, _ in reqs if r.id}
        with self.lock:
            sent |= {r.id for r in self.requests if r.id}
        for op_id, rec in table.items():
            if op_id not in sent and final:
                # (A request answered by devcore a moment ago may not be in the list yet: only
                # the final check counts.)
                bad += 1
                self.violation(name, "a record of a request Core never sent: %s" % rec)
        if not bad:
            self.passed(name)

    def check_events(self, final):
        until = time.time()
        events = self.events_until(until - 1)
        with self.lock:
            resumes = dict(self.resumes_sent)
            tokens = set(self.exec_tokens)
            deletions = dict(self.deletions_sent)
            created_ok = {s for s, b in self.sandboxes.items() if b["created_ok"]}
        v = soak_lib.double_mutations(events, resumes, tokens)
        for m in v:
            self.violation("no_mutation_twice", m)
        if not v:
            self.passed("no_mutation_twice")
        v = soak_lib.unexplained_destroys(events, deletions, created_ok)
        for m in v:
            self.violation("no_retained_state_lost", m)
        if not v:
            self.passed("no_retained_state_lost")

    def containers(self):
        status, conts = harness.docker_request(
            self.dockerd.sock, "GET", "/containers/json?all=1&filters=" +
            json.dumps({"label": ["sn.installation=" + self.installation]}).replace(" ", ""))
        if status != 200:
            return None
        return conts

    def check_containers(self, final):
        name = "no_unknown_container"
        # Sandboxes whose kill was answered ok or not_found before the list is read: none of
        # them may have a container in it (a create that landed after its kill: finding 6).
        with self.lock:
            killed_before = {s for s, b in self.sandboxes.items() if b["killed"]}
        with self.dockerd_lock:
            conts = self.containers()
        if conts is None:
            return  # the daemon is restarting: checked next time
        with self.lock:
            known = set(self.sandboxes)
        bad = 0
        for c in conts:
            sid = (c.get("Labels") or {}).get("sn.sandbox")
            if sid not in known:
                bad += 1
                self.violation(name, "container %s (sandbox %s) unknown to Core"
                               % (c["Id"][:12], sid))
            elif not final and sid in killed_before:
                bad += 1
                self.violation(name, "container %s of sandbox %s exists after Core's kill was "
                               "answered; the container: created %s, %s; the sandbox's "
                               "requests:\n%s"
                               % (c["Id"][:12], sid, self.clock(c.get("Created")),
                                  c.get("Status"), self.sandbox_history(sid)))
            elif final:
                bad += 1
                self.violation(name, "container %s of sandbox %s left after Core killed "
                               "everything it knows (kill answered: %s); the container: "
                               "created %s, %s; the sandbox's requests:\n%s"
                               % (c["Id"][:12], sid, sid in killed_before,
                                  self.clock(c.get("Created")), c.get("Status"),
                                  self.sandbox_history(sid)))
        if not bad:
            self.passed(name)

    def clock(self, t):
        """An epoch time on the log's clock (log(): local time) and as seconds into the run."""
        if not t:
            return "-"
        return "%s (%+.1f s)" % (time.strftime("%H:%M:%S", time.localtime(t)), t - self.t0)

    def sandbox_history(self, sid, last=40):
        """The last requests Core sent for a sandbox, for a violation's evidence: when each was
        sent and answered, its id, its answer and its final outcome."""
        with self.lock:
            mine = [r for r in self.requests if r.sid == sid][-last:]
        return "\n".join("    #%d %s gen %s id %s sent %s done %s outcome %s final %s"
                         % (r.n, r.op, r.gen, r.id, self.clock(r.t_sent), self.clock(r.t_done),
                            r.outcome, r.final) for r in mine) or "    (none)"

    def check_all(self, final=False):
        self.check_outcomes(final)
        self.check_events(final)
        self.check_containers(final)

    def checker(self):
        while not self.stop_load.wait(self.args.check_seconds):
            try:
                self.check_all()
            except Exception:
                self.violation("driver", "check: " + traceback.format_exc())
            with self.lock:
                n = len(self.requests)
            log("check: %d requests, %d violations so far" % (n, len(self.violations)))

    def check_resources(self):
        out = {}
        for name in ("agent", "privhelper"):
            r = soak_lib.resource_slopes(self.samples[name], self.args.warmup_seconds,
                                         self.args.min_slope_span)
            out[name] = r
            if r is None or not r["enforced"]:
                continue
            ok = (r["rss_kib_per_min"] <= self.args.max_rss_slope and
                  r["fds_per_min"] <= self.args.max_fd_slope)
            if ok:
                self.passed("memory_and_fds_flat")
            else:
                self.violation("memory_and_fds_flat",
                               "%s: %+.1f KiB/min, %+.2f fds/min over %.0f s (limits %s KiB/min, "
                               "%s fds/min)" % (name, r["rss_kib_per_min"], r["fds_per_min"],
                                                r["span"], self.args.max_rss_slope,
                                                self.args.max_fd_slope))
        return out

    # -- the run --------------------------------------------------------------------------------------
    def run(self):
        secs = self.args.minutes * 60.0
        if self.args.faults:
            schedule = soak_lib.parse_schedule(self.args.faults)
        else:
            schedule = soak_lib.fault_schedule(self.seed, secs,
                                               per_minute=self.args.faults_per_minute)
        if self.args.no_dockerd_restart:
            schedule = [(t, k) for t, k in schedule if k != "restart_dockerd"]
        log("schedule: " + ", ".join("%.0fs %s" % x for x in schedule))
        threading.current_thread().name = "final"
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True,
                                    name="worker-%d" % i)
                   for i in range(self.args.workers)]
        aux = [threading.Thread(target=self.observer, daemon=True),
               threading.Thread(target=self.sampler, daemon=True)]
        for t in aux:
            t.start()
        for t in threads:
            t.start()
        inj = threading.Thread(target=self.injector, args=(schedule,), daemon=True,
                               name="injector")
        inj.start()
        chk = threading.Thread(target=self.checker, daemon=True, name="checker")
        chk.start()
        time.sleep(max(0.0, self.t0 + secs - time.time()))
        log("load stops")
        self.stop_load.set()
        # The final phase has one deadline for everything it waits for; past it, what is left
        # is a violation (a worker or fault that cannot finish is a wedged node or driver).
        final_deadline = time.time() + FINAL_PHASE_S
        left = lambda: max(0.0, final_deadline - time.time())  # noqa: E731
        inj.join(left())
        for t in threads:
            t.join(left())
        chk.join(left())
        stuck = [t.name for t in threads + [inj, chk] if t.is_alive()]
        if stuck:
            self.violation("final_phase", "%d threads still running %d s after the load "
                           "stopped: %s" % (len(stuck), FINAL_PHASE_S, ", ".join(stuck)))
        # The node back to normal before the final checks.
        self.proxy.stall_until = 0
        if self.filler and os.path.exists(self.filler):
            os.unlink(self.filler)
        self.connected_since(time.time())
        deadline = min(time.time() + 120, final_deadline)
        while time.time() < deadline:
            with self.lock:
                if not self.pending_observe:
                    break
            time.sleep(1)
        # Core kills everything it knows that is not known killed.
        with self.lock:
            todo = [(s, b["gen"]) for s, b in self.sandboxes.items() if not b["killed"]]
        rng = random.Random(self.seed)
        for sid, gen in todo:
            if time.time() > final_deadline:
                self.violation("final_phase", "no time left to kill %d sandboxes" % len(todo))
                break
            # Enough attempts to outlast a sandbox fence (docs/protocol.md 22e): a create
            # interrupted by a fault may keep a kill of its sandbox `unavailable` for its budget
            # (30 s) + 3 s + 30 s; the attempts after the fifth are 3 s apart.
            self.kill(sid, gen, rng, attempts=30)
        time.sleep(2)
        self.stop_all.set()
        self.check_all(final=True)
        self.slopes = self.check_resources()

    # -- the table --------------------------------------------------------------------------------------
    def longest_unavailability(self):
        longest, start = 0.0, None
        for t, up in self.presence:
            if not up and start is None:
                start = t
            elif up and start is not None:
                longest = max(longest, t - start)
                start = None
        if start is not None:
            longest = max(longest, self.presence[-1][0] - start)
        return longest

    def longest_without_success(self):
        """The longest time between two requests answered ok (any operation) during the load."""
        done = sorted(r.t_done for r in self.requests if r.final == "ok" and r.t_done)
        gaps = [b - a for a, b in zip(done, done[1:])]
        return max(gaps) if gaps else 0.0

    def table(self, wall):
        by_outcome = collections.Counter()
        by_op = collections.Counter()
        for rq in self.requests:
            by_outcome[rq.final or ("unresolved:" + str(rq.outcome))] += 1
            by_op[rq.op] += 1
        rows = [("run", [("seed", self.seed), ("minutes of load", self.args.minutes),
                         ("workers", self.args.workers), ("wall seconds", "%.0f" % wall)]),
                ("requests by final outcome (%d)" % len(self.requests),
                 sorted(by_outcome.items(), key=lambda x: -x[1])),
                ("requests by operation", sorted(by_op.items(), key=lambda x: -x[1])),
                ("exec answered ok, exit code not 0 (output not compared)",
                 [("count", self.exec_not_run)]),
                ("errors by operation (top 12)", sorted(
                    collections.Counter("%s %s" % (r.op, r.final or r.outcome)
                                        for r in self.requests
                                        if (r.final or r.outcome) != "ok").items(),
                    key=lambda x: -x[1])[:12]),
                ("faults injected by kind (%d)" % sum(self.faults.values()),
                 [(k, self.faults.get(k, 0)) for k in soak_lib.FAULT_KINDS]),
                ("rollouts", [(k, self.rollouts.get(k, 0))
                              for k in ("started", "ready", "dropped")] +
                 [("old generation collected", self.collected())])]
        names = sorted({n for n, _ in self.checks})
        rows.append(("invariant checks (passed / failed)",
                     [(n, "%d / %d" % (self.checks[(n, "passed")], self.checks[(n, "failed")]))
                      for n in names]))
        rec = [x for _, x in self.reconnects if x is not None]
        rows.append(("availability", [
            ("longest disconnection (s)", "%.1f" % self.longest_unavailability()),
            ("longest time without an ok (s)", "%.1f" % self.longest_without_success()),
            ("longest reconnect after a cut (s)", "%.1f" % max(rec) if rec else "-"),
            ("reconnect limit (s)", "%.0f" % (BACKOFF_CAP_S + CONNECT_SLACK_S))]))
        res = []
        for name in ("agent", "privhelper"):
            r = self.slopes.get(name)
            if not r or r["rss_kib_per_min"] is None:
                res.append((name, "no segment"))
                continue
            res.append(("%s RSS KiB/min" % name, "%+.1f" % r["rss_kib_per_min"]))
            res.append(("%s fds/min" % name, "%+.2f" % r["fds_per_min"]))
            res.append(("%s segment" % name, "%.0f s, %d samples, %s" % (
                r["span"], r["n"], "enforced" if r["enforced"] else "too short: not enforced")))
        res.append(("limits", "%s KiB/min, %s fds/min" % (self.args.max_rss_slope,
                                                          self.args.max_fd_slope)))
        rows.append(("resources after %.0f s warm-up" % self.args.warmup_seconds, res))
        rows.append(("result", [("violations", len(self.violations))]))
        return soak_lib.format_table(rows)

    def collected(self):
        try:
            gens = os.listdir(self.s.ph_generations_dir())
        except OSError:
            return "-"
        dropped = sorted(n for n in gens if n.endswith(".dropped"))
        return ", ".join(dropped) if dropped else "none yet"

    # -- clean-up ----------------------------------------------------------------------------------------
    def cleanup(self):
        self.stop_load.set()
        self.stop_events()
        if self.proxy:
            self.proxy.close()
        if self.s:
            try:
                self.s.stop(keep=True)  # removed below, once its mounts are gone
            except Exception:
                traceback.print_exc()
        if self.dockerd and self.installation:
            conts = self.containers() or []
            for c in conts:  # only this run's installation's containers
                harness.docker_request(self.dockerd.sock, "DELETE",
                                       "/containers/%s?force=1&v=1" % c["Id"])
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-l", m], check=False)
        if self.s and not self.args.keep:
            shutil.rmtree(self.s.root, ignore_errors=True)
        if self.dockerd:
            self.dockerd.destroy(keep=self.args.keep)
        if self.root and not self.args.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        # The host's dockerd is never touched; say so if it is not answering.
        if not harness.docker_ping("/var/run/docker.sock"):
            log("note: the host's dockerd (/var/run/docker.sock) is not answering; the soak "
                "did not touch it (restore it with tools/deps.sh sn_start_dockerd)")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workers", type=int, default=28,
                    help="concurrent request loops (devcore allows 32 pending)")
    ap.add_argument("--faults-per-minute", type=float, default=4.0)
    ap.add_argument("--check-seconds", type=float, default=30.0)
    ap.add_argument("--sample-seconds", type=float, default=2.0)
    ap.add_argument("--warmup-seconds", type=float, default=60.0)
    ap.add_argument("--min-slope-span", type=float, default=300.0,
                    help="seconds after the warm-up a segment needs for its slope to count")
    ap.add_argument("--max-rss-slope", type=float, default=1024.0, help="KiB per minute")
    ap.add_argument("--max-fd-slope", type=float, default=2.0, help="descriptors per minute")
    ap.add_argument("--no-dockerd-restart", action="store_true",
                    help="leave restart_dockerd out of the schedule (while iterating)")
    ap.add_argument("--keep", action="store_true", help="keep the directories for inspection")
    ap.add_argument("--faults", default=None,
                    help="an explicit schedule instead of the seed's, e.g. "
                    "'20:fill_disk,45:kill_agent' (seconds after the load starts: kind)")
    args = ap.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    print("soak: seed %d (again: --seed=%d --minutes=%g)" % (args.seed, args.seed, args.minutes))
    if os.geteuid() != 0 or harness.DOCKERD is None or not os.path.exists("/bin/busybox"):
        print("soak: needs root, dockerd and /bin/busybox", file=sys.stderr)
        return 2
    started = time.time()
    soak = Soak(args)
    rc = 1
    try:
        soak.setup()
        log("stack up in %.0f s (node %s, installation %s)" % (time.time() - started, soak.nid,
                                                               soak.installation))
        soak.run()
        print(soak.table(time.time() - started))
        for v in soak.violations[:50]:
            print("violation: " + v[:3000])
        rc = 0 if not soak.violations else 1
        if rc and soak.s:
            print(soak.s.logs())
    except BaseException:
        traceback.print_exc()
        if soak.s:
            print(soak.s.logs())
        rc = 1
    finally:
        soak.cleanup()
    print("soak: %s in %.0f s (seed %d)" % ("PASSED" if rc == 0 else "FAILED",
                                              time.time() - started, args.seed))
    return rc


if __name__ == "__main__":
    sys.exit(main())
