"""The throughput area assembled for the daemon: tracker (a source), ledger (a subscriber), log tails.

`attach(daemon)` (called by `web.progress.routes(daemon)`, which the web
server calls at start-up) sets `daemon.tracker` (the daemon collects it each
tick and closes it on stop), registers the `jobs` extras provider and the
ledger subscriber, and starts the log tails.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_watchd.snapshot import Snapshot
from spark_watchd.throughput.ledger import LEDGER_FILE, RunLedger
from spark_watchd.throughput.logtail import LogTailer
from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.throughput.tracker import JobTracker


class Throughput:
    """Owns the tracker, the ledger and the log tails, and closes them in the right order."""

    def __init__(
        self,
        settings: ProgressSettings,
        state_dir: str | os.PathLike,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.tracker = JobTracker(settings, clock)
        self.ledger: RunLedger | None = None
        if settings.ledger:
            self.ledger = RunLedger(Path(state_dir) / LEDGER_FILE, settings.ledger_recent_samples)
            self.tracker.add_run_listener(self.ledger.on_run_end)
        self.tailer = LogTailer(settings, self.tracker.report)
        # daemon.close() closes the tracker: tails stop first, the ledger flushes last.
        self.tracker.add_close_hook(self.tailer.close, before=True)
        if self.ledger is not None:
            self.tracker.add_close_hook(self.ledger.close)

    def start(self) -> None:
        """Start following the configured logs."""
        self.tailer.start()

    def extras(self) -> dict[str, Any]:
        """Per-tick snapshot extras: {"jobs": (JobStats, ...)}."""
        return {"jobs": self.tracker.stats()}

    def observe(self, snapshot: Snapshot) -> None:
        """Snapshot subscriber (feeds the ledger)."""
        if self.ledger is not None:
            self.ledger.observe(snapshot)

    def close(self) -> None:
        """Stop tails, end open runs ("shutdown"), write them to the ledger."""
        self.tracker.close()


def attach(daemon: Any) -> Throughput | None:
    """Wire the throughput area into a daemon once (no-op when progress is disabled or already wired)."""
    if getattr(daemon, "tracker", None) is not None:
        return None
    settings = daemon.settings.progress
    if not settings.enabled:
        return None
    # The daemon's state_dir is None in replay mode: nothing from a replay may land next to the live state.
    state_dir = getattr(daemon, "state_dir", daemon.settings.daemon.state_dir)
    if state_dir is None:
        settings = settings.model_copy(update={"ledger": False})
    tp = Throughput(settings, state_dir or ".", getattr(daemon, "clock", time.time))
    daemon.tracker = tp.tracker
    providers = getattr(daemon, "extras_providers", None)
    if providers is not None:
        providers["jobs"] = tp.tracker.stats
    daemon.subscribe(tp.observe)
    tp.start()
    return tp
