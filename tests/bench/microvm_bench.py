"""The microVM provider's targets (issue 25), each beside the Docker provider on the same
machine in the same run:

    bazel run -c opt //tests/bench:microvm_bench [-- --quick]

Two stacks from tests/e2e/harness.py, both enrolled and connected: devcore + privhelper +
agent with the Docker provider on a private dockerd (the e2e tests' busybox image), and the
same with the microVM provider (the repository's kernel, guest agent and qemu seccomp policy,
the host's microvm firmware, a `release rootfs` busybox image; qemu under TCG here, KVM where it
runs guests).

  create-to-running p50   Core's round trip of a create answered "running" (devcore's
                          Sn-Node-Round-Trip-Us), each sandbox killed again (not timed);
                          target <= 1.0 s under TCG; Docker's create beside it for context
  exec round trip p50     `true` in a running sandbox, Core's round trip; target: no slower
                          than the Docker provider's (<= 1.0x)
  qemu resident memory    VmRSS of the qemu of an idle sandbox created with 64 MiB, 10 s
                          after its create; target <= 110 MiB
  16 at once              16 sandboxes created and each answering an exec at the same time;
                          their qemu's total resident memory for context

It needs root, dockerd, qemu and /bin/busybox; without them it exits 2 with a message. Not a
test: it prints figures and ratios; exit 0 when it measured (a missed target is a result).
"""

import argparse
import os
import statistics
import sys
import time
import uuid

from bench_stack import harness, node_request  # noqa: E402
import bench_stack  # noqa: E402
import suite_json  # noqa: E402

PROG = "microvm_bench"
MEMORY = 64 << 20
AT_ONCE = 16


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def create_args(sid):
    return {"sandbox_id": sid, "image": "busybox", "command": ["sleep", "3600"],
            "cpu_millis": 1000, "memory_bytes": MEMORY}


def create_p50(stack, n):
    times = []
    for _ in range(n):
        sid = str(uuid.uuid4())
        _, t = node_request(stack, "create", create_args(sid))
        times.append(t)
        node_request(stack, "kill", {"sandbox_id": sid})
    return statistics.median(times)


def exec_p50(stack, sid, n):
    args = {"sandbox_id": sid, "argv": ["true"], "output_limit_bytes": 0}
    node_request(stack, "exec", args)  # warm: the helper's first call
    return statistics.median(node_request(stack, "exec", args)[1] for _ in range(n))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--accel", choices=("tcg", "kvm", "auto"), default="tcg",
                        help="the accelerator (a KVM host: kvm; docs/performance.md)")
    suite_json.add_arguments(parser)
    args = parser.parse_args()
    bench_stack.check_environment(PROG, ["privhelper/native/microvm/supervisor/vm_supervisor"])
    if not os.path.exists("/usr/bin/qemu-system-x86_64"):
        bench_stack.die(PROG, "qemu is not installed (apt-get install qemu-system-x86)")
    rounds = 5 if args.quick else 15
    docker = bench_stack.NodeStack()
    t = bench_stack.Asserts()
    vm = harness.Stack(t, None, provider="microvm")
    vm.microvm_accel = args.accel
    store = os.path.join(vm.root, "vm")
    rows = []
    try:
        docker.start(max_active=AT_ONCE + 4)
        vm.start_devcore()
        vm.start_privhelper(max_active=AT_ONCE + 4, max_retained=4)
        vm.agent_config()
        vm.enroll()
        vm.start_agent()
        vm.wait_connected(timeout=60)
        node_request(vm, "inspect", {"sandbox_id": str(uuid.uuid4())})  # the helper started

        vm_create = create_p50(vm, rounds)
        docker_create = create_p50(docker.stack, rounds)
        rows.append(suite_json.row(PROG, "create-to-running p50 (microVM, %s)" % args.accel, vm_create, "s",
                                   "the Docker provider's create, same run", docker_create,
                                   "<= 1.0 s", met=vm_create <= 1.0))

        vm_sid, docker_sid = str(uuid.uuid4()), str(uuid.uuid4())
        node_request(vm, "create", create_args(vm_sid))
        created_at = time.monotonic()
        node_request(docker.stack, "create", create_args(docker_sid))
        vm_exec = exec_p50(vm, vm_sid, rounds * 4)
        docker_exec = exec_p50(docker.stack, docker_sid, rounds * 4)
        rows.append(suite_json.row(PROG, "exec round trip p50 (`true`)", vm_exec * 1e3, "ms",
                                   "the Docker provider's exec, same run", docker_exec * 1e3,
                                   "<= 1.0x"))
        time.sleep(max(0.0, 10.0 - (time.monotonic() - created_at)))
        pids = harness.vm_processes(store)
        rss = rss_mib(pids[0]) if len(pids) == 1 else float("nan")
        rows.append(suite_json.row(PROG, "qemu resident memory, idle 64 MiB sandbox, 10 s",
                                   rss, "MiB", target="<= 110 MiB", met=rss <= 110))
        node_request(vm, "kill", {"sandbox_id": vm_sid})

        sids = [str(uuid.uuid4()) for _ in range(AT_ONCE)]
        for sid in sids:
            node_request(vm, "create", create_args(sid))
        answered = sum(1 for sid in sids if node_request(vm, "exec", {
            "sandbox_id": sid, "argv": ["true"], "output_limit_bytes": 0})[0]["exit_code"] == 0)
        total = sum(rss_mib(p) for p in harness.vm_processes(store))
        rows.append(suite_json.row(PROG, "sandboxes running and answering at once", answered,
                                   "VMs", target=">= %d" % AT_ONCE, met=answered >= AT_ONCE))
        rows.append(suite_json.row(PROG, "their qemu's resident memory, total", total, "MiB"))
        for sid in sids:
            node_request(vm, "kill", {"sandbox_id": sid})
    finally:
        vm.stop()
        for pid in harness.vm_processes(store):  # a failed run's VMs (their supervisors take them along)
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        docker.stop()
    for r in rows:
        ratio = "" if r["ratio"] is None else "  (%.2fx %s: %.3g %s)" % (
            r["ratio"], r["baseline"], r["baseline_value"], r["unit"])
        print("%-50s %10.3f %-4s target %-10s %s%s" % (
            r["metric"], r["value"], r["unit"], r["target"] or "-",
            {True: "met", False: "MISSED", None: ""}[r["met"]], ratio))
    suite_json.write(args.suite_json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
