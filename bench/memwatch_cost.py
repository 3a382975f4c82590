"""CPU cost of the fast memory watch (prints figures, asserts nothing).

    python bench/memwatch_cost.py [SECONDS] [INTERVAL]      # defaults: 20 s at 1.0 s

Measures the watch thread's own CPU time (per-thread clock) over a run at the
configured interval, and the cost of one reading in a tight loop.
"""

from __future__ import annotations

import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from spark_watchd.sources.memwatch import MemWatch  # noqa: E402


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0

    # One reading, measured in a tight loop.
    w = MemWatch("/proc", interval_s=interval)
    n = 5000
    t0 = time.process_time()
    for _ in range(n):
        w.read_once()
    per_read = (time.process_time() - t0) / n
    w.stop()

    # The real thread, its own CPU clock sampled from inside.
    w = MemWatch("/proc", interval_s=interval)
    cpu = {}
    orig = w.read_once

    def read_and_clock():
        orig()
        cpu["t"] = time.thread_time()

    w.read_once = read_and_clock  # type: ignore[method-assign]
    w.start()
    time.sleep(seconds)
    w.stop()
    used = cpu.get("t", 0.0)
    print(f"one reading (meminfo + PSI, pread): {per_read * 1e6:.1f} us CPU")
    print(
        f"watch thread over {seconds:g} s at {interval:g} s: {w.readings} readings, {used * 1000:.2f} ms CPU "
        f"-> {used / seconds * 3600:.2f} CPU s per hour, {used / seconds * 100:.4f} % of one core"
    )
    print(f"threads now: {threading.active_count()} (1 = only main)")


if __name__ == "__main__":
    main()
