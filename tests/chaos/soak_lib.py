"""The chaos soak's pure parts (no processes, no sockets): the seeded fault schedule, the
slope of a resource over time, the Docker-event checks and the summary table. Tested by
soak_lib_test.py; used by soak.py."""

import collections
import json
import os
import random

# Every kind of fault the injector knows, in the order the table lists them.
FAULT_KINDS = ("kill_agent", "kill_privhelper", "kill_native_helper", "restart_dockerd",
               "ws_drop", "ws_stall", "fill_disk", "rollout")
# Relative weights of the faults added beyond one of each kind (longer runs). A dockerd restart
# stops every container (a minute of resumes): rarer. A rollout takes minutes: rarest.
FAULT_WEIGHTS = {"kill_agent": 4, "kill_privhelper": 3, "kill_native_helper": 3,
                 "restart_dockerd": 1, "ws_drop": 4, "ws_stall": 3, "fill_disk": 2,
                 "rollout": 1}
# Faults that restart a process whose memory and descriptors are sampled: in a short run
# they are placed early, so that the last segment of each process is long enough to fit a
# slope after the warm-up.
PROCESS_KILLS = ("kill_agent", "kill_privhelper")


def parse_schedule(text):
    """'20:fill_disk,45.5:kill_agent' -> [(20.0, 'fill_disk'), (45.5, 'kill_agent')], sorted;
    ValueError for a malformed entry or an unknown kind."""
    out = []
    for part in text.split(","):
        t, sep, kind = part.strip().partition(":")
        if not sep or kind not in FAULT_KINDS:
            raise ValueError("bad fault %r (want SECONDS:KIND, KIND one of %s)"
                             % (part, ", ".join(FAULT_KINDS)))
        out.append((float(t), kind))
    out.sort()
    return out


