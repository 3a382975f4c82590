"""Post-mortem ring: what persisting every sample costs per tick, and what it writes to disk per hour.

    python bench/ring_persistence.py [--dir DIR] [--ticks N] [--interval S]

Appends N samples of the vLLM creep scenario (a vLLM launcher and its EngineCore, as a GB10 sample carries
them) to a SampleRing in DIR (default: a temporary directory; give the state directory's filesystem to
measure its fsync), each append written, flushed and fsynced as the daemon does. Prints the median and
p95 cost of one append and the bytes written per hour at the sampling interval.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spark_watchd.postmortem.ring import SampleRing  # noqa: E402
from spark_watchd.sample.trace import read_trace  # noqa: E402

TRACE = REPO / "tests" / "fixtures" / "traces" / "runway" / "vllm_creep_oom_30s.jsonl"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="where the ring goes (default: a temporary directory)")
    ap.add_argument("--ticks", type=int, default=400)
    ap.add_argument("--interval", type=float, default=30.0, help="sampling interval, s (default 30)")
    args = ap.parse_args()
    base = list(read_trace(TRACE))[:200]
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        ring = SampleRing(Path(d) / "ring", span_s=1800)
        costs = []
        t0 = base[0].ts
        for i in range(args.ticks):
            s = replace(base[i % len(base)], ts=t0 + i * args.interval)
            a = time.perf_counter()
            ring.append(s)
            costs.append(time.perf_counter() - a)
        ring.close()
        per_tick = ring.bytes_written / args.ticks
        costs.sort()
        on_disk = sum(p.stat().st_size for p in (Path(d) / "ring").iterdir())
    print(f"ring append (write+flush+fsync), {args.ticks} ticks: median {statistics.median(costs) * 1e3:.2f} ms, "
          f"p95 {costs[int(len(costs) * 0.95)] * 1e3:.2f} ms")  # fmt: skip
    print(f"bytes per sample: {per_tick:.0f}; written per hour at {args.interval:g} s: "
          f"{per_tick * 3600 / args.interval / 1024:.0f} KiB; on disk at the end (2 segments): {on_disk / 1024:.0f} KiB")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
