#!/usr/bin/env python3
"""Where the `replay` verb's time goes, per sample, in CPU time (prints figures, asserts nothing).

usage: python bench/replay_parts.py [TRACE ...]   (default: the six public traces)
Each part is timed alone over the same samples, lowest of 3 runs (the cores may be shared: CPU time, not
wall): reading the lines, decoding the JSON, checking and building the Samples (read_trace less the first
two), classifying, the findings' words (summaries and evidence, built on first read where deferred), and
encoding the jsonl lines; then the verb in-process, which is about their sum. Runs in any tree since
68b3b1e (copy it into that tree's bench/ to compare).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spark_watchd.commands import replay as replay_cmd  # noqa: E402
from spark_watchd.diagnose.engine import Diagnoser  # noqa: E402
from spark_watchd.sample.codec import dumps_compact, loads  # noqa: E402
from spark_watchd.sample.trace import read_trace  # noqa: E402


def lowest(fn, runs: int = 3) -> float:
    best = None
    for _ in range(runs):
        c0 = time.process_time()
        fn()
        dc = time.process_time() - c0
        best = dc if best is None or dc < best else best
    return best


def main(argv: list[str]) -> None:
    paths = [Path(a) for a in argv] or sorted(
        p
        for p in (ROOT / "tests/fixtures/traces/public").glob("*.jsonl")
        if not p.name.endswith(".truth.jsonl")
    )
    texts = [p.read_text().splitlines(keepends=True) for p in paths]
    n = sum(len(t) for t in texts)
    samples = [list(read_trace(p)) for p in paths]

    def read():
        for p in paths:
            with open(p, encoding="utf-8", errors="replace") as fh:
                for _line in fh:
                    pass

    def decode():
        for t in texts:
            for line in t:
                loads(line)

    def parse():
        for p in paths:
            for _s in read_trace(p):
                pass

    def classify():
        for t in samples:
            observe = Diagnoser().observe
            for s in t:
                observe(s)

    judged: list = []

    def words():  # each run judges afresh (untimed), then reads every finding's words once
        judged[:] = [Diagnoser().observe(s) for t in samples for s in t]
        c0 = time.process_time()
        for d in judged:
            for f in d.findings.values():
                f.summary  # noqa: B018 - the first read builds summary and evidence
        words.cpu = min(getattr(words, "cpu", 1e9), time.process_time() - c0)

    def encode():
        for d in judged:
            dumps_compact(replay_cmd._replay_obj(d))

    def verb():
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            for p in paths:
                args = argparse.Namespace(
                    trace=str(p), format="jsonl", skip_bad=False, state_dir=None, config=None
                )
                replay_cmd.main(args)

    parts = [("read lines", lowest(read)), ("decode JSON", lowest(decode))]
    parts.append(("check + build Samples", lowest(parse) - parts[0][1] - parts[1][1]))
    parts.append(("classify", lowest(classify)))
    lowest(words)
    parts += [("findings' words (first read)", words.cpu), ("encode jsonl lines", lowest(encode))]
    print(f"traces: {len(paths)}, samples: {n}, load average: {os.getloadavg()[0]:.1f}")
    for name, cpu in parts:
        print(f"  {name:30s} {cpu / n * 1e6:7.1f} us/sample CPU")
    print(f"  {'sum of the parts':30s} {sum(c for _, c in parts) / n * 1e6:7.1f} us/sample CPU")
    total = lowest(verb)
    print(
        f"replay verb in-process: {total / n * 1e6:.1f} us/sample CPU, {n / total:,.0f} samples per CPU-second"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
