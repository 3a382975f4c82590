"""The driver-events source: Xids from NVML's event API, and driver faults from the kernel log.

Three optional feeds, each on its own and none an error when absent:
- NVML events (`nvmlEventSetCreate`, `nvmlDeviceRegisterEvents` for Xid critical errors,
  `nvmlEventSetWait_v2` with a timeout) on a thread of their own; Not Supported is a state.
- The previous boot's kernel messages (`journalctl -k -b -1 -o json`), read once at the first collect, so
  a reboot can be explained (readable with group systemd-journal).
- Live kernel messages (`journalctl -k -f -o json`) for NV_ERR_NO_MEMORY and PCIe AER fatal lines (and
  Xid lines while NVML events are not available, so one fault is never recorded twice).
collect() hands over what arrived since the previous collect as trace-v1 `driver_events`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sources.command import run_argv
from spark_watchd.sources.driverlog import journal_problem, last_entry_ts, parse_journal_json
from spark_watchd.sources.nvml import FATAL_ERRORS, describe_nvml_error, load_pynvml

PREVIOUS_BOOT_ARGV = ("-k", "-b", "-1", "-o", "json", "--no-pager", "-q")
# The previous boot's last entry of any kind (a planned reboot's shutdown lines are user space's).
PREVIOUS_BOOT_END_ARGV = ("-b", "-1", "-n", "1", "-o", "json", "--no-pager", "-q")
FOLLOW_ARGV = ("-k", "-f", "-n", "0", "-o", "json", "--no-pager", "-q")
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
# NVML_ERROR_TIMEOUT, _NOT_SUPPORTED, _FUNCTION_NOT_FOUND, _LIBRARY_NOT_FOUND
_TIMEOUT, _NOT_SUPPORTED, _NO_FUNCTION, _NO_LIBRARY = 10, 3, 13, 12
# An Xid storm must not grow memory without bound between two ticks; what is cut is counted and logged.
QUEUE_MAX = 1000


class DriverEventsSource:
    """`driver_events`: faults since the previous collect. Always up; missing feeds are states (see `states`)."""

    name = "driver_events"

    def __init__(
        self,
        nvml: Any = None,
        *,
        journalctl: str | None = "journalctl",
        journal_timeout_s: float = 5.0,
        follow: bool = True,
        nvml_events: bool = True,
        wait_ms: int = 500,
        retry_s: float = 60.0,
        runner: Callable[[Sequence[str], float], subprocess.CompletedProcess] = run_argv,
        follow_argv: Sequence[str] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self._nvml = nvml
        self.journalctl = journalctl
        self.journal_timeout_s = journal_timeout_s
        self.follow = follow
        self.nvml_events = nvml_events
        self.wait_ms = wait_ms
        self.retry_s = retry_s
        self.runner = runner
        self.follow_argv = (
            list(follow_argv) if follow_argv else ([journalctl, *FOLLOW_ARGV] if journalctl else None)
        )
        self.clock = clock
        self.log = get_logger("driver_events")
        self.states: dict[str, str] = {}  # feed -> what it is doing (or why it is off)
        self.dropped = 0
        self._queue: deque[DriverEvent] = deque(maxlen=QUEUE_MAX)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._nvml_watching = threading.Event()
        self._proc: subprocess.Popen | None = None

    # --- plumbing --------------------------------------------------------------
    def _state(self, feed: str, text: str, problem: bool = False) -> None:
        """Record a feed's state; log once per change (never every tick)."""
        if self.states.get(feed) == text:
            return
        self.states[feed] = text
        (self.log.info if not problem else self.log.warning)(f"{feed}: {text}", feed=feed)

    def _push(self, ev: DriverEvent) -> None:
        with self._lock:
            if len(self._queue) == self._queue.maxlen:
                self.dropped += 1
            self._queue.append(ev)

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        if not self._started:
            self._started = True
            self._read_previous_boot()  # synchronous: the first sample must carry it for a reboot verdict
            self._spawn("nvml-events", self._nvml_loop, self.nvml_events, "NVML not in use")
            self._spawn(
                "kernel-log", self._follow_loop, self.follow and self.follow_argv is not None, "configuration"
            )
        with self._lock:
            events = list(self._queue)
            self._queue.clear()
        return {"driver_events": events}

    def _spawn(self, name: str, fn: Callable[[], None], enabled: bool, why_off: str) -> None:
        if not enabled:
            self._state(name, f"off ({why_off})")
            return
        t = threading.Thread(target=fn, name=f"spark-watchd-{name}", daemon=True)
        t.start()
        self._threads.append(t)

    def close(self) -> None:
        """Stop the feeds: the event thread, the kernel-log follower and its child process."""
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)
        for t in self._threads:
            t.join(timeout=(self.wait_ms / 1000.0) + 2.0)
        if proc is not None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait(timeout=2)

    # --- previous boot ------------------------------------------------------------
    def _read_previous_boot(self) -> None:
        if not self.journalctl:
            self._state("previous-boot", "off (no journalctl configured)")
            return
        try:
            cp = self.runner([self.journalctl, *PREVIOUS_BOOT_ARGV], self.journal_timeout_s)
        except subprocess.TimeoutExpired:
            self._state("previous-boot", f"journalctl took over {self.journal_timeout_s:g} s: skipped", True)
            return
        except OSError as exc:
            self._state("previous-boot", f"journalctl not available ({exc.strerror or exc})")
            return
        lines = (cp.stdout or "").splitlines()
        events = parse_journal_json(lines)
        problem = journal_problem(cp.returncode, cp.stderr or "", bool(events))
        end = self._previous_boot_end(lines) if events else None
        for ev in events:
            self._push(dataclasses.replace(ev, boot_end_ts=end) if end is not None else ev)
        if problem:
            self._state("previous-boot", problem, problem.startswith("kernel messages not readable"))
        else:
            self._state("previous-boot", f"read: {len(events)} driver fault line(s)")

    def _previous_boot_end(self, kernel_lines: list[str]) -> float | None:
        """When the previous boot's journal ends: its last entry of any kind, else its last kernel line."""
        ends = [last_entry_ts(kernel_lines)]
        try:
            cp = self.runner([self.journalctl, *PREVIOUS_BOOT_END_ARGV], self.journal_timeout_s)
            ends.append(last_entry_ts((cp.stdout or "").splitlines()) if cp.returncode == 0 else None)
        except (OSError, subprocess.TimeoutExpired):
            pass
        known = [t for t in ends if t is not None]
        return max(known) if known else None

    # --- live kernel log ----------------------------------------------------------
    def _follow_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._proc = subprocess.Popen(
                    self.follow_argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                self._state("kernel-log", f"not followed ({exc.strerror or exc})")
                return
            self._state("kernel-log", "following")
            try:
                self._read_follow(self._proc)
            finally:
                with contextlib.suppress(OSError):
                    os.killpg(self._proc.pid, signal.SIGTERM)
                self._proc.stdout.close()
            rc = self._proc.wait()
            if self._stop.is_set():
                return
            self._state("kernel-log", f"follower exited {rc}; retrying in {self.retry_s:g} s", True)
            if self._stop.wait(self.retry_s):
                return

    def _read_follow(self, proc: subprocess.Popen) -> None:
        buf = b""
        fd = proc.stdout.fileno()
        while not self._stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for ev in parse_journal_json(ln.decode("utf-8", "replace") for ln in lines):
                # While NVML delivers Xid events the kernel's Xid line is the same fault: record it once.
                if ev.xid is not None and self._nvml_watching.is_set():
                    continue
                self._push(ev)

    # --- NVML events ---------------------------------------------------------------
    def _nvml_loop(self) -> None:
        while not self._stop.is_set():
            again = self._nvml_session()
            self._nvml_watching.clear()
            if not again or self._stop.wait(self.retry_s):
                return

    def _nvml_session(self) -> bool:
        """Watch Xid events until stopped or the GPU is lost; False when retrying is pointless."""
        try:
            nv = self._nvml if self._nvml is not None else load_pynvml()
        except Exception as exc:
            self._state("nvml-events", f"off ({exc})")
            return False
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            missing = getattr(exc, "value", None) == _NO_LIBRARY  # no driver installed: nothing to wait for
            self._state("nvml-events", f"nvmlInit failed: {describe_nvml_error(exc)}", not missing)
            return not missing
        es = None
        try:
            es = nv.nvmlEventSetCreate()
            handles = self._register(nv, es)
            if not handles:
                self._state("nvml-events", "Xid events not supported by this driver (kernel log only)")
                return False
            self._nvml_watching.set()
            self._state("nvml-events", f"watching Xid events on {len(handles)} GPU(s)")
            while not self._stop.is_set():
                try:
                    data = nv.nvmlEventSetWait_v2(es, self.wait_ms)
                except nv.NVMLError as exc:
                    code = getattr(exc, "value", None)
                    if code == _TIMEOUT:
                        continue
                    if code in FATAL_ERRORS:
                        self._state("nvml-events", f"lost: {describe_nvml_error(exc)}", True)
                        return True
                    self._stop.wait(self.wait_ms / 1000.0)  # a transient error: do not spin
                    continue
                if int(data.eventType) & XID_EVENT:
                    code = int(data.eventData)
                    gpu = self._index(nv, data.device, handles)
                    self._push(DriverEvent(self.clock(), gpu, code, "nvml", f"Xid {code} (NVML event)"))
            return False
        except nv.NVMLError as exc:
            # Not Supported or a driver without the symbol: no event API here. Anything else may pass.
            retry = getattr(exc, "value", None) not in (_NOT_SUPPORTED, _NO_FUNCTION)
            self._state("nvml-events", f"not available: {describe_nvml_error(exc)}", retry)
            return retry
        finally:
            with contextlib.suppress(Exception):
                if es is not None:
                    nv.nvmlEventSetFree(es)
            with contextlib.suppress(Exception):
                nv.nvmlShutdown()

    @staticmethod
    def _register(nv: Any, es: Any) -> list[int]:
        """Register every GPU that supports Xid events; the indices registered."""
        out = []
        for index in range(int(nv.nvmlDeviceGetCount())):
            try:
                nv.nvmlDeviceRegisterEvents(nv.nvmlDeviceGetHandleByIndex(index), XID_EVENT, es)
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) in FATAL_ERRORS:
                    raise
                continue  # Not Supported on this device (some drivers): the others still count
            out.append(index)
        return out

    @staticmethod
    def _index(nv: Any, device: Any, registered: list[int]) -> int | None:
        try:
            return int(nv.nvmlDeviceGetIndex(device))
        except Exception:
            return registered[0] if len(registered) == 1 else None
