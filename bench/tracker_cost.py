#!/usr/bin/env python3
"""Each classifier's own per-sample cost: CPU microseconds a sample for G3, G4 and G6 alone (prints, asserts nothing).

usage: python bench/tracker_cost.py [--repeat N] [TRACE ...]   (default: the public traces)
The engine runs each trace once while every tracker's calls (observe with the sample and its features,
reboot, time_jump) are recorded; each tracker is then fed its recorded calls alone, afresh, N times
(best of N, CPU time), so the features, the driver and the other trackers are left out. The findings
are not read, as in the engine-only figure of bench/replay_throughput.py: deferred words cost nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_watchd.diagnose.engine import Diagnoser  # noqa: E402
from spark_watchd.sample.trace import read_trace  # noqa: E402

PUBLIC = Path(__file__).resolve().parents[1] / "tests/fixtures/traces/public"


class _Recorder:
    """Stands in for a tracker in the engine: passes every call on and records it."""

    def __init__(self, tracker, calls: list):
        self._t, self._calls = tracker, calls
        self.gotcha = tracker.gotcha

    def observe(self, sample, f):
        self._calls.append(("observe", sample, f))
        return self._t.observe(sample, f)

    def reboot(self, ts, boot_id, cause):
        self._calls.append(("reboot", ts, boot_id, cause))
        return self._t.reboot(ts, boot_id, cause)

    def time_jump(self, ts):
        self._calls.append(("time_jump", ts))
        return self._t.time_jump(ts)

    def __getattr__(self, name):
        return getattr(self._t, name)


def record(traces) -> list[tuple[type, object, list]]:
    """Per trace and tracker: (its class, the thresholds, its calls)."""
    out = []
    for samples in traces:
        eng = Diagnoser()
        logs = [(type(t), eng.th, []) for t in eng.trackers]
        eng.trackers = tuple(
            _Recorder(t, calls) for t, (_c, _th, calls) in zip(eng.trackers, logs, strict=True)
        )
        for s in samples:
            eng.observe(s)
        out.extend(logs)
    return out


def replay(cls, th, calls) -> None:
    t = cls(th)
    for c in calls:
        getattr(t, c[0])(*c[1:])


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("traces", nargs="*")
    a = ap.parse_args(argv)
    paths = [Path(p) for p in a.traces] or sorted(p for p in PUBLIC.glob("*.jsonl") if "truth" not in p.name)
    logs = record([list(read_trace(p)) for p in paths])
    n = sum(1 for cls, _th, calls in logs if cls is logs[0][0] for c in calls if c[0] == "observe")
    print(f"traces: {len(paths)}, samples: {n}")
    for cls in dict.fromkeys(cls for cls, _th, _calls in logs):
        mine = [(th, calls) for c, th, calls in logs if c is cls]
        best = None
        for _ in range(a.repeat):
            c0 = time.process_time()
            for th, calls in mine:
                replay(cls, th, calls)
            dc = time.process_time() - c0
            best = dc if best is None or dc < best else best
        print(f"{cls.gotcha}: {best / n * 1e6:.2f} us/sample CPU (best of {a.repeat})")


if __name__ == "__main__":
    main(sys.argv[1:])
