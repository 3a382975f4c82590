#!/usr/bin/env python3
"""spark-watchd's cost beside the previous release and node_exporter, on this machine, in one run. Asserts nothing.

Run from the repository root:
    python bench/compare.py [--previous REF] [--scrapes 200] [--process-counts 100 1000 5000] [--ticks 15]
                            [--live-minutes 0]

The previous release is REF of this repository (`git archive`, default 68b3b1e: main before the stages
restructure of issue 24); every figure is measured for it and for this tree in the same run, side by side.

1. /metrics latency: Debian prometheus-node-exporter (--no-collector.systemd) and both trees'
   `spark-watchd run --interval 30` (live, default config) scraped in turn, a new connection per scrape,
   median and p90; exposition size and series count; resident memory after start and after the scrapes.
2. CPU time of one full live tick (every source, diagnosis, publish) with 100, 1,000 and 5,000 extra
   sleeping processes: the first three ticks after they appear (new processes) and the steady median.
3. The fast memory watch's CPU share (its thread alone, 1 s interval).
4. Replay: `spark-watchd replay --format jsonl` over the six public traces (with process starts), the
   same verb in-process, the in-process classify rate (Diagnoser.observe) and trace parsing.
5. With --live-minutes N: both daemons live at --interval 1 for N minutes with two training jobs posting
   progress reports and 50 server processes; RSS after start and at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from _common import count_series, free_port, proc_status, spawn_sleepers  # noqa: E402
from compare_parts import get, live_load, pct, wait_ready  # noqa: E402

PREVIOUS = "68b3b1e"


def daemon(tree: Path, state: str, interval: float = 30) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("SPARK_WATCHD_CONFIG", None)
    p = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}",
         "--interval", f"{interval:g}", "--state-dir", state, "--log-level", "error"],
        env=env, cwd=state, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return p, port


def scrape_side_by_side(trees: dict[str, Path], scrapes: int) -> None:
    node = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    procs: dict[str, tuple[subprocess.Popen, int, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, tree in trees.items():
            state = os.path.join(tmp, name)
            os.mkdir(state)
            p, port = daemon(tree, state)
            procs[name] = (p, port, "/healthz")
        if node:
            port = free_port()
            ne = subprocess.Popen(
                [node, "--no-collector.systemd", f"--web.listen-address=127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            procs["node_exporter"] = (ne, port, "/metrics")
        else:
            print("node_exporter: not installed (apt-get install prometheus-node-exporter); not compared")
        try:
            for p, port, ready in procs.values():
                wait_ready(port, ready, p)
            time.sleep(1.0)  # the first tick published, start-up garbage settled
            rss_start = {n: proc_status(p.pid, "VmRSS") for n, (p, _port, _r) in procs.items()}
            for _ in range(10):  # warm up every server
                for _p, port, _r in procs.values():
                    get(port, "/metrics")
            lat: dict[str, list[float]] = {n: [] for n in procs}
            last: dict[str, bytes] = {}
            names = list(procs)
            for i in range(scrapes):
                order = names[i % len(names) :] + names[: i % len(names)]  # each goes first in turn
                for name in order:
                    t0 = time.perf_counter()
                    _status, body = get(procs[name][1], "/metrics")
                    lat[name].append((time.perf_counter() - t0) * 1000)
                    last[name] = body
            rss_after = {n: proc_status(p.pid, "VmRSS") for n, (p, _port, _r) in procs.items()}
        finally:
            for p, _port, _r in procs.values():
                p.terminate()
            for p, _port, _r in procs.values():
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    ne_median = statistics.median(lat["node_exporter"]) if "node_exporter" in lat else None
    print(f"/metrics latency, {scrapes} scrapes each, in turn, a new connection per scrape:")
    for name, xs in lat.items():
        m = statistics.median(xs)
        ratio = (
            f"  = {m / ne_median:.2f}x node_exporter's median"
            if ne_median and name != "node_exporter"
            else ""
        )
        print(f"  {name:22s} median {m:6.2f} ms   p90 {pct(xs, 0.9):6.2f} ms   "
              f"({len(last[name]):,} bytes, {count_series(last[name].decode())} series){ratio}")  # fmt: skip
    print("resident memory (VmRSS) with the default config:")
    for name in procs:
        print(f"  {name:22s} {rss_start[name] / 1024:5.1f} MiB after start, "
              f"{rss_after[name] / 1024:5.1f} MiB after {scrapes + 10} scrapes")  # fmt: skip


def worker(section: str, tree: Path, args: argparse.Namespace) -> dict:
    """Run one section in a fresh interpreter with TREE's spark_watchd; its figures as a dict."""
    cmd = [sys.executable, str(REPO / "bench" / "compare_parts.py"), section, str(tree)]
    cmd += ["--process-counts", *map(str, args.process_counts), "--ticks", str(args.ticks)]
    cmd += ["--watch-seconds", str(args.watch_seconds)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=str(tree))
    if out.returncode != 0:
        raise RuntimeError(f"{section} on {tree}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def side_by_side(trees: dict[str, Path], args: argparse.Namespace) -> None:
    names = list(trees)
    res = {n: worker("tick", t, args) for n, t in trees.items()}
    print("tick CPU (full live tick: every source; diagnosis; publish), median of the steady ticks and the "
          "first ticks after N new processes appear:")  # fmt: skip
    for n in args.process_counts:
        cells = []
        for name in names:
            r = res[name][str(n)]
            cells.append(
                f"{name}: steady {r['steady_ms']:5.2f} ms, new {' / '.join(f'{x:.0f}' for x in r['new_ms'])} ms"
            )
        print(f"  +{n:5d} processes   " + "   |   ".join(cells))
    res = {n: worker("watch", t, args) for n, t in trees.items()}
    print("fast memory watch (1 s): " + "   |   ".join(
        f"{name}: {r['share'] * 100:.3f} % of one CPU, {r['us_per_reading']:.1f} us a reading" for name, r in res.items()
    ))  # fmt: skip
    res = {n: worker("replay", t, args) for n, t in trees.items()}
    rows = (
        ("replay --format jsonl (process starts included)", "cli_per_s"),
        ("replay verb in-process (parse + classify + encode + write)", "verb_per_s"),
        ("classify in-process (Diagnoser.observe)", "classify_per_s"),
        ("trace parsing (JSON + validation + Sample)", "parse_per_s"),
    )
    print(f"replay over the six public traces ({res[names[-1]]['samples']} samples), samples per CPU-second:")
    for label, key in rows:
        cells = [f"{name}: {res[name][key]:8,.0f}" for name in names]
        gain = res[names[-1]][key] / res[names[0]][key] if len(names) > 1 else 1.0
        print(f"  {label:60s} " + "   ".join(cells) + f"   (x{gain:.2f})")


def previous_tree(ref: str, dst: Path) -> Path:
    """REF of this repository extracted to DST (tracked files only)."""
    dst.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dst)], input=archive.stdout, check=True)
    return dst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--previous", default=PREVIOUS, help=f"git ref of the previous release (default {PREVIOUS})"
    )
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--process-counts", type=int, nargs="*", default=[100, 1000, 5000])
    ap.add_argument("--ticks", type=int, default=15)
    ap.add_argument("--watch-seconds", type=float, default=10)
    ap.add_argument("--live-minutes", type=float, default=0, help="also run the live soak for N minutes")
    args = ap.parse_args()
    la = os.getloadavg()
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    print(f"machine: {os.cpu_count()} CPUs, load average {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}; "
          f"python {sys.version.split()[0]}; this tree {head.stdout.strip() or '?'}, previous {args.previous}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="compare-") as tmp:
        prev = previous_tree(args.previous, Path(tmp) / "previous")
        trees = {f"previous {args.previous}": prev, "this tree": REPO}
        scrape_side_by_side(trees, args.scrapes)
        side_by_side(trees, args)
        if args.live_minutes:
            live_load(trees, args.live_minutes, daemon, spawn_sleepers)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
