#!/usr/bin/env python3
"""Memory of the diagnosis window at --interval 1 (prints figures, asserts nothing).

usage: python bench/window_memory.py [--seconds 90]

1. In-process: this host's live samples (every meminfo and vmstat counter) fed one second apart for ten
   minutes into the engine, with the window bounded by `window_max_samples` and without (time only, the
   old behaviour); the Python heap each one holds (tracemalloc).
2. A real `spark-watchd run --interval 1` (loopback, its own state dir): VmRSS after 10 s and at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import free_port, proc_status  # noqa: E402

from spark_watchd.diagnose.engine import Diagnoser  # noqa: E402
from spark_watchd.diagnose.thresholds import Thresholds  # noqa: E402
from spark_watchd.sources.collect import Collector  # noqa: E402
from spark_watchd.sources.kernel import BootSource, MeminfoSource, PsiSource, VmstatSource  # noqa: E402


def heap_of_window(th: Thresholds, base) -> tuple[int, int]:
    """(bytes held, samples kept) after ten minutes of one-second samples."""
    tracemalloc.start()
    eng = Diagnoser(th)
    before = tracemalloc.get_traced_memory()[0]
    for i in range(600):
        # A fresh copy of the counters per sample, as live collection makes them.
        eng.observe(
            dataclasses.replace(base, ts=base.ts + i, meminfo=dict(base.meminfo), vmstat=dict(base.vmstat))
        )
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held, len(eng.window)


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=90.0)
    args = ap.parse_args(argv)
    col = Collector((MeminfoSource(watch_interval_s=0), PsiSource(), VmstatSource(), BootSource()))
    base, _ = col.collect()
    col.close()
    print(f"live sample: {len(base.meminfo)} meminfo keys, {len(base.vmstat)} vmstat counters")
    for label, th in (
        ("time only (600 s)", Thresholds(window_max_samples=100_000)),
        (f"bounded ({Thresholds().window_max_samples} samples)", Thresholds()),
    ):
        held, kept = heap_of_window(th, base)
        print(f"window {label}: {kept} samples kept, {held / 2**20:.2f} MiB held")
    port = free_port()
    with tempfile.TemporaryDirectory() as state:
        cmd = [
            sys.executable,
            "-m",
            "spark_watchd",
            "run",
            "--listen",
            f"127.0.0.1:{port}",
            "--interval",
            "1",
        ]
        env = {**os.environ, "SPARK_WATCHD_DAEMON__STATE_DIR": state}
        env.pop("SPARK_WATCHD_CONFIG", None)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            t0 = time.monotonic()
            rss = {}
            while time.monotonic() - t0 < args.seconds:
                time.sleep(1)
                try:  # scrape as Prometheus would, so the exposition's cost is in the figure too
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
                except OSError:
                    pass
                elapsed = round(time.monotonic() - t0)
                if elapsed in (10, 30, 60) or elapsed >= args.seconds - 1:
                    rss[elapsed] = proc_status(proc.pid, "VmRSS")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(
        "run --interval 1, VmRSS: " + ", ".join(f"{s} s {kb / 1024:.1f} MiB" for s, kb in sorted(rss.items()))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
