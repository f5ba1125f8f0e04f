#!/usr/bin/env python3
"""Boots //tools/microvm/kernel:vmlinux under qemu -M microvm with TCG, twice.

The initramfs (built here, in $TEST_TMPDIR, as an uncompressed newc cpio) holds Debian's static
busybox and an /init script that mounts /proc, /sys and /dev, prints `guest kernel: $(uname -r)`
and the virtio-serial ports it sees, and reboots; with -no-reboot and reboot=t (triple fault:
there is no ACPI to power off with) qemu then exits by itself.

  1. one vCPU, no devices: qemu exits by itself within the deadline, the console shows
     `guest kernel: 6.1.<N>-sandbox-node`, and that release is not the host's;
  2. two vCPUs and a virtio-serial port named sn.agent, the provider's host<->guest channel: the
     guest finds the port by its name in /sys/class/virtio-ports, sends a line through it, reads
     the test's answer back and prints it; both vCPUs are online.

Each boot runs under a deadline (generous for a loaded 2-core machine); on expiry qemu is
killed and the test fails with the console log. No sleeps: the test waits on qemu's exit and on
the socket. Without qemu-system-x86_64 (or /bin/busybox) the test prints SKIPPED and passes,
except under CI=true, where it fails.
  boot_test.py VMLINUX
Environment: SN_QEMU names another qemu binary (e.g. a missing one, to see the skip);
SN_BOOT_DEADLINE_S overrides the per-boot deadline (seconds).
"""

import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time

DEADLINE_S = float(os.environ.get("SN_BOOT_DEADLINE_S", "60"))
MARKER = "sn-boot-test: init done"
PORT_NAME = "sn.agent"
BUSYBOX = "/bin/busybox"

# reboot=t: reset by triple fault, the one reset path microvm without ACPI has.
# panic=-1: a panic resets at once, so a broken boot fails fast instead of at the deadline.
# lpj= (lpj_arg below) is added when the host's clock rate is known.
CMDLINE = "console=ttyS0 reboot=t panic=-1"
GUEST_HZ = 100  # CONFIG_HZ_100 in guest.config


def lpj_arg():
    """lpj=<loops per jiffy> for the guest, from the host's TSC rate, or "" if unknown.

    Under TCG the guest's TSC is the host's (rdtsc is passed through), so the value the guest
    would calibrate is the host's TSC kHz * 1000 / HZ. Given on the command line, it skips the
    delay-loop calibration, which waits for timer ticks and was seen to hang about 1 boot in 50
    of a stock kernel under TCG (README.md, "Boot"); it only scales udelay()."""
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^cpu MHz\s*:\s*([0-9.]+)$", f.read(), re.M)
    except OSError:
        return ""
    if m is None or float(m.group(1)) <= 0:
        return ""
    return " lpj=%d" % round(float(m.group(1)) * 1e6 / GUEST_HZ)

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
# DEVTMPFS_MOUNT mounts /dev only on a real root; an initramfs mounts it itself.
mount -t devtmpfs devtmpfs /dev
# Kernel messages after this point would interleave with ours on the same console.
dmesg -n 1
echo "guest kernel: $(uname -r)"
echo "guest cpus online: $(cat /sys/devices/system/cpu/online)"
for f in /sys/class/virtio-ports/*/name; do
  [ -e "$f" ] || continue
  dev=${f%/name}
  dev=${dev##*/}
  name=$(cat "$f")
  echo "guest virtio port: /dev/$dev name=$name"
  if [ "$name" = "@PORT@" ] && [ -c "/dev/$dev" ]; then
    exec 3<>"/dev/$dev"
    echo "hello from $(uname -r)" >&3
    read -r answer <&3
    exec 3>&-
    echo "guest received on $name: $answer"
  fi
