"""The benchmark suite's row format (the contract is written out at the top of suite.py): one
row per measured ratio, written as a JSON list to the file named by `--suite-json=FILE`.

    import suite_json
    suite_json.add_arguments(parser)              # --suite-json=FILE and --quick
    rows = [suite_json.row("create_bench", "create-to-running p50", 0.41, "s",
                           "docker run -d, same profile", 0.52, "< 1.0x")]
    suite_json.write(args.suite_json, rows)       # does nothing without --suite-json

A benchmark may also build the dicts itself; this module only saves writing the same code
in every benchmark.
"""

import json
import os
import re

FIELDS = ("bench", "metric", "value", "unit", "baseline", "baseline_value", "ratio", "target",
          "met")


def add_arguments(parser):
    parser.add_argument("--suite-json", metavar="FILE", default=None,
                        help="also write the results as the suite's JSON rows to FILE")
    parser.add_argument("--quick", action="store_true",
                        help="fewer rounds (what //tests/bench:suite runs)")


def meets(ratio, target):
    """Whether `ratio` meets a target written "<= 2.0x", "< 1.5x", ">= 1x" or "> 1x"; None when
    there is no ratio or the target is not of that form."""
    m = re.fullmatch(r"\s*(<=|<|>=|>)\s*([0-9.]+)\s*x\s*", target or "")
    if ratio is None or not m:
        return None
    bound = float(m.group(2))
    return {"<=": ratio <= bound, "<": ratio < bound, ">=": ratio >= bound,
            ">": ratio > bound}[m.group(1)]


def row(bench, metric, value, unit, baseline=None, baseline_value=None, target=None, met=None):
    """One row; ratio = value / baseline_value when both are there; met from the target when
    not given."""
    ratio = (value / baseline_value) if (value is not None and baseline_value) else None
    if met is None:
        met = meets(ratio, target)
    return {"bench": bench, "metric": metric, "value": value, "unit": unit,
            "baseline": baseline, "baseline_value": baseline_value, "ratio": ratio,
            "target": target, "met": met}


def write(path, rows):
    """Writes `rows` to `path` (atomically: a crashed benchmark leaves no half a list)."""
    if not path:
        return
    for r in rows:
        missing = [f for f in FIELDS if f not in r]
        if missing:
            raise ValueError("suite row %r lacks %s" % (r, ", ".join(missing)))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
