#!/usr/bin/env python3
"""spark-watchd's cost side by side with node_exporter, on this machine, in one run. Prints figures, asserts nothing.

Run from the repository root:
    python bench/compare.py [--scrapes 200] [--process-counts 100 1000 5000] [--ticks 15]

1. /metrics latency: Debian prometheus-node-exporter (--no-collector.systemd) and
   `spark-watchd run --interval 30` (live) scraped alternately, a new connection
   per scrape, median and p90; exposition size and series count of each.
2. Resident memory of the daemon (VmRSS) after start and after the scrapes.
3. CPU time of one full live tick (every source, diagnosis, publish) with 100,
   1,000 and 5,000 extra sleeping processes: the first tick after they appear
   (cold process cache) and the median of the following ones.
4. The fast memory watch's CPU share (its thread alone, 1 s interval).
5. Replay throughput: `spark-watchd replay --format jsonl` over every trace
   (samples/s, wall and CPU), and the in-process classify rate (Diagnoser.observe).
"""

from __future__ import annotations

import argparse
import http.client
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from _common import count_series, free_port, proc_status, spawn_sleepers  # noqa: E402


def get(port: int, path: str) -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait_ready(port: int, path: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited {proc.returncode}")
        try:
            if get(port, path)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{proc.args} not ready")


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def scrape_side_by_side(scrapes: int) -> None:
    node = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    sw_port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("SPARK_WATCHD_CONFIG", None)
    procs: dict[str, tuple[subprocess.Popen, int, str]] = {}
    with tempfile.TemporaryDirectory() as state:
        sw = subprocess.Popen(
            [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{sw_port}",
             "--interval", "30", "--state-dir", state, "--log-level", "error"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs["spark-watchd"] = (sw, sw_port, "/healthz")
        if node:
            ne_port = free_port()
            ne = subprocess.Popen(
                [node, "--no-collector.systemd", f"--web.listen-address=127.0.0.1:{ne_port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            procs["node_exporter"] = (ne, ne_port, "/metrics")
        else:
            print("node_exporter: not installed (apt-get install prometheus-node-exporter); scraped alone")
        try:
            for _name, (p, port, ready) in procs.items():
                wait_ready(port, ready, p)
            rss_start = proc_status(sw.pid, "VmRSS")
            for _ in range(10):  # warm up both
                for _name, (_p, port, _r) in procs.items():
                    get(port, "/metrics")
            lat: dict[str, list[float]] = {n: [] for n in procs}
            last: dict[str, bytes] = {}
            for i in range(scrapes):
                order = list(procs) if i % 2 == 0 else list(reversed(procs))  # interleaved, alternating first
                for name in order:
                    port = procs[name][1]
                    t0 = time.perf_counter()
                    status, body = get(port, "/metrics")
                    lat[name].append((time.perf_counter() - t0) * 1000)
                    last[name] = body
            rss_after = proc_status(sw.pid, "VmRSS")
            print(f"/metrics latency, {scrapes} scrapes each, interleaved, new connection per scrape:")
            for name, xs in lat.items():
                print(f"  {name:13s} median {statistics.median(xs):6.2f} ms   p90 {pct(xs, 0.9):6.2f} ms   "
                      f"({len(last[name]):,} bytes, {count_series(last[name].decode())} series)")  # fmt: skip
            if "node_exporter" in procs:
                print(
                    f"  node_exporter RSS: {proc_status(procs['node_exporter'][0].pid, 'VmRSS') / 1024:.1f} MiB"
                )
            print(f"spark-watchd RSS: {rss_start / 1024:.1f} MiB after start, "
                  f"{rss_after / 1024:.1f} MiB after {scrapes + 10} scrapes")  # fmt: skip
        finally:
            for p, _port, _r in procs.values():
                p.terminate()
            for p, _port, _r in procs.values():
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()


def tick_cpu(counts: list[int], ticks: int) -> None:
    """CPU time of daemon.tick() in this process (fast watch off: it is measured on its own below)."""
    from spark_watchd import app
    from spark_watchd.config import load_settings
    from spark_watchd.sources.processes import SETTLE_SCANS

    settings = load_settings(None, environ={"SPARK_WATCHD_SOURCES__FAST_WATCH_INTERVAL_S": "0"})
    with tempfile.TemporaryDirectory() as state:
        d = app.build(settings, state_dir=state, serve=False)
        for _ in range(3):
            d.tick()
        names = ", ".join(s.name for s in d.collector.sources)
        print(f"tick CPU (full live tick: sources {names}; diagnosis; publish):")
        base = len([p for p in os.listdir("/proc") if p.isdigit()])
        for n in counts:
            procs = spawn_sleepers(n)
            try:
                time.sleep(0.5)
                cpu = []
                for _ in range(ticks + SETTLE_SCANS):
                    c0 = time.process_time()
                    d.tick()
                    cpu.append(time.process_time() - c0)
                settle, steady = cpu[:SETTLE_SCANS], cpu[SETTLE_SCANS:]
                scan = d.snapshot().sources.get("processes")
                print(f"  +{n:5d} processes ({base + n} in /proc): steady median {statistics.median(steady) * 1000:6.2f} ms,"
                      f" p90 {pct(steady, 0.9) * 1000:6.2f} ms CPU; while new: "
                      f"{' / '.join(f'{c * 1000:.0f}' for c in settle)} ms (argv read on the first {SETTLE_SCANS} scans)"
                      f"  [processes source {scan.duration_s * 1000 if scan else float('nan'):.2f} ms wall]")  # fmt: skip
            finally:
                for p in procs:
                    p.kill()
                for p in procs:
                    p.wait()
        d.close()


def fast_watch_share(seconds: float) -> None:
    from spark_watchd.sources.memwatch import MemWatch

    w = MemWatch("/proc", 1.0)
    w.start()
    time.sleep(0.2)
    # The watch thread's own CPU clock, not the process's.
    clk = time.pthread_getcpuclockid(w._thread.ident) if hasattr(time, "pthread_getcpuclockid") else None
    c0 = time.clock_gettime(clk) if clk is not None else time.process_time()
    t0, r0 = time.perf_counter(), w.readings
    time.sleep(seconds)
    c1 = time.clock_gettime(clk) if clk is not None else time.process_time()
    dt, reads = time.perf_counter() - t0, w.readings - r0
    w.stop()
    share = (c1 - c0) / dt
    print(f"fast memory watch (1 s): {share * 100:.4f} % of one CPU ({(c1 - c0) / max(reads, 1) * 1e6:.0f} us "
          f"CPU per reading, {reads} readings in {dt:.0f} s)")  # fmt: skip


def traces() -> list[Path]:
    """The six labelled public example traces (the repo's copy under tests/fixtures/traces/public)."""
    d = REPO / "tests" / "fixtures" / "traces" / "public"
    return sorted(p for p in d.glob("*.jsonl") if not p.name.endswith(".truth.jsonl"))


def replay_rates() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    paths = traces()

    def run(path: Path) -> tuple[int, float, float]:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "spark_watchd", "replay", "--format", "jsonl", str(path)],
            env=env, capture_output=True, check=True,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        return sum(1 for line in out.stdout.splitlines() if line.strip()), wall, cpu

    with tempfile.TemporaryDirectory() as tmp:  # start-up cost: the same command on a one-sample trace
        one = Path(tmp) / "one.jsonl"
        one.write_text(paths[0].read_text().splitlines()[0] + "\n")
        starts = [run(one) for _ in range(3)]
    start_wall = statistics.median(w for _, w, _ in starts)
    start_cpu = statistics.median(c for _, _, c in starts)
    total = wall = cpu = 0.0
    for p in paths:
        n, w, c = run(p)
        total, wall, cpu = total + n, wall + w, cpu + c
    print(f"replay --format jsonl, {len(paths)} traces, {total:.0f} samples: {wall:.2f} s wall in all, "
          f"{total / wall:,.0f} samples/s ({len(paths)} process starts of ~{start_wall:.2f} s wall, "
          f"{start_cpu:.2f} s CPU each, included)")  # fmt: skip
    # The same verb in this process (no start-up): parse, classify, encode, write to /dev/null.
    import argparse as _ap

    from spark_watchd.commands import replay as replay_cmd

    saved = sys.stdout
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        with open(os.devnull, "w") as sink:
            sys.stdout = sink
            for p in paths:
                replay_cmd.main(_ap.Namespace(trace=str(p), format="jsonl", skip_bad=False))
    finally:
        sys.stdout = saved
    w, c = time.perf_counter() - t0, time.process_time() - c0
    print(f"replay verb in-process (parse + classify + encode + write): {total / w:,.0f} samples/s wall, "
          f"{total / c:,.0f} per CPU-second")  # fmt: skip
    from spark_watchd.diagnose.engine import Diagnoser
    from spark_watchd.sample.trace import read_trace

    loaded = [list(read_trace(p)) for p in paths]
    n = sum(len(s) for s in loaded)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(20):
        for s in loaded:  # parsed once above: this times classification alone
            eng = Diagnoser()
            for x in s:
                eng.observe(x)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    m = sum(1 for p in paths for _ in read_trace(p))
    parse, parse_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"in-process classify (Diagnoser.observe): {20 * n / dt:,.0f} samples/s wall, "
          f"{20 * n / dc:,.0f} per CPU-second; trace parsing (JSON + Sample): {m / parse:,.0f} samples/s wall, "
          f"{m / parse_cpu:,.0f} per CPU-second")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--process-counts", type=int, nargs="*", default=[100, 1000, 5000])
    ap.add_argument("--ticks", type=int, default=15)
    ap.add_argument("--watch-seconds", type=float, default=10)
    args = ap.parse_args()
    from spark_watchd.logs import configure_logging

    configure_logging("error")
    la = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}; "
          f"python {sys.version.split()[0]}")  # fmt: skip
    scrape_side_by_side(args.scrapes)
    tick_cpu(args.process_counts, args.ticks)
    fast_watch_share(args.watch_seconds)
    replay_rates()
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
