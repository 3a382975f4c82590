"""Servers as they are launched: flags from the launch environment, a server still loading, a server without
its metrics endpoint, a server found between two scrapes. Real processes (tests/support/serving_fakes.py under
the server's own command line), found by the real process scan of /proc, scraped over loopback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spark_watchd.sources.processes import ProcessSource
from spark_watchd.sources.serving import ServingSource
from spark_watchd.sources.serving_settings import ServingSettings
from tests.conftest import REPO, cli_env, free_port
from tests.support.poll import wait_until


def _launcher(tmp: Path, name: str, code: str) -> Path:
    path = tmp / name
    path.write_text(f"import sys\nsys.path.insert(0, {str(REPO)!r})\n{code}\n")
    return path


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []

    def start(argv, env=None):
        p = subprocess.Popen(argv, env=cli_env(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(p)
        return p

    yield start
    for p in started:
        p.terminate()
    for p in started:
        p.wait(10)


def _read(src: ServingSource, scan: ProcessSource, pid: int | None = None) -> dict:
    """One tick: the real process scan, then the serving source; its readings by server label (of pid's
    servers only, when given: the table is host-wide)."""
    got = src.collect({"processes": scan.collect({})["processes"]})["serving"]
    return {r.server: r for r in got if pid is None or r.pid == pid}


def _source(**kw) -> ServingSource:
    return ServingSource(ServingSettings(**kw), interval_s=0.3, own_addresses=frozenset())


def test_a_llama_server_started_with_only_LLAMA_ARG_PORT_is_scraped_on_that_port(tmp_path, procs):
    port = free_port()
    fake = _launcher(
        tmp_path, "llama-server", "from tests.support.serving_fakes import main\nmain('llamacpp')"
    )
    p = procs([sys.executable, str(fake), "-m", "q.gguf", "--metrics"], {"LLAMA_ARG_PORT": str(port)})
    src, scan = _source(), ProcessSource()
    try:
        r = wait_until(
            lambda: _read(src, scan).get(f"llamacpp:{port}"),
            timeout=20,
            interval=0.2,
            what="found at its port",
        )
        r = wait_until(
            lambda: (x := _read(src, scan).get(f"llamacpp:{port}")) and x.up and x, timeout=20, interval=0.2,
            what="scraped up",
        )  # fmt: skip
        assert r.pid == p.pid and r.endpoint == f"http://127.0.0.1:{port}"
        assert "llamacpp:8080" not in _read(src, scan, p.pid)
    finally:
        src.close()
