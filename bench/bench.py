#!/usr/bin/env python3
"""Daemon cost figures: tick CPU with N extra processes, /metrics latency, resident memory, replay rate.

Prints figures, asserts nothing. Run from the repository root:
    python bench/bench.py [--processes 300] [--scrapes 200]
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from _common import free_port, spawn_sleepers  # noqa: E402


def tick_cost(ticks: int) -> tuple[float, float]:
    """Median CPU and wall seconds of one live tick (in-process, live sources of this build)."""
    from spark_watchd import app
    from spark_watchd.config import load_settings

    settings = load_settings(None, environ={})
    with tempfile.TemporaryDirectory() as state:
        d = app.build(settings, state_dir=state, serve=False)
        d.tick()  # warm caches (process cache, NVML init attempt)
        cpu, wall = [], []
        for _ in range(ticks):
            c0, w0 = time.process_time(), time.perf_counter()
            d.tick()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        d.close()
    return statistics.median(cpu), statistics.median(wall)


def replay_rate(trace: Path) -> float:
    """Samples per second the daemon's replay tick sustains (diagnosis included, no pacing)."""
    from spark_watchd import app
    from spark_watchd.config import load_settings
    from spark_watchd.sources.replay import ReplayFeed

    with tempfile.TemporaryDirectory() as state:
        d = app.build(
            load_settings(None, environ={}),
            replay=ReplayFeed(str(trace), speed=1e12),
            state_dir=state,
            serve=False,
        )
        n, t0 = 0, time.perf_counter()
        while d.tick() is not None:
            n += 1
        rate = n / (time.perf_counter() - t0)
        d.close()
    return rate


def scrape_daemon(scrapes: int) -> tuple[float, float, int, int]:
    """Start `run --interval 1`, scrape /metrics; (median ms, p99 ms, RSS KiB, exposition bytes)."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with tempfile.TemporaryDirectory() as state:
        env["SPARK_WATCHD_DAEMON__STATE_DIR"] = state
        proc = subprocess.Popen(
            [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}", "--interval", "1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                    c.request("GET", "/healthz")
                    if c.getresponse().status == 200:
                        break
                except OSError:
                    time.sleep(0.1)
            lat, size = [], 0
            for _ in range(scrapes):
                t0 = time.perf_counter()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/metrics")
                body = c.getresponse().read()
                lat.append((time.perf_counter() - t0) * 1000)
                size = len(body)
                c.close()
            time.sleep(1.5)  # a few more ticks before reading memory
            rss = 0
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1], rss, size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--processes", type=int, default=300, help="extra idle processes during the tick benchmark"
    )
    ap.add_argument("--ticks", type=int, default=30)
    ap.add_argument("--scrapes", type=int, default=200)
    args = ap.parse_args()

    from spark_watchd.app import live_sources
    from spark_watchd.config import load_settings
    from spark_watchd.logs import configure_logging

    configure_logging("error")  # figures only; missing sources are expected on a bench machine

    names = [s.name for s in live_sources(load_settings(None, environ={}))]
    print(f"live sources in this build: {', '.join(names)}")
    procs = spawn_sleepers(args.processes)
    try:
        total = len(os.listdir("/proc")) if os.path.isdir("/proc") else 0
        cpu, wall = tick_cost(args.ticks)
        print(
            f"tick: median {cpu * 1000:.2f} ms CPU, {wall * 1000:.2f} ms wall (~{total} /proc entries, +{args.processes} idle processes)"
        )
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    med, p99, rss, size = scrape_daemon(args.scrapes)
    print(f"/metrics: median {med:.2f} ms, p99 {p99:.2f} ms over {args.scrapes} scrapes ({size} bytes)")
    print(f"resident memory of `run`: {rss / 1024:.1f} MiB")
    trace = REPO / "spark_watchd" / "scenarios" / "eviction.jsonl"
    print(f"replay through the daemon tick: {replay_rate(trace):,.0f} samples/s ({trace.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
