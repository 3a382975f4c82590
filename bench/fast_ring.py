"""Cost of the armed fast ring (postmortem/fast.py): CPU share and bytes written per hour while armed, and
nothing while disarmed (prints figures, asserts nothing).

    python bench/fast_ring.py [SECONDS]      # default 20 s armed at 1 s, into a temporary state dir

Reads this machine's /proc; writes (and fsyncs) into a temporary directory on the same disk as /tmp.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from spark_watchd.postmortem.fast import FastRing  # noqa: E402


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    with tempfile.TemporaryDirectory() as d:
        # One reading (read, parse, write, fsync), in a loop.
        ring = FastRing(os.path.join(d, "loop"))
        n = 200
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            ring.read_once()
        wall, cpu = (time.perf_counter() - t0) / n, (time.process_time() - c0) / n
        per_line = ring.bytes_written / n
        ring.close()
        # Disarmed: no thread, nothing written.
        idle = FastRing(os.path.join(d, "idle"))
        time.sleep(min(3.0, seconds))
        print(f"disarmed: {idle.readings} readings, {idle.bytes_written} bytes, armed={idle.armed}")
        # Armed for `seconds`: the real thread, its own CPU clock sampled from inside.
        ring = FastRing(os.path.join(d, "armed"))
        used = {}
        orig = ring.read_once

        def read_and_clock():
            orig()
            used["t"] = time.thread_time()

        ring.read_once = read_and_clock  # type: ignore[method-assign]
        ring.arm()
        time.sleep(seconds)
        ring.close()
        t = used.get("t", 0.0)
        on_disk = sum(
            os.path.getsize(os.path.join(d, "armed", f)) for f in os.listdir(os.path.join(d, "armed"))
        )
    print(
        f"one reading: {cpu * 1e6:.0f} us CPU, {wall * 1e3:.2f} ms wall (fsync included), {per_line:.0f} bytes"
    )
    print(
        f"armed {seconds:g} s at 1 s: {ring.readings} readings, {t * 1000:.1f} ms CPU -> "
        f"{t / seconds * 100:.3f} % of one core, {ring.bytes_written / seconds * 3600 / 2**20:.1f} MiB written "
        f"per hour, {on_disk / 1024:.0f} KiB on disk (two 60 s segments at most)"
    )
    print(f"threads now: {threading.active_count()} (1 = only main)")


if __name__ == "__main__":
    main()
