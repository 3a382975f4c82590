"""What `spark-watchd fabric-test` costs: wall time, the receiving daemon's CPU, the throughput it reports.

    python bench/fabric_test_cost.py [GIB ...]

Starts one real daemon on loopback (replaying a bundled trace) that agrees to fabric tests from 127.0.0.1,
then runs the verb against it once per size (default 0.25, 1 and 4 GiB, each bounded at 5 s) and prints,
per run: bytes received, the reported Gb/s, the verb's wall time and the daemon's CPU seconds during the
test (/proc/PID/stat utime + stime). On loopback the figure is the host's memory and socket speed, not a
ConnectX-7's; what it shows is the cost of a test to the daemon that receives it. Asserts nothing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TRACE = os.path.join(ROOT, "tests", "fixtures", "traces", "healthy_hot_60s.jsonl")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(sizes: list[float]) -> None:
    tmp = tempfile.mkdtemp(prefix="fabric-bench-")
    pa, pb = _port(), _port()
    cfg_b, cfg_a = os.path.join(tmp, "b.toml"), os.path.join(tmp, "a.toml")
    with open(cfg_b, "w") as fh:
        fh.write(
            f'[fleet]\npeers = ["spark-a=127.0.0.1:{pa}"]\nfabric_test = true\nfabric_test_bytes = {16 << 30}\n'
        )
    with open(cfg_a, "w") as fh:
        fh.write(f'[fleet]\npeers = ["spark-b=127.0.0.1:{pb}"]\n')
    env = dict(os.environ, PYTHONPATH=ROOT)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "run", "--config", cfg_b, "--replay", TRACE, "--speed", "1",
         "--interval", "30", "--listen", f"127.0.0.1:{pb}", "--state-dir", os.path.join(tmp, "state")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{pb}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        for gib in sizes:
            cpu0, t0 = _cpu_s(daemon.pid), time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "spark_watchd", "fabric-test", "--config", cfg_a, "--bytes",
                 str(int(gib * 2**30)), "--seconds", "5"],
                env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            wall, cpu = time.perf_counter() - t0, _cpu_s(daemon.pid) - cpu0
            print(
                f"{gib:g} GiB asked: {out.stdout.strip()} | verb wall {wall:.2f} s, receiving daemon CPU {cpu:.2f} s"
            )
    finally:
        daemon.terminate()
        daemon.wait(10)


if __name__ == "__main__":
    main([float(x) for x in sys.argv[1:]] or [0.25, 1.0, 4.0])
