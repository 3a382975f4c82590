"""Regenerate docs/img/status-page.png: the status page during the bundled eviction scenario.

    /work/venv/bin/python docs/img/make_screenshot.py [--dark] [--out PATH]

Replays the bundled eviction scenario (spark_watchd/scenarios/eviction.jsonl) up to
an hour past the eviction, when G6 is critical and the vLLM is still resident,
with `spark-watchd run --replay` on a free loopback port (fast, throwaway state
dir); once the replay has ended the daemon keeps serving its last snapshot, and
headless Debian Chromium (/usr/bin/chromium via Playwright; never downloads a
browser) captures the full page at 1440 px wide, times in UTC.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.web.browser import launch  # noqa: E402

TRACE = REPO / "spark_watchd" / "scenarios" / "eviction.jsonl"
EVICTION_TS = 1764407100.0  # from the trace's events file
SHOOT_AT_TS = EVICTION_TS + 3600  # the vLLM still resident, an hour of damage on the charts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(origin: str) -> dict | None:
    try:
        with urllib.request.urlopen(origin + "/api/v1/status", timeout=2) as r:
            return json.load(r)
    except OSError:
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "img" / "status-page.png"))
    ap.add_argument("--dark", action="store_true", help="emulate prefers-color-scheme: dark")
    ap.add_argument("--speed", type=float, default=400.0, help="replay speed (default 400x)")
    args = ap.parse_args()
    port = _free_port()
    origin = f"http://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_WATCHD_WEB__PAGE_REFRESH_SECONDS="1")
    with tempfile.TemporaryDirectory(prefix="sw-shot-") as state:
        trace = Path(state) / "eviction-part.jsonl"
        lines = [
            ln for ln in TRACE.read_text().splitlines(keepends=True) if json.loads(ln)["ts"] <= SHOOT_AT_TS
        ]
        trace.write_text("".join(lines))
        cmd = [
            sys.executable,
            "-m",
            "spark_watchd",
            "run",
            "--replay",
            str(trace),
            "--speed",
            str(args.speed),
            "--listen",
            f"127.0.0.1:{port}",
            "--interval",
            "1",
            "--state-dir",
            state,
        ]
        daemon = subprocess.Popen(
            cmd, env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                st = _status(origin)
                if st and (st.get("ts") or 0) >= SHOOT_AT_TS:
                    break
                if daemon.poll() is not None or time.monotonic() > deadline:
                    print(daemon.stderr.read().decode()[-2000:], file=sys.stderr)
                    print("make_screenshot: the replay never reached its end", file=sys.stderr)
                    return 1
                time.sleep(0.2)
            severities = {g: f["severity"] for g, f in st["findings"].items()}
            print(f"shooting at trace ts {st['ts']:.0f}: {severities}")
            with launch(timezone_id="UTC") as ctx:
                page = ctx.new_page()
                page.set_viewport_size({"width": 1440, "height": 900})
                page.emulate_media(color_scheme="dark" if args.dark else "light")
                page.goto(origin + "/")
                page.wait_for_selector('#events li[data-kind="eviction"]', timeout=20_000)
                page.wait_for_selector("#chart-memory path.line")
                page.wait_for_timeout(300)
                page.screenshot(path=args.out, full_page=True)
        finally:
            daemon.terminate()
            daemon.wait(10)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
