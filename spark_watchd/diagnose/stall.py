"""Engine stall: a serving engine with requests running and no prompt or generation progress over consecutive
scrapes (docs/diagnosis.md, "Engine stall").

NVIDIA/open-gpu-kernel-modules#1358: in every instrumented GB10 wedge vLLM's prompt throughput fell to 0.0
with the request still running (the KV cache at ~4 %, ~12k tokens into a ~70k prefill) and userspace froze
~5 s later, silent even under a raw /dev/kmsg tap. With usable memory thin that stall is the last sign
before a wedge. Pure: fed one sample's serving readings at a time, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from spark_watchd.sample.model import ServingProgress
from spark_watchd.sample.serving import ServingReading

Read = ServingReading | ServingProgress  # a sample's scrape, or one of the 1 s reads between samples


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


def progressed(prev: Read, cur: Read) -> bool | None:
    """Whether the server made prompt or generation progress between two reads; None when it cannot say.

    llama.cpp adds a request's prompt and generated tokens to its counters only when the request ends (docs/
    serving.md): what it shows as it goes is the tokens its running requests have generated (/slots), so it is
    judged on that alone, and only while a request is past its prefill (its prompt progress shows nowhere: a
    long prefill would read as a stall).
    """
    if cur.kind == "llamacpp":
        if not (prev.generation_tokens_in_flight or 0) > 0 < (cur.generation_tokens_in_flight or 0):
            return None
        pairs = ((generated(prev), generated(cur)),)
    else:
        pairs = (
            (prev.prompt_tokens_total, cur.prompt_tokens_total),
            (prev.generation_tokens_total, cur.generation_tokens_total),
        )
    moved = None
    for a, b in pairs:
        if a is None or b is None:
            continue
        if b < a:  # a counter reset (the server restarted): no verdict this interval
            return None
        moved = bool(moved) or b > a
    return moved


def generated(r: Read) -> float | None:
    """llama.cpp's tokens generated so far: its counter plus what its running requests have generated."""
    if r.generation_tokens_total is None or r.generation_tokens_in_flight is None:
        return None
    return r.generation_tokens_total + r.generation_tokens_in_flight


class StallWatch:
    """Per server: consecutive scrapes with requests running and neither counter moving, for at least
    engine_stall_min_s between the first and the latest of them."""

    def __init__(self, th):
        self.th = th
        self.last: dict[str, Read] = {}
        self.runs: dict[str, tuple[float, int]] = {}  # server -> (first stalled scrape's ts, scrapes)
        self.reported: set[str] = set()  # servers whose current stall has had its event

    def forget(self) -> None:
        self.last.clear()
        self.runs.clear()
        self.reported.clear()

    def observe(
        self, readings: Sequence[ServingReading], ts: float, also: Iterable[str] = ()
    ) -> tuple[list[Stall], list[Stall]]:
        """Take one sample's readings: (the servers stalled now, those among them newly stalled); a server in
        neither `readings` nor `also` (those read at 1 s since the previous sample) is no longer watched."""
        now, new = self.follow(readings)
        present = {r.server for r in readings} | set(also)
        for gone in [s for s in self.last if s not in present]:  # a server no longer scraped
            self.last.pop(gone, None)
            self.runs.pop(gone, None)
            self.reported.discard(gone)
        return now, new

    def follow(self, reads: Sequence[Read]) -> tuple[list[Stall], list[Stall]]:
        """Take reads in time order (one sample's, or the 1 s progress reads between samples): (the servers
        stalled at their latest read, those newly stalled)."""
        latest: dict[str, Stall | None] = {}
        new = []
        for r in reads:
            st, fresh = self._step(r)
            latest[r.server] = st
            if fresh:
                new.append(st)
        return [st for st in latest.values() if st is not None], new

    def _step(self, r: Read) -> tuple[Stall | None, bool]:
        """One read of one server: (its stall, if it is stalled at this read; whether the stall is new)."""
        need = self.th.engine_stall_min_s
        prev = self.last.get(r.server)
        if prev is not None and r.ts is not None and prev.ts is not None and r.ts <= prev.ts:
            # The same read again, or an older one (a sample's scrape before the 1 s reads): no new interval.
            run = self.runs.get(r.server)
            if run is not None and prev.ts - run[0] >= need:
                return Stall(
                    r.server, run[0], run[1], prev.requests_running or 0.0, prev.kv_usage, prev.ts
                ), False
            return None, False
        if not r.up or r.ts is None or r.kind == "ollama":  # (Ollama gives no token counters)
            self.runs.pop(r.server, None)
            self.reported.discard(r.server)
            self.last.pop(r.server, None)
            return None, False
        self.last[r.server] = r
        moved = progressed(prev, r) if prev is not None else None
        if moved is None or moved or (r.requests_running or 0) < 1 or (prev.requests_running or 0) < 1:
            self.runs.pop(r.server, None)
            self.reported.discard(r.server)
            return None, False
        since, n = self.runs.get(r.server, (prev.ts, 0))
        self.runs[r.server] = (since, n + 1)
        if r.ts - since < need:
            return None, False
        fresh = r.server not in self.reported
        self.reported.add(r.server)
        return Stall(r.server, since, n + 1, r.requests_running or 0.0, r.kv_usage, r.ts), fresh
