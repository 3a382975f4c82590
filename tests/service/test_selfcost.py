"""The daemon's own cost: process_* series on /metrics, one line in `status` and on the page."""

from __future__ import annotations

import json
import os
import subprocess

from spark_watchd.service.selfcost import SelfCost, resident_bytes, summary
from tests.conftest import FIXTURES, require_binary, run_cli
from tests.daemon_helpers import http_get, running_daemon, samples, value

TRACE = FIXTURES / "traces" / "public" / "healthy.jsonl"


def test_cpu_share_is_cpu_seconds_over_wall_seconds_since_the_last_read():
    clock, cpu = iter([100.0, 130.0, 160.0]), iter([5.0, 5.3, 5.9])
    cost = SelfCost(cpu=lambda: next(cpu), rss=lambda: 48 * 2**20, clock=lambda: next(clock))
    first = cost.read()
    assert abs(first["cpu_share"] - 0.01) < 1e-9  # 0.3 CPU-s in 30 s
    second = cost.read()
    assert abs(second["cpu_share"] - 0.02) < 1e-9  # 0.6 CPU-s in the next 30 s
    assert abs(second["cpu_share_since_start"] - 0.015) < 1e-9  # 0.9 CPU-s in 60 s
    assert second["resident_bytes"] == 48 * 2**20
    assert second["summary"] == "spark-watchd: 2.00 % of a CPU, 48 MiB"


def test_summary_leaves_out_what_is_unknown():
    assert summary(None, None) == "spark-watchd: cost unknown"
    assert summary(0.0002, None) == "spark-watchd: 0.02 % of a CPU"
    assert summary(0.5, 100 * 2**20) == "spark-watchd: 50 % of a CPU, 100 MiB"


def test_resident_bytes_reads_statm_and_is_none_without_proc(tmp_path):
    statm = tmp_path / "statm"
    statm.write_text("12345 2000 300 1 0 500 0\n")
    assert resident_bytes(str(statm)) == 2000 * os.sysconf("SC_PAGE_SIZE")
    assert resident_bytes(str(tmp_path / "missing")) is None
    assert resident_bytes("/proc/self/statm") > 0


def test_running_daemon_exposes_its_own_cost_on_metrics_status_and_the_api(tmp_path):
    args = ("--replay", str(TRACE), "--speed", "60", "--state-dir", str(tmp_path / "state"))
    with running_daemon(*args) as (proc, base):
        _, text = http_get(base + "/metrics")
        got = samples(text)
        assert value(got, "process_resident_memory_bytes") > 10 * 2**20
        assert value(got, "process_cpu_seconds_total") > 0
        assert value(got, "process_open_fds") > 0
        assert value(got, "process_start_time_seconds") > 1.6e9
        assert any(name == "python_info" for name, _ in got)
        _, body = http_get(base + "/api/v1/status")
        cost = json.loads(body)["extras"]["daemon_cost"]
        assert cost["resident_bytes"] > 10 * 2**20 and cost["summary"].startswith("spark-watchd: ")
        res = run_cli("status", "--url", base, "--color", "never")
        line = [ln for ln in res.stdout.splitlines() if ln.startswith("spark-watchd: ")]
        assert line and "MiB" in line[0], res.stdout
    promtool = require_binary("promtool")
    own = "\n".join(ln for ln in text.splitlines() if _name(ln).startswith(("process_", "python_")))
    res = subprocess.run([promtool, "check", "metrics"], input=own + "\n", capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def _name(line: str) -> str:
    """The metric a line of the exposition is about (# HELP/# TYPE lines too)."""
    parts = line.split()
    if line.startswith("#"):
        return parts[2] if len(parts) > 2 else ""
    return line.split("{")[0].split(" ")[0]
