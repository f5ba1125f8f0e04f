#!/usr/bin/env python3
"""Where a `bazel test` phase's time went: the longest tests (their shards and runs summed) and
the total, read from the test.xml files under a bazel-testlogs directory.

    tools/ci/test_times.py TESTLOGS_DIR [--top=N]

.ci/run prints it after its tests and asan phases, so that every CI log says which tests took
the time (docs/build.md, "CI"). Only the test.xml files written since --since (a Unix time) are
counted when it is given: a phase's own runs, not cached results of earlier ones."""

import argparse
import collections
import os
import re
import sys

_TIME = re.compile(rb'<testsuites?\b[^>]*?\btime="([0-9.]+)"')
_SHARD = re.compile(r"/(shard_\d+_of_\d+|run_\d+_of_\d+)(?=/|$)")


def test_times(testlogs, since=None):
    """{test label path: seconds} over every test.xml under TESTLOGS (shards and runs of one
    test summed), only those modified at or after SINCE when given."""
    out = collections.Counter()
    for root, _dirs, files in os.walk(testlogs):
        if "test.xml" not in files:
            continue
        path = os.path.join(root, "test.xml")
        if since is not None and os.stat(path).st_mtime < since:
            continue
        with open(path, "rb") as f:
            m = _TIME.search(f.read(65536))
        if m is None:
            continue
        rel = os.path.relpath(root, testlogs)
        out[_SHARD.sub("", "/" + rel).lstrip("/")] += float(m.group(1))
    return out


def report(times, top):
    lines = ["test time: %.0f s over %d tests; the %d longest:" % (sum(times.values()),
                                                                  len(times), min(top, len(times)))]
    for name, secs in sorted(times.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
        package, _, target = name.rpartition("/")
        lines.append("  %7.1f s  //%s:%s" % (secs, package, target))
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("testlogs")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--since", type=float, default=None)
    a = ap.parse_args(argv)
    if not os.path.isdir(a.testlogs):
        print("test_times: no directory %s" % a.testlogs, file=sys.stderr)
        return 1
    print(report(test_times(a.testlogs, a.since), a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
