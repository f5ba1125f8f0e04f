"""A process's memory and threads as the kernel reports them (/proc/PID/status, smaps_rollup,
smaps), in KiB; what memory_bench and request_bench --rss read."""

ROLLUP_KEYS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Anonymous")


def _fields(path, keys):
    """{key: first number} of the `key: value ...` lines of PATH for `keys`."""
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in keys:
                out[k] = int(v.split()[0])
    return out


def status(pid, keys):
    """{key: value} of /proc/PID/status for `keys` (KiB for the Vm*/Rss* lines, a count for
    Threads); a key the kernel does not report is absent."""
    return _fields("/proc/%d/status" % pid, keys)


def threads(pid):
    return status(pid, ("Threads",)).get("Threads", 0)


def smaps_rollup(pid, keys=ROLLUP_KEYS):
    """{key: KiB} of /proc/PID/smaps_rollup for `keys`; RuntimeError when one is missing."""
    out = _fields("/proc/%d/smaps_rollup" % pid, keys)
    missing = [k for k in keys if k not in out]
    if missing:
        raise RuntimeError("/proc/%d/smaps_rollup lacks %s (kernel too old?)" % (pid, missing))
    return out


def file_mappings(pid):
    """[(path, Pss KiB, Rss KiB)] of every file-backed mapping of PID, summed per path, largest
    Pss first (Pss well below Rss: other processes map the same pages)."""
    per = {}
    path = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:
                path = fields[5] if len(fields) >= 6 and fields[5].startswith("/") else None
            elif fields[0] in ("Pss:", "Rss:") and path:
                pss, rss = per.get(path, (0, 0))
                if fields[0] == "Pss:":
                    pss += int(fields[1])
                else:
                    rss += int(fields[1])
                per[path] = (pss, rss)
    return sorted(((p, v[0], v[1]) for p, v in per.items()), key=lambda t: -t[1])
