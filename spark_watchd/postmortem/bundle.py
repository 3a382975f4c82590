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
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.logs import get_logger
from spark_watchd.postmortem.ring import state_subdir
from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.files import StateFileError, open_regular
from spark_watchd.sample.findings import Event
from spark_watchd.sample.groups import Grouper
from spark_watchd.sample.model import Sample
from spark_watchd.sample.redact import redact_argv, redact_command_line, redact_sample_dict

FILES = ("trace.jsonl", "timeline.json", "workloads.json", "report.html", "manifest.json")
FAST = "fast.jsonl"  # the 1 s readings before the trigger, when there are any
# What ends or endangers a run: a bundle each (reboot only when it followed a throttle or a driver fault, an
# engine stall only while memory is thin).
CRITICAL_KINDS = (
    "oom_kill",
    "eviction",
    "driver_oom",
    "pcie_fatal",
    "workload_exit",
    "reboot",
    "xid",
    "engine_stall",
)


def is_critical(e: Event) -> bool:
    """Whether an event calls for a bundle."""
    if e.kind not in CRITICAL_KINDS or e.details.get("previous_boot"):
        return False
    if e.kind == "workload_exit":
        # A kill by oomd, earlyoom or the driver; the kernel's kills have their own oom_kill event.
        cause = str(e.details.get("cause", ""))
        return bool(e.gotcha) and not e.details.get("follows") and not cause.startswith("oom_kill")
    if e.kind == "reboot":
        # a throttle, a driver fault or a wedge after kills, a stall or a thin pool before it
        return bool(e.after_throttle or e.details.get("driver_cause") or e.details.get("before_gap"))
    if e.kind == "xid":
        return bool(e.details.get("fatal"))
    if e.kind == "engine_stall":  # with memory thin, the last sign before a wedge: the ring goes out at once
        return bool(e.details.get("thin"))
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


def _write_private(path: Path, text: str) -> None:
    """Create `path` 0600 whatever the umask (never through a link), write text, fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def private_dir(path: Path) -> None:
    """A directory only the daemon's user reads (0700 whatever the umask; one made by an older release too);
    StateFileError for a link or anything but a directory there."""
    state_subdir(path, 0o700)
    if stat.S_IMODE(os.lstat(path).st_mode) != 0o700:
        os.chmod(path, 0o700)


def _redacted_rows(workloads: Sequence[Any]) -> list[dict[str, Any]]:
    rows = [dict(w.to_dict()) if hasattr(w, "to_dict") else dict(w) for w in workloads]
    for row in rows:
        argv = row.get("cmdline")
        if isinstance(argv, str):
            row["cmdline"] = redact_command_line(argv)
        elif isinstance(argv, (list, tuple)):
            row["cmdline"] = list(redact_argv(str(a) for a in argv))
    return rows


def write_bundle(
    root: str | os.PathLike,
    trigger: Event,
    samples: Sequence[Sample],
    events: Sequence[Event],
    workloads: Sequence[Any],
    thresholds,
    final_seconds: Sequence[Sample] = (),
) -> Path:
    """Write one bundle under root, private to the daemon's user, argv secrets redacted; returns its directory.

    `final_seconds`: the 1 s memory readings of the minutes before (postmortem/fast.py), kept as fast.jsonl
    (replayable) and drawn by the report, when memory was thin enough to arm them."""
    root = Path(root)
    private_dir(root)
    stamp = dt.datetime.fromtimestamp(trigger.ts, dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = f"{stamp}-{trigger.kind}"
    final = root / name
    n = 1
    while final.exists():
        n += 1
        final = root / f"{name}-{n}"
    tmp = root / f".{final.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    try:
        _fill(tmp, trigger, samples, events, workloads, thresholds, final_seconds)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a full disk: nothing half-written left behind
        raise
    os.replace(tmp, final)
    return final


def _fill(tmp: Path, trigger: Event, samples, events, workloads, thresholds, final_seconds=()) -> None:
    """The bundle's files, written into its temporary directory."""
    if samples and not workloads:
        workloads = Grouper(thresholds.capped_utilization_max).group(samples[-1].processes)
    rows = _redacted_rows(workloads)
    t0 = samples[0].ts if samples else trigger.ts
    evs = [e.to_dict() for e in events if e.ts >= t0 - 1.0]
    if not any(e["ts"] == trigger.ts and e["kind"] == trigger.kind for e in evs):
        evs.append(trigger.to_dict())
    evs.sort(key=lambda e: e["ts"])
    timeline = timeline_of(samples, thresholds)
    dicts = [redact_sample_dict(s.to_dict()) for s in samples]
    _write_private(tmp / "trace.jsonl", "".join(dumps_strict(d, separators=(",", ":")) + "\n" for d in dicts))
    _write_private(tmp / "timeline.json", dumps_strict({"findings": timeline, "events": evs}, default=str))
    _write_private(tmp / "workloads.json", dumps_strict(rows, default=str))
    from spark_watchd.postmortem.html import render_report  # only when a bundle is written, not at start

    # The report shows argv only in the workload table (rows, redacted above).
    if final_seconds:
        lines = (dumps_strict(s.to_dict(), separators=(",", ":")) + "\n" for s in final_seconds)
        _write_private(tmp / FAST, "".join(lines))
    report = render_report(samples, timeline, evs, rows, trigger.to_dict(), final_seconds)
    _write_private(tmp / "report.html", report)
    size = sum(p.stat().st_size for p in tmp.iterdir())
    manifest = {
        "version": 1,
        "trigger": trigger.to_dict(),
        "samples": len(samples),
        "first_ts": t0,
        "last_ts": samples[-1].ts if samples else trigger.ts,
        "bytes": size,
        "files": list(FILES) + ([FAST] if final_seconds else []),
    }
    _write_private(tmp / "manifest.json", dumps_strict(manifest, default=str))


