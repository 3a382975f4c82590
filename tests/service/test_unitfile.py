"""The systemd unit: the repository copy, its rendering per installation, systemd's own verdicts on it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from spark_watchd.service import unitfile
from tests.conftest import REPO, require_binary

UNIT = REPO / "systemd" / "spark-watchd.service"


def _directives(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            k, v = line.split("=", 1)
            out.setdefault(k, []).append(v)
    return out


def test_repository_unit_is_the_default_rendering():
    # Regenerate with: python -m spark_watchd.service.unitfile > systemd/spark-watchd.service
    assert UNIT.read_text() == unitfile.render_unit()


def test_unit_is_notify_with_watchdog_and_unprivileged():
    d = _directives(UNIT.read_text())
    assert d["Type"] == ["notify"]
    assert d["NotifyAccess"] == ["main"]
    assert d["WatchdogSec"] == ["120"]
    assert d["Restart"] == ["on-failure"]
    assert d["User"] == ["spark-watchd"]
    assert d["CapabilityBoundingSet"] == [""]
    assert d["NoNewPrivileges"] == ["yes"]
    assert d["ProtectSystem"] == ["strict"]
    # The venv the README installs into: the by-hand steps copy this unit as it is.
    assert d["ExecStart"] == [
        "/opt/spark-watchd/bin/python -m spark_watchd run --config /etc/spark-watchd/config.toml"
    ]


@pytest.mark.parametrize(("interval", "expected"), [(30, 120), (60, 240), (1, 60), (7.5, 60), (45.2, 181)])
def test_watchdog_follows_the_interval(interval, expected):
    assert unitfile.watchdog_seconds(interval) == expected
    assert f"WatchdogSec={expected}\n" in unitfile.render_unit(interval_s=interval)


def test_render_uses_given_interpreter_user_and_config():
    text = unitfile.render_unit(python="/opt/sw/bin/python", user="watcher", config="/srv/sw.toml")
    d = _directives(text)
    assert d["ExecStart"] == ["/opt/sw/bin/python -m spark_watchd run --config /srv/sw.toml"]
    assert d["User"] == ["watcher"] and d["Group"] == ["watcher"]


def test_without_a_device_group_no_supplementary_group_is_asked_for():
    # systemd refuses to start a unit naming a group that does not exist.
    assert "SupplementaryGroups" not in unitfile.render_unit(device_group=None, journal_group=None)
    assert "SupplementaryGroups=video systemd-journal" in unitfile.render_unit()
    assert "SupplementaryGroups=systemd-journal\n" in unitfile.render_unit(device_group=None)


def test_the_journal_group_keeps_exposure_at_or_under_2(tmp_path):
    # The kernel log is read through group systemd-journal (issue 15): the sandbox must stay as tight.
    exe = require_binary("systemd-analyze")
    path = tmp_path / "spark-watchd.service"
    path.write_text(unitfile.render_unit(python=sys.executable))
    proc = subprocess.run(
        [exe, "security", "--offline=yes", "--no-pager", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", proc.stdout)
    assert m and float(m.group(1)) <= 2.0, proc.stdout[-400:]


@pytest.mark.parametrize("bad", ["/opt/my venv/bin/python", "/opt/$x/python", "", "venv/bin/python"])
def test_paths_that_would_break_the_unit_are_refused(bad):
    with pytest.raises(ValueError, match="python"):
        unitfile.render_unit(python=bad)


def _rendered_for_this_machine(tmp_path):
    # verify checks ExecStart exists: point it at this interpreter.
    path = tmp_path / "spark-watchd.service"
    path.write_text(unitfile.render_unit(python=sys.executable))
    return path


def test_systemd_analyze_verify_prints_nothing(tmp_path):
    exe = require_binary("systemd-analyze")
    path = _rendered_for_this_machine(tmp_path)
    proc = subprocess.run([exe, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout + proc.stderr == ""


def test_systemd_analyze_security_rates_it_3_or_better(tmp_path):
    exe = require_binary("systemd-analyze")
    path = _rendered_for_this_machine(tmp_path)
    proc = subprocess.run(
        [exe, "security", "--offline=yes", "--no-pager", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    assert float(m.group(1)) <= 3.0
    # The things the daemon must keep (other users' /proc, NVIDIA nodes) and must not have.
    assert "✗ CapabilityBoundingSet" not in proc.stdout
    assert "✗ NoNewPrivileges" not in proc.stdout


MDWE_PROBE = """
import ctypes, mmap, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN (Linux >= 6.3)
    sys.exit(77)
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    sys.exit(78)  # the restriction is not in force: the probe proves nothing
except OSError:
    pass
import pynvml, psutil, spark_watchd.cli, spark_watchd.service.unitfile  # what the daemon imports
assert ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 7)() == 7  # even a libffi callback needs no W+X page
print("ok")
"""


def test_python_nvml_bindings_and_ctypes_run_under_memory_deny_write_execute():
    # MemoryDenyWriteExecute=yes refuses W+X mappings; the kernel's PR_SET_MDWE is the same rule.
    from tests.conftest import cli_env

    proc = subprocess.run(
        [sys.executable, "-c", MDWE_PROBE], capture_output=True, text=True, timeout=60, env=cli_env()
    )
    if proc.returncode == 77:
        pytest.skip("kernel without PR_SET_MDWE (< 6.3)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
