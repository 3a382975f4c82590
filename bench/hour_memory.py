#!/usr/bin/env python3
"""What grows in a live daemon over an hour, in a minute or two: prints figures, asserts nothing.

    python bench/hour_memory.py [--minutes 60] [--interval 1] [--servers 50] [--every 10] [--top 25]
                                [--no-tracemalloc] [--metrics-every 0] [--page-every 0]

The daemon is the one `run` builds (spark_watchd.app.build with every subscriber: page history, run ledger,
post-mortem ring, state file and journal in a temporary state directory), on the live sources of this
machine, with the `live` load of bench/compare.py (compare_parts.live_load): two training jobs posting a
progress report every 0.5 s through the progress route's handler (a new run every 300 steps) and 50
`vllm serve` processes. Only the clock is simulated: each tick moves it one --interval on, so an hour of
samples takes the CPU time of 3,600 ticks instead of an hour. Every --every simulated minutes it prints
the Python heap that tracemalloc traces (after gc) and VmRSS; at the end the allocations that grew most
between the first report and the last, by file:line (what holds them, not who is to blame).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def breakdown() -> str:
    """Where the RSS is: glibc's main heap ([heap]), other anonymous mappings (pymalloc's 1 MiB arenas,
    threads' malloc arenas, big blocks), files (code); and pymalloc's arenas and the bytes in use in them."""
    rss = {"heap": 0, "anon": 0, "file": 0}
    kind = "anon"
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 else ""
                kind = "heap" if name == "[heap]" else "file" if name.startswith("/") else "anon"
            elif head[0] == "Rss:":
                rss[kind] += int(head[1])
    import os

    with tempfile.TemporaryFile("w+") as tmp:  # _debugmallocstats writes to the C stderr
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read()
    stats = {}
    for line in text.splitlines():
        if line.startswith("# arenas allocated current") or line.startswith("# bytes in allocated blocks"):
            stats[line.split("=")[0].strip("# ").strip()] = int(line.split("=")[1].replace(",", ""))
    return (
        f"[heap] {rss['heap'] / 1024:5.1f}, anon {rss['anon'] / 1024:5.1f}, files {rss['file'] / 1024:5.1f} MiB;"
        f" pymalloc {stats.get('arenas allocated current', 0)} arenas,"
        f" {stats.get('bytes in allocated blocks', 0) / 2**20:.1f} MiB in use"
    )


def report(post, Request, job: str, st: list[int]) -> None:
    """One progress report of JOB through the route's handler (st: [step, run]; a new run every 300 steps)."""
    st[0] += 1
    body = {"job": f"{job}-{st[1]}", "step": st[0], "tokens": st[0] * 8192}
    if st[0] == 300:
        body["event"] = "end"
        st[0], st[1] = 0, st[1] + 1
    headers = {"content-type": "application/json"}
    post(Request("POST", "/api/v1/progress", {}, headers, json.dumps(body).encode(), "127.0.0.1"))


def http_poster(address: tuple[str, int]):
    """A handler look-alike that sends the request to the server at ADDRESS (a new connection each, as
    compare_parts._report's urllib does)."""
    import http.client

    def post(req) -> None:
        c = http.client.HTTPConnection(*address, timeout=10)
        try:
            c.request(req.method, req.path, req.body, {"Content-Type": req.headers["content-type"]})
            c.getresponse().read()
        finally:
            c.close()

    return post


def where(tree: Path, frame, line: bool = False) -> str:
    name = str(Path(frame.filename).resolve()).replace(str(tree.resolve()) + "/", "")
    return f"{name}:{frame.lineno}" if line else name


