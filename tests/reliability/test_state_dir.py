"""The state directory is ours (issue 20 §3): one holder at a time, and no state file read or written
through a link or a FIFO. Real `spark-watchd run` subprocesses on loopback, each bounded in time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env, free_port
from tests.daemon_helpers import http_get, running_daemon

TRACE = str(REPO / "spark_watchd" / "scenarios" / "eviction.jsonl")
ENV = {"SPARK_WATCHD_FAKE_NVML": "gb10"}


def _run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """`spark-watchd run ARGS` on a free loopback port, expected to exit by itself within `timeout`."""
    return subprocess.run(
        [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{free_port()}", *args],
        capture_output=True, text=True, timeout=timeout, env=cli_env(ENV), cwd=str(REPO),
    )  # fmt: skip


def test_a_second_daemon_or_replay_on_the_same_state_dir_exits_naming_the_holder(tmp_path):
    """Two daemons used to share one dir: events.jsonl held 4 eviction lines and state.json counted 2."""
    state = tmp_path / "state"
    with running_daemon("--interval", "1", "--state-dir", str(state), env=ENV) as (first, base):
        for args in (("--interval", "1"), ("--replay", TRACE, "--speed", "1000")):
            second = _run(*args, "--state-dir", str(state))
            assert second.returncode == 75, second.stderr
            assert f"{state} is in use by another spark-watchd (pid {first.pid}" in second.stderr, (
                second.stderr
            )
            assert all(json.loads(line)["level"] for line in second.stderr.splitlines())  # JSON off a tty
        assert http_get(base + "/healthz")[0] == 200  # the holder is untouched
        os.kill(first.pid, signal.SIGKILL)  # the kernel drops an flock however its holder dies
        first.wait(timeout=10)
    with running_daemon("--interval", "1", "--state-dir", str(state), env=ENV) as (_, base):
        assert http_get(base + "/healthz")[0] == 200
    # A replay without --state-dir keeps its state in memory and takes no lock: any number may run.


def _fifo(path):
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("name", "make", "what"),
    [
        ("state.json", _fifo, "is a FIFO, not a regular file"),
        ("events.jsonl", lambda p: os.symlink(p.parent.parent / "victim", p), "is a symbolic link"),
        ("runs.jsonl", lambda p: os.symlink(p.parent.parent / "victim", p), "is a symbolic link"),
        ("state.json", lambda p: os.symlink(p.parent.parent / "victim", p), "is a symbolic link"),
        ("events.jsonl", os.mkdir, "is a directory, not a regular file"),
        ("lock", _fifo, "is a FIFO"),
    ],
)
def test_a_state_file_that_is_a_link_or_a_fifo_exits_78_naming_it(tmp_path, name, make, what):
    """A FIFO as state.json hung the start (nothing served, nothing logged); events.jsonl and runs.jsonl
    followed symlinks (an event line was appended to the link's target)."""
    victim = tmp_path / "victim"
    victim.write_text("someone else's file\n")
    state = tmp_path / "state"
    state.mkdir()
    make(state / name)
    proc = _run("--interval", "1", "--state-dir", str(state), timeout=30)  # a hang is a failure here
    assert proc.returncode == 78, (proc.returncode, proc.stderr)
    assert f"state file {state / name} {what}" in proc.stderr, proc.stderr
    assert victim.read_text() == "someone else's file\n"


def test_a_planted_tmp_link_is_replaced_not_written_through(tmp_path):
    from spark_watchd.diagnose.journal import read_state, write_state_atomic

    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / "state.json.tmp")
    write_state_atomic(tmp_path / "state.json", {"version": 1})
    assert victim.read_text() == "keep" and read_state(tmp_path / "state.json") == {"version": 1}
