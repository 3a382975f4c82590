"""The servers' progress every second while memory is thin (the armed fast ring's reads, issue 31 item 4).

NVIDIA/open-gpu-kernel-modules#1358: vLLM's prompt throughput fell to 0.0 with the request still running
and userspace froze seconds later; a scrape every tick sees that a tick late, or never. While the fast ring
is armed (postmortem/fast.py) it asks for each scraped server's progress every second. Each read is the
scraper's own (`Scraper.read`: the port's owner checked, the auth header only where trusted, bounded in
time, size and series) on a short-lived thread of its own: a server whose previous read has not ended is
not read again (it keeps its last reading), and the caller waits at most `wait_s` for this second's reads,
so a slow or hung server never holds the 1 s memory line. Each server's previous read gives the 1 s rates;
the scraper's own interval figures are untouched. Nothing runs while the ring is disarmed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from spark_watchd.sample.model import ServingProgress
from spark_watchd.sample.serving import ServingReading

MAX_FRESH = 4096  # reads kept for the next sample: 16 servers for 4 minutes of missed ticks


class ProgressReads:
    """Per server: one read at a time, its latest reading, and the reads done since the last `take`."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.latest: dict[str, ServingProgress] = {}
        self._prev: dict[str, tuple[dict, float]] = {}
        self._busy: dict[str, threading.Event] = {}  # the read of each server still running, if any
        self._fresh: list[ServingProgress] = []
        self._lock = threading.Lock()
        self.skipped = 0  # reads not started because the server's previous one had not ended

    def read(self, scrapers: Sequence, wait_s: float) -> tuple[ServingProgress, ...]:
        """Start a read of every server whose previous read has ended; wait at most wait_s for them; each
        server's latest reading (this second's where it came in time)."""
        started = []
        for sc in scrapers:
            server = sc.ep.server
            running = self._busy.get(server)
            if running is not None and not running.is_set():
                self.skipped += 1
                continue
            done = self._busy[server] = threading.Event()
            t = threading.Thread(
                target=self._one, args=(sc, done), name=f"spark-watchd-progress-{server}", daemon=True
            )
            t.start()
            started.append(done)
        deadline = time.monotonic() + wait_s
        for done in started:
            done.wait(max(0.0, deadline - time.monotonic()))
        now = {sc.ep.server for sc in scrapers}
        with self._lock:
            for gone in [s for s in self.latest if s not in now]:  # a server no longer scraped: forgotten
                del self.latest[gone]
                self._prev.pop(gone, None)
                self._busy.pop(gone, None)
            return tuple(self.latest[s] for s in (sc.ep.server for sc in scrapers) if s in self.latest)

    def _one(self, sc, done: threading.Event) -> None:
        try:
            self._record(sc)
        finally:
            done.set()  # whatever happened, the server may be read again next second

    def _record(self, sc) -> None:
        server, ts = sc.ep.server, self.clock()
        prev, prev_ts = self._prev.get(server, (None, None))
        try:
            r, cur, _, _ = sc.read(ts, prev, prev_ts)
        except Exception as exc:  # a bug in a parser costs this read, never the thread that asked
            cur = None
            why = f"{type(exc).__name__}: {exc}"[:200]
            r = ServingReading(server, sc.ep.kind, up=False, ts=ts, endpoint=sc.ep.base_url, error=why)
        p = progress_of(r)
        with self._lock:
            if cur is None:
                self._prev.pop(server, None)  # rates restart after an outage
            else:
                self._prev[server] = (cur, ts)
            self.latest[server] = p
            self._fresh.append(p)
            del self._fresh[:-MAX_FRESH]

    def take(self) -> tuple[ServingProgress, ...]:
        """The reads done since the last take, in time order (a sample's `serving_progress`)."""
        with self._lock:
            out, self._fresh = self._fresh, []
        return tuple(sorted(out, key=lambda r: r.ts))


def progress_of(r: ServingReading) -> ServingProgress:
    """A read's progress figures: what the stall rule, the 1 s lines and the sample keep of it."""
    return ServingProgress(
        server=r.server,
        kind=r.kind,
        up=r.up,
        ts=r.ts,
        error=r.error,
        requests_running=r.requests_running,
        requests_waiting=r.requests_waiting,
        kv_usage=r.kv_usage,
        prompt_tokens_total=r.prompt_tokens_total,
        generation_tokens_total=r.generation_tokens_total,
        generation_tokens_in_flight=r.generation_tokens_in_flight,
        prompt_tokens_per_s=r.prompt_tokens_per_s,
        generation_tokens_per_s=r.generation_tokens_per_s,
    )
