"""Every verb that reads state finds it where `run` wrote it, for root and for an unprivileged user (issue 14.1)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from spark_watchd.commands.statedir import resolve_state_dir, user_state_dir
from spark_watchd.config import load_settings
from tests.conftest import REPO, cli_env, free_port

pytestmark = pytest.mark.slow  # starts a real daemon as an unprivileged user


def _as_user() -> list[str]:
    """Prefix that runs a command unprivileged: nothing when we already are, setpriv to nobody as root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv to drop to nobody")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def home():
    # Not tmp_path: pytest's base directory is 0700 to root, and nobody must be able to write its HOME.
    path = Path(tempfile.mkdtemp(prefix="sw-home-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _env(home: Path) -> dict:
    env = cli_env({"HOME": str(home)})
    for key in [k for k in env if k.startswith("SPARK_WATCHD_") or k == "XDG_STATE_HOME"]:
        env.pop(key)
    return env


def _post(url: str, payload: dict) -> dict:
    req = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def _wait(pred, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_runs_lists_what_an_unprivileged_run_recorded(home):
    prefix, env = _as_user(), _env(home)
    port = free_port()
    daemon = subprocess.Popen(
        [*prefix, sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}",
         "--interval", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
    )  # fmt: skip
    ledger = home / ".local" / "state" / "spark-watchd" / "runs.jsonl"
    try:
        url = f"http://127.0.0.1:{port}/api/v1/progress"
        _wait(lambda: _try(lambda: _post(url, {"job": "as-user", "step": 1, "tokens": 0})), "the daemon")
        t0 = time.time()
        for i in range(2, 5):
            _post(url, {"job": "as-user", "step": i, "tokens": 1000 * i, "ts": t0 + i})
        _post(url, {"job": "as-user", "step": 5, "tokens": 5000, "ts": t0 + 5, "event": "end"})
        _wait(lambda: ledger.exists() and "as-user" in ledger.read_text(), f"a ledger line in {ledger}")
    finally:
        daemon.terminate()
        _, err = daemon.communicate(timeout=15)
    assert "not writable; using" in err  # the fallback is said, not silent
    out = subprocess.run(
        [*prefix, sys.executable, "-m", "spark_watchd", "runs", "--json"],
        capture_output=True, text=True, env=env, cwd=str(REPO), timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert [r["job"] for r in json.loads(out.stdout)] == ["as-user"]


def _try(fn):
    try:
        return fn() or True
    except OSError:
        return False


def test_readers_resolve_without_creating_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    gone = tmp_path / "ro" / "state"
    (tmp_path / "ro").mkdir(mode=0o500)
    monkeypatch.setattr(os, "access", lambda p, mode: not str(p).startswith(str(tmp_path / "ro")))
    settings = load_settings(None, environ={})
    settings.daemon.state_dir = str(gone)  # as if the default were unwritable (an unprivileged user)
    settings.daemon.model_fields_set.discard("state_dir")
    assert resolve_state_dir(settings, create=False) == user_state_dir() == str(tmp_path / "xdg/spark-watchd")
    assert not (tmp_path / "xdg").exists()
    # Explicitly configured: no fallback, the reason is named.
    explicit = load_settings(None, {"daemon": {"state_dir": str(gone)}}, environ={})
    with pytest.raises(Exception, match="not a writable directory"):
        resolve_state_dir(explicit, create=False)


def test_replay_finds_a_capture_by_name_in_the_state_dir(tmp_path, traces_dir):
    from tests.conftest import run_cli

    trace = next(iter(sorted(traces_dir.rglob("*.jsonl"))))
    (tmp_path / "captures").mkdir()
    shutil.copy(trace, tmp_path / "captures" / "capture-1-g4.jsonl")
    env = {"SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path)}
    out = run_cli("replay", "capture-1-g4.jsonl", env=env)
    assert out.returncode == 0, out.stderr
    assert "samples replayed" in out.stdout
    missing = run_cli("replay", "capture-0-none.jsonl", env=env)
    assert missing.returncode == 66 and "capture-0-none.jsonl: no such file" in missing.stderr  # EX_NOINPUT
