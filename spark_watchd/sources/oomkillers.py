"""The user-space OOM killers' own reports: systemd-oomd and earlyoom, from their units' journal entries.

One follower (`journalctl -f -o json _SYSTEMD_UNIT=systemd-oomd.service + _SYSTEMD_UNIT=earlyoom.service`,
the kernel-log follower's loop with this reader) whose entries count only by journald's trusted fields
(`sample/kills.killer_of`: the unit, the process name and the transport journald recorded, never the text):
a `logger "Killed ... due to memory pressure"` from any user is not a kill. collect() appends what arrived
since the previous collect to the sample's `oom_kills` (after the kernel's, from the driver-events source).
Absent journalctl, or no such unit, is a state, not an error.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.sample.kills import TRUSTED_KILLER_UNITS, parse_killer_entry
from spark_watchd.sources.driverlog import JournalRead, journal_objects
from spark_watchd.sources.kernel_follow import KernelFollower

FOLLOW_ARGV = ("-f", "-n", "0", "-o", "json", "--no-pager", "-q")
QUEUE_MAX = 200  # kills between two ticks: more is a storm, the latest kept and the rest counted


def killer_argv(journalctl: str) -> list[str]:
    """journalctl following every user-space killer's unit (alternatives joined by `+`)."""
    matches: list[str] = []
    for unit, _comm in TRUSTED_KILLER_UNITS.values():
        matches += (["+"] if matches else []) + [f"_SYSTEMD_UNIT={unit}"]
    return [journalctl, *FOLLOW_ARGV, *matches]


def read_killer_entries(lines: Iterable[str], ctx: dict | None = None) -> JournalRead:
    """Kill reports in `journalctl -o json` lines of the killers' units; bad lines counted, others skipped."""
    out = JournalRead({"oom_kills": []})
    for obj in journal_objects(lines, out):
        report = parse_killer_entry(obj)
        if report is not None:
            out.records["oom_kills"].append(report)
    return out


class OomKillersSource:
    """`oom_kills` from systemd-oomd and earlyoom; always up, the follower's state in `states`."""

    name = "oom_killers"

    def __init__(
        self,
        journalctl: str | None = "journalctl",
        *,
        argv: Sequence[str] | None = None,
        retry_s: float = 60.0,
    ):
        self.argv = list(argv) if argv else (killer_argv(journalctl) if journalctl else None)
        self.retry_s = retry_s
        self.log = get_logger("oom_killers")
        self.states: dict[str, str] = {}
        self.rejected = 0
        self.dropped = 0
        self._queue: deque = deque(maxlen=QUEUE_MAX)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._follower: KernelFollower | None = None

    def _state(self, _feed: str, text: str, problem: bool = False, state: str | None = None) -> None:
        """Log the follower's state once per change (never every tick)."""
        if self.states.get("oom-killers") == text:
            return
        self.states["oom-killers"] = text
        (self.log.warning if problem else self.log.info)(f"oom-killers: {text}", feed="oom-killers")

    def _take(self, got: JournalRead) -> None:
        self.rejected += got.rejected
        with self._lock:
            for r in got.records["oom_kills"]:
                if len(self._queue) == self._queue.maxlen:
                    self.dropped += 1
                self._queue.append(r)

    def _reject(self, n: int) -> None:
        self.rejected += n

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        if self._thread is None:
            if self.argv is None:
                self._state("", "off (no journalctl configured)")
            else:
                self._follower = KernelFollower(
                    self.argv,
                    self.retry_s,
                    self.log,
                    self._state,
                    self._take,
                    self._reject,
                    read_killer_entries,
                )
                self._thread = threading.Thread(
                    target=self._follower.run,
                    args=(self._stop,),
                    name="spark-watchd-oom-killers",
                    daemon=True,
                )
                self._thread.start()
        with self._lock:
            mine = list(self._queue)
            self._queue.clear()
        if not mine:
            return {}
        return {"oom_kills": [*(partial.get("oom_kills") or ()), *mine]}

    def close(self) -> None:
        """Stop the follower and its journalctl."""
        self._stop.set()
        if self._follower is not None:
            self._follower.terminate()
        if self._thread is not None:
            self._thread.join(timeout=3.0)
        if self._follower is not None:
            with contextlib.suppress(Exception):
                self._follower.kill()
