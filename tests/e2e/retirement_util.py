"""Helpers for retirement_test: catching a collection in the act.

A collection of small release files takes milliseconds, too short to hit by polling. The
JournalWatcher waits with inotify(7) for privhelper to publish the collection journal
(`node/generations/<g>.collecting`, renamed into place) and sends SIGKILL to the given
processes the moment the kernel reports it: a real `kill -9` at (or just after) the first
durable step of the collection."""

import ctypes
import ctypes.util
import os
import select
import signal
import struct
import threading

IN_CREATE = 0x00000100
IN_MOVED_TO = 0x00000080
IN_CLOEXEC = 0o2000000
IN_NONBLOCK = 0o4000

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class JournalWatcher:
    def __init__(self, directory, name, pids):
        self.name = name
        self.pids = list(pids)
        self.fired = False
        self.fd = _libc.inotify_init1(IN_CLOEXEC | IN_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(directory), IN_CREATE | IN_MOVED_TO)
        if wd < 0:
            err = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(err, "inotify_add_watch " + directory)
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop = True
        self._thread.join(5)
        os.close(self.fd)

    def _run(self):
        target = os.fsencode(self.name)
        while not self._stop and not self.fired:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            off = 0
            while off < len(data):
                _wd, _mask, _cookie, length = struct.unpack_from("iIII", data, off)
                raw = data[off + 16:off + 16 + length].rstrip(b"\0")
                off += 16 + length
                if raw == target:
                    for pid in self.pids:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    self.fired = True
                    break
