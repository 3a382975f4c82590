"""The daemon's diagnosis runtime: engine + event counters + state file + event journal + capture on trouble.

state_dir layout: `state.json` (atomic), `events.jsonl` (append-only, fsync per event), `captures/*.jsonl`.
With state_dir None everything stays in memory (replay, tests).
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.incidents import CaptureRing
from spark_watchd.diagnose.journal import EventJournal, read_events, read_state, write_state_atomic
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.diagnose.xid import XID_LABELS, xid_label
from spark_watchd.logs import get_logger
from spark_watchd.sample.findings import Diagnosis, Event
from spark_watchd.sample.model import COUNTED_EVENT_KINDS, Sample

STATE_VERSION = 1
# The state is rewritten on every change that matters for a reboot verdict, and otherwise at most
# this often (sample time), so a week replayed at speed does not fsync 20,000 times.
STATE_REFRESH_S = 300.0


class DiagnosisRuntime:
    """Judges samples for the daemon and keeps what must outlive it."""

    def __init__(
        self,
        thresholds: Thresholds | None = None,
        state_dir: str | os.PathLike | None = None,
        *,
        capture_pre: int = 30,
        capture_post: int = 30,
        capture_keep: int = 20,
        recent: int = 200,
    ):
        self.thresholds = thresholds or Thresholds()
        self.engine = Diagnoser(self.thresholds)
        self.counts = dict.fromkeys(COUNTED_EVENT_KINDS, 0)
        # sparkwatchd_gpu_xid_errors_total{gpu,xid}: "GPU:XID" -> count (bounded labels, see diagnose.xid)
        self.xid_counts: dict[str, int] = {}
        # sparkwatchd_workload_exits_total{kind,cause}: "KIND:CAUSE" -> count (diagnose/exits.py)
        self.exit_counts: dict[str, int] = {}
        self._xid_gpus: set[int] = set()
        self._recent: deque[Event] = deque(maxlen=recent)
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self._capture_args = (capture_pre, capture_post, capture_keep)
        self._journal: EventJournal | None = None
        self._capture: CaptureRing | None = None
        self._saved_key = None
        self._saved_ts = None
        self.journal_skipped = 0
        self.storage_error: str | None = None  # last state/journal/capture failure while it lasts
        self.storage_errors_total = 0
        self._log = get_logger("diagnosis")
        if self.state_dir is not None:
            try:
                self._open_storage(recent)
            except OSError as exc:
                # An unwritable state directory must not stop the diagnosis: judge in memory.
                self._storage_failed("open", exc)
                self.state_dir = None

    def _open_storage(self, recent: int) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        st = read_state(self.state_dir / "state.json")
        if st and st.get("version") == STATE_VERSION:
            self.engine.restore(st.get("engine") or {})
            if isinstance(plat := st.get("platform"), dict):  # the last boot's stack (diagnose/platform.py)
                self.engine.platform.restore(plat)
            for k, v in (st.get("event_counts") or {}).items():
                if k in self.counts and isinstance(v, int):
                    self.counts[k] = v
            for k, v in (st.get("exit_counts") or {}).items():
                if isinstance(k, str) and k.count(":") == 1 and isinstance(v, int):
                    self.exit_counts[k] = v
            for k, v in (st.get("xid_counts") or {}).items():
                if isinstance(k, str) and k.count(":") == 1 and isinstance(v, int):
                    self.xid_counts[k] = v
        events, self.journal_skipped = read_events(self.state_dir / "events.jsonl")
        self._recent.extend(events[-recent:])
        self._journal = EventJournal(self.state_dir / "events.jsonl")
        self._capture = CaptureRing(self.state_dir / "captures", *self._capture_args)

    def _storage_failed(self, what: str, exc: OSError) -> None:
        """Count a storage failure; log only when the error changes (not every tick)."""
        self.storage_errors_total += 1
        text = f"{what}: {exc}"
        if text != self.storage_error:
            self._log.warning("diagnosis state storage failing", error=text, state_dir=str(self.state_dir))
        self.storage_error = text

    def _storage_ok(self) -> None:
        if self.storage_error is not None:
            self._log.info("diagnosis state storage recovered", state_dir=str(self.state_dir))
            self.storage_error = None

    def observe(self, sample: Sample) -> Diagnosis:
        """Judge one sample; count, journal and persist what it brought."""
        d = self.engine.observe(sample)
        for g in sample.gpus:
            if g.index not in self._xid_gpus:
                # Every code at 0 for each GPU ever seen (kept through NVML outages and restarts), so
                # increase() sees the first Xid and the series set stays flat.
                self._xid_gpus.add(g.index)
                for label in XID_LABELS:
                    self.xid_counts.setdefault(f"{g.index}:{label}", 0)
        if sample.driver_events:
            d = self._driver_events(d)
        for e in d.events:
            if e.kind == "workload_exit" and not e.details.get("follows"):
                key = f"{e.details.get('workload_kind', 'other')}:{e.details.get('cause', 'exit')}"
                self.exit_counts[key] = self.exit_counts.get(key, 0) + 1
            if e.kind in self.counts and not e.details.get("previous_boot"):
                self.counts[e.kind] += 1
            if e.kind == "reboot" and e.after_throttle:
                self.counts["reboot_after_throttle"] += 1
            self._recent.append(e)
        if self.state_dir is None:
            return d
        try:
            for e in d.events:
                self._journal.append(e)
            self._capture.push(sample, d)
            self._persist(sample.ts)
        except OSError as exc:  # disk full, read-only remount: keep judging, say so once
            self._storage_failed("write", exc)
        else:
            self._storage_ok()
        return d

    def _driver_events(self, d: Diagnosis) -> Diagnosis:
        """Drop previous-boot events already journaled (a restart re-reads that boot); count live Xids."""
        keep = []
        for e in d.events:
            if e.details.get("previous_boot"):
                if any(r.kind == e.kind and r.ts == e.ts and r.summary == e.summary for r in self._recent):
                    continue
            elif e.kind == "xid":
                gpu = e.details.get("gpu")
                key = f"{gpu if gpu is not None else 'unknown'}:{xid_label(e.details.get('xid'))}"
                self.xid_counts[key] = self.xid_counts.get(key, 0) + int(e.details.get("count") or 1)
            keep.append(e)
        if len(keep) == len(d.events):
            return d
        return Diagnosis(d.ts, d.findings, tuple(keep))

    def _persist(self, ts: float) -> None:
        st = self.engine.state()
        key = (
            st["boot_id"],
            st["throttle_active"],
            st["last_thermal_ts"],
            st["reboot_hold_until"],
            tuple(self.counts.values()),
            tuple(self.xid_counts.values()),
            tuple(self.exit_counts.values()),
            self.engine.platform.current,  # a new boot's platform, and its change, saved at once
            self.engine.platform.change,
            len(st.get("holds") or ()),  # a hold measured or gone (diagnose/hold.py), saved at once
        )
        if key == self._saved_key and self._saved_ts is not None and ts - self._saved_ts < STATE_REFRESH_S:
            return
        write_state_atomic(
            self.state_dir / "state.json",
            {
                "version": STATE_VERSION,
                "engine": st,
                "event_counts": dict(self.counts),
                "xid_counts": dict(self.xid_counts),
                "exit_counts": dict(self.exit_counts),
                "platform": self.engine.platform.state(),
            },
        )
        self._saved_key = key
        self._saved_ts = ts

    def update_thresholds(self, thresholds: Thresholds) -> None:
        """Apply reloaded thresholds (SIGHUP) without losing windows, baselines or episodes."""
        self.thresholds = thresholds
        self.engine.set_thresholds(thresholds)

    def event_counts(self) -> dict[str, int]:
        """Cumulative counts per kind for sparkwatchd_events_total (carried across restarts)."""
        return dict(self.counts)

    def workload_exit_counts(self) -> dict[str, int]:
        """Cumulative workload exits per "KIND:CAUSE" for sparkwatchd_workload_exits_total (across restarts)."""
        return dict(self.exit_counts)

    def xid_error_counts(self) -> dict[str, int]:
        """Cumulative Xid counts per "GPU:XID" for sparkwatchd_gpu_xid_errors_total (carried across restarts)."""
        return dict(self.xid_counts)

    def link_status(self) -> dict | None:
        """The ConnectX-7 ports' verdict on the last sample (the `link` extra); None without link readings."""
        st = self.engine.link.status
        return st.to_dict() if st is not None else None

    def platform_status(self) -> dict | None:
        """The boot's platform, its change since the boot before, the known-bad entries (the `platform` extra)."""
        return self.engine.platform.status()

    def clock_cap_status(self) -> dict | None:
        """The SM clock cap on the last sample (the `clock_cap` extra): seen, expected, lost, its cost."""
        st = self.engine.cap.status
        return st.to_dict() if st is not None and (st.cap_mhz or st.expected_mhz) else None

    def throttle_seconds(self) -> float:
        """Seconds spent in thermal throttle per the classifier (carried across restarts)."""
        return self.engine.throttle_seconds

    def recent_events(self, n: int = 20) -> tuple[Event, ...]:
        """The last n events, oldest first (including those journaled before a restart)."""
        if n <= 0:
            return ()
        items = list(self._recent)
        return tuple(items[-n:])

    def close(self) -> None:
        """Flush the state and close the journal and any capture in progress."""
        last_ts = self.engine.state()["last_ts"]
        if self.state_dir is not None and last_ts is not None:
            self._saved_key = None
            try:
                self._persist(last_ts)
            except OSError as exc:
                self._storage_failed("close", exc)
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if self._capture is not None:
            self._capture.close()
