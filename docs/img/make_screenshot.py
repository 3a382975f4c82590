"""Regenerate docs/img/status-page.png: the status page during the bundled eviction scenario.

    .venv/bin/python docs/img/make_screenshot.py [--dark] [--out PATH]

Replays the first 250 samples of the bundled eviction scenario
(spark_watchd/scenarios/eviction.jsonl: the eviction is at sample 130; at 250 the
uncapped vLLM is still resident and G6 critical) with `spark-watchd run --replay`
on a free loopback port and a throwaway state dir. A replay that has ended keeps
serving its last snapshot; headless Debian Chromium (/usr/bin/chromium via
Playwright; never downloads a browser) then captures the full page, 1440 px
wide, times in UTC.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.conftest import free_port  # noqa: E402
from tests.web.browser import launch  # noqa: E402

TRACE = REPO / "spark_watchd" / "scenarios" / "eviction.jsonl"
SAMPLES = 250


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return json.load(r)
    except OSError:
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "img" / "status-page.png"))
    ap.add_argument("--dark", action="store_true", help="emulate prefers-color-scheme: dark")
    args = ap.parse_args()
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_WATCHD_WEB__PAGE_REFRESH_SECONDS="1")
    with tempfile.TemporaryDirectory(prefix="sw-shot-") as state:
        trace = Path(state) / "eviction-part.jsonl"
        trace.write_text("".join(TRACE.read_text().splitlines(keepends=True)[:SAMPLES]))
        cmd = [sys.executable, "-m", "spark_watchd", "run", "--replay", str(trace), "--speed", "100000"]
        cmd += ["--listen", f"127.0.0.1:{port}", "--interval", "1", "--state-dir", state]
        daemon = subprocess.Popen(
            cmd, env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 120
            while (_get(origin + "/api/v1/history?limit=1") or {}).get("held") != SAMPLES:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    print(daemon.stderr.read().decode()[-2000:], file=sys.stderr)
                    print("make_screenshot: the replay did not reach its end", file=sys.stderr)
                    return 1
                time.sleep(0.2)
            st = _get(origin + "/api/v1/status") or {}
            print("findings:", {g: f["severity"] for g, f in st.get("findings", {}).items()})
            with launch() as ctx:
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
