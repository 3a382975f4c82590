"""The real daemon as systemd would run it: notify socket, readiness, watchdog, stop; `status` against it."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import REPO, cli_env, free_port, run_cli
from tests.daemon_helpers import http_get

# First 200 samples of the bundled eviction scenario: ends with G3 and G6 critical and an eviction event.
SCENARIO = REPO / "spark_watchd" / "scenarios" / "eviction.jsonl"
SAMPLES = 200


@pytest.fixture
def short_eviction(tmp_path):
    with open(SCENARIO) as f:
        lines = [next(f) for _ in range(SAMPLES)]
    path = tmp_path / "eviction-200.jsonl"
    path.write_text("".join(lines))
    # Replay shifts timestamps to the present; uptime_s passes through unchanged and marks the last sample.
    return path, json.loads(lines[-1])["uptime_s"]


class _NotifyListener:
    """A fake systemd notify socket that drains datagrams as they come, like PID 1 does."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.msgs: list[str] = []
        self.ready_seen = threading.Event()
        self.on_ready = None  # called in the listener thread the moment READY=1 arrives
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                msg = self.sock.recv(4096).decode()
            except TimeoutError:
                continue
            self.msgs.append(msg)
            if msg.startswith("READY=1") and not self.ready_seen.is_set():
                if self.on_ready:
                    self.on_ready()
                self.ready_seen.set()

    def close(self):
        """Stop listening, keeping whatever is still queued."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.setblocking(False)
        while True:
            try:
                self.msgs.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                break
        self.sock.close()


def test_notify_ready_after_first_snapshot_watchdog_each_tick_stopping_on_sigterm_and_status(
    short_eviction, tmp_path
):
    trace, last_uptime = short_eviction
    listener = _NotifyListener(tmp_path / "notify.sock")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    health_at_ready = []
    listener.on_ready = lambda: health_at_ready.append(http_get(base + "/healthz")[0])
    env = {"NOTIFY_SOCKET": str(tmp_path / "notify.sock"), "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path)}
    argv = [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}"]
    argv += ["--replay", str(trace), "--speed", "3000"]
    with open(tmp_path / "daemon.log", "w") as log:  # a file, not a pipe nobody drains
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, env=cli_env(env), cwd=str(REPO))
        try:
            # systemd's view: nothing counts as started until READY=1.
            assert listener.ready_seen.wait(timeout=30), "no READY=1"
            assert health_at_ready == [200]  # ready means a snapshot is already published and fresh
            assert listener.msgs[0] == "WATCHDOG=1"  # the first publish pings, then declares readiness

            deadline = time.monotonic() + 30
            while json.loads(http_get(base + "/api/v1/status")[1]).get("uptime_s") != last_uptime:
                assert time.monotonic() < deadline, "replay did not reach its last sample"
                time.sleep(0.1)

            res = run_cli("status", "--url", base)
            assert res.returncode == 2, (
                res.stdout + res.stderr + (tmp_path / "daemon.log").read_text()[-2000:]
            )
            assert "G6 CRITICAL" in res.stdout and "G3 CRITICAL" in res.stdout
            assert "eviction G6:" in res.stdout
            assert res.stdout.rstrip().endswith("overall: critical")

            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    listener.close()
    msgs = listener.msgs
    assert msgs.count("WATCHDOG=1") >= 2, msgs  # pinged on every publish
    assert msgs[-1] == "STOPPING=1"
    assert sum(m.startswith("READY=1") for m in msgs) == 1  # ready once
