"""Shared fixtures: repo paths, the CLI as a subprocess, free ports, required binaries."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

# Shared fixtures: progress (fake clock, loopback progress server, a real daemon), tls (a self-signed cert),
# nvmlshim (the GB10-shaped libnvidia-ml.so.1 the real nvidia-ml-py loads).
pytest_plugins = ("tests.support.progress", "tests.support.tls", "tests.support.nvmlshim")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The six labelled public example traces (a copy of the trace-v1 companion set, so the repo stands alone);
# SPARK_WATCHD_TRACES points the scenario tests at another labelled set in the same layout.
TRACES = Path(os.environ.get("SPARK_WATCHD_TRACES") or FIXTURES / "traces" / "public")
# The scenarios shipped inside the package (the public eviction and throttle traces, byte for byte).
SCENARIOS = REPO / "spark_watchd" / "scenarios"


def cli_env(extra: dict | None = None) -> dict:
    """Environment for running `python -m spark_watchd` from this checkout (installed or not)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("SPARK_WATCHD_CONFIG", None)
    if extra:
        env.update(extra)
    return env


def run_cli(*args: str, env: dict | None = None, timeout: float = 60, input: str | None = None):
    """Run the CLI to completion and return the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "spark_watchd", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(env),
        input=input,
        cwd=str(REPO),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_binary(name: str) -> str:
    """Path of a binary the test needs; skip without it, except in CI where it must be there."""
    path = shutil.which(name)
    if path:
        return path
    if os.environ.get("SPARK_WATCHD_REQUIRE_E2E"):
        pytest.fail(f"{name} is required in CI (install it in .ci/run)")
    pytest.skip(f"{name} not installed")


@pytest.fixture(autouse=True)
def _fresh_logging():
    """A verb run in-process configures logging for the process: undo it, so no test sees another's level."""
    yield
    from spark_watchd.logs import reset_logging

    reset_logging()


@pytest.fixture
def traces_dir() -> Path:
    """The labelled public example traces."""
    return TRACES


@pytest.fixture(autouse=True)
def _logging_config_restored():
    """A test that runs the CLI in-process (`cli.main(["run", ...])`) configures logging for the whole process,
    at info: put the configuration back so a later test's captured debug lines are not filtered away."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
