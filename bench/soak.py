#!/usr/bin/env python3
"""Soak: a week of samples through the running daemon at high speed; RSS and series count per simulated day.

Prints figures, asserts nothing. Run from the repository root:
    python bench/soak.py [--days 7] [--speed 20000] [--traces DIR ...]

The week (7 x 24 x 3600 / 30 = 20,160 samples) is built by looping over the
traces (the labelled public examples, tests/fixtures/traces/public) with time
made contiguous, and churn on every pass: each process gets a new pid and
create_time, each training job a new name (`job-p<pass>`). While the daemon
replays it, a client posts progress reports for a new job name every simulated
hour (when the progress API is in this build). Once per simulated day the
daemon's VmRSS and the number of series in /metrics are read.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "bench"))  # _common, also when imported as bench.soak by the tests
from _common import count_series, proc_status  # noqa: E402

DAY = 86400.0
STEP = 30.0


def default_traces() -> list[Path]:
    """The six labelled public example traces (the repo's copy under tests/fixtures/traces/public)."""
    d = REPO / "tests" / "fixtures" / "traces" / "public"
    return sorted(p for p in d.glob("*.jsonl") if not p.name.endswith(".truth.jsonl"))


def build_week_trace(dst: Path, traces: Iterable[Path], samples: int, churn: bool = True) -> int:
    """Write `samples` trace-v1 lines looping over `traces`, time contiguous at 30 s; returns passes made."""
    sources = [
        [json.loads(line) for line in Path(t).read_text().splitlines() if line.strip()] for t in traces
    ]
    sources = [s for s in sources if s]
    written, passes, ts = 0, 0, sources[0][0]["ts"]
    with open(dst, "w") as out:
        while written < samples:
            for lines in sources:
                passes += 1
                t0 = lines[0]["ts"]
                for doc in lines:
                    if written >= samples:
                        return passes
                    d = dict(doc)
                    d["ts"] = ts + (doc["ts"] - t0)
                    if churn:
                        # New pids (and create_times) every pass, as after restarts; new job names too.
                        d["processes"] = [
                            {**p, "pid": p["pid"] + 1000 * passes, "create_time": p["create_time"] + passes}
                            for p in doc.get("processes") or ()
                        ]
                        d["throughput"] = [
                            {**t, "job": f"{t['job']}-p{passes}", "ts": t["ts"] - t0 + ts}
                            for t in doc.get("throughput") or ()
                        ]
                    out.write(json.dumps(d, separators=(",", ":")) + "\n")
                    written += 1
                ts = d["ts"] + STEP
    return passes


def series_count(base: str) -> int:
    """Lines in /metrics that are samples (not # HELP/# TYPE)."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        return count_series(r.read().decode())


def status(base: str) -> dict:
    with urllib.request.urlopen(base + "/api/v1/status", timeout=10) as r:
        return json.loads(r.read())


def post_progress(base: str, job: str, step: int, event: str | None = None) -> int:
    body = {"job": job, "step": step, "tokens": step * 4096}
    if event:
        body["event"] = event
    req = urllib.request.Request(
        base + "/api/v1/progress", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def start_daemon(trace: Path, speed: float, state_dir: str | None, extra_env: dict | None = None):
    """`spark-watchd run --replay TRACE --speed X` on a free port; (proc, base url) once healthy."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO), **(extra_env or {})}
    env.pop("SPARK_WATCHD_CONFIG", None)
    argv = [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}"]
    argv += ["--replay", str(trace), "--speed", str(speed), "--log-level", "warning"]
    if state_dir is not None:  # state file and journal on disk (fsync'd), as a live daemon keeps them
        argv += ["--state-dir", state_dir]
    proc = subprocess.Popen(argv, env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            if status(base).get("ts"):
                return proc, base
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("daemon did not come up")


def expiry_env(speed: float) -> dict[str, str]:
    """SPARK_WATCHD_PROGRESS__JOB_EXPIRY_S scaled to the replay speed, where this build has the setting.

    The tracker drops a job after job_expiry_s (900 s) of *wall* time without reports; at SPEED x a simulated
    day passes in seconds, so without scaling every job of the week would still be tracked (up to
    progress.max_jobs) when the soak ends: a pile-up of the soak's making, not the daemon's.
    """
    try:
        from spark_watchd.throughput.settings import ProgressSettings
    except ImportError:
        return {}
    if "job_expiry_s" not in ProgressSettings.model_fields:
        return {}
    return {"SPARK_WATCHD_PROGRESS__JOB_EXPIRY_S": f"{max(1.0, 900.0 / speed):g}"}


def soak(
    trace: Path,
    samples: int,
    speed: float,
    progress: bool = True,
    log=print,
    every: float = DAY,
    keep_state: bool = True,
) -> list[dict]:
    """Replay `trace` through a daemon; a row per `every` simulated seconds (a day by default):
    {day, wall_s, rss_kib, series, threads, fds, jobs_posted}, day counting periods of `every`."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="soak-state-") as state:
        # The tracker drops a job after progress.job_expiry_s (900 s) of *wall* time without reports; at
        # SPEED x a simulated day passes in seconds, so scale the expiry with the speed (at least 1 s) or every
        # job of the week would still be tracked (capped by progress.max_jobs) when the soak ends.
        proc, base = start_daemon(trace, speed, state if keep_state else None, expiry_env(speed))
        try:
            t_wall = time.monotonic()
            first_ts = None
            next_day = 1
            next_hour = 0
            jobs = 0
            have_progress = progress
            last_ts = None
            stalled = 0
            while True:
                st = status(base)
                ts = st.get("ts")
                if first_ts is None:
                    first_ts = ts
                    rows.append(row(0, t_wall, proc.pid, base, jobs))
                sim = ts - first_ts
                if have_progress and sim >= next_hour * 3600:
                    # A new training job every simulated hour: start, a few steps, end.
                    name = f"soak-job-{next_hour}"
                    codes = [
                        post_progress(base, name, s, ev) for s, ev in ((0, "start"), (10, None), (20, "end"))
                    ]
                    if 404 in codes:
                        have_progress = False
                        log("  (progress API not in this build: no job churn through POST /api/v1/progress)")
                    else:
                        jobs += 1
                    next_hour += 1
                while sim >= next_day * every:
                    r = row(next_day, t_wall, proc.pid, base, jobs)
                    rows.append(r)
                    log(
                        f"  day {r['day']}: wall {r['wall_s']:.1f} s, RSS {r['rss_kib'] / 1024:.1f} MiB, "
                        f"{r['series']} series, {r['threads']} threads, {r['fds']} fds, {r['jobs_posted']} jobs posted"
                    )
                    next_day += 1
                done = sim >= (samples - 1) * STEP - 1
                stalled = stalled + 1 if ts == last_ts else 0
                last_ts = ts
                if done or stalled > 100:
                    break
                time.sleep(0.05)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            proc.stderr.close()
    return rows


def row(day: int, t_wall: float, pid: int, base: str, jobs: int) -> dict:
    return {
        "day": day,
        "wall_s": time.monotonic() - t_wall,
        "rss_kib": proc_status(pid, "VmRSS"),
        "threads": proc_status(pid, "Threads"),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "series": series_count(base),
        "jobs_posted": jobs,
    }


def slope(rows: list[dict], key: str) -> float:
    """Least-squares growth per simulated day over days 1.. (day 0 is start-up, before the first plateau)."""
    pts = [(r["day"], r[key]) for r in rows if r["day"] >= 1]
    if len(pts) < 2:
        return float("nan")
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--speed", type=float, default=20000.0, help="replay speed (x real time)")
    ap.add_argument("--traces", nargs="*", type=Path, help="trace files to loop over")
    ap.add_argument("--no-churn", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks: stop the daemon
    samples = int(args.days * DAY / STEP)
    traces = args.traces or default_traces()
    load = os.getloadavg()
    print(f"soak: {samples} samples ({args.days:g} simulated days at 30 s), speed {args.speed:g}x, "
          f"{len(traces)} traces, load {load[0]:.2f} on {os.cpu_count()} CPUs")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        trace = Path(tmp) / "week.jsonl"
        passes = build_week_trace(trace, traces, samples, churn=not args.no_churn)
        print(f"  trace: {passes} passes over {', '.join(t.name for t in traces)}; "
              f"{trace.stat().st_size / 2**20:.1f} MiB")  # fmt: skip
        rows = soak(trace, samples, args.speed)
    first, last = rows[1] if len(rows) > 1 else rows[0], rows[-1]
    print(f"RSS: {rows[0]['rss_kib'] / 1024:.1f} MiB at start, {first['rss_kib'] / 1024:.1f} MiB after day 1, "
          f"{last['rss_kib'] / 1024:.1f} MiB after day {last['day']}; "
          f"growth {slope(rows, 'rss_kib'):+.0f} KiB per simulated day")  # fmt: skip
    print(f"series: {rows[0]['series']} at start, {first['series']} after day 1, {last['series']} after day "
          f"{last['day']}; growth {slope(rows, 'series'):+.1f} per simulated day")  # fmt: skip
    print(f"threads: {rows[0]['threads']} -> {last['threads']}, fds: {rows[0]['fds']} -> {last['fds']}")
    print(f"wall: {last['wall_s']:.0f} s for {last['day']} simulated days; load now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
