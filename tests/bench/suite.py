"""Every benchmark in one command (issue 12, target 5), as root:

    bazel run -c opt //tests/bench:suite [-- --only=create_bench,wire_bench] [-- --full]

The contract every benchmark of tests/bench follows (the suite relies on it):

  --suite-json=FILE  after measuring, write FILE: a JSON list of rows, one per measured ratio,
                     each an object with exactly these members:
                       "bench"           the benchmark's name, e.g. "create_bench"
                       "metric"          what was measured, e.g. "create-to-running p50"
                       "value"           the node's figure (number)
                       "unit"            its unit, e.g. "s", "ms", "us", "MiB", "x"
                       "baseline"        what it was measured against, e.g. "docker run -d,
                                         same profile" (string; null when there is none)
                       "baseline_value"  the baseline's figure in the same unit (or null)
                       "ratio"           value / baseline_value (or null)
                       "target"          the target as a string, e.g. "<= 2.0x", "< 1.5x",
                                         "<= 32 MiB" (or null when the row is for context)
                       "met"             true / false, or null when there is no target
                     tests/bench/suite_json.py (py_library :suite_json) writes such rows.
  --quick            fewer rounds: what the suite passes, so that all of it runs in under
                     5 minutes on the 2-core development machine.
  exit status        0 when the measurement completed, whatever the targets (a missed target
                     is a result, recorded as "met": false); non-zero only when the benchmark
                     could not measure; 2 when the environment is missing (root, dockerd).

The suite runs each benchmark in turn (they would disturb each other in parallel) as a
subprocess of the binary built into its runfiles, with its mode's flags (BENCHMARKS: e.g.
request_bench --inspect-overhead for issue 12's target 1), --quick (unless --full) and
--suite-json, collects the rows, and prints one table and the total wall time. It exits
non-zero only if a benchmark failed (non-zero exit, or no rows); missed targets are printed,
not failures. A benchmark missing from the runfiles (not in the BUILD file's `data`) or not yet
accepting --suite-json is reported as skipped.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# In the order they run: (name, what it covers, the mode's own flags beside the contract's).
BENCHMARKS = (
    ("wire_bench", "codec", ()),
    # Target 1's mode: node overhead on inspect against grpc_hop_bench's floor, same run.
    ("request_bench", "request path (node overhead on inspect vs the floor)",
     ("--inspect-overhead",)),
    ("create_bench", "create-to-running, 32 concurrent creates", ()),
    ("busy_host_bench", "scale (flat on a busy host)", ()),
    ("memory_bench", "idle memory", ()),
    ("prepare_bench", "rollout preparation", ()),
    ("microvm_bench", "the microVM provider beside Docker's", ()),
    ("metrics_bench", "the request path while Prometheus scrapes", ()),
)
MODE_FLAGS = {name: flags for name, _, flags in BENCHMARKS}
PYTHON = {"request_bench", "create_bench", "busy_host_bench", "memory_bench", "prepare_bench",
          "microvm_bench", "metrics_bench"}
TIMEOUT_S = 600


def runfiles_dir():
    d = os.environ.get("RUNFILES_DIR")
    if d:
        return d
    here = os.path.abspath(sys.argv[0])
    i = here.find(".runfiles" + os.sep)
    if i >= 0:
        return here[:i + len(".runfiles")]
    if os.path.isdir(here + ".runfiles"):
        return here + ".runfiles"
    return None


def binary(name):
    """The benchmark's executable in this binary's runfiles, or None."""
    d = runfiles_dir()
    if not d:
        return None
    for ws in sorted(os.listdir(d)):
        path = os.path.join(d, ws, "tests", "bench", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def missing_flags(path, flags):
    """The flags a Python benchmark's --help does not name (one that predates the contract
    would reject them only after its set-up); ["--help"] when --help fails."""
    r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return ["--help"]
    return [f for f in flags if f not in r.stdout]


def run_one(name, quick, out_dir):
    """Runs one benchmark: (rows, status string, seconds, failed)."""
    path = binary(name)
    if path is None:
        return [], "skipped: not in the suite's runfiles (add it to :suite's data)", 0.0, False
    flags = list(MODE_FLAGS.get(name, ()))
    if name in PYTHON:
        missing = missing_flags(path, ["--suite-json", "--quick"] + flags)
        if missing:
            return [], "skipped: does not accept %s yet" % " ".join(missing), 0.0, False
    out = os.path.join(out_dir, name + ".json")
    argv = [path] + flags + ["--suite-json=" + out] + (["--quick"] if quick else [])
    print("== %s: %s" % (name, " ".join(argv[1:])), flush=True)
    t0 = time.monotonic()
    try:
        rc = subprocess.run(argv, timeout=TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        return [], "FAILED: no result within %d s" % TIMEOUT_S, time.monotonic() - t0, True
    elapsed = time.monotonic() - t0
    if rc != 0:
        return [], "FAILED: exit status %d" % rc, elapsed, True
    try:
        with open(out) as f:
            rows = json.load(f)
    except (OSError, ValueError) as e:
        return [], "FAILED: no rows (%s)" % e, elapsed, True
    if not isinstance(rows, list) or not rows:
        return [], "FAILED: no rows", elapsed, True
    return rows, "ok", elapsed, False


def run_suite(names, quick):
    """Runs the benchmarks in turn: (all rows, [(name, status, seconds)], whether one failed)."""
    rows, summary, failed = [], [], False
    with tempfile.TemporaryDirectory(prefix="snsuite-") as out_dir:
        for name in names:
            got, status, elapsed, bad = run_one(name, quick, out_dir)
            rows.extend(got)
            summary.append((name, status, elapsed))
            failed = failed or bad
            print("== %s: %s (%.0f s)" % (name, status, elapsed), flush=True)
    return rows, summary, failed


def fmt(x, unit=""):
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, (int, float)):
        a = abs(x)
        s = "%.0f" % x if a >= 100 else "%.1f" % x if a >= 10 else "%.2f" % x if a >= 0.1 \
            else "%.3g" % x
        return s + (" " + unit if unit else "")
    return str(x)


def print_table(rows):
    cols = ("bench", "metric", "value", "baseline", "ratio", "target", "met")
    lines = []
    for r in rows:
        base = r.get("baseline")
        if base is not None and r.get("baseline_value") is not None:
            base = "%s (%s)" % (base, fmt(r["baseline_value"], r.get("unit") or ""))
        met = r.get("met")
        lines.append((str(r.get("bench")), str(r.get("metric")),
                      fmt(r.get("value"), r.get("unit") or ""), base or "-",
                      "-" if r.get("ratio") is None else "%.2fx" % r["ratio"],
                      r.get("target") or "-",
                      "-" if met is None else "met" if met else "MISSED"))
    widths = [max(len(c), *(len(l[i]) for l in lines)) if lines else len(c)
              for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for l in lines:
        print("  ".join(v.ljust(w) for v, w in zip(l, widths)).rstrip())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="", help="comma-separated benchmark names")
    p.add_argument("--full", action="store_true", help="without --quick (takes much longer)")
    p.add_argument("--json", metavar="FILE", help="also write every row to FILE")
    args = p.parse_args()
    names = [n for n, _, _ in BENCHMARKS]
    if args.only:
        unknown = set(args.only.split(",")) - set(names)
        if unknown:
            sys.stderr.write("suite: unknown benchmark(s): %s (known: %s)\n"
                             % (", ".join(sorted(unknown)), ", ".join(names)))
            return 2
        names = [n for n in names if n in args.only.split(",")]
    if os.geteuid() != 0:
        sys.stderr.write("suite: needs root (the node benchmarks run privhelper and a private "
                         "dockerd as root); run it as root\n")
        return 2
    t0 = time.monotonic()
    rows, summary, failed = run_suite(names, not args.full)
    total = time.monotonic() - t0
    print()
    print_table(rows)
    print()
    for name, status, elapsed in summary:
        print("%-16s %-60s %5.0f s" % (name, status, elapsed))
    missed = sum(1 for r in rows if r.get("met") is False)
    print("total wall time %.0f s (%.1f min)%s; %d rows, %d targets met, %d missed%s" % (
        total, total / 60.0, "" if args.full else " with --quick", len(rows),
        sum(1 for r in rows if r.get("met") is True), missed,
        "; a benchmark FAILED" if failed else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
