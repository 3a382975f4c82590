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


# What llama-server answers while it loads its model (server-http.cpp), and on /metrics without `--metrics`
# (server-context.cpp), byte for byte.
_LLAMA_ANSWERS = """
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
born = time.monotonic()
LOADING = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}
NO_METRICS = {"error": {"code": 501, "message": "This server does not support metrics endpoint. Start it with `--metrics`", "type": "not_supported_error"}}
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        status, body = (503, LOADING) if time.monotonic() - born < float(os.environ["LOAD_S"]) else (501, NO_METRICS)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *a):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), H).serve_forever()
"""


def test_a_server_still_loading_is_loading_not_down_and_then_up(tmp_path, procs):
    """vLLM and SGLang listen only once the model is loaded: a young server process refusing connections
    is loading (read again within seconds), and is up once it listens."""
    port = free_port()
    code = "import time\ntime.sleep(4)\nfrom tests.support.serving_fakes import main\nmain('llamacpp')"
    fake = _launcher(tmp_path, "llama-server", code)
    p = procs([sys.executable, str(fake), "-m", "q.gguf", "--metrics", "--port", str(port)])
    src, scan = _source(), ProcessSource()
    src.interval_s = 30.0  # the default interval: a loading server is still read again within seconds
    label = f"llamacpp:{port}"
    try:
        first = wait_until(lambda: _read(src, scan, p.pid).get(label), timeout=10, interval=0.1, what="found")
        assert not first.up and first.loading, first
        assert first.error.startswith("loading: ") and "listens" in first.error
        assert first.to_dict()["loading"] is True
        up = wait_until(
            lambda: (r := _read(src, scan, p.pid).get(label)) and r.up and r, timeout=20, interval=0.2,
            what="up once it listens",
        )  # fmt: skip
        assert not up.loading and "loading" not in up.to_dict()
    finally:
        src.close()


def test_llama_servers_own_words_loading_then_start_it_with_metrics(tmp_path, procs):
    port = free_port()
    fake = _launcher(tmp_path, "llama-server", _LLAMA_ANSWERS)
    p = procs([sys.executable, str(fake), "-m", "q.gguf", "--port", str(port)], {"LOAD_S": "3"})
    src, scan = _source(), ProcessSource()
    label = f"llamacpp:{port}"
    try:
        loading = wait_until(
            lambda: (r := _read(src, scan, p.pid).get(label)) and r.error and "503" in r.error and r,
            timeout=10, interval=0.1, what="its 503 while loading",
        )  # fmt: skip
        assert loading.loading and "Loading model" in loading.error
        no_metrics = wait_until(
            lambda: (r := _read(src, scan, p.pid).get(label)) and r.error and "501" in r.error and r,
            timeout=15, interval=0.2, what="its 501 without --metrics",
        )  # fmt: skip
        assert not no_metrics.up and not no_metrics.loading
        assert "Start it with `--metrics`" in no_metrics.error, no_metrics.error
    finally:
        src.close()


def test_a_server_found_now_is_in_this_samples_readings(tmp_path, procs):
    port = free_port()
    fake = _launcher(tmp_path, "vllm", "from tests.support.serving_fakes import main\nmain('vllm')")
    p = procs([sys.executable, str(fake), "serve", "m", "--port", str(port)])
    wait_until(lambda: _answers(port), timeout=20, interval=0.2, what="the fake listening")
    src, scan = _source(), ProcessSource()
    src.interval_s = 30.0
    try:
        got = _read(src, scan, p.pid)  # the first tick that sees it
        assert got[f"vllm:{port}"].up
    finally:
        src.close()


def _answers(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
        return True
    except OSError:
        return False


def test_status_says_loading_for_a_loading_server_and_down_for_a_down_one():
    from spark_watchd.commands.status import _serving

    rows = [
        {
            "server": "vllm:8000",
            "up": False,
            "loading": True,
            "error": "loading: nothing listens on 127.0.0.1:8000",
        },
        {
            "server": "vllm:8001",
            "up": False,
            "error": "ConnectionRefusedError: [Errno 111] Connection refused",
        },
    ]
    out = {ln.split()[0]: ln for ln in _serving(rows, 160) if ln.split() and ":" in ln.split()[0]}
    assert "LOADING" in out["vllm:8000"] and "DOWN" not in out["vllm:8000"]
    assert "DOWN" in out["vllm:8001"]
