"""The servers' progress in a bundle's final seconds (the armed fast ring's 1 s reads, issue 31 item 4): the
series the report charts and, for each server that stopped, since when. Pure functions of the 1 s samples."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from spark_watchd.diagnose.stall import progressed
from spark_watchd.sample.model import Sample
from spark_watchd.sample.serving import ServingReading


def _reads(samples: Sequence[Sample]) -> dict[str, list[ServingReading]]:
    """Each server's reads in time order, each once (a slow server's repeated reading is one read)."""
    out: dict[str, list[ServingReading]] = {}
    for s in samples:
        for r in s.serving:
            seen = out.setdefault(r.server, [])
            if r.ts is not None and (not seen or r.ts > seen[-1].ts):
                seen.append(r)
    return out


def progress_series(samples: Sequence[Sample]) -> list[tuple[str, list[tuple[float, float | None]]]]:
    """Per server: prompt plus generation tokens per second, and its requests running, at each read."""
    series = []
    for server, reads in _reads(samples).items():
        rate = [
            (r.ts, None if not r.up else (r.prompt_tokens_per_s or 0.0) + (r.generation_tokens_per_s or 0.0))
            for r in reads
        ]
        series.append((f"{server} tokens/s", rate))
        series.append((f"{server} running", [(r.ts, r.requests_running if r.up else None) for r in reads]))
    return series


def still(samples: Sequence[Sample]) -> list[str]:
    """For each server whose last reads show requests running and no progress (diagnose/stall.py's rule): since
    when, in words ('vllm:8000: 1 request running, no prompt or generation progress since 12:00:05 UTC, 14 s
    before its last read')."""
    out = []
    for server, reads in _reads(samples).items():
        last = reads[-1]
        if not last.up or (last.requests_running or 0) < 1:
            continue
        since = None
        for prev, cur in zip(reads, reads[1:], strict=False):
            moved = progressed(prev, cur)
            stuck = moved is False and (prev.requests_running or 0) >= 1 and (cur.requests_running or 0) >= 1
            since = (since or prev.ts) if stuck else None
        if since is None:
            continue
        n = int(last.requests_running) if float(last.requests_running).is_integer() else last.requests_running
        at = dt.datetime.fromtimestamp(since, dt.timezone.utc).strftime("%H:%M:%S")
        out.append(
            f"{server}: {n} request{'s' if n != 1 else ''} running, no prompt or generation progress since {at} "
            f"UTC, {last.ts - since:.0f} s before its last read"
        )
    return out