def fault_schedule(seed, seconds, per_minute=4.0, quiet_tail=20.0, start=10.0):
    """[(offset seconds, kind)] ascending: one fault of each kind, plus as many more (weighted
    draws) as make `per_minute` on average, spread over [start, seconds - quiet_tail] with
    jitter. The same seed and length give the same schedule. In a run shorter than 10 minutes
    the process kills fall in its first 40%, the rollout in its first 30%."""
    rng = random.Random(seed)
    end = max(start + 1.0, seconds - quiet_tail)
    total = max(len(FAULT_KINDS), int(round(per_minute * seconds / 60.0)))
    kinds = list(FAULT_KINDS)
    names = sorted(FAULT_WEIGHTS)
    weights = [FAULT_WEIGHTS[n] for n in names]
    while len(kinds) < total:
        k = rng.choices(names, weights)[0]
        # At most one rollout per 10 minutes: each takes minutes and leaves a retirement.
        if k == "rollout" and kinds.count("rollout") >= max(1, int(seconds // 600)):
            continue
        kinds.append(k)
    rng.shuffle(kinds)
    short = seconds < 600
    span = end - start
    slot = span / len(kinds)
    out = []
    for i, k in enumerate(kinds):
        t = start + slot * i + rng.uniform(0, slot * 0.8)
        if short and k in PROCESS_KILLS:
            t = start + rng.uniform(0, 0.4 * span)
        if short and k == "rollout":
            t = start + rng.uniform(0, 0.3 * span)
        out.append((round(t, 2), k))
    out.sort()
    return out


def linear_slope(points):
    """Least-squares slope of [(x, y)]; None for fewer than 3 points or no spread in x."""
    n = len(points)
    if n < 3:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def resource_slopes(samples, warmup, min_span):
    """`samples`: [(t seconds, pid, rss KiB, fds)] of one program. Each pid is a segment (a
    restart starts a new one); the first `warmup` seconds of a segment are not used. Returns the
    longest segment's {pid, span (s), n, rss_kib_per_min, fds_per_min, enforced} where
    `enforced` is whether its span after the warm-up is at least `min_span`; None without
    samples."""
    by_pid = collections.OrderedDict()
    for t, pid, rss, fds in samples:
        by_pid.setdefault(pid, []).append((t, rss, fds))
    best = None
    for pid, seg in by_pid.items():
        t0 = seg[0][0]
        used = [s for s in seg if s[0] >= t0 + warmup]
        span = (used[-1][0] - used[0][0]) if used else 0.0
        if best is None or span > best["span"]:
            rss = linear_slope([(t / 60.0, r) for t, r, _ in used])
            fds = linear_slope([(t / 60.0, f) for t, _, f in used])
            best = {"pid": pid, "span": span, "n": len(used), "rss_kib_per_min": rss,
                    "fds_per_min": fds, "enforced": span >= min_span and rss is not None}
    return best


def event_sandbox(ev):
    return ((ev.get("Actor") or {}).get("Attributes") or {}).get("sn.sandbox")


def event_action(ev):
    """The event's action without its detail ("exec_start: sh -c ..." -> "exec_start")."""
    return (ev.get("Action") or ev.get("status") or "").split(":", 1)[0]


def double_mutations(events, resumes_sent, exec_tokens):
    """Violations of "no mutation ran twice" in Docker's container events of the run's
    installation: a sandbox created more than once, destroyed more than once, or started
    more often than its one create and the resumes Core sent for it (`resumes_sent`:
    {sandbox: count}); an exec whose unique token (`exec_tokens`: the set Core sent) started
    more than once. Returns [message]."""
    counts = collections.defaultdict(collections.Counter)
    execs = collections.Counter()
    for ev in events:
        sid = event_sandbox(ev)
        if sid is None:
            continue
        a = event_action(ev)
        counts[sid][a] += 1
        if a == "exec_start":
            detail = (ev.get("Action") or "").split(":", 1)[-1]
            for tok in detail.split():
                if tok in exec_tokens:
                    execs[tok] += 1
    out = []
    for sid, c in sorted(counts.items()):
        if c["create"] > 1:
            out.append("sandbox %s created %d times" % (sid, c["create"]))
        if c["destroy"] > 1:
            out.append("sandbox %s destroyed %d times" % (sid, c["destroy"]))
        allowed = 1 + resumes_sent.get(sid, 0)
        if c["start"] > allowed:
            out.append("sandbox %s started %d times (1 create + %d resumes sent)"
                       % (sid, c["start"], resumes_sent.get(sid, 0)))
    for tok, n in sorted(execs.items()):
        if n > 1:
            out.append("exec %s started %d times" % (tok, n))
    return out


def unexplained_destroys(events, deletions_sent, created_ok):
    """Violations of "no retained state deleted without its kill": a destroy of a sandbox's
    container before Core sent a kill or delete_retained for it (`deletions_sent`: {sandbox:
    earliest send time, unix s}), for a sandbox whose create Core saw succeed (`created_ok`;
    a create that failed may remove what it made). Returns [message]."""
    out = []
    for ev in events:
        sid = event_sandbox(ev)
        if sid is None or event_action(ev) != "destroy" or sid not in created_ok:
            continue
        t = ev.get("timeNano", 0) / 1e9 or ev.get("time", 0)
        sent = deletions_sent.get(sid)
        if sent is None or sent > t + 0.001:
            out.append("sandbox %s's container destroyed at %.3f without a kill sent before"
                       % (sid, t))
    return out


def format_table(rows_by_section):
    """[(section, [(name, value)])] as one aligned two-column table."""
    width = max([len(n) for _, rows in rows_by_section for n, _ in rows] + [10])
    lines = []
    rule = "+-" + "-" * width + "-+-" + "-" * 28 + "-+"
    lines.append(rule)
    for section, rows in rows_by_section:
        lines.append("| " + section.upper().ljust(width) + " | " + "".ljust(28) + " |")
        for n, v in rows:
            lines.append("| " + ("  " + n).ljust(width) + " | " + str(v).ljust(28) + " |")
        lines.append(rule)
    return "\n".join(lines)


# -- the agent's operation record (agent/requests/operation_record.h, docs/formats.md) ---------
JOURNAL_NAME = "sandbox-node operations"


def record_disagrees(op, op_id, final, rec):
    """For a mutation Core sent with final outcome FINAL ("ok", an error code, or "never_ran":
    observed unknown), whether the node's durable record REC (its last state, None when there
    is none) says otherwise: a message, or None when they agree.

    A completed record says its outcome; one left `queued` or `running` (its completion could
    not be written: a full state disk) says what the node's next start completes it as
    (docs/formats.md): `unavailable` or `uncertain`. No record agrees with any outcome but ok
    (a request refused before it was recorded)."""
    if rec is None:
        if final == "ok":
            return "%s %s answered ok, no durable record" % (op, op_id)
        return None
    state = rec.get("state")
    if state == "completed":
        code = (rec.get("response") or {}).get("error_code") or "ok"
    elif state in ("queued", "running"):
        code = "unavailable" if state == "queued" else "uncertain"
    else:
        return "%s %s final %s, record %s" % (op, op_id, final, rec)
    if final == "never_ran":
        return "%s %s observed unknown but recorded %s" % (op, op_id, code)
    if code != final:
        return "%s %s: Core's outcome %s, the record's %s" % (op, op_id, final, code)
    return None


def _segment_seq(name):
    if (len(name) == len("journal-") + 20 + len(".jsonl") and name.startswith("journal-")
            and name.endswith(".jsonl") and name[8:28].isdigit() and int(name[8:28]) > 0):
        return int(name[8:28])
    return None


def read_operation_record(ops_dir):
    """The last state of every id in the agent's operation record, read as the agent reads it:
    segments newest first, a sealed segment exactly to its sealed length, the newest to its
    first line that does not read (an append in progress or cut by a crash); files of the
    earlier one-file-per-record format too. Returns ({id: record dict}, [problems]).
    A record's "response" is the recorded response (decoded from its text)."""
    try:
        names = os.listdir(ops_dir)
    except OSError:
        return {}, []
    segs = sorted(((_segment_seq(n), n) for n in names if _segment_seq(n)), reverse=True)
    sealed = {}
    out = {}
    problems = []
    for seq, name in segs:
        try:
            with open(os.path.join(ops_dir, name), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue  # removed meanwhile (no record needed it)
        nl = data.find(b"\n")
        try:
            header = json.loads(data[:nl]) if nl >= 0 else None
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("journal") != JOURNAL_NAME \
                or header.get("segment") != seq:
            if seq in sealed:
                problems.append("%s: a sealed segment's header does not read" % name)
            continue  # a creation that did not finish: it holds nothing
        limit = len(data)
        if seq in sealed:
            if sealed[seq] > len(data):
                problems.append("%s: shorter than its sealed length" % name)
            limit = min(limit, sealed[seq])
        seals = header.get("seals")
        if isinstance(seals, dict):
            sealed.setdefault(seals.get("segment"), seals.get("bytes"))
        lines = []
        pos = nl + 1
        while pos < limit:
            end = data.find(b"\n", pos, limit)
            rec = None
            if end >= 0:
                try:
                    rec = json.loads(data[pos:end])
                except ValueError:
                    rec = None
            if not isinstance(rec, dict) or "id" not in rec:
                if seq in sealed:
                    problems.append("%s: a line at byte %d does not read" % (name, pos))
                break
            lines.append(rec)
            pos = end + 1
        for rec in reversed(lines):
            out.setdefault(rec["id"], rec)
    for n in names:
        if len(n) == 41 and n.endswith(".json"):
            try:
                with open(os.path.join(ops_dir, n)) as f:
                    rec = json.load(f)
            except (OSError, ValueError):
                continue
            if isinstance(rec, dict) and rec.get("id") == n[:-5]:
                out.setdefault(rec["id"], rec)
    for rec in out.values():
        if isinstance(rec.get("response"), str):  # the response frame's text, kept as sent
            try:
                rec["response"] = json.loads(rec["response"])
            except ValueError:
                pass
    return out, problems
