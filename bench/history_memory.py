"""Memory and read cost of the status page history: prints figures, asserts nothing.

python bench/history_memory.py [RECORDS ...]
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_watchd.sample.findings import Diagnosis, Finding  # noqa: E402
from spark_watchd.sample.trace import read_trace  # noqa: E402
from spark_watchd.snapshot import Snapshot  # noqa: E402
from spark_watchd.web.charts import History  # noqa: E402
from spark_watchd.web.settings import WebSettings  # noqa: E402

TRACE = Path(__file__).resolve().parent.parent / "spark_watchd" / "scenarios" / "eviction.jsonl"


def main(counts: list[int]) -> None:
    samples = list(read_trace(TRACE))
    findings = {g: Finding(g, "warning", "bench", {"x": 1.0}) for g in ("G3", "G4", "G6")}
    for n in counts:
        step = 30.0 if n <= 2880 else 1.0  # 24 h default retention: long windows are 1 s replays
        tracemalloc.start()
        h = History(WebSettings(history_max_records=n, history_api_max_records=n))
        base = tracemalloc.get_traced_memory()[0]
        t = time.perf_counter()
        for i in range(n):
            s = dataclasses.replace(samples[i % len(samples)], ts=1.0e9 + step * i)
            h(Snapshot(s, Diagnosis(s.ts, findings)))
        used = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        h2, t = History(WebSettings(history_max_records=n)), time.perf_counter()
        for i in range(n):
            h2(Snapshot(dataclasses.replace(samples[i % len(samples)], ts=1.0e9 + step * i), None))
        add_s = time.perf_counter() - t
        t = time.perf_counter()
        body = json.dumps(h.to_json(), separators=(",", ":"), allow_nan=False)
        read_s = time.perf_counter() - t
        t = time.perf_counter()
        json.dumps(h.to_json(since=1.0e9 + step * (n - 2)))
        inc_s = time.perf_counter() - t
        print(
            f"{len(h):>6} records: {used / 1e6:6.2f} MB held ({used / n:5.0f} B/record), "
            f"add {add_s / n * 1e6:5.1f} us/record, full GET body {len(body) / 1e6:5.2f} MB in {read_s * 1e3:6.1f} ms, "
            f"incremental GET {inc_s * 1e3:5.2f} ms"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1440, 20000])
