#!/usr/bin/env python3
"""Replay throughput of the diagnosis engine: samples classified per second (prints figures, asserts nothing).

usage: python bench/replay_throughput.py [TRACE ...]   (default: every trace under tests/fixtures/traces)
Prints the engine-only rate (pre-parsed samples, what `replay` adds per sample), the end-to-end rate
including JSON parsing and Sample construction, and the `spark-watchd replay --format jsonl` command's own
rate (read, parse, classify, write the jsonl to /dev/null; in-process, so interpreter start-up is left out).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_watchd.commands import replay as replay_cmd  # noqa: E402
from spark_watchd.diagnose.engine import Diagnoser  # noqa: E402
from spark_watchd.sample.trace import read_trace  # noqa: E402


def main(argv):
    paths = [Path(a) for a in argv] or sorted(
        p
        for p in (Path(__file__).resolve().parents[1] / "tests/fixtures/traces").glob("*.jsonl")
        if not p.name.endswith(".truth.jsonl")
    )
    t0 = time.perf_counter()
    traces = [list(read_trace(p)) for p in paths]
    parse_s = time.perf_counter() - t0
    n = sum(len(t) for t in traces)
    best = best_cpu = None
    for _ in range(5):
        t0, c0 = time.perf_counter(), time.process_time()
        for samples in traces:
            eng = Diagnoser()
            for s in samples:
                eng.observe(s)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        best = dt if best is None or dt < best else best
        best_cpu = dc if best_cpu is None or dc < best_cpu else best_cpu
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"traces: {len(paths)}, samples: {n}, cpus: {os.cpu_count()}, load average: {load:.1f}")
    print(f"engine only, wall: {n / best:,.0f} samples/s ({best / n * 1e6:.1f} us/sample, best of 5)")
    print(
        f"engine only, CPU time: {n / best_cpu:,.0f} samples per CPU-second (what it costs on an idle core)"
    )
    print(f"end to end (JSON parse + Sample + classify), wall: {n / (parse_s + best):,.0f} samples/s")
    best_cmd = best_cmd_cpu = None
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()
            for p in paths:
                replay_cmd.main(
                    argparse.Namespace(
                        trace=str(p), format="jsonl", skip_bad=False, state_dir=None, config=None
                    )
                )
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            best_cmd = dt if best_cmd is None or dt < best_cmd else best_cmd
            best_cmd_cpu = dc if best_cmd_cpu is None or dc < best_cmd_cpu else best_cmd_cpu
    print(
        f"replay command (read + parse + classify + jsonl out), wall: {n / best_cmd:,.0f} samples/s, "
        f"CPU time: {n / best_cmd_cpu:,.0f} samples per CPU-second (best of 3)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
