"""Engine stall: a serving engine with requests running and no prompt or generation progress over consecutive
scrapes (docs/diagnosis.md, "Engine stall").

NVIDIA/open-gpu-kernel-modules#1358: in every instrumented GB10 wedge vLLM's prompt throughput fell to 0.0
with the request still running (the KV cache at ~4 %, ~12k tokens into a ~70k prefill) and userspace froze
~5 s later, silent even under a raw /dev/kmsg tap. With usable memory thin that stall is the last sign
before a wedge. Pure: fed one sample's serving readings at a time, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from spark_watchd.sample.serving import ServingReading


class Stall(NamedTuple):
    """One server stalled: since when (its first scrape without progress), its requests and KV use now."""

    server: str
    since: float
    scrapes: int
    running: float
    kv_usage: float | None
    ts: float  # the latest stalled scrape

    def words(self) -> str:
        """'vllm:8000: 1 request running, no prompt or generation progress for 30 s (KV cache 4 %)'."""
        n = int(self.running) if float(self.running).is_integer() else self.running
        txt = f"{self.server}: {n} request{'s' if n != 1 else ''} running, no prompt or generation progress "
        txt += f"for {self.ts - self.since:.0f} s"
        if self.kv_usage is not None:
            txt += f" (KV cache {100 * self.kv_usage:.0f} %)"
        return txt


def _progress(prev: ServingReading, cur: ServingReading) -> bool | None:
    """Whether the server made prompt or generation progress between two scrapes; None when it cannot say."""
    moved = None
    for a, b in (
        (prev.prompt_tokens_total, cur.prompt_tokens_total),
        (prev.generation_tokens_total, cur.generation_tokens_total),
    ):
        if a is None or b is None:
            continue
        if b < a:  # a counter reset (the server restarted): no verdict this interval
            return None
        moved = bool(moved) or b > a
    return moved


class StallWatch:
    """Per server: consecutive scrapes with requests running and neither counter moving, for at least
    engine_stall_min_s between the first and the latest of them."""

    def __init__(self, th):
        self.th = th
        self.last: dict[str, ServingReading] = {}
        self.runs: dict[str, tuple[float, int]] = {}  # server -> (first stalled scrape's ts, scrapes)
        self.reported: set[str] = set()  # servers whose current stall has had its event

    def forget(self) -> None:
        self.last.clear()
        self.runs.clear()
        self.reported.clear()

    def observe(self, readings: Sequence[ServingReading], ts: float) -> tuple[list[Stall], list[Stall]]:
        """Take one sample's readings: (the servers stalled now, those among them newly stalled)."""
        need = self.th.engine_stall_min_s
        now, new = [], []
        present = set()
        for r in readings:
            present.add(r.server)
            prev = self.last.get(r.server)
            if not r.up or r.ts is None or r.kind == "ollama":  # (Ollama gives no token counters)
                self.runs.pop(r.server, None)
                self.reported.discard(r.server)
                self.last.pop(r.server, None)
                continue
            if prev is not None and prev.ts is not None and r.ts <= prev.ts:
                run = self.runs.get(r.server)  # the same scrape again: no new interval
                if run is not None and r.ts - run[0] >= need:
                    now.append(Stall(r.server, run[0], run[1], r.requests_running or 0.0, r.kv_usage, r.ts))
                continue
            self.last[r.server] = r
            moved = _progress(prev, r) if prev is not None else None
            if moved is None or moved or (r.requests_running or 0) < 1 or (prev.requests_running or 0) < 1:
                self.runs.pop(r.server, None)
                self.reported.discard(r.server)
                continue
            since, n = self.runs.get(r.server, (prev.ts, 0))
            self.runs[r.server] = (since, n + 1)
            if r.ts - since >= need:
                st = Stall(r.server, since, n + 1, r.requests_running or 0.0, r.kv_usage, r.ts)
                now.append(st)
                if r.server not in self.reported:
                    self.reported.add(r.server)
                    new.append(st)
        for gone in [s for s in self.last if s not in present]:  # a server no longer scraped
            self.last.pop(gone, None)
            self.runs.pop(gone, None)
            self.reported.discard(gone)
        return now, new
