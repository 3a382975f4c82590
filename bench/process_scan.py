"""CPU time of one process scan with N extra sleeping processes (prints figures, asserts nothing).

python bench/process_scan.py            # N = 100, 1000 (and 5000 with --big)
python bench/process_scan.py 100 1000 5000
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from spark_watchd.sources.processes import SETTLE_SCANS, ProcessSource  # noqa: E402


def measure(n: int, scans: int = 20) -> None:
    procs = [subprocess.Popen(["sleep", "600"]) for _ in range(n)]
    try:
        time.sleep(0.5)
        gpu = {procs[0].pid: 2**30, procs[1].pid: 2**29}
        src = ProcessSource()
        t0 = time.process_time()
        src.collect({"_gpu_processes": gpu})
        cold = time.process_time() - t0
        for _ in range(SETTLE_SCANS):
            src.collect({"_gpu_processes": gpu})
        t0 = time.process_time()
        for _ in range(scans):
            out = src.collect({"_gpu_processes": gpu})
        steady = (time.process_time() - t0) / scans
        total = len(os.listdir("/proc"))
        print(
            f"{n:>5} extra processes ({total} /proc entries): first scan {cold * 1000:.1f} ms CPU, "
            f"steady scan {steady * 1000:.2f} ms CPU, {len(out['processes'])} reported"
        )
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:] if a.isdigit()] or [100, 1000]
    if "--big" in sys.argv:
        sizes.append(5000)
    for n in sizes:
        measure(n)
