"""Report training progress to spark-watchd from any training loop (no dependency beyond spark-watchd's).

    from spark_watchd.integrations.reporter import ProgressReporter
    reporter = ProgressReporter("llama-8b-sft")
    for step, batch in enumerate(loader, 1):
        ...
        reporter.report(step, tokens=tokens_so_far)
    reporter.close()

`report()` only stores the totals and wakes a background thread: it never blocks
the loop on the network and never raises into it. Reports are coalesced (the
totals are cumulative, so only the latest matters) and sent at most once per
`min_interval`. When the daemon is not running (or the URL is wrong) the
reports are dropped with one warning, repeated only after it answered again.
"""

from __future__ import annotations

import atexit
import base64
import http.client
import json
import logging
import os
import re
import threading
import time
from collections import deque
from typing import Any
from urllib.parse import unquote, urlsplit

import structlog


def library_logger(name: str):
    """A structlog logger over the stdlib logger `name`.

    The integrations run inside the user's training process: the trainer's own logging
    configuration (not the daemon's) decides where these lines go and at which level.
    """
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[structlog.stdlib.filter_by_level, structlog.stdlib.render_to_log_kwargs],
        wrapper_class=structlog.stdlib.BoundLogger,
    )


log = library_logger("spark_watchd.integrations.reporter")

DEFAULT_URL = "http://127.0.0.1:9761"
PATH = "/api/v1/progress"
_BAD_JOB_CHARS = re.compile(r"[^A-Za-z0-9_.:@+/-]+")


def job_name(name: str) -> str:
    """A name the daemon accepts as `job` (odd characters become '-', at most 128 characters)."""
    cleaned = _BAD_JOB_CHARS.sub("-", str(name)).strip("-_.:@+/")[:128]
    return cleaned or "job"


class ProgressReporter:
    """Sends a job's cumulative step / tokens / samples to the daemon from a background thread."""

    def __init__(
        self,
        job: str,
        url: str | None = None,
        token: str | None = None,
        min_interval: float = 5.0,
        timeout: float = 2.0,
        max_pending: int = 8,
    ) -> None:
        self.job = job_name(job)
        if self.job != job:
            log.debug(f"spark-watchd job name {job!r} reported as {self.job!r}")
        self.url = (url or os.environ.get("SPARK_WATCHD_URL") or DEFAULT_URL).rstrip("/")
        # The daemon reads its token from SPARK_WATCHD_PROGRESS__TOKEN: the same variable works here.
        self.token = token if token is not None else os.environ.get("SPARK_WATCHD_PROGRESS__TOKEN")
        self.min_interval = max(0.0, float(min_interval))
        self.timeout = timeout
        self.sent = 0  # reports the daemon accepted
        self.dropped = 0  # reports coalesced away, refused, or lost while the daemon was away
        self._cond = threading.Condition()
        self._pending: deque[dict[str, Any]] = deque(maxlen=max(2, max_pending))
        self._thread: threading.Thread | None = None
        self._closing = False
        self._started = False
        self._last: dict[str, Any] | None = None
        self._last_send = float("-inf")
        self._backoff = 0.0
        self._logged: set[str] = set()
        atexit.register(self.close)

    def report(
        self, step: int, tokens: int | None = None, samples: int | None = None, event: str | None = None
    ) -> None:
        """Queue the job's totals so far; returns at once, never raises."""
        try:
            body: dict[str, Any] = {"job": self.job, "step": int(step), "ts": time.time()}
            if tokens is not None:
                body["tokens"] = int(tokens)
            if samples is not None:
                body["samples"] = int(samples)
            with self._cond:
                if self._closing:
                    return
                if not self._started:
                    # A new reporter is a new run, even when resuming from a checkpoint at a later step.
                    self._started = True
                    event = event or "start"
                if event is not None:
                    body["event"] = event
                self._last = body
                if self._pending and "event" not in self._pending[-1] and event is None:
                    self._pending[-1] = body  # cumulative totals: the newest replaces the unsent one
                    self.dropped += 1
                else:
                    if len(self._pending) == self._pending.maxlen:
                        self.dropped += 1
                    self._pending.append(body)
                self._cond.notify()
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="spark-watchd-reporter", daemon=True
                    )
                    self._thread.start()
        except Exception as e:  # never into the training loop
            self._log_once("report", logging.DEBUG, f"spark-watchd report not queued: {e}")

    def close(self, timeout: float | None = None) -> None:
        """Send the final totals as the run's end and wait (bounded) for the queue to drain."""
        with self._cond:
            if self._closing:
                return
            if self._last is not None:
                final = dict(self._last, ts=time.time(), event="end")
                if self._pending and "event" not in self._pending[-1]:
                    self._pending[-1] = final
                else:
                    self._pending.append(final)
            self._closing = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(self.timeout + 1.0 if timeout is None else timeout)
        try:
            atexit.unregister(self.close)
        except Exception:
            pass

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return
                due = self._last_send + max(self.min_interval, self._backoff)
                while not self._closing and time.monotonic() < due:
                    self._cond.wait(due - time.monotonic())
                batch = list(self._pending)
                self._pending.clear()
                closing = self._closing
            for body in batch:
                if self._send(body):
                    self.sent += 1
                else:
                    self.dropped += 1
                    if closing:
                        break  # daemon away at exit: do not hold the interpreter
            self._last_send = time.monotonic()

    def _send(self, body: dict[str, Any]) -> bool:
        try:
            parts = urlsplit(self.url)
            conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            conn = conn_cls(parts.hostname or "127.0.0.1", parts.port, timeout=self.timeout)
            headers = {"Content-Type": "application/json"}
            if parts.username is not None:
                # http://user:pass@host: the daemon's basic auth takes Authorization, the token its own header.
                cred = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
                headers["Authorization"] = "Basic " + base64.b64encode(cred).decode()
                if self.token:
                    headers["X-Progress-Token"] = self.token
            elif self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            try:
                conn.request("POST", parts.path.rstrip("/") + PATH, json.dumps(body), headers)
                resp = conn.getresponse()
                detail = resp.read(2048).decode("utf-8", "replace")
            finally:
                conn.close()
        except (OSError, http.client.HTTPException) as e:
            # Daemon not running, restarting or a wrong URL: say so once (not every report), back off.
            self._backoff = min(60.0, max(self.min_interval, self._backoff * 2 or 1.0))
            self._log_once(
                "down",
                logging.WARNING,
                f"spark-watchd not reachable at {self.url} ({e}); progress reports are dropped until it "
                "answers (check the URL or SPARK_WATCHD_URL)",
            )
            return False
        self._backoff = 0.0
        self._logged.discard("down")
        if resp.status >= 300:
            self._log_once(
                f"http{resp.status}",
                logging.WARNING,
                f"spark-watchd refused a progress report ({resp.status}): {detail.strip()[:300]}",
            )
            return False
        return True

    def _log_once(self, key: str, level: int, msg: str) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.log(level, msg)


class ReportingCallback:
    """What the framework callbacks share: where to report, and the reporter they open when training starts."""

    def __init__(
        self,
        job: str | None,
        url: str | None = None,
        token: str | None = None,
        tokens_per_step: int | None = None,
        min_interval: float = 5.0,
    ) -> None:
        self.job = job
        self.url = url
        self.token = token
        self.tokens_per_step = tokens_per_step
        self.min_interval = min_interval
        self.reporter: ProgressReporter | None = None

    def open_reporter(self, job: str) -> ProgressReporter:
        """Start reporting as `job` (the first report follows from the caller)."""
        self.reporter = ProgressReporter(job, url=self.url, token=self.token, min_interval=self.min_interval)
        return self.reporter
