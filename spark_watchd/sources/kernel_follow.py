"""The live kernel-log follower (`journalctl -k -f -o json`): a child process read without ever dying silently.

Lines are capped (driverlog.MAX_LINE_CHARS: a line with no newline in sight is dropped, not buffered
without bound, and counted); each batch goes through driverlog.read_journal; a follower that exits or
fails for any reason (a bug, a line no parser foresaw) is logged once through structlog and started again
with backoff (1 s doubling to retry_s, afresh after a run longer than retry_s).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from spark_watchd.sources.driverlog import MAX_LINE_CHARS, JournalRead, read_journal

FOLLOW_ARGV = ("-k", "-f", "-n", "0", "-o", "json", "--no-pager", "-q")
BACKOFF_FIRST_S = 1.0
FEED = "kernel-log"


class KernelFollower:
    """Runs the follower until stopped; hands each batch's JournalRead to `take`, cut lines to `reject`."""

    def __init__(
        self,
        argv: Sequence[str],
        retry_s: float,
        log,
        state: Callable[..., None],
        take: Callable[[JournalRead], None],
        reject: Callable[[int], None],
        reader: Callable[..., JournalRead] | None = None,
    ):
        # Each batch of lines to records: read_journal, the kernel's (looked up per batch), or oomkillers.py's.
        self.reader = reader
        self.argv = list(argv)
        self.retry_s = retry_s
        self.log = log
        self.state = state
        self.take = take
        self.reject = reject
        self.proc: subprocess.Popen | None = None

    def run(self, stop: threading.Event) -> None:
        delay = BACKOFF_FIRST_S
        while not stop.is_set():
            try:
                self.proc = proc = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                self.state(FEED, f"not followed ({exc.strerror or exc})", state="not supported")
                return
            self.state(FEED, "following")
            began = time.monotonic()
            why = None
            try:
                self._read(proc, stop)
            except Exception as exc:  # any bad input or bug: logged once as JSON, then a fresh follower
                self.log.exception("kernel-log: follower failed; restarting", feed=FEED)
                why = type(exc).__name__
            finally:
                self.terminate()
                proc.stdout.close()
            rc = proc.wait()
            if stop.is_set():
                return
            if time.monotonic() - began > self.retry_s:
                delay = BACKOFF_FIRST_S
            what = f"failed ({why})" if why else f"exited {rc}"
            self.state(FEED, f"follower {what}; restarting in {delay:g} s", True, "restarting")
            if stop.wait(delay):
                return
            delay = min(delay * 2, self.retry_s)

    def _read(self, proc: subprocess.Popen, stop: threading.Event) -> None:
        buf = b""
        skipping = False  # inside a line already over the cap: drop up to its newline
        ctx: dict = {}
        fd = proc.stdout.fileno()
        while not stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            if skipping and lines:
                lines, skipping = lines[1:], False
            if len(buf) > MAX_LINE_CHARS:  # a line with no newline in sight is not buffered without bound
                buf = b""
                if not skipping:
                    skipping = True
                    self.reject(1)
            if lines:
                read = self.reader or read_journal
                self.take(read([ln.decode("utf-8", "replace") for ln in lines], ctx=ctx))

    def terminate(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait(timeout=2)
