"""Every verb a person reads fits an 80-column terminal: folded or elided, units humanised, no Python repr.

Run as a user would with COLUMNS=80: `status` against a real daemon replaying the eviction scenario,
`replay --format table`, `runs` over a ledger, `once` on the fake GB10 and `plan` (issue 19 §5).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import FIXTURES, REPO, SCENARIOS, cli_env, free_port, run_cli

WIDTH = {"COLUMNS": "80"}
# What a terminal must never show: Python reprs, raw byte counts, None for a missing value.
REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\{'|': |\[\]|\(\)")
RAW_BYTES = re.compile(r"(?<![\w.-])\d{9,}(?![\w.])")


def _check(out: str, what: str) -> None:
    lines = out.splitlines()
    assert lines, what
    too_long = [ln for ln in lines if len(ln) > 80]
    assert too_long == [], f"{what}: {len(too_long)} lines over 80 columns, e.g. {too_long[0]!r}"
    for ln in lines:
        assert not REPR.search(ln), f"{what}: a Python repr: {ln!r}"
        assert not RAW_BYTES.search(ln), f"{what}: a raw count: {ln!r}"
        assert "\x1b" not in ln


@pytest.fixture(scope="module")
def eviction_daemon(tmp_path_factory):
    """A real daemon that has replayed the eviction scenario past its eviction (G6 critical, workloads)."""
    state = tmp_path_factory.mktemp("state")
    # Cut where G6 is critical and stays so (the page tests' cut): an ended replay keeps its last snapshot.
    trace = state / "eviction.jsonl"
    trace.write_text("".join((SCENARIOS / "eviction.jsonl").read_text().splitlines(keepends=True)[:250]))
    port = free_port()
    cmd = [sys.executable, "-m", "spark_watchd", "run", "--replay", str(trace)]
    cmd += [
        "--speed",
        "100000",
        "--listen",
        f"127.0.0.1:{port}",
        "--interval",
        "1",
        "--state-dir",
        str(state),
    ]
    proc = subprocess.Popen(
        cmd, env=cli_env(), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the replay did not reach the eviction in time"
            try:
                with urllib.request.urlopen(url + "/api/v1/status", timeout=2) as r:
                    doc = json.load(r)
                with urllib.request.urlopen(url + "/api/v1/history?limit=1", timeout=2) as r:
                    held = json.load(r)["held"]
                if held >= 250 and doc["findings"]["G6"]["severity"] == "critical":
                    break
            except OSError:
                pass
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_status_fits_80_columns_with_units_and_no_repr(eviction_daemon):
    p = run_cli("status", "--url", eviction_daemon, "--color", "never", env=WIDTH)
    assert p.returncode == 2, p.stderr
    _check(p.stdout, "status")
    assert "workloads:" in p.stdout and re.search(r"\d+\.\d GiB", p.stdout)
    assert "G6 CRITICAL" in p.stdout and "    evidence: " in p.stdout and "    advice: " in p.stdout


def test_replay_table_fits_80_columns():
    p = run_cli("replay", str(SCENARIOS / "eviction.jsonl"), "--format", "table", env=WIDTH)
    assert p.returncode == 0, p.stderr
    _check(p.stdout, "replay --format table")
    # A folded change continues indented under the gotcha column, never at the margin.
    starts = [ln for ln in p.stdout.splitlines() if not ln.startswith(" ")]
    assert all(re.match(r"\d{4}-\d\d-\d\d |\d+ samples replayed", ln) for ln in starts)


def test_runs_fits_80_columns_and_says_what_it_left_out(tmp_path):
    run = {
        "start": "2026-11-29T08:00:00Z", "job": "llama-70b-qlora-with-a-long-name", "duration_s": 3725.4,
        "steps": 1200, "mean_tokens_per_second": 2048.4, "mean_step_seconds": 3.1042, "max_slowdown_ratio": 1.375,
        "throttle_seconds": {"hw_slowdown": 30, "sw_thermal": 12.4, "power_cap": 600}, "energy_j": 345600,
        "peak_temp_c": 86.2, "mem_available_min_bytes": 5 * 2**30, "evictions": 1, "oom_kills": 0,
        "end_reason": "finished",
    }  # fmt: skip
    (tmp_path / "runs.jsonl").write_text(
        json.dumps(run) + "\n" + json.dumps({**run, "energy_j": None}) + "\n"
    )
    p = run_cli("runs", "--state-dir", str(tmp_path), env=WIDTH)
    assert p.returncode == 0, p.stderr
    _check(p.stdout, "runs")
    assert "\n(not shown at this width: STEPS, " in p.stdout


def test_once_fits_80_columns():
    env = {
        **WIDTH,
        "SPARK_WATCHD_FAKE_NVML": "gb10",
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(FIXTURES / "hosts" / "gb10-eviction" / "proc"),
        "SPARK_WATCHD_SOURCES__SYS_ROOT": str(FIXTURES / "hosts" / "gb10-spbm" / "sys"),
    }
    p = run_cli("once", env=env)
    assert p.returncode == 0, p.stderr
    _check(p.stdout, "once")
    assert "board: " in p.stdout and re.search(r"memory: [\d.]+ GiB available", p.stdout)


@pytest.mark.parametrize("method", ["qlora", "full"])
def test_plan_fits_80_columns(method):
    root = FIXTURES / "hosts" / "gb10-operator-bare"
    p = run_cli("plan", "--params", "70B", "--method", method, "--root", str(root), env=WIDTH)
    assert p.returncode in (0, 1, 3), p.stderr
    _check(p.stdout, f"plan {method}")
    assert "(issue" not in p.stdout


def test_report_fits_80_columns(tmp_path):
    """Issue 34: a bundle's line reached 215 columns; its summary is now folded under it."""
    from tests.postmortem.helpers import feed, scenario

    feed(tmp_path, scenario("vllm_creep_oom_30s"))
    p = run_cli("report", "--state-dir", str(tmp_path), env=WIDTH)
    assert p.returncode == 0, p.stderr
    _check(p.stdout, "report")
    assert "OOM killer killed" in p.stdout and "global memory pressure" in p.stdout


def test_preflight_fits_80_columns_on_a_terminal_and_keeps_one_line_per_check_in_a_pipe():
    """Issue 34: five preflight lines ran past 80 columns on a machine without torch or a GPU. A pipe keeps
    the community's fixed format (one `G3 INFO: ...` line per check) for scripts."""
    import os
    import pty

    env = {**WIDTH, "SPARK_WATCHD_SOURCES__PROC_ROOT": str(FIXTURES / "hosts" / "daemon-vm" / "proc")}
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "preflight"],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env=cli_env(env),
        cwd=str(REPO),
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) in (0, 1, 3)
    shown = b"".join(chunks).decode().replace("\r\n", "\n")
    _check(shown, "preflight on a terminal")
    assert re.search(r"^G3 ", shown, re.M) and re.search(r"^    \S", shown, re.M)  # folded, indented
    piped = run_cli("preflight", env=env)
    assert all(re.match(r"G\d+ (PASS|FAIL|WARN|SKIP|INFO): ", ln) for ln in piped.stdout.splitlines())
