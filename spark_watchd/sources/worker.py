"""Run blocking driver calls on one worker thread with a time bound, so a hung driver cannot stall the tick.

A call that overruns is abandoned, not killed (Python cannot kill a thread
stuck in a C call): the worker stays busy with it, further calls are refused
at once until it returns, and at most one thread is ever stuck. The worker is
a daemon thread so a wedged driver cannot hold up interpreter exit either.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any


class CallTimeout(Exception):
    """The call did not return within its bound, or an earlier call is still stuck."""


class _Job:
    __slots__ = ("fn", "args", "done", "result", "error", "started")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]):
        self.fn = fn
        self.args = args
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.started = time.monotonic()


class BoundedWorker:
    """One lazily started worker thread; call(fn, *args, timeout=...) runs fn there."""

    def __init__(self, name: str):
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stuck: _Job | None = None

    @property
    def stuck(self) -> bool:
        """True while an abandoned call has not returned yet."""
        if self._stuck is not None and self._stuck.done.is_set():
            self._stuck = None
        return self._stuck is not None

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        """fn(*args) on the worker; its result, its exception, or CallTimeout after `timeout` s."""
        if self.stuck:
            waited = time.monotonic() - self._stuck.started  # type: ignore[union-attr]
            raise CallTimeout(f"{self.name}: an earlier call is still blocked after {waited:.0f} s")
        if self._thread is None or not self._thread.is_alive():
            # A fresh queue per thread: a stuck old worker never steals the new one's jobs.
            self._jobs = queue.SimpleQueue()
            self._thread = threading.Thread(
                target=self._run, args=(self._jobs,), name=f"spark-watchd-{self.name}", daemon=True
            )
            self._thread.start()
        job = _Job(fn, args)
        self._jobs.put(job)
        if not job.done.wait(timeout):
            self._stuck = job
            raise CallTimeout(f"{self.name}: call did not return within {timeout:g} s")
        if job.error is not None:
            raise job.error
        return job.result

    @staticmethod
    def _run(jobs: queue.SimpleQueue[_Job | None]) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            try:
                job.result = job.fn(*job.args)
            except BaseException as exc:  # handed back to the caller, whatever it is
                job.error = exc
            finally:
                job.done.set()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the worker; joins it unless a call is stuck (then it is left to die with the process)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._jobs.put(None)
        if not self.stuck:
            thread.join(timeout)
