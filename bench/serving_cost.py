#!/usr/bin/env python3
"""What the serving source costs the tick, with four inference servers scraped, and with one of them hung.

Run from the repository root:
    python bench/serving_cost.py [--ticks 30] [--interval 1.0]

Four fake servers (vLLM, SGLang, llama.cpp, Ollama: real HTTP servers on loopback serving the exposition
each release emits, tests/support/serving_fakes.py) are configured as `[[serving.endpoints]]`. The same
live daemon tick (every source, diagnosis, publish; fast memory watch off) is timed with `[serving]` off
and on, the tick thread's own CPU (the scrapes run on their own threads, timed apart), then again with
the vLLM fake answering after 30 s. Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.serving_fakes import FakeEngine, FakeServer  # noqa: E402

KINDS = ("vllm", "sglang", "llamacpp", "ollama")


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def thread_cpu(t: threading.Thread) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(t.ident))


def run(
    servers: dict, enabled: bool, ticks: int, interval: float
) -> tuple[list[float], list[float], float, int]:
    """(tick CPU s, tick wall s, scraper threads' CPU s, scrapes) over `ticks` ticks `interval` apart."""
    from spark_watchd import app
    from spark_watchd.config import load_settings
    from spark_watchd.sources.serving_settings import ServingSettings

    settings = load_settings(None, environ={"SPARK_WATCHD_SOURCES__FAST_WATCH_INTERVAL_S": "0"})
    eps = [{"kind": k, "url": s.url} for k, s in servers.items()]
    serving = ServingSettings(enabled=enabled, interval_s=interval, endpoints=eps)
    settings = settings.model_copy(update={"serving": serving})
    cpu, wall, own = [], [], []
    with tempfile.TemporaryDirectory() as state:
        d = app.build(settings, state_dir=state, serve=False)
        try:
            for _ in range(3):
                d.tick()
                time.sleep(interval)
            src = next((s for s in d.collector.sources if s.name == "serving"), None)
            scr0 = {id(sc): thread_cpu(sc._thread) for sc in src.scrapers.values()} if src else {}
            for _ in range(ticks):
                c0, w0 = time.thread_time(), time.perf_counter()
                d.tick()
                cpu.append(time.thread_time() - c0)
                wall.append(time.perf_counter() - w0)
                st = d.snapshot().sources.get("serving")
                if st is not None:
                    own.append(st.duration_s)
                time.sleep(interval)
            scrape_cpu = (
                sum(thread_cpu(sc._thread) - scr0.get(id(sc), 0.0) for sc in src.scrapers.values())
                if src
                else 0.0
            )
            n = len(src.scrapers) * ticks if src else 0
            readings = d.snapshot().sample.serving
            up = sum(r.up for r in readings)
            if own:
                print(f"    the serving source's collect: median {statistics.median(own) * 1000:.3f} ms, "
                      f"max {max(own) * 1000:.3f} ms wall")  # fmt: skip
            print(
                f"    serving readings in the last sample: {len(readings)} ({up} up): {sorted(r.server for r in readings)}"
            )
        finally:
            d.close()
    return cpu, wall, scrape_cpu, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=30)
    ap.add_argument("--interval", type=float, default=1.0)
    a = ap.parse_args()
    engines = {k: FakeEngine(k) for k in KINDS}
    servers = {k: FakeServer(e).__enter__() for k, e in engines.items()}
    stop = threading.Event()

    def advance():
        while not stop.wait(0.5):
            for e in engines.values():
                e.step(0.5)

    threading.Thread(target=advance, daemon=True).start()
    try:
        results = {}
        for label, enabled, hang in (
            ("serving off", False, 0.0),
            ("4 servers", True, 0.0),
            ("vLLM hung 30 s", True, 30.0),
        ):
            engines["vllm"].hang_s = hang
            print(f"{label}:")
            cpu, wall, scrape_cpu, n = run(servers, enabled, a.ticks, a.interval)
            results[label] = cpu
            print(f"    tick CPU median {statistics.median(cpu) * 1000:.2f} ms, p90 {pct(cpu, 0.9) * 1000:.2f} ms; "
                  f"wall median {statistics.median(wall) * 1000:.2f} ms, max {max(wall) * 1000:.2f} ms")  # fmt: skip
            if n:
                print(
                    f"    scraper threads: {scrape_cpu * 1000 / n:.2f} ms CPU per scraper interval ({n} = scrapers x intervals, off the tick)"
                )
        extra = statistics.median(results["4 servers"]) - statistics.median(results["serving off"])
        print(f"tick CPU added by four servers: {extra * 1000:+.2f} ms (median against median)")
    finally:
        stop.set()
        for s in servers.values():
            s.__exit__()
    return 0


if __name__ == "__main__":
    sys.exit(main())
