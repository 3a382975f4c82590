#!/usr/bin/env python3
"""Memory of G6's per-process levels after an hour (prints figures, asserts nothing).

usage: python bench/g6_levels_memory.py [--interval S ...] [--servers N] [--minutes M]
Feeds G6Tracker M minutes (default 60) of samples at each interval (default 1, 5, 30 and 60 s) with N
server processes (default 50, 2 GiB each) and two training jobs, their RSS moving every sample, and prints
the bytes its level histories hold (every object reachable from them, counted once) with the count bound
(diagnose/g6_levels.py LEVELS) and without it (levels kept for the whole eviction window).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_watchd.diagnose import features as feat  # noqa: E402
from spark_watchd.diagnose import g6, g6_levels  # noqa: E402
from spark_watchd.diagnose.thresholds import Thresholds  # noqa: E402
from spark_watchd.sample.model import ProcessInfo, Sample  # noqa: E402

GIB = 1024**3
SERVER = ("python3", "-m", "vllm.entrypoints.openai.api_server", "--gpu-memory-utilization", "0.3")
TRAINER = ("python3", "train.py", "--config", "qlora.yaml")


def _samples(interval: float, servers: int, minutes: float):
    t0 = 1_764_400_000.0
    for i in range(int(minutes * 60 / interval)):
        wobble = (i * 7919) % 64 * 1024**2  # RSS moves by up to 64 MiB every sample
        procs = [
            ProcessInfo(1000 + k, t0 - 600, "python3", SERVER, 2 * GIB + wobble, GIB, True)
            for k in range(servers)
        ] + [
            ProcessInfo(9000 + k, t0 - 600, "python3", TRAINER, 14 * GIB + wobble, 20 * GIB, True)
            for k in range(2)
        ]
        yield Sample(
            ts=t0 + i * interval,
            meminfo={"MemTotal": 128 * GIB // 1024, "MemAvailable": (40 * GIB + wobble) // 1024},
            processes=tuple(procs),
        )


def _deep_size(root) -> int:
    seen: set[int] = set()
    todo = [root]
    total = 0
    while todo:
        o = todo.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            todo.extend(o.keys())
            todo.extend(o.values())
        elif isinstance(o, tuple | list | type(g6.deque())):
            todo.extend(o)
    return total


def levels_after(interval: float, servers: int, minutes: float) -> tuple[int, int]:
    """(bytes the level histories hold, most levels of one process) after the run."""
    th = Thresholds()
    t = g6.G6Tracker(th)
    prev = None
    for s in _samples(interval, servers, minutes):
        f = feat.compute(prev, s, th)
        t.observe(s, f)
        prev = f
    return _deep_size(t.rss), max(map(len, t.rss.values()))


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval", type=float, action="append")
    ap.add_argument("--servers", type=int, default=50)
    ap.add_argument("--minutes", type=float, default=60.0)
    a = ap.parse_args(argv)
    print(f"G6 levels after {a.minutes:g} min, {a.servers} server processes and 2 trainers:")
    bound = g6_levels.LEVELS
    for interval in a.interval or [1.0, 5.0, 30.0, 60.0]:
        size, most = levels_after(interval, a.servers, a.minutes)
        g6.LEVELS = 10**9  # no count bound: every sample of the window kept
        try:
            size_all, most_all = levels_after(interval, a.servers, a.minutes)
        finally:
            g6.LEVELS = bound
        print(
            f"  --interval {interval:g}: {size / 2**20:.2f} MiB ({most} levels a process); "
            f"without the count bound {size_all / 2**20:.2f} MiB ({most_all})"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
