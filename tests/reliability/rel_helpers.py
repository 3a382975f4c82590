"""Helpers for reliability tests: an in-process daemon on real sources and a real HTTP server."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from pathlib import Path

from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.sources import build_sources
from spark_watchd.web.server import HttpServer
from tests.conftest import FIXTURES
from tests.daemon_helpers import http_get, samples, value
from tests.support.resources import thread_count  # noqa: F401 - re-exported for the reliability tests

GB10_HOST = FIXTURES / "hosts" / "gb10-eviction"


class FakeMonotonic:
    """A monotonic clock tests move by hand (NVML backoff without sleeping)."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


def copy_host(tmp_path: Path, host: Path = GB10_HOST) -> Path:
    """A writable copy of a fixture host (so a test can break its files)."""
    dst = tmp_path / "host"
    shutil.copytree(host, dst)
    return dst


def fd_count(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class LiveDaemon:
    """Daemon + HttpServer in this process, on `host` with the fake NVML `nvml`; ticks are driven by the test."""

    def __init__(self, tmp_path: Path, nvml, host: Path = GB10_HOST, clock=time.time, mono=None, **src):
        env = {
            "SPARK_WATCHD_SOURCES__PROC_ROOT": str(host / "proc"),
            "SPARK_WATCHD_SOURCES__SYS_ROOT": str(host / "sys"),
            "SPARK_WATCHD_SOURCES__NVML_TIMEOUT_S": str(src.pop("nvml_timeout_s", 0.3)),
            "SPARK_WATCHD_SOURCES__FAST_WATCH_INTERVAL_S": str(src.pop("fast_watch_interval_s", 0.1)),
        }
        env.update({f"SPARK_WATCHD_SOURCES__{k.upper()}": str(v) for k, v in src.items()})
        self.settings = load_settings(None, environ=env)
        self.mono = mono or FakeMonotonic()
        self.sources = build_sources(self.settings, nvml=nvml, clock=self.mono)
        state = tmp_path / "state"
        self.daemon = build(self.settings, sources=self.sources, clock=clock, state_dir=str(state))
        self.server = HttpServer("127.0.0.1:0", self.daemon.routes, workers=4, timeout=2)
        self.server.start()
        self.url = self.server.url

    def scrape(self) -> dict:
        status, text = http_get(self.url + "metrics", timeout=5)
        assert status == 200, text
        return samples(text)

    def up(self, source: str) -> float | None:
        return value(self.scrape(), "sparkwatchd_source_up", source=source)

    def memwatch(self):
        """The meminfo source's fast watch thread (None when the watch is off)."""
        return next((s.watch for s in self.sources if getattr(s, "watch", None) is not None), None)

    def close(self) -> None:
        self.server.stop()
        self.daemon.close()


@contextlib.contextmanager
def live_daemon(tmp_path: Path, nvml, **kw):
    d = LiveDaemon(tmp_path, nvml, **kw)
    try:
        yield d
    finally:
        d.close()


def churn(stop: threading.Event, n: int = 4) -> None:
    """Start and reap short-lived processes until stop is set (pids vanish while the scan runs)."""
    import subprocess

    while not stop.is_set():
        procs = [subprocess.Popen(["sleep", "0.02"]) for _ in range(n)]
        for p in procs:
            p.wait()
