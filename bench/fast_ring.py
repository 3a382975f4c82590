"""Cost of the armed fast ring (postmortem/fast.py): CPU share and bytes written per hour while armed, without
servers and with N inference servers' progress read every second, and nothing while disarmed (prints figures,
asserts nothing).

    python bench/fast_ring.py [SECONDS] [--servers N]   # default 20 s armed at 1 s, N = 2

Reads this machine's /proc; writes (and fsyncs) into a temporary directory on the same disk as /tmp. The
servers are fake vLLMs in processes of their own (tests/support/serving_fakes.py: real HTTP servers on
loopback serving the exposition vLLM emits, tokens flowing), configured as `[[serving.endpoints]]`; their
CPU is theirs, not counted. With servers the figure is this whole process's CPU over the armed seconds (the
ring's thread and the short-lived read threads; the scrapers' own 30 s scrapes are done before it starts).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, REPO)

from spark_watchd.diagnose.thresholds import Thresholds  # noqa: E402
from spark_watchd.postmortem.fast import FastRing  # noqa: E402

SERVER = (
    "import sys\nsys.path.insert(0, {repo!r})\nfrom tests.support.serving_fakes import main\nmain('vllm')\n"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _servers(n: int) -> tuple[list[subprocess.Popen], list[int]]:
    """n fake vLLMs, each `vllm serve M --port P` in a process of its own, answering."""
    procs, ports = [], []
    for _ in range(n):
        port = _free_port()
        argv = [sys.executable, "-c", SERVER.format(repo=REPO), "serve", "Qwen/Qwen3-8B", "--port", str(port)]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        ports.append(port)
    for port in ports:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                time.sleep(0.1)
    return procs, ports


def _armed(d: str, seconds: float, servers=None) -> tuple[FastRing, float, int]:
    """(the ring after `seconds` armed, this process's CPU seconds over them, bytes on disk at the end)."""
    ring = FastRing(d, servers=servers, thresholds=Thresholds)
    c0 = time.process_time()
    ring.arm()
    time.sleep(seconds)
    if servers is not None:  # what the next tick's sample would carry: each read once (serving_progress)
        reads = servers().fast.take()
        size = sum(len(json.dumps(r.to_dict(), separators=(",", ":"))) for r in reads)
        print(
            f"the samples' serving_progress: {len(reads)} reads, {size / seconds * 3600 / 2**20:.1f} MiB per hour"
        )
    ring.close()
    cpu = time.process_time() - c0
    return ring, cpu, sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def _say(what: str, seconds: float, ring: FastRing, cpu: float, on_disk: int) -> None:
    print(
        f"{what}: armed {seconds:g} s at 1 s: {ring.readings} lines of {ring.bytes_written / max(ring.readings, 1):.0f}"
        f" bytes, {cpu * 1000:.0f} ms CPU -> {cpu / seconds * 100:.2f} % of one core, "
        f"{ring.bytes_written / seconds * 3600 / 2**20:.1f} MiB written per hour, {on_disk / 1024:.0f} KiB on disk"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("seconds", nargs="?", type=float, default=20.0)
    ap.add_argument("--servers", type=int, default=2)
    args = ap.parse_args()
    seconds = args.seconds
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
        print(
            f"one reading: {cpu * 1e6:.0f} us CPU, {wall * 1e3:.2f} ms wall (fsync included), {per_line:.0f} bytes"
        )
        # Disarmed: no thread, nothing read or written.
        idle = FastRing(os.path.join(d, "idle"))
        time.sleep(min(3.0, seconds))
        print(f"disarmed: {idle.readings} readings, {idle.bytes_written} bytes, armed={idle.armed}")
        # Armed, no server.
        os.mkdir(os.path.join(d, "armed"))
        _say("no server", seconds, *_armed(os.path.join(d, "armed"), seconds))
        # Armed, N servers' progress every second.
        if args.servers:
            from spark_watchd.sources.serving import ServingSource
            from spark_watchd.sources.serving_settings import ServingSettings

            procs, ports = _servers(args.servers)
            try:
                eps = [{"kind": "vllm", "url": f"http://127.0.0.1:{p}"} for p in ports]
                src = ServingSource(
                    ServingSettings(endpoints=eps), interval_s=30.0, own_addresses=frozenset()
                )
                src.collect({})  # the scrapers and their first scrape, before the clock starts
                os.mkdir(os.path.join(d, "servers"))
                ring, cpu, on_disk = _armed(os.path.join(d, "servers"), seconds, lambda: src)
                last = ring.samples()[-1].serving if ring.readings else ()
                up = sum(1 for r in last if r.up and r.generation_tokens_per_s)
                _say(
                    f"{args.servers} vLLM servers ({up} up and generating in the last line)",
                    seconds,
                    ring,
                    cpu,
                    on_disk,
                )
                src.close()
            finally:
                for p in procs:
                    p.terminate()
                    p.wait(10)
    print(f"threads now: {threading.active_count()} (1 = only main)")


if __name__ == "__main__":
    main()
