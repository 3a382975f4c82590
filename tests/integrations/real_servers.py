"""Helpers of the real-server tests: a server process, a client load, and time-stamped readings of both sides.

The servers run from interpreters and binaries CI installs for them (SPARK_WATCHD_VLLM_PYTHON,
SPARK_WATCHD_LLAMA_SERVER); the daemon runs from this checkout. Every reading is stamped with the wall clock
(the daemon's readings carry their scrape time), so each of the daemon's figures is compared with what the
server itself said around the moment the daemon scraped it.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.daemon_helpers import http_get

REQUIRE = os.environ.get("SPARK_WATCHD_REQUIRE_REAL_SERVERS") == "1"  # .ci/run's pass: run, never skip


def need(env: str, what: str) -> str:
    """The path named by `env`, or skip (fail where CI requires the group) naming how to get it."""
    path = os.environ.get(env, "")
    if path and os.access(path, os.X_OK):
        return path
    msg = f"{env} does not name {what} (.ci/run installs it and sets it)"
    if REQUIRE:
        pytest.fail(msg)
    pytest.skip(msg)


def get_json(url: str, timeout: float = 5.0):
    status, body = http_get(url, timeout=timeout)
    assert status == 200, (url, status)
    return json.loads(body)


def post_json(url: str, payload: dict, timeout: float = 300.0) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (loopback)
        return json.loads(resp.read())


def prom_values(text: str) -> dict[str, float]:
    """{sample name: value} summed over label sets (engines, models), histograms' buckets left out."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.endswith("_bucket") or s.name.endswith("_created"):
                continue
            out[s.name] = out.get(s.name, 0.0) + float(s.value)
    return out


class Server:
    """A server process in its own process group, its output in a log file; stopped by pid."""

    def __init__(self, argv: list[str], env: dict, log: Path, base: str, ready_path: str):
        self.base, self.log = base, log
        self._fh = open(log, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.ready_path = ready_path

    def wait_ready(self, timeout: float) -> float:
        """Seconds until it answered ready_path with 200; fails with its log's tail if it died or never did."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(OSError):
                if http_get(self.base + self.ready_path, timeout=2)[0] == 200:
                    return time.monotonic() - t0
            time.sleep(0.5)
        raise AssertionError(f"server not ready within {timeout:g} s:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_bytes()[-n:].decode("utf-8", "replace")
        return ""

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._fh.close()


class Poller(threading.Thread):
    """Calls `read` every `every` s, keeping (wall time before, wall time after, value) for each answer."""

    def __init__(self, read: Callable[[], object], every: float):
        super().__init__(daemon=True)
        self.read, self.every = read, every
        self.got: list[tuple[float, float, object]] = []
        self.errors: list[tuple[float, float, str]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            t0 = time.time()
            try:
                v = self.read()
            except Exception as exc:  # a hung or restarting server: no answer this time
                v = None
                self.errors.append((t0, time.time(), f"{type(exc).__name__}: {exc}"[:200]))
            if v is not None:
                self.got.append((t0, time.time(), v))
            self._halt.wait(self.every)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)

    def dump(self, path: Path) -> None:
        """What it read and what failed, for a failed test's post-mortem."""
        path.write_text(json.dumps({"got": self.got, "errors": self.errors}, default=str))

    def around(self, ts: float, slack: float) -> list[object]:
        """The answers whose request began within `slack` s of ts (either side)."""
        starts = [g[0] for g in self.got]
        lo, hi = bisect.bisect_left(starts, ts - slack), bisect.bisect_right(starts, ts + slack)
        return [g[2] for g in self.got[lo:hi]]

    def bracket(self, ts: float, key: str, after: float) -> tuple[float, float] | None:
        """(the server's `key` in the last answer begun before ts, in the first begun `after` s after ts):
        a counter the daemon read at ts lies between them."""
        before = [g for g in self.got if g[1] <= ts and key in g[2]]
        later = [g for g in self.got if g[0] >= ts + after and key in g[2]]
        if not before or not later:
            return None
        return before[-1][2][key], later[0][2][key]


class Load:
    """Client threads sending completions: steady loops or a one-off burst; tokens received are counted."""

    def __init__(self, url: str, payload: dict):
        self.url, self.payload = url, payload
        self.tokens = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self.threads: list[threading.Thread] = []

    def _one(self) -> None:
        try:
            out = post_json(self.url, self.payload)
            n = int(out["usage"]["completion_tokens"]) if "usage" in out else int(out["tokens_predicted"])
            with self._lock:
                self.tokens += n
        except Exception as exc:  # counted: the test asserts there were none
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _loop(self) -> None:
        while not self._halt.is_set():
            self._one()

    def failed(self) -> bool:
        """A request failed (its error is in `errors`)."""
        return bool(self.errors)

    def steady(self, clients: int) -> Load:
        self._start(self._loop, clients)
        return self

    def burst(self, n: int, spacing_s: float = 0.0) -> Load:
        """n one-off requests, `spacing_s` apart (a server's HTTP front swamped by all at once stops
        answering its own /metrics on a small machine)."""
        for _ in range(n):
            self._start(self._one, 1)
            time.sleep(spacing_s)
        return self

    def _start(self, fn, n: int) -> None:
        for _ in range(n):
            t = threading.Thread(target=fn, daemon=True)
            t.start()
            self.threads.append(t)

    def finish(self, timeout: float = 300.0) -> None:
        self._halt.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self.threads), "client requests still running"
