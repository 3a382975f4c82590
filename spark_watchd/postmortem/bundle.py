"""Post-mortem bundles: on a critical event, the ring and what it explains, in one directory.

A bundle `STATE_DIR/bundles/YYYYmmddTHHMMSSZ-KIND/` holds `trace.jsonl` (the ring, trace-v1: `replay`
reads it), `timeline.json` (the findings re-judged sample by sample on the ring, and the events),
`workloads.json` (the table at the end), `report.html` (self-contained) and `manifest.json`. Written into a
temporary directory and renamed, so a bundle is whole or absent. Bounded in count and total size, pruned
oldest first.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.sample.findings import Event
from spark_watchd.sample.groups import Grouper
from spark_watchd.sample.model import Sample

FILES = ("trace.jsonl", "timeline.json", "workloads.json", "report.html", "manifest.json")
# What ends or endangers a run: a bundle each (reboot only when it followed a throttle or a driver fault).
CRITICAL_KINDS = ("oom_kill", "eviction", "driver_oom", "pcie_fatal", "workload_exit", "reboot", "xid")


def is_critical(e: Event) -> bool:
    """Whether an event calls for a bundle."""
    if e.kind not in CRITICAL_KINDS or e.details.get("previous_boot"):
        return False
    if e.kind == "workload_exit":
        # A kill by oomd, earlyoom or the driver; the kernel's kills have their own oom_kill event.
        cause = str(e.details.get("cause", ""))
        return bool(e.gotcha) and not e.details.get("follows") and not cause.startswith("oom_kill")
    if e.kind == "reboot":
        return bool(e.after_throttle) or bool(
            e.details.get("driver_cause")
        )  # a throttle or a wedge before it
    if e.kind == "xid":
        return bool(e.details.get("fatal"))
    return True


@dataclass(frozen=True)
class BundleInfo:
    """One bundle on disk, from its manifest."""

    name: str
    path: Path
    ts: float
    kind: str
    summary: str
    samples: int
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ts": self.ts,
            "kind": self.kind,
            "summary": self.summary,
            "samples": self.samples,
            "bytes": self.bytes,
        }


def timeline_of(samples: Sequence[Sample], thresholds) -> list[dict[str, Any]]:
    """The findings re-judged on the ring, one row per sample (the same classifiers as live)."""
    d = Diagnoser(thresholds)
    out = []
    for s in samples:
        diag = d.observe(s)
        row: dict[str, Any] = {"ts": s.ts}
        for g, f in diag.findings.items():
            row[g] = {"severity": f.severity, "summary": f.summary, "evidence": dict(f.evidence)}
            if f.advice and f.severity in ("warning", "critical"):  # the report's "What to do"
                row[g]["advice"] = list(f.advice)
        out.append(row)
    return out


def write_bundle(
    root: str | os.PathLike,
    trigger: Event,
    samples: Sequence[Sample],
    events: Sequence[Event],
    workloads: Sequence[Any],
    thresholds,
) -> Path:
    """Write one bundle under root; returns its directory."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.fromtimestamp(trigger.ts, dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = f"{stamp}-{trigger.kind}"
    final = root / name
    n = 1
    while final.exists():
        n += 1
        final = root / f"{name}-{n}"
    tmp = root / f".{final.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    if samples and not workloads:
        workloads = Grouper(thresholds.capped_utilization_max).group(samples[-1].processes)
    rows = [w.to_dict() if hasattr(w, "to_dict") else dict(w) for w in workloads]
    t0 = samples[0].ts if samples else trigger.ts
    evs = [e.to_dict() for e in events if e.ts >= t0 - 1.0]
    if not any(e["ts"] == trigger.ts and e["kind"] == trigger.kind for e in evs):
        evs.append(trigger.to_dict())
    evs.sort(key=lambda e: e["ts"])
    timeline = timeline_of(samples, thresholds)
    with open(tmp / "trace.jsonl", "w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s.to_dict(), separators=(",", ":")) + "\n")
    (tmp / "timeline.json").write_text(json.dumps({"findings": timeline, "events": evs}, default=str))
    (tmp / "workloads.json").write_text(json.dumps(rows, default=str))
    from spark_watchd.postmortem.html import render_report  # only when a bundle is written, not at start

    (tmp / "report.html").write_text(render_report(samples, timeline, evs, rows, trigger.to_dict()))
    size = sum(p.stat().st_size for p in tmp.iterdir())
    manifest = {
        "version": 1,
        "trigger": trigger.to_dict(),
        "samples": len(samples),
        "first_ts": t0,
        "last_ts": samples[-1].ts if samples else trigger.ts,
        "bytes": size,
        "files": list(FILES),
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, default=str))
    for p in tmp.iterdir():
        with open(p, "rb") as fh:
            os.fsync(fh.fileno())
    os.replace(tmp, final)
    return final


def list_bundles(root: str | os.PathLike) -> list[BundleInfo]:
    """The bundles under root, oldest first (a directory without a readable manifest is skipped)."""
    out = []
    root = Path(root)
    if not root.is_dir():
        return out
    for p in root.iterdir():
        if not p.is_dir() or p.name.startswith("."):
            continue
        try:
            m = json.loads((p / "manifest.json").read_text())
            trig = m["trigger"]
            out.append(
                BundleInfo(p.name, p, float(trig["ts"]), str(trig["kind"]), str(trig.get("summary", "")),
                           int(m.get("samples", 0)), int(m.get("bytes", 0)))
            )  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            continue
    out.sort(key=lambda b: (b.ts, b.name))
    return out


def prune(root: str | os.PathLike, keep: int, max_bytes: int) -> list[str]:
    """Delete the oldest bundles past `keep` or past `max_bytes` in all; the names deleted."""
    bundles = list_bundles(root)
    gone = []
    total = sum(b.bytes for b in bundles)
    while bundles and (len(bundles) > keep or total > max_bytes):
        b = bundles.pop(0)
        shutil.rmtree(b.path, ignore_errors=True)
        total -= b.bytes
        gone.append(b.name)
    for p in Path(root).glob(".*.tmp"):  # a bundle cut short by a crash
        shutil.rmtree(p, ignore_errors=True)
    return gone
