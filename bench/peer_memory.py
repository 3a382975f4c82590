#!/usr/bin/env python3
"""What a peer sending 3.9 MB of `worst` every second costs the daemon (issue 29, break 7).

usage: python bench/peer_memory.py [--seconds 20] [--mb 3.9] [--repo PATH] [--parse-only]

Starts a real daemon (`run --replay` of the throttle scenario, `[fleet]` interval 1 s) whose one peer is
a loopback HTTP server answering a real-shaped status document with a `worst` string of MB megabytes,
reads the daemon's VmRSS once a second for SECONDS, then the size of its /api/v1/fleet answer. With
--repo, the daemon is the checkout at PATH (e.g. a worktree of an older commit), to compare before and
after. First, the CPU one hostile 4 MiB answer costs the fleet worker's decode and check (web/peerdoc.py,
this checkout). Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

from _common import free_port, proc_status  # bench/ is the script's own directory

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tests.support.fakes import CaptureServer, Reply  # noqa: E402

HERE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def parse_costs() -> None:
    """CPU time of peer_status() on the worst 4 MiB answers (a 4 MiB answer is the default bound)."""
    from spark_watchd.web.peerdoc import PeerError, peer_status

    n = 4 << 20
    cases = {
        "nested brackets": b"[" * (n // 2) + b"]" * (n // 2),
        "numbers in gpus": b'{"gpus": [' + b"1," * (n // 2 - 20) + b"1]}",
        "objects in gpus": b'{"gpus": [' + b'{"a":1},' * (n // 8 - 4) + b"{}]}",
        "one string as worst": json.dumps({"worst": "x" * (n - 20)}).encode(),
    }
    for name, body in cases.items():
        t0 = time.process_time()
        try:
            peer_status(body)
            verdict = "accepted"
        except PeerError as exc:
            verdict = str(exc)[:60]
        print(f"  4 MiB of {name}: {(time.process_time() - t0) * 1e3:.0f} ms CPU -> {verdict}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--mb", type=float, default=3.9)
    ap.add_argument("--repo", default=HERE, help="the checkout whose daemon runs (default: this one)")
    ap.add_argument("--parse-only", action="store_true", help="only the decode-and-check costs")
    args = ap.parse_args(argv)
    print("one hostile answer through web/peerdoc.py (this checkout):")
    parse_costs()
    if args.parse_only:
        return 0
    doc = {"ts": 1.0, "host": "spark-b", "fresh": True, "worst": "x" * int(args.mb * 1e6),
           "gpus": [{"util_pct": 62, "sm_clock_mhz": 2410, "temp_c": 71}],
           "findings": {"G4": {"severity": "ok", "summary": "No thermal throttle"}}, "memory": {}, "extras": {}}  # fmt: skip
    body = json.dumps(doc).encode()
    peer = CaptureServer(lambda _req: Reply(200, body, {"Content-Type": "application/json"}))
    port = free_port()
    trace = os.path.join(args.repo, "spark_watchd", "scenarios", "throttle.jsonl")
    with tempfile.TemporaryDirectory(prefix="sw-peer-mem-") as state:
        env = {**os.environ, "PYTHONPATH": args.repo,
               "SPARK_WATCHD_FLEET__PEERS": json.dumps([f"spark-b={peer.url}"]),
               "SPARK_WATCHD_FLEET__INTERVAL_S": "1", "SPARK_WATCHD_FLEET__TIMEOUT_S": "5"}  # fmt: skip
        env.pop("SPARK_WATCHD_CONFIG", None)
        cmd = [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}", "--replay", trace,
               "--speed", "60", "--loop", "--interval", "1", "--state-dir", state]  # fmt: skip
        proc = subprocess.Popen(
            cmd, env=env, cwd=args.repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    if b"ok" in _get(base + "/healthz"):
                        break
                except OSError:
                    time.sleep(0.1)
            rss = [proc_status(proc.pid, "VmRSS") / 1024]
            t0 = time.monotonic()
            while time.monotonic() - t0 < args.seconds:
                time.sleep(1.0)
                rss.append(proc_status(proc.pid, "VmRSS") / 1024)
            fleet = _get(base + "/api/v1/fleet")
        finally:
            proc.terminate()
            proc.wait(20)
            peer.close()
    view = json.loads(fleet)
    peer_row = next((m for m in (view.get("view") or {}).get("members", []) if m["name"] == "spark-b"), {})
    points = len(view.get("history", {}).get("spark-b", []))
    print(f"daemon {args.repo}: a peer answering {args.mb:g} MB of `worst` each second, {args.seconds:.0f} s")
    print(f"  VmRSS at start {rss[0]:.1f} MiB, after {args.seconds:.0f} s {rss[-1]:.1f} MiB, peak {max(rss):.1f} MiB "
          f"(+{rss[-1] - rss[0]:.1f} MiB)")  # fmt: skip
    every5 = ", ".join(f"{r:.1f}" for r in rss[::5])
    print(f"  VmRSS every 5 s: {every5} MiB")
    print(f"  /api/v1/fleet {len(fleet):,} bytes, {points} history points of spark-b")
    print(f"  spark-b: up={peer_row.get('up')} error={str(peer_row.get('error'))[:100]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
