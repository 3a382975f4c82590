#!/usr/bin/env python3
"""What the serving source costs the tick, with four inference servers scraped, and with one of them hung.

Run from the repository root:
    python bench/serving_cost.py [--ticks 30] [--interval 1.0]

Four fake servers (vLLM, SGLang, llama.cpp, Ollama: real HTTP servers on loopback serving the exposition
each release emits, tests/support/serving_fakes.py) are configured as `[[serving.endpoints]]`. The same
live daemon tick (every source, diagnosis, publish; fast memory watch off) is timed with `[serving]` off
and on, the tick thread's own CPU (the scrapes run on their own threads, timed apart), then again with
the vLLM fake answering after 30 s. Prints figures, asserts nothing.

    python bench/serving_cost.py --flood [--seconds 20] [--max-response-bytes N] [--flood-bytes N]

A hostile server instead: ~3.9 MB of distinct `vllm:num_requests_running` series, scraped each second by one
scraper with the default `[serving]` settings (or a raised byte bound, so that the series bound is what
stops it): its thread's CPU as a share of one core, and this process's RSS growth and peak over it.
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

from tests.support.serving_fakes import FakeEngine, FakeServer, series_flood  # noqa: E402

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


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def flood(seconds: float, max_bytes: int | None, size: int = 3_900_000) -> None:
    """One scraper, interval 1 s, against a server answering ~3.9 MB of distinct series: CPU and RSS."""
    import gc
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from spark_watchd.sources.serving import Scraper, http_get
    from spark_watchd.sources.serving_endpoints import Endpoint
    from spark_watchd.sources.serving_settings import ServingSettings

    body = series_flood(size)
    gc.collect()

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except ConnectionError:
                pass  # refused past the byte bound: the scraper hung up

        def log_message(self, *a):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    settings = ServingSettings(**({"max_response_bytes": max_bytes} if max_bytes else {}))
    Path("/proc/self/clear_refs").write_text("5")  # the peak RSS from here on
    rss0 = _kib("VmRSS")
    sc = Scraper(Endpoint("vllm:flood", "vllm", url), settings, 1.0, http_get, _Quiet(), time.time)
    sc.start()
    time.sleep(0.2)
    c0, w0 = thread_cpu(sc._thread), time.perf_counter()
    time.sleep(seconds)
    cpu, wall = thread_cpu(sc._thread) - c0, time.perf_counter() - w0
    sc.stop()
    r = sc.latest
    lines = body.count(b"\n")
    print(f"exposition {len(body):,} bytes, {lines:,} lines; max_response_bytes "
          f"{settings.max_response_bytes:,}, max_series {getattr(settings, 'max_series', None)}")  # fmt: skip
    print(f"    latest reading: up={r.up if r else None} error={(r.error or '')[:100] if r else None!r}")
    print(f"    scraper thread CPU {cpu / wall * 100:.1f} % of a core over {wall:.0f} s")
    print(f"    RSS {rss0 / 1024:.1f} MiB before, {_kib('VmRSS') / 1024:.1f} MiB after "
          f"(+{(_kib('VmRSS') - rss0) / 1024:.1f}), peak +{(_kib('VmHWM') - rss0) / 1024:.1f} MiB")  # fmt: skip
    httpd.shutdown()


class _Quiet:
    def warning(self, *a, **k):
        pass

    info = debug = warning


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=30)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--flood", action="store_true", help="a ~3.9 MB distinct-series server instead")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--max-response-bytes", type=int, default=None)
    ap.add_argument("--flood-bytes", type=int, default=3_900_000, help="the hostile exposition's size")
    a = ap.parse_args()
    if a.flood:
        flood(a.seconds, a.max_response_bytes, a.flood_bytes)
        return 0
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
