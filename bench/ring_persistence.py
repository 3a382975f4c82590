"""Post-mortem ring: what persisting every sample costs per tick, and what it writes to disk per hour.

    python bench/ring_persistence.py [--dir DIR] [--ticks N] [--interval S] [--long-line-mb MB]

Appends N samples of the vLLM creep scenario (a vLLM launcher and its EngineCore, as a GB10 sample carries
them) to a SampleRing in DIR (default: a temporary directory; give the state directory's filesystem to
measure its fsync), each append written, flushed and fsynced as the daemon does. Prints the median and
p95 cost of one append and the bytes written per hour at the sampling interval.

With --long-line-mb MB, a segment also gets one MB-long line (no sample writes one: a planted or corrupt
file), and a fresh process opens the ring and reads its samples back, as the daemon does at start and on a
bundle: its peak RSS (ru_maxrss) is printed beside that of the same process on a ring without the line.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
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


_READ_BACK = """
import resource, sys
sys.path.insert(0, {repo!r})
from spark_watchd.postmortem.ring import SampleRing
ring = SampleRing({ring!r}, span_s=1e9)
n = len(ring.samples())
print(n, ring.lines_skipped, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _read_back(ring_dir: Path) -> tuple[int, int, int]:
    """(samples read, lines skipped, peak RSS KiB) of a fresh process opening the ring and reading it."""
    out = subprocess.run(
        [sys.executable, "-c", _READ_BACK.format(repo=str(REPO), ring=str(ring_dir))],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return int(out[0]), int(out[1]), int(out[2])


def long_line(directory: str | None, mb: int, base: list) -> None:
    """Peak RSS reading a ring back, without and with one MB-long line in a segment."""
    with tempfile.TemporaryDirectory(dir=directory) as d:
        ring_dir = Path(d) / "ring"
        ring = SampleRing(ring_dir, span_s=1e9)
        for s in base[:60]:
            ring.append(s)
        ring.close()
        n, _, clean = _read_back(ring_dir)
        with open(ring_dir / "ring-0.jsonl", "ab") as fh:
            block = b"x" * (1 << 20)
            for _ in range(mb):
                fh.write(block)
            fh.write(b"\n")
        n2, skipped, with_line = _read_back(ring_dir)
    print(f"read back {n} samples: peak RSS {clean / 1024:.0f} MiB; with a {mb} MB line added: {n2} samples, "
          f"{skipped} line skipped, peak RSS {with_line / 1024:.0f} MiB (+{(with_line - clean) / 1024:.0f} MiB)")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="where the ring goes (default: a temporary directory)")
    ap.add_argument("--ticks", type=int, default=400)
    ap.add_argument("--interval", type=float, default=30.0, help="sampling interval, s (default 30)")
    ap.add_argument("--long-line-mb", type=int, default=0, help="also measure reading past a line this long")
    args = ap.parse_args()
    base = list(read_trace(TRACE))[:200]
    if args.long_line_mb:
        long_line(args.dir, args.long_line_mb, base)
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
