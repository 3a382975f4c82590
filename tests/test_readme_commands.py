"""Every command in the README's shell blocks, run the way a new user would after the README's install.

Each command line of every ```sh / ```console block is either run here as written (from the checkout, with
the README's `.venv`), started and stopped (a daemon: its listen address and state dir moved by environment
variables so it cannot collide with another test), or named below with the reason it cannot run on this
machine. A command added to the README that is in neither list fails the test: whoever adds it decides.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request

import pytest

from tests.conftest import REPO, free_port

README = (REPO / "README.md").read_text(encoding="utf-8")
VENV = REPO / ".venv" / "bin"

# Commands that cannot run on a test machine, with the reason (the text before any `#` comment).
NOT_HERE = {
    # The README's own two commands: CI runs both verbatim in a fresh venv before the suite.
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/spark-watchd run": "CI runs it verbatim",
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test,fast]' && .venv/bin/python -m pytest": "CI runs it",
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test,fast]'": "the install itself (CI's test command)",
    ".venv/bin/python -m pytest": "the suite itself",
    "bash .ci/run": "CI itself (apt installs, fresh venvs)",
    "SPARK_WATCHD_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/export/test_prometheus.py": "rewrites golden files",
    # System-wide installs: root on a Spark, a system user, systemd as PID 1.
    "sudo ": "installs system-wide (root, a system user, systemd)",
    "/opt/spark-watchd/bin/python -m spark_watchd.service.configdoc": "the service install's venv",
    ".venv/bin/pip install torch": "downloads CPU torch and the train extra (about 1.1 GB)",
    "bash packaging/deb/build.sh": "builds the Debian package (minutes; CI runs packaging/deb/test.sh)",
    # Needs what only a Spark or a configured box has.
    ".venv/bin/spark-watchd run --listen 0.0.0.0:9761": "binds every interface with the service's config file",
    ".venv/bin/spark-watchd run --record /var/lib/spark-watchd/traces": "writes under the service's state dir",
    ".venv/bin/spark-watchd thermal-log": "reads the GPU through NVML",
    ".venv/bin/spark-watchd preflight --python /opt/train-venv/bin/python": "names your training venv",
    "curl -X POST http://127.0.0.1:9761/api/v1/progress": "posts to a daemon on the default port",
    # Benchmarks take minutes to an hour each; bench/ is run by hand and quoted in Performance.
    ".venv/bin/python bench/": "a benchmark (minutes to an hour)",
}
# Daemons: started as written, checked for a fresh sample on /healthz, then stopped.
SERVES = (
    ".venv/bin/spark-watchd run",
    ".venv/bin/spark-watchd run --replay spark_watchd/scenarios/throttle.jsonl --speed 60 --loop",
    ".venv/bin/spark-watchd demo",
)
# Commands run to completion: their allowed exit codes (plan: 0 fits, 1 tight, 3 does not fit).
RUNS = {
    ".venv/bin/spark-watchd plan --params 70B --method qlora": (0, 1, 3),
    ".venv/bin/spark-watchd replay spark_watchd/scenarios/throttle.jsonl --format table": (0,),
    '.venv/bin/spark-watchd status; echo "worst severity: $?"': (0,),  # against a daemon the test starts
    ".venv/bin/python bench/score_replay.py tests/fixtures/traces/public -- .venv/bin/spark-watchd replay "
    "{trace} --format jsonl": (0,),
    ".venv/bin/ruff check . && .venv/bin/ruff format --check $(git ls-files '*.py')": (0,),
}


def commands() -> list[str]:
    """Every command line of the README's shell blocks, continuations joined, comments and prompts dropped."""
    out = []
    for block in re.findall(r"^```(?:sh|console|bash)\n(.*?)^```", README, re.S | re.M):
        console = any(line.startswith("$ ") for line in block.splitlines())
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            if console:
                if not line.startswith("$ "):
                    continue  # the printed answer
                line = line[2:]
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line:
                out.append(re.sub(r"\s+", " ", line))
    return out


def _kind(cmd: str) -> str:
    if cmd in RUNS:
        return "run"
    if cmd in SERVES:
        return "serve"
    if any(cmd.startswith(prefix) for prefix in NOT_HERE):
        return "not here"
    return "unknown"


def test_every_readme_command_is_run_here_or_says_why_not():
    found = commands()
    assert len(found) > 25
    unknown = [c for c in found if _kind(c) == "unknown"]
    assert unknown == [], "add each to RUNS, SERVES or NOT_HERE (with why) in this test"
    assert {c for c in found if _kind(c) in ("run", "serve")} == set(RUNS) | set(SERVES)


def test_no_readme_command_calls_a_program_that_is_not_on_a_new_users_path():
    """After `python3 -m venv .venv && .venv/bin/pip install .`, neither `spark-watchd` nor `python` is on
    PATH (Debian has `python3` only): a command must name `.venv/bin/...` or an install's own path."""
    bare = [c for c in commands() if re.search(r"(^|[;&|] *|-- )(spark-watchd|python) ", c)]
    assert bare == []


def _env(port: int, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_WATCHD_")}
    env.update(
        SPARK_WATCHD_DAEMON__LISTEN=f"127.0.0.1:{port}",
        SPARK_WATCHD_DAEMON__STATE_DIR=str(tmp_path / "state"),
        SPARK_WATCHD_URL=f"http://127.0.0.1:{port}",
    )
    return env


def _healthy(port: int, proc: subprocess.Popen, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


@pytest.fixture
def readme_venv():
    if not (VENV / "spark-watchd").exists():
        pytest.skip("the README's .venv is not in this checkout (run the README's test command)")


@pytest.mark.parametrize("cmd", SERVES)
def test_each_readme_daemon_command_serves(cmd, tmp_path, readme_venv):
    port = free_port()
    proc = subprocess.Popen(
        ["bash", "-c", cmd],
        cwd=REPO,
        env=_env(port, tmp_path),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _healthy(port, proc), proc.stderr.read() if proc.poll() is not None else "no fresh sample"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.parametrize("cmd", sorted(RUNS))
def test_each_readme_command_runs_as_written(cmd, tmp_path, readme_venv):
    port, daemon = free_port(), None
    env = _env(port, tmp_path)
    if "status" in cmd:  # status asks a running daemon: the demo, as the README's Run section starts it
        daemon = subprocess.Popen(
            [str(VENV / "spark-watchd"), "demo", "--scenario", "throttle"],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert _healthy(port, daemon)
    try:
        res = subprocess.run(
            ["bash", "-c", cmd], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        if daemon is not None:
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(timeout=30)
    if "status" in cmd:
        assert re.search(r"worst severity: [0-3]$", res.stdout.strip()), res.stdout + res.stderr
    else:
        assert res.returncode in RUNS[cmd], f"exit {res.returncode}: {res.stderr[-2000:]}"
    assert "Traceback" not in res.stderr