done
echo "@MARKER@"
reboot -f
""".replace("@PORT@", PORT_NAME).replace("@MARKER@", MARKER)


def skip_or_fail(why):
    if os.environ.get("CI") == "true":
        print("FAIL: required under CI=true: " + why)
        sys.exit(1)
    print("SKIPPED (not CI): " + why)
    sys.exit(0)


def cpio_newc(entries):
    """An uncompressed newc archive of (name, mode, data, rdev_major, rdev_minor) entries."""
    out = bytearray()
    ino = 1
    for name, mode, data, rmaj, rmin in entries + [("TRAILER!!!", 0, b"", 0, 0)]:
        namez = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rmaj, rmin, len(namez), 0]
        out += b"070701" + b"".join(b"%08X" % f for f in fields) + namez
        out += b"\0" * (-len(out) % 4)
        out += data
        out += b"\0" * (-len(out) % 4)
        ino += 1
    return bytes(out)


def build_initramfs(path):
    with open(BUSYBOX, "rb") as f:
        busybox = f.read()
    d = stat.S_IFDIR | 0o755
    entries = [
        ("bin", d, b"", 0, 0),
        ("dev", d, b"", 0, 0),
        ("dev/console", stat.S_IFCHR | 0o600, b"", 5, 1),
        ("proc", d, b"", 0, 0),
        ("sys", d, b"", 0, 0),
        ("tmp", stat.S_IFDIR | 0o1777, b"", 0, 0),
        ("bin/busybox", stat.S_IFREG | 0o755, busybox, 0, 0),
        ("init", stat.S_IFREG | 0o755, INIT.encode(), 0, 0),
    ]
    with open(path, "wb") as f:
        f.write(cpio_newc(entries))


def boot(qemu, vmlinux, initrd, tmp, label, smp, extra_args, on_started=None, pass_fds=()):
    """Runs one boot; returns (console text, seconds). Fails the test on a timeout."""
    console = os.path.join(tmp, label + ".console.log")
    errlog = os.path.join(tmp, label + ".qemu-stderr.log")
    cmd = [
        qemu, "-M", "microvm,acpi=off", "-accel", "tcg", "-m", "64", "-smp", str(smp),
        "-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-serial", "stdio",
        "-kernel", vmlinux, "-initrd", initrd, "-append", CMDLINE + lpj_arg(),
    ] + extra_args
    print(f"[{label}] " + shlex.join(cmd), flush=True)
    deadline = time.monotonic() + DEADLINE_S
    start = time.monotonic()
    with open(console, "wb") as out, open(errlog, "wb") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                pass_fds=pass_fds)
        try:
            if on_started is not None:
                on_started(deadline)
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except BaseException as e:
            proc.kill()
            proc.wait()
            fail(label, console, errlog,
                 f"{type(e).__name__} {e} (deadline {DEADLINE_S:g} s); qemu killed")
    elapsed = time.monotonic() - start
    with open(console, "rb") as f:
        text = f.read().decode("utf-8", "replace").replace("\r", "")
    if proc.returncode != 0:
        fail(label, console, errlog, f"qemu exited with status {proc.returncode}")
    print(f"[{label}] qemu exited by itself after {elapsed:.2f} s (boot to reset, wall time)",
          flush=True)
    return text, elapsed


def fail(label, console, errlog, why):
    print(f"FAIL [{label}]: {why}")
    for name, path in (("console", console), ("qemu stderr", errlog)):
        try:
            with open(path, "rb") as f:
                body = f.read().decode("utf-8", "replace")
        except OSError:
            body = "(none)"
        print(f"----- {name} ({path}) -----\n{body}\n----- end of {name} -----")
    sys.exit(1)


def check(cond, label, text, why):
    if not cond:
        print(f"FAIL [{label}]: {why}\n----- console -----\n{text}\n----- end of console -----")
        sys.exit(1)


def check_release(label, text):
    m = re.search(r"^guest kernel: (\S+)$", text, re.M)
    check(m is not None, label, text, "no 'guest kernel: ...' line")
    release = m.group(1)
    check(re.fullmatch(r"6\.1\.\d+-sandbox-node", release) is not None, label, text,
          f"guest release {release!r} is not 6.1.<N>-sandbox-node")
    host = os.uname().release
    check(release != host, label, text, f"guest release {release!r} is the host's")
    check(re.search("^" + re.escape(MARKER) + "$", text, re.M) is not None, label, text,
          f"the init script did not finish (no {MARKER!r})")
    print(f"[{label}] guest kernel {release} (host {host})", flush=True)
    return release


def main():
    if len(sys.argv) != 2:
        print("usage: boot_test.py VMLINUX")
        return 2
    vmlinux = os.path.abspath(sys.argv[1])
    qemu = os.environ.get("SN_QEMU") or shutil.which("qemu-system-x86_64")
    if not qemu or not os.access(qemu, os.X_OK):
        skip_or_fail("qemu-system-x86_64 is not installed (Debian package qemu-system-x86; "
                     "tools/deps.sh)")
    if not os.access(BUSYBOX, os.X_OK):
        skip_or_fail(BUSYBOX + " is missing (Debian package busybox-static; tools/deps.sh)")
    tmp = os.environ.get("TEST_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    initrd = os.path.join(tmp, "initramfs.cpio")
    build_initramfs(initrd)
    print(f"vmlinux: {vmlinux} ({os.path.getsize(vmlinux)} bytes); "
          f"initramfs: {os.path.getsize(initrd)} bytes", flush=True)

    # 1. One vCPU, no devices.
    text, t1 = boot(qemu, vmlinux, initrd, tmp, "plain", 1, [])
    check_release("plain", text)
    check("guest cpus online: 0\n" in text, "plain", text, "expected exactly CPU 0 online")
    check("guest virtio port:" not in text, "plain", text, "a virtio port without a device")

    # 2. Two vCPUs and the virtio-serial port. qemu is the socket's server (server=on) on a
    # listening socket the test made and passes as a file descriptor; the test connects before
    # qemu starts (the connection waits in the backlog until qemu accepts it), so nothing
    # polls for the socket file to appear.
    # The socket lives in its own directory under /tmp: a unix socket's path has at most 107
    # bytes, and $TEST_TMPDIR under Bazel's default output base is longer than that.
    sock_dir = tempfile.mkdtemp(prefix="sn-boot-", dir="/tmp")
    sock_path = os.path.join(sock_dir, "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(1)
    host_end = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host_end.connect(sock_path)
    fd = listener.fileno()
    received = {}

    def converse(deadline):
        # The guest's line, then our answer (which the guest prints).
        buf = b""
        while not buf.endswith(b"\n"):
            host_end.settimeout(max(0.001, deadline - time.monotonic()))
            chunk = host_end.recv(4096)
            if not chunk:
                raise ConnectionError(f"qemu closed the port's socket after {buf!r}")
            buf += chunk
        received["line"] = buf.decode("utf-8", "replace").strip()
        host_end.sendall(b"answer from the host\n")

    extra = [
        "-device", "virtio-serial-device",
        "-chardev", f"socket,id=c0,fd={fd},server=on,wait=off",
        "-device", f"virtserialport,chardev=c0,name={PORT_NAME}",
    ]
    try:
        text2, t2 = boot(qemu, vmlinux, initrd, tmp, "virtio-serial", 2, extra, converse,
                         pass_fds=(fd,))
    finally:
        host_end.close()
        listener.close()
        shutil.rmtree(sock_dir, ignore_errors=True)
    check_release("virtio-serial", text2)
    check("guest cpus online: 0-1\n" in text2, "virtio-serial", text2,
          "expected CPUs 0-1 online")
    m = re.search(r"^guest virtio port: (/dev/vport\S+) name=" + re.escape(PORT_NAME) + "$",
                  text2, re.M)
    check(m is not None, "virtio-serial", text2, f"no virtio port named {PORT_NAME}")
    check(received.get("line", "").startswith("hello from 6.1."), "virtio-serial", text2,
          f"the host received {received.get('line')!r} on the port")
    check(f"guest received on {PORT_NAME}: answer from the host\n" in text2, "virtio-serial",
          text2, "the guest did not print the host's answer")
    print(f"[virtio-serial] port {PORT_NAME} is {m.group(1)}; host received "
          f"{received['line']!r}; guest received the answer", flush=True)
    print(f"ok: boot wall times {t1:.2f} s (1 vCPU), {t2:.2f} s (2 vCPUs, virtio-serial)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
