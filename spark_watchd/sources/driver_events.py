"""The driver-events source: Xids from NVML's event API, and driver faults from the kernel log.

Three optional feeds, each on its own and none an error when absent:
- NVML events (`nvmlEventSetCreate`, `nvmlDeviceRegisterEvents` for Xid critical errors,
  `nvmlEventSetWait_v2` with a timeout) on a thread of their own; Not Supported is a state.
- The previous boot's kernel messages (`journalctl -k -b -1 -o json`), read once at the first collect, so
  a reboot can be explained (readable with group systemd-journal); each line carries that boot's end.
- Live kernel messages (`journalctl -k -f -o json`) for NV_ERR_NO_MEMORY and PCIe AER fatal lines (and
  Xid lines while NVML events are not available, so one fault is never recorded twice).
Lines count only when the kernel spoke them and the driver's text starts the message (driverlog.py,
sample/driverlines.py); a bad line is skipped and counted per feed; a storm is folded into one event with a
count (driverlog.StormFolder); a follower that fails for any reason restarts with backoff. Each feed's state
(`feed_status()`: watching, read, not supported, unreadable, restarting, off) reaches /api/v1/status, the
page and /metrics. collect() hands over what arrived since the previous collect as trace-v1 `driver_events`
(and any other key a kernel-line kind feeds, driverlog.KERNEL_LINE_KINDS).
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.sample.driver import DRIVER_FEEDS, FEED_STATES, LINE_FEEDS, DriverEvent
from spark_watchd.sources.command import run_argv
from spark_watchd.sources.driverlog import (
    KERNEL_LINE_KINDS,
    MAX_EVENTS_PER_READ,
    StormFolder,
    fold_all,
    fold_key,
    journal_problem,
    last_entry_ts,
    no_previous_boot,
    read_journal,
)
from spark_watchd.sources.gpu_pci import nvml_pci_index, sysfs_pci_index
from spark_watchd.sources.kernel_follow import FOLLOW_ARGV, KernelFollower
from spark_watchd.sources.nvml import FATAL_ERRORS, describe_nvml_error, load_pynvml

PREVIOUS_BOOT_ARGV = ("-k", "-b", "-1", "-o", "json", "--no-pager", "-q")
# The previous boot's last entry of any kind (a planned reboot's shutdown lines are user space's).
PREVIOUS_BOOT_END_ARGV = ("-b", "-1", "-n", "1", "-o", "json", "--no-pager", "-q")
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
# NVML_ERROR_TIMEOUT, _NOT_SUPPORTED, _FUNCTION_NOT_FOUND, _LIBRARY_NOT_FOUND
_TIMEOUT, _NOT_SUPPORTED, _NO_FUNCTION, _NO_LIBRARY = 10, 3, 13, 12
# An Xid storm must not grow memory without bound between two ticks; what is cut is counted and logged.
QUEUE_MAX = 1000
BACKOFF_FIRST_S = 1.0  # the first restart of a failed feed; doubling to retry_s


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
        sys_root: str = "/sys",
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
        self.sys_root = sys_root
        self.log = get_logger("driver_events")
        self.states: dict[str, str] = {}  # feed -> what it is doing (or why it is off), in words
        self.feed_states: dict[str, str] = {}  # feed -> one of FEED_STATES
        self.rejected: dict[str, int] = dict.fromkeys(LINE_FEEDS, 0)
        self.dropped = 0
        self._queue: deque[DriverEvent] = deque(maxlen=QUEUE_MAX)
        self._other: dict[str, list] = {k.key: [] for k in KERNEL_LINE_KINDS if k.key != "driver_events"}
        self._folder = StormFolder()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._nvml_watching = threading.Event()
        self._follower: KernelFollower | None = None
        self._pci_index: dict[str, int] | None = None

    # --- plumbing --------------------------------------------------------------
    def _state(self, feed: str, text: str, problem: bool = False, state: str | None = None) -> None:
        """Record a feed's state (one of FEED_STATES) and its words; log once per change (never every tick)."""
        state = state or ("unreadable" if problem else "watching")
        assert state in FEED_STATES, state
        self.feed_states[feed] = state
        if self.states.get(feed) == text:
            return
        self.states[feed] = text
        (self.log.info if not problem else self.log.warning)(f"{feed}: {text}", feed=feed)

    def feed_status(self) -> dict[str, dict[str, Any]]:
        """Each feed's state, its words and the lines it rejected: for /api/v1/status, the page and /metrics."""
        return {
            feed: {
                "state": self.feed_states.get(feed, "off"),
                "detail": self.states.get(feed, "not started"),
                "lines_rejected": self.rejected.get(feed, 0),
            }
            for feed in DRIVER_FEEDS
        }

    def _push(self, ev: DriverEvent, live: bool = True) -> None:
        """Queue an event; a live one through the storm folder (a previous boot's batch is folded already and
        must not fold the first live fault of the same GPU into itself)."""
        with self._lock:
            if ev.gpu is None and ev.pci is not None:
                ev = dataclasses.replace(ev, gpu=self._gpu_of(ev.pci))
            if not live:
                self._append(ev)
                return
            first = self._folder.add(ev, time.monotonic())
            if first is not None:
                self._append(first)
                return
            if self._folder.folding_started:
                self.log.warning(
                    "driver fault storm: identical lines folded into one event with a count",
                    xid=ev.xid,
                    pci=ev.pci,
                    text=ev.text[:120],
                )
            key = fold_key(ev)
            for i in range(len(self._queue) - 1, -1, -1):  # still queued: that event counts this line
                q = self._queue[i]
                if fold_key(q) == key:
                    self._queue[i] = dataclasses.replace(q, ts=max(q.ts, ev.ts), count=q.count + ev.count)
                    self._folder.absorb(ev)
                    break

    def _append(self, ev: DriverEvent) -> None:
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
        self._queue.append(ev)

    def _gpu_of(self, pci: str) -> int | None:
        """The GPU index of a PCI address (NVML's bus ids when the event thread read them, else sysfs)."""
        if self._pci_index is None:
            self._pci_index = sysfs_pci_index(self.sys_root)
        return self._pci_index.get(pci)

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        if not self._started:
            self._started = True
            if (
                self._pci_index is None
            ):  # read now: a GPU that falls off the bus may leave /sys/bus/pci with it
                self._pci_index = sysfs_pci_index(self.sys_root)
            try:
                self._read_previous_boot()  # synchronous: the first sample must carry it for a reboot verdict
            except Exception as exc:  # a bad previous boot never keeps the live feeds from starting
                self.log.exception("previous boot's journal could not be read", feed="previous-boot")
                self._state("previous-boot", f"unreadable ({type(exc).__name__})", True, "unreadable")
            finally:
                self._spawn("nvml-events", self._nvml_loop, self.nvml_events, "NVML not in use")
                follow = self.follow and self.follow_argv is not None
                self._spawn("kernel-log", self._follow_loop, follow, "configuration")
        with self._lock:
            for ev in self._folder.flush(time.monotonic()):
                self._append(ev)
            events = list(self._queue)
            self._queue.clear()
            other = {k: v[:] for k, v in self._other.items()}
            for v in self._other.values():
                v.clear()
        return {"driver_events": events, **other}

    def _spawn(self, name: str, fn: Callable[[], None], enabled: bool, why_off: str) -> None:
        if not enabled:
            self._state(name, f"off ({why_off})", state="off")
            return
        t = threading.Thread(target=self._guarded(name, fn), name=f"spark-watchd-{name}", daemon=True)
        t.start()
        self._threads.append(t)

    def _guarded(self, feed: str, fn: Callable[[], None]) -> Callable[[], None]:
        """Run a feed's loop; after any exception log it (structlog, JSON) and restart it with backoff."""

        def run() -> None:
            delay = BACKOFF_FIRST_S
            while not self._stop.is_set():
                began = time.monotonic()
                try:
                    fn()
                    return
                except Exception as exc:
                    self.log.exception(f"{feed}: feed failed; restarting", feed=feed)
                    self._state(feed, f"restarting after {type(exc).__name__}", True, "restarting")
                if time.monotonic() - began > self.retry_s:
                    delay = BACKOFF_FIRST_S  # it had been running: start the backoff afresh
                if self._stop.wait(min(delay, self.retry_s)):
                    return
                delay = min(delay * 2, self.retry_s)

        return run

    def close(self) -> None:
        """Stop the feeds: the event thread, the kernel-log follower and its child process."""
        self._stop.set()
        follower = self._follower
        if follower is not None:
            follower.terminate()
        for t in self._threads:
            t.join(timeout=(self.wait_ms / 1000.0) + 2.0)
        if follower is not None:
            follower.kill()

    # --- previous boot ------------------------------------------------------------
    def _read_previous_boot(self) -> None:
        feed = "previous-boot"
        if not self.journalctl:
            self._state(feed, "off (no journalctl configured)", state="off")
            return
        try:
            cp = self.runner([self.journalctl, *PREVIOUS_BOOT_ARGV], self.journal_timeout_s)
        except subprocess.TimeoutExpired:
            self._state(feed, f"journalctl took over {self.journal_timeout_s:g} s: skipped", True)
            return
        except OSError as exc:
            self._state(feed, f"journalctl not available ({exc.strerror or exc})", state="not supported")
            return
        if no_previous_boot(cp.returncode, cp.stderr or ""):  # a journal holding one boot: normal
            return self._state(feed, "read: the journal holds no previous boot (its first)", state="read")
        lines = (cp.stdout or "").splitlines()
        got = read_journal(lines, ctx={})
        self.rejected[feed] += got.rejected
        events = fold_all(got.records["driver_events"])[-MAX_EVENTS_PER_READ:]
        problem = journal_problem(cp.returncode, cp.stderr or "", bool(events))
        end = self._previous_boot_end(lines) if events else None
        for ev in events:
            self._push(dataclasses.replace(ev, boot_end_ts=end) if end is not None else ev, live=False)
        with self._lock:
            for key, recs in got.records.items():
                # A kill in the previous boot names no process of this one (the reboot event speaks for it).
                if key in self._other and key != "oom_kills":
                    self._other[key].extend(recs)
        if problem:
            unreadable = problem.startswith("kernel messages not readable")
            word = "unreadable" if unreadable or "no persistent journal" not in problem else "not supported"
            self._state(feed, problem, unreadable, word)
        else:
            lines_n = sum(e.count for e in events)
            self._state(feed, f"read: {len(events)} driver fault(s) from {lines_n} line(s)", state="read")

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
        follower = KernelFollower(
            self.follow_argv, self.retry_s, self.log, self._state, self._take, self._reject
        )
        self._follower = follower
        follower.run(self._stop)

    def _reject(self, n: int) -> None:
        self.rejected["kernel-log"] += n

    def _take(self, got) -> None:
        self._reject(got.rejected)
        for ev in got.records["driver_events"]:
            # While NVML delivers Xid events the kernel's Xid line is the same fault: record it once.
            if ev.xid is not None and self._nvml_watching.is_set():
                continue
            self._push(ev)
        with self._lock:
            for key, recs in got.records.items():
                if key in self._other:
                    self._other[key].extend(recs)

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
            self._state("nvml-events", f"off ({exc})", state="off")
            return False
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            missing = getattr(exc, "value", None) == _NO_LIBRARY  # no driver installed: nothing to wait for
            self._state(
                "nvml-events",
                f"nvmlInit failed: {describe_nvml_error(exc)}",
                not missing,
                "not supported" if missing else "restarting",
            )
            return not missing
        es = None
        try:
            es = nv.nvmlEventSetCreate()
            handles = self._register(nv, es)
            if not handles:
                self._state(
                    "nvml-events",
                    "Xid events not supported by this driver (kernel log only)",
                    state="not supported",
                )
                return False
            self._nvml_watching.set()
            self._pci_index = nvml_pci_index(nv, handles) or self._pci_index
            self._state("nvml-events", f"watching Xid events on {len(handles)} GPU(s)")
            while not self._stop.is_set():
                try:
                    data = nv.nvmlEventSetWait_v2(es, self.wait_ms)
                except nv.NVMLError as exc:
                    code = getattr(exc, "value", None)
                    if code == _TIMEOUT:
                        continue
                    if code in FATAL_ERRORS:
                        self._state("nvml-events", f"lost: {describe_nvml_error(exc)}", True, "restarting")
                        return True
                    self._stop.wait(self.wait_ms / 1000.0)  # a transient error: do not spin
                    continue
                if int(data.eventType) & XID_EVENT:
                    code = int(data.eventData)
                    gpu = self._index(nv, data.device, handles)
                    text = f"Xid {code} (NVML event)"
                    self._push(DriverEvent(ts=self.clock(), gpu=gpu, xid=code, source="nvml", text=text))
            return False
        except nv.NVMLError as exc:
            # Not Supported or a driver without the symbol: no event API here. Anything else may pass.
            retry = getattr(exc, "value", None) not in (_NOT_SUPPORTED, _NO_FUNCTION)
            self._state(
                "nvml-events",
                f"not available: {describe_nvml_error(exc)}",
                retry,
                "restarting" if retry else "not supported",
            )
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
