"""The platform line in headless Chromium: a real daemon replays a trace whose first sample carries a Spark's
platform on the 7.0.0-1019-nvidia kernel; the page names the stack and the known-bad kernel with its advice."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.conftest import FIXTURES, REPO, cli_env, free_port, require_binary
from tests.web.browser import launch, open_page

pytestmark = pytest.mark.e2e
TRACE = FIXTURES / "traces" / "healthy_hot_60s.jsonl"
# NVIDIA/open-gpu-kernel-modules#1358: 7.0.0-1019-nvidia pulled by a routine apt upgrade, open 580.173.02.
PLATFORM = {"kernel": "7.0.0-1019-nvidia", "driver": "580.173.02", "driver_flavour": "open", "cuda_driver": "13.0",
            "ota": "7.5.0", "nic_firmware": {"rocep1s0f0": "28.45.4028"}}  # fmt: skip


def test_the_page_shows_the_platform_and_the_known_bad_kernel(tmp_path):
    require_binary("chromium")
    lines = TRACE.read_text().splitlines()
    first = json.loads(lines[0])
    first["platform"] = PLATFORM
    trace = tmp_path / "platform.jsonl"
    trace.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "run", "--replay", str(trace), "--speed", "60", "--interval", "1",
         "--listen", f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "state")],
        env=cli_env(), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with launch() as browser, open_page(browser, f"http://127.0.0.1:{port}") as (page, log):
            line = page.locator("#platform-line")
            expect(line).to_contain_text(
                "Platform: kernel 7.0.0-1019-nvidia, driver 580.173.02 (open), CUDA 13.0, ConnectX-7 28.45.4028, "
                "DGX OTA 7.5.0",
                timeout=20000,
            )
            expect(line).to_contain_text("known bad: kernel 7.0.0-1019-nvidia: owners report NCCL failing")
            expect(line).to_contain_text("Boot 6.17.0-1031-nvidia or 6.17.0-1032-nvidia")
            expect(line).to_have_class("link-line sev-warning")
            assert not log.errors, log.errors
    finally:
        proc.terminate()
        proc.wait(10)
