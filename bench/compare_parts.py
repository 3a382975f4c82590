#!/usr/bin/env python3
"""bench/compare.py's measurements, one section per fresh interpreter against one tree's spark_watchd.

    python bench/compare_parts.py tick|watch|replay TREE [--process-counts ...] [--ticks N]

prints one JSON line of figures (compare.py prints them side by side); also the HTTP helpers and the live
soak compare.py uses.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def get(port: int, path: str) -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait_ready(port: int, path: str, proc: subprocess.Popen, timeout: float = 90) -> None:
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


def tick(args) -> dict:
    """CPU time of daemon.tick() in this process (fast watch off: it is measured on its own)."""
    from _common import spawn_sleepers

    from spark_watchd import app
    from spark_watchd.config import load_settings

    settings = load_settings(None, environ={"SPARK_WATCHD_SOURCES__FAST_WATCH_INTERVAL_S": "0"})
    out = {}
    with tempfile.TemporaryDirectory() as state:
        d = app.build(settings, state_dir=state, serve=False)
        for _ in range(3):
            d.tick()
        for n in args.process_counts:
            procs = spawn_sleepers(n)
            try:
                time.sleep(0.5)
                cpu = []
                for _ in range(args.ticks + 3):
                    c0 = time.process_time()
                    d.tick()
                    cpu.append(time.process_time() - c0)
                out[str(n)] = {
                    "new_ms": [c * 1000 for c in cpu[:3]],
                    "steady_ms": statistics.median(cpu[3:]) * 1000,
                }
            finally:
                for p in procs:
                    p.kill()
                for p in procs:
                    p.wait()
        d.close()
    return out


def watch(args) -> dict:
    from spark_watchd.sources.memwatch import MemWatch

    w = MemWatch("/proc", 1.0)
    w.start()
    time.sleep(0.2)
    clk = time.pthread_getcpuclockid(w._thread.ident)  # the watch thread's own CPU clock
    c0, t0, r0 = time.clock_gettime(clk), time.perf_counter(), w.readings
    time.sleep(args.watch_seconds)
    c1, dt, reads = time.clock_gettime(clk), time.perf_counter() - t0, w.readings - r0
    w.stop()
    return {"share": (c1 - c0) / dt, "us_per_reading": (c1 - c0) / max(reads, 1) * 1e6}


def replay(args) -> dict:
    from spark_watchd.commands import replay as replay_cmd
    from spark_watchd.diagnose.engine import Diagnoser
    from spark_watchd.sample.trace import read_trace

    d = Path.cwd() / "tests" / "fixtures" / "traces" / "public"
    paths = sorted(p for p in d.glob("*.jsonl") if not p.name.endswith(".truth.jsonl"))
    env = dict(os.environ, PYTHONPATH=str(Path.cwd()))
    env.pop("SPARK_WATCHD_CONFIG", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = 0
    for p in paths:
        out = subprocess.run(
            [sys.executable, "-m", "spark_watchd", "replay", "--format", "jsonl", str(p)],
            env=env, capture_output=True, check=True,
        )  # fmt: skip
        total += sum(1 for line in out.stdout.splitlines() if line.strip())
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cli_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    ns = argparse.Namespace(format="jsonl", skip_bad=False, state_dir=None, config=None)
    saved = sys.stdout
    verb = []
    try:
        with open(os.devnull, "w") as sink:
            sys.stdout = sink
            for _ in range(3):
                c0 = time.process_time()
                for p in paths:
                    ns.trace = str(p)
                    replay_cmd.main(ns)
                verb.append(time.process_time() - c0)
    finally:
        sys.stdout = saved
    loaded = [list(read_trace(p)) for p in paths]
    passes = []
    for _ in range(5):
        c0 = time.process_time()
        for s in loaded:  # parsed once above: this times classification alone
            eng = Diagnoser()
            for x in s:
                eng.observe(x)
        passes.append(time.process_time() - c0)
    c0 = time.process_time()
    for _ in range(3):
        for p in paths:
            for _s in read_trace(p):
                pass
    parse = (time.process_time() - c0) / 3
    return {
        "samples": total,
        "cli_per_s": total / cli_cpu,
        "verb_per_s": total / min(verb),
        "classify_per_s": total / min(passes),
        "parse_per_s": total / parse,
    }


def live_load(trees: dict, minutes: float, daemon, spawn_sleepers) -> None:
    """Both daemons live at --interval 1 with two jobs reporting progress and 50 server processes."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "vllm"
        script.write_text("import time\ntime.sleep(36000)\n")
        servers = [
            subprocess.Popen(
                [sys.executable, str(script), "serve", f"m{i}", "--gpu-memory-utilization", "0.3"]
            )
            for i in range(50)
        ]
        procs = {}
        try:
            for name, tree in trees.items():
                state = Path(tmp) / name.replace(" ", "-")
                state.mkdir()
                p, port = daemon(tree, str(state), interval=1)
                wait_ready(port, "/healthz", p)
                procs[name] = (p, port)
            start = {n: _rss(p.pid) for n, (p, _port) in procs.items()}
            stop = threading.Event()
            posters = [
                threading.Thread(target=_report, args=(port, job, stop), daemon=True)
                for _p, port in procs.values()
                for job in ("train-a", "train-b")
            ]
            for t in posters:
                t.start()
            # RSS every tenth of the run (10 minutes apart at most), to tell a plateau from a climb.
            every = min(minutes * 60 / 10, 600.0)
            marks: list[tuple[float, dict[str, float]]] = []
            t0 = time.monotonic()
            while not stop.wait(max(0.0, t0 + every * (len(marks) + 1) - time.monotonic())):
                marks.append(
                    ((time.monotonic() - t0) / 60, {n: _rss(p.pid) for n, (p, _port) in procs.items()})
                )
                if marks[-1][0] >= minutes - 1e-6:
                    break
            stop.set()
            end = marks[-1][1] if marks else {n: _rss(p.pid) for n, (p, _port) in procs.items()}
        finally:
            for p, _port in procs.values():
                p.terminate()
                p.wait(timeout=15)
            for s in servers:
                s.kill()
                s.wait()
    print(f"live at --interval 1 for {minutes:g} min, two jobs reporting every 0.5 s (a new run every 300 "
          "steps), 50 server processes:")  # fmt: skip
    for n in procs:
        print(f"  {n:22s} RSS {start[n]:5.1f} MiB after start, {end[n]:5.1f} MiB at the end")
    for n in procs:
        print(f"  {n:22s} RSS at minute " + ", ".join(f"{m:.3g}: {r[n]:.1f}" for m, r in marks))


def _rss(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def _report(port: int, job: str, stop: threading.Event) -> None:
    step, run = 0, 0
    while not stop.is_set():
        step += 1
        body = {"job": f"{job}-{run}", "step": step, "tokens": step * 8192}
        if step == 300:
            body["event"] = "end"
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/progress",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        try:
            urllib.request.urlopen(req, timeout=5).read()
        except OSError:
            pass
        if step == 300:
            step, run = 0, run + 1
        stop.wait(0.5)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("section", choices=("tick", "watch", "replay"))
    ap.add_argument("tree")
    ap.add_argument("--process-counts", type=int, nargs="*", default=[100, 1000, 5000])
    ap.add_argument("--ticks", type=int, default=15)
    ap.add_argument("--watch-seconds", type=float, default=10)
    args = ap.parse_args()
    sys.path.insert(0, args.tree)
    sys.path.insert(1, str(BENCH))
    from spark_watchd.logs import configure_logging

    configure_logging("error")
    print(json.dumps({"tick": tick, "watch": watch, "replay": replay}[args.section](args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