def print_tables(rows, by_file, first, last, args) -> None:
    """KiB traced per file at each report, relative to the first tick (the files that grew most); then the
    lines that grew most from the first tick to the end."""
    grown = sorted(by_file[-1], key=lambda f: by_file[0].get(f, 0.0) - by_file[-1][f])[: args.top]
    print("KiB held per file, relative to the first tick, at simulated minute:")
    print(f"  {'':48s}" + "".join(f"{m:>8.0f}" for m, *_ in rows[1:]))
    for f in grown:
        base = by_file[0].get(f, 0.0)
        print(f"  {f[-48:]:48s}" + "".join(f"{b.get(f, 0.0) - base:+8.0f}" for b in by_file[1:]))
    print(f"lines that grew most from the first tick to minute {rows[-1][0]:g}:")
    for st in last.compare_to(first, "lineno")[: args.top]:
        print(
            f"  {st.size_diff / 1024:+9.1f} KiB {st.count_diff:+8d} blocks  {where(args.tree, st.traceback[0], True)}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=REPO, help="the spark_watchd tree to measure")
    ap.add_argument("--minutes", type=float, default=60.0, help="simulated minutes")
    ap.add_argument("--interval", type=float, default=1.0, help="simulated seconds between ticks")
    ap.add_argument("--servers", type=int, default=50)
    ap.add_argument("--every", type=float, default=10.0, help="report every N simulated minutes")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-tracemalloc", action="store_true", help="RSS alone (tracemalloc inflates it)")
    ap.add_argument("--breakdown", action="store_true", help="where the RSS is, at each report")
    ap.add_argument(
        "--http", action="store_true", help="post the reports over loopback HTTP to the real server"
    )
    ap.add_argument("--metrics-every", type=int, default=0, help="render /metrics every N ticks (0: never)")
    ap.add_argument("--page-every", type=int, default=0, help="GET the page history every N ticks")
    args = ap.parse_args()
    sys.path.insert(0, str(args.tree))

    from spark_watchd import app
    from spark_watchd.config import load_settings
    from spark_watchd.logs import configure_logging
    from spark_watchd.web.http import Request

    configure_logging("error")
    trace = not args.no_tracemalloc
    if trace:
        tracemalloc.start(1)
    now = [time.time()]
    with tempfile.TemporaryDirectory(prefix="hour-memory-") as tmp:
        script = Path(tmp) / "vllm"
        script.write_text("import time\ntime.sleep(36000)\n")
        servers = [
            subprocess.Popen(
                [sys.executable, str(script), "serve", f"m{i}", "--gpu-memory-utilization", "0.3"]
            )
            for i in range(args.servers)
        ]
        state = Path(tmp) / "state"
        state.mkdir()
        settings = load_settings(None, {"daemon": {"interval": args.interval, "log_level": "error"}})
        d = app.build(settings, state_dir=str(state), clock=lambda: now[0])
        routes = {(r.method, r.path): r.handler for r in d.routes}
        post = routes[("POST", "/api/v1/progress")]
        server = None
        if args.http:  # the daemon's own server on a free loopback port, its worker pool and gate
            settings = settings.model_copy(
                update={"daemon": settings.daemon.model_copy(update={"listen": "127.0.0.1:0"})}
            )
            server, _runner = app.serving_parts(settings, d, reload=lambda: settings)
            server.start()
            post = http_poster(server.address)
        metrics = routes.get(("GET", "/metrics"))
        history = routes.get(("GET", "/api/v1/history"))
        jobs = {"train-a": [0, 0], "train-b": [0, 0]}  # job -> [step, run]
        ticks = int(args.minutes * 60 / args.interval)
        per_report = max(1, int(args.every * 60 / args.interval))
        rows: list[tuple] = []
        by_file: list[dict[str, float]] = []  # per report: file -> KiB traced
        first = last = None
        cpu0 = time.process_time()
        try:
            for i in range(1, ticks + 1):
                for _ in range(int(args.interval * 2)):  # each job reports every 0.5 s
                    now[0] += 0.5
                    for job, st in jobs.items():
                        report(post, Request, job, st)
                d.tick()
                if args.metrics_every and metrics and i % args.metrics_every == 0:
                    metrics(Request("GET", "/metrics", {}, {}, b"", "127.0.0.1"))
                if args.page_every and history and i % args.page_every == 0:
                    history(Request("GET", "/api/v1/history", {}, {}, b"", "127.0.0.1"))
                if i == 1 or i % per_report == 0 or i == ticks:
                    gc.collect()
                    heap = tracemalloc.get_traced_memory()[0] / 2**20 if trace else float("nan")
                    rows.append((i * args.interval / 60, heap, rss_mib(), time.process_time() - cpu0))
                    m, h, r, c = rows[-1]
                    more = f"; {breakdown()}" if args.breakdown else ""
                    print(
                        f"  {m:6.1f} min: heap {h:5.2f} MiB traced, VmRSS {r:5.1f} MiB, CPU {c:5.1f} s{more}",
                        flush=True,
                    )
                    if trace:
                        last = tracemalloc.take_snapshot()
                        first = first or last
                        by_file.append(
                            {
                                where(args.tree, st.traceback[0]): st.size / 1024
                                for st in last.statistics("filename")
                            }
                        )
            if trace and first is not None:
                print_tables(rows, by_file, first, last, args)
        finally:
            if server is not None:
                server.stop()
            d.close()
            for s in servers:
                s.kill()
                s.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
