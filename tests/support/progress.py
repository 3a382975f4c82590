"""Progress fixtures: a fake clock and a loopback server running the real progress handler."""

from __future__ import annotations

import pytest

from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.throughput.tracker import JobTracker
from spark_watchd.web.http import Request
from spark_watchd.web.progress import PATH, make_handler
from tests.support.fakes import CaptureServer, Recorded, Reply

T0 = 1764403200.0  # 2025-11-29T08:00:00Z, the traces' epoch


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class ProgressServer(CaptureServer):
    """A loopback HTTP server serving only POST /api/v1/progress through the real handler."""

    def __init__(self, settings: ProgressSettings | None = None) -> None:
        self.tracker = JobTracker(settings or ProgressSettings())
        self.handler = make_handler(self.tracker, self.tracker.settings)
        super().__init__(self._answer)

    def _answer(self, rec: Recorded) -> Reply:
        if rec.method != "POST" or rec.path != PATH:
            return Reply(404, headers={"Content-Type": "application/json"})
        headers = {k.lower(): v for k, v in rec.headers.items()}
        resp = self.handler(Request("POST", PATH, {}, headers, rec.body, "127.0.0.1"))
        return Reply(resp.status, resp.body, {"Content-Type": "application/json"})

    def wait_for(self, count: int = 1, timeout: float = 10.0) -> list[bytes]:
        """The bodies received so far, once at least `count` have arrived."""
        return [r.body for r in super().wait_for(count, timeout)]

    @property
    def bodies(self) -> list[bytes]:
        return [r.body for r in self.requests]

    @property
    def headers(self) -> list[dict]:
        return [{k.lower(): v for k, v in r.headers.items()} for r in self.requests]


@pytest.fixture
def progress_server():
    srv = ProgressServer()
    yield srv
    srv.close()


class DaemonProcess:
    """A real `spark-watchd run` on loopback with a fake GB10 (no GPU here), for end-to-end tests."""

    def __init__(self, state_dir, port: int) -> None:
        import subprocess
        import sys

        from tests.conftest import REPO, cli_env

        self.state_dir = state_dir
        self.url = f"http://127.0.0.1:{port}"
        self.train_log = state_dir / "train.log"
        self.train_log.write_text("")
        config = state_dir / "config.toml"
        config.write_text(
            "[progress]\nlog_tail_poll_s = 0.1\nlog_tail_min_interval_s = 0\n\n"
            f'[[progress.log_tail]]\npath = "{self.train_log}"\njob = "tailed-run"\npattern = "hf"\n'
        )
        self.log = open(state_dir / "daemon.log", "w")  # noqa: SIM115 - closed in stop()
        env = cli_env({"SPARK_WATCHD_FAKE_NVML": '{"temp_c": 81}'})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}", "--interval", "1",
             "--state-dir", str(state_dir), "--config", str(config)],
            cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def request(self, method: str, path: str, body: bytes | None = None, timeout: float = 10):
        """(status, body bytes) of one request; HTTP errors are answers, not exceptions."""
        import urllib.error
        import urllib.request

        headers = {"Content-Type": "application/json"} if body is not None else {}
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def wait_until(self, predicate, what: str, timeout: float = 30.0):
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"daemon exited: {self.read_log()}"
            try:
                value = predicate()
            except OSError:
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; daemon log:\n{self.read_log()}")

    def read_log(self) -> str:
        return (self.state_dir / "daemon.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        import subprocess

        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    from tests.conftest import free_port

    d = DaemonProcess(tmp_path_factory.mktemp("daemon-state"), free_port())
    try:
        d.wait_until(lambda: d.request("GET", "/healthz", timeout=2)[0] == 200, "/healthz 200")
        yield d
    finally:
        d.stop()