MAX_MANIFEST = 256 << 10  # a manifest is under 2 KiB; past this it was not written by write_bundle
_MAX_TS = 253402300799.0  # 9999-12-31: any later time has no date to list it under
_said: dict[str, str] = {}  # bundle path -> why it was skipped, so each bad bundle is logged once per change


class BadBundle(ValueError):
    """A bundle whose manifest cannot be listed (unreadable, not JSON, wrong types, out of range)."""


def _count(m: dict, key: str) -> int:
    v = m.get(key, 0)
    if type(v) is not int or not 0 <= v < 1 << 62:
        raise BadBundle(f"manifest '{key}' must be a non-negative integer, got {str(v)[:40]}")
    return v


def read_info(path: Path) -> BundleInfo:
    """The BundleInfo of one bundle directory; BadBundle naming what is wrong with its manifest."""
    try:
        fd = open_regular(path / "manifest.json")  # never through a link, never blocked on a FIFO
        if fd is None:
            raise BadBundle("no manifest.json")
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_MANIFEST + 1)
    except (OSError, StateFileError) as exc:
        raise BadBundle(f"manifest.json not readable: {exc}") from None
    if len(raw) > MAX_MANIFEST:
        raise BadBundle(f"manifest.json over {MAX_MANIFEST} bytes")
    try:
        m = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BadBundle(f"manifest.json is not JSON ({str(exc)[:80]})") from None
    if not isinstance(m, dict) or not isinstance(trig := m.get("trigger"), dict):
        raise BadBundle("manifest 'trigger' must be an object")
    ts, kind, summary = trig.get("ts"), trig.get("kind"), trig.get("summary", "")
    if type(ts) not in (int, float) or not 0 <= ts <= _MAX_TS:
        raise BadBundle(f"trigger 'ts' must be a Unix time, got {str(ts)[:40]}")
    if not isinstance(kind, str) or not 0 < len(kind) <= 64:
        raise BadBundle("trigger 'kind' must be a short string")
    if not isinstance(summary, str):
        raise BadBundle("trigger 'summary' must be a string")
    return BundleInfo(
        path.name, path, float(ts), kind, summary[:1000], _count(m, "samples"), _count(m, "bytes")
    )


def _skipped(path: Path, why: str, log) -> None:
    if _said.get(str(path)) != why:
        if len(_said) > 1024:
            _said.clear()
        _said[str(path)] = why
        (log or get_logger("postmortem")).warning("post-mortem bundle skipped", bundle=str(path), reason=why)


def _bundle_dirs(root: Path) -> list[Path]:
    """Bundle directories under root (no link, no dot-name temporary one)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    return [Path(e.path) for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]


def list_bundles(root: str | os.PathLike, log=None) -> list[BundleInfo]:
    """The bundles under root, oldest first; one whose manifest cannot be read is skipped, with a log line
    (once per bundle and reason)."""
    out = []
    for p in _bundle_dirs(Path(root)):
        try:
            out.append(read_info(p))
        except BadBundle as exc:
            _skipped(p, str(exc), log)
    out.sort(key=lambda b: (b.ts, b.name))
    return out


def _du(path: Path) -> int:
    """Bytes of the files in a bundle as they are on disk (a manifest's own figure is not trusted)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def prune(root: str | os.PathLike, keep: int, max_bytes: int, log=None) -> list[str]:
    """Delete the oldest bundles past `keep` or past `max_bytes` in all; the names deleted. A bundle that
    cannot be listed still counts (by its directory's time and its size on disk), so the cap holds."""
    entries = []
    for p in _bundle_dirs(Path(root)):
        try:
            when = read_info(p).ts
        except BadBundle as exc:
            _skipped(p, str(exc), log)
            try:
                when = os.lstat(p).st_mtime
            except OSError:
                continue
        entries.append((when, p.name, p, _du(p)))
    entries.sort(key=lambda e: (e[0], e[1]))
    gone = []
    total = sum(e[3] for e in entries)
    while entries and (len(entries) > keep or total > max_bytes):
        _when, name, path, size = entries.pop(0)
        shutil.rmtree(path, ignore_errors=True)
        total -= size
        gone.append(name)
    for p in Path(root).glob(".*.tmp"):  # a bundle cut short by a crash
        shutil.rmtree(p, ignore_errors=True)
    return gone
