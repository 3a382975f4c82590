"""The throughput area assembled for the daemon: tracker (a source), ledger (a subscriber), log tails.

spark_watchd.app.build hands the tracker to the daemon as a contributor (collected
each tick, closed on stop), its stats() as the `jobs` extra and observe() as a
snapshot subscriber, then starts the log tails.
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
