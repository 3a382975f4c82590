"""CPU time of the process scan with N extra sleeping processes (prints figures, asserts nothing).

python bench/process_scan.py            # N = 100, 1000 (and 5000 with --big)
python bench/process_scan.py 100 1000 5000 [--repeat 5]

For each N: the first three scans after the N processes appear (the first reads each one, the next two are
its settling re-reads) and the steady scan, in CPU time of this process. With --repeat R the N processes
are started afresh R times and each figure is the lowest of the R (the machine is shared: the lowest is
the one least disturbed by others).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _common import spawn_sleepers  # noqa: E402

from spark_watchd.sources.processes import SETTLE_SCANS, ProcessSource  # noqa: E402


def measure(n: int, scans: int = 20) -> tuple[list[float], float, int, int]:
    """([first, second, third scan], steady scan) in ms CPU, how many processes were reported, /proc entries."""
    src = ProcessSource()
    src.collect({})  # the machine as it was: known before the N appear
    procs = spawn_sleepers(n)
    try:
        time.sleep(0.5)
        gpu = {procs[0].pid: 2**30, procs[1].pid: 2**29}
        new = []
        for _ in range(SETTLE_SCANS):
            t0 = time.process_time()
            src.collect({"_gpu_processes": gpu})
            new.append((time.process_time() - t0) * 1000)
        steady = []
        for _ in range(scans):
            t0 = time.process_time()
            out = src.collect({"_gpu_processes": gpu})
            steady.append((time.process_time() - t0) * 1000)
        return new, statistics.median(steady), len(out["processes"]), len(os.listdir("/proc"))
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:] if a.isdigit() and sys.argv[sys.argv.index(a) - 1] != "--repeat"]
    sizes = sizes or [100, 1000]
    if "--big" in sys.argv:
        sizes.append(5000)
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    for n in sizes:
        runs = [measure(n) for _ in range(repeat)]
        new = [min(r[0][i] for r in runs) for i in range(SETTLE_SCANS)]
        steady = min(r[1] for r in runs)
        print(
            f"{n:>5} extra processes ({runs[-1][3]} /proc entries): first scans "
            f"{' / '.join(f'{c:.1f}' for c in new)} ms CPU, steady scan {steady:.2f} ms CPU, "
            f"{runs[-1][2]} reported" + (f" (lowest of {repeat})" if repeat > 1 else "")
        )
