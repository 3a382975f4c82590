"""Post-mortem: the persisted ring of recent samples and a bundle on every critical event.

`PostMortem` is a daemon subscriber: each published sample goes to the ring (`ring.py`); an OOM kill, an
eviction, a kill by systemd-oomd or earlyoom, a driver out of memory, a fatal Xid or PCIe error, a serving
engine stalled while memory is thin (the last sign before a wedge: its bundle is on disk before the freeze), or a reboot
after a throttle or a driver fault (a wedge seen at the next boot: the ring still holds the minutes before
the freeze) writes a bundle (`bundle.py`, with `html.py`'s report). Bundles are listed by `spark-watchd
report`, linked from the status page and replayable (`replay BUNDLE`).

A storage failure (a full disk, a link or FIFO planted under a ring segment's name) never stops the daemon:
it is counted per part (`ring`, `bundles`: `sparkwatchd_postmortem_storage_errors_total`), logged once when
it starts or changes and once when it clears.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from spark_watchd.logs import get_logger
from spark_watchd.postmortem.bundle import (
    BundleInfo,
    is_critical,
    list_bundles,
    private_dir,
    prune,
    write_bundle,
)
from spark_watchd.postmortem.fast import read_fast
from spark_watchd.postmortem.ring import SampleRing
from spark_watchd.sample.files import StateFileError
from spark_watchd.sample.findings import Event

STORAGE_PARTS = ("ring", "bundles")

__all__ = ["BundleInfo", "PostMortem", "is_critical", "list_bundles"]


FINAL_SPAN_S = 300.0  # 1 s readings this close before a trigger go into its bundle (the ring keeps 120 s)


class PostMortem:
    """Keeps the ring and writes bounded bundles; call with each published Snapshot."""

    def __init__(
        self,
        state_dir: str | os.PathLike,
        thresholds,
        *,
        span_s: float = 1800.0,
        keep: int = 20,
        max_bytes: int = 200 << 20,
        min_gap_s: float = 60.0,
    ):
        self.root = Path(state_dir) / "bundles"
        self.fast_dir = Path(state_dir) / "fast"  # where the 1 s FastRing writes (app.py)
        self.ring = SampleRing(Path(state_dir) / "ring", span_s)
        self.thresholds = thresholds
        self.keep, self.max_bytes, self.min_gap_s = keep, max_bytes, min_gap_s
        self._last_bundle_ts: float | None = None
        self.log = get_logger("postmortem")
        self.written: list[Path] = []
        self.storage_errors = dict.fromkeys(STORAGE_PARTS, 0)
        self.storage_error: dict[str, str | None] = dict.fromkeys(STORAGE_PARTS)
        try:  # bundles an older release left readable by all turn private at start, not at the next bundle
            private_dir(self.root)
        except OSError as exc:
            self._stored("bundles", exc)

    def _stored(self, part: str, exc: BaseException | None) -> None:
        """Count and say (once per change) how storing `part` went."""
        if exc is None:
            if self.storage_error[part] is not None:
                self.log.info("post-mortem storage recovered", part=part, path=str(self._where(part)))
                self.storage_error[part] = None
            return
        self.storage_errors[part] += 1
        text = str(exc)
        if text != self.storage_error[part]:
            self.log.warning(
                "post-mortem storage failing", part=part, path=str(self._where(part)), error=text
            )
        self.storage_error[part] = text

    def _where(self, part: str) -> Path:
        return self.ring.path if part == "ring" else self.root

    def storage_status(self) -> dict:
        """Storage failures per part (counts since start, and the current error or None)."""
        return {
            p: {"errors_total": self.storage_errors[p], "error": self.storage_error[p]} for p in STORAGE_PARTS
        }

    def __call__(self, snapshot) -> None:
        sample = snapshot.sample
        if sample is None:
            return
        try:
            self.ring.append(sample)
        except (OSError, StateFileError) as exc:  # a full disk or a planted link: the daemon goes on
            self._stored("ring", exc)
        else:
            self._stored("ring", None)
        diag = snapshot.diagnosis
        triggers = [e for e in (diag.events if diag is not None else ()) if is_critical(e)]
        if not triggers:
            return
        last = self._last_bundle_ts
        if last is not None and 0 <= sample.ts - last < self.min_gap_s:
            return  # a storm of kills: the next bundle holds these too
        trigger = triggers[0]
        events = list(getattr(snapshot, "recent_events", ()) or ())
        for e in diag.events:
            if e not in events:
                events.append(e)
        try:
            try:
                samples = self.ring.samples()
            except StateFileError as exc:  # the ring's segment was swapped for a link: bundle without it
                self._stored("ring", exc)
                samples = [sample]
            # The 1 s readings of the minutes before (postmortem/fast.py, armed while memory was thin): the
            # final seconds a 30 s ring misses before a freeze, read back after the reboot too.
            final = [f for f in read_fast(self.fast_dir) if trigger.ts - FINAL_SPAN_S <= f.ts <= trigger.ts]
            if shift := snapshot.wall_shift():
                trigger, samples, events = on_wall_clock(shift, trigger, samples, events)
            path = write_bundle(
                self.root, trigger, samples, events, snapshot.workloads, self.thresholds, final_seconds=final
            )
            gone = prune(self.root, self.keep, self.max_bytes, self.log)
        except (OSError, StateFileError) as exc:  # a full disk, or a link swapped in for bundles/
            self._stored("bundles", exc)
            return
        self._stored("bundles", None)
        self._last_bundle_ts = sample.ts
        self.written.append(path)
        self.log.warning(
            "post-mortem bundle written", bundle=str(path), trigger=trigger.kind, pruned=len(gone)
        )

    def latest(self) -> BundleInfo | None:
        """The newest bundle, if any."""
        bundles = list_bundles(self.root, self.log)
        return bundles[-1] if bundles else None

    def close(self) -> None:
        self.ring.close()


def on_wall_clock(shift: float, trigger: Event, samples: list, events: list) -> tuple[Event, list, list]:
    """A replay's (the demo's) bundle dated on the clock the page, /metrics and `status` show.

    A replay at 60x runs trace time an hour ahead every minute; the one replay clock (Snapshot.wall_shift)
    shows the newest sample as now. A bundle written with trace times would be named hours ahead of the
    page after a few demo passes: its trigger, samples and events move by the same shift instead.
    """
    return (
        dataclasses.replace(trigger, ts=trigger.ts + shift),
        [dataclasses.replace(s, ts=s.ts + shift) for s in samples],
        [dataclasses.replace(e, ts=e.ts + shift) for e in events],
    )
