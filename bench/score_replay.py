#!/usr/bin/env python3
"""Score a replay command against labelled scenario traces.

usage: score_replay.py TRACE_DIR -- CMD... ({trace} is replaced by the trace path)
  e.g. bench/score_replay.py tests/fixtures/traces/public -- spark-watchd replay {trace} --format jsonl

For each TRACE.jsonl with TRACE.truth.jsonl beside it, runs the command, reads
one JSON object per sample ({"ts", "findings": {G: {"severity"}}, "events"}),
and compares:
  - agreement: share of samples whose severity is in the allowed set, per gotcha
  - episodes: maximal runs where truth requires >= warning; detected when any
    sample in the run is >= warning; latency = samples from run start
  - false criticals: critical where truth does not allow critical
  - false warnings: >= warning where truth is strictly "ok"
  - events: expected eviction/reboot events matched within tolerance;
    unexpected eviction/reboot events counted
Prints one line per trace and a summary; last line:
  "score: agreement=A% episodes=D/N false_critical=C false_warning_samples=W events=E/M extra_events=X"
Exit 0 when the bar holds (all episodes, no false critical, agreement >= 97%,
all events, no extra events), 1 otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RANK = {"ok": 0, "unknown": 0, "warning": 1, "critical": 2}
GOTCHAS = ("G3", "G4", "G6")


def allowed(spec):
    return {"ok", "warning", "critical", "unknown"} if spec == "any" else set(spec.split("|"))


def run(cmd, trace):
    argv = [a.replace("{trace}", str(trace)) for a in cmd]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {p.stderr.strip()[-400:]}")
    out = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def score_trace(trace: Path, cmd):
    samples = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    truth_path = trace.parent / (trace.name[: -len(".jsonl")] + ".truth.jsonl")
    truth = [json.loads(line) for line in truth_path.read_text().splitlines() if line.strip()]
    ev_path = trace.parent / (trace.name[: -len(".jsonl")] + ".events.json")
    expected_events = json.loads(ev_path.read_text()) if ev_path.exists() else []
    out = run(cmd, trace)
    r = {
        "name": trace.name[: -len(".jsonl")],
        "n": len(samples),
        "agree": 0,
        "total": 0,
        "episodes": 0,
        "detected": 0,
        "latency": [],
        "false_critical": 0,
        "false_warning": 0,
        "events": len(expected_events),
        "events_hit": 0,
        "extra_events": 0,
        "error": None,
    }
    if len(out) != len(samples):
        r["error"] = f"{len(out)} output lines for {len(samples)} samples"
        return r
    sev = {g: [] for g in GOTCHAS}
    for s, o in zip(samples, out, strict=False):
        if abs(float(o.get("ts", -1)) - float(s["ts"])) > 1e-3:
            r["error"] = f"ts mismatch {o.get('ts')} vs {s['ts']}"
            return r
        for g in GOTCHAS:
            f = (o.get("findings") or {}).get(g) or {}
            sev[g].append(f.get("severity", "missing"))
    for g in GOTCHAS:
        ep_start = None
        for i, (t, v) in enumerate(zip(truth, sev[g], strict=False)):
            a = allowed(t[g])
            r["total"] += 1
            r["agree"] += v in a
            if v == "critical" and "critical" not in a:
                r["false_critical"] += 1
            if RANK.get(v, 0) >= 1 and a == {"ok"}:
                r["false_warning"] += 1
            must = "ok" not in a and t[g] != "any"
            if must and ep_start is None:
                ep_start, hit = i, None
            if ep_start is not None and must and hit is None and RANK.get(v, 0) >= 1:
                hit = i
            if ep_start is not None and (not must or i == len(truth) - 1):
                r["episodes"] += 1
                if hit is not None:
                    r["detected"] += 1
                    r["latency"].append(hit - ep_start)
                ep_start = None
    got = [(float(o["ts"]), e) for o in out for e in (o.get("events") or [])]
    used = set()
    for e in expected_events:
        for k, (ts, ge) in enumerate(got):
            if k in used or ge.get("kind") != e["kind"]:
                continue
            if abs(ts - e["ts"]) <= e["tol_s"] + 1e-6:
                if e["kind"] == "reboot" and bool(ge.get("after_throttle")) != e["after_throttle"]:
                    continue
                used.add(k)
                r["events_hit"] += 1
                break
    kinds = {e["kind"] for e in expected_events}
    for k, (ts, ge) in enumerate(got):
        if (
            k not in used
            and ge.get("kind") in ("eviction", "reboot")
            and not (ge.get("kind") in kinds and any(abs(ts - e["ts"]) <= 600 for e in expected_events))
        ):
            r["extra_events"] += 1
    return r


def main(argv):
    sep = argv.index("--")
    tdir, cmd = Path(argv[1]), argv[sep + 1 :]
    traces = sorted(p for p in tdir.glob("*.jsonl") if not p.name.endswith(".truth.jsonl"))
    tot = {
        "agree": 0,
        "total": 0,
        "episodes": 0,
        "detected": 0,
        "false_critical": 0,
        "false_warning": 0,
        "events": 0,
        "events_hit": 0,
        "extra_events": 0,
    }
    lat, errors = [], 0
    for t in traces:
        try:
            r = score_trace(t, cmd)
        except Exception as exc:  # the command failed on this trace
            print(f"{t.name}: ERROR {exc}")
            errors += 1
            continue
        if r["error"]:
            print(f"{r['name']}: ERROR {r['error']}")
            errors += 1
            continue
        for k in tot:
            tot[k] += r[k]
        lat += r["latency"]
        print(
            f"{r['name']}: agree {r['agree']}/{r['total']} episodes {r['detected']}/{r['episodes']} "
            f"latency {r['latency']} false_crit {r['false_critical']} false_warn {r['false_warning']} "
            f"events {r['events_hit']}/{r['events']} extra {r['extra_events']}"
        )
    agree = 100.0 * tot["agree"] / max(1, tot["total"])
    lat.sort()
    med = lat[len(lat) // 2] if lat else None
    ok = (
        errors == 0
        and tot["detected"] == tot["episodes"]
        and tot["false_critical"] == 0
        and agree >= 97.0
        and tot["events_hit"] == tot["events"]
        and tot["extra_events"] == 0
    )
    print(
        f"score: agreement={agree:.1f}% episodes={tot['detected']}/{tot['episodes']} median_latency={med} "
        f"false_critical={tot['false_critical']} false_warning_samples={tot['false_warning']} "
        f"events={tot['events_hit']}/{tot['events']} extra_events={tot['extra_events']} errors={errors}"
    )
    if errors:
        # Every failed replay scores nothing: say so, so "agreement=0.0%" is not read as the classifier's.
        print(f"score: {errors} of {len(traces)} replays failed (see the ERROR lines above)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
