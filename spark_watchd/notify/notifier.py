"""Embedded webhook notifier for a Spark without Alertmanager.

A snapshot subscriber: it compares each published diagnosis with the last one,
turns finding transitions (ok -> warning -> critical and back) and new events
into notifications, and hands them to a background thread that posts them to
the configured webhook (generic JSON, ntfy or Slack-compatible). The
subscriber only appends to a bounded queue, so a slow or dead webhook never
delays sampling.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.notify.settings import NotifySettings
from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.model import SEVERITY_LEVEL
from spark_watchd.snapshot import Snapshot

log = get_logger("notify")

# Events worth a message of their own; throttle_start/end are covered by the G4 transitions.
EVENT_SEVERITY = {
    "eviction": "critical",
    "oom_kill": "critical",
    "reboot": "warning",
    "driver_oom": "warning",  # G3 pages on the memory signals; healthy engine starts log it too
    "pcie_fatal": "critical",
    "xid": "warning",
    "engine_stall": "warning",  # critical while memory is thin: the last sign before a wedge
}


def event_severity(e) -> str | None:
    """Severity of a notification for an event: a fatal Xid this boot pages; a previous boot's fault informs."""
    if e.after_throttle:
        return "critical"
    severity = EVENT_SEVERITY.get(e.kind)
    if e.kind == "xid" and e.details.get("fatal") or e.kind == "engine_stall" and e.details.get("thin"):
        severity = "critical"
    if severity == "critical" and e.details.get("previous_boot"):
        severity = "warning"
    return severity


NTFY_PRIORITY = {"critical": "urgent", "warning": "high", "ok": "default"}
NTFY_TAGS = {"critical": "rotating_light", "warning": "warning", "ok": "white_check_mark"}
_STOP = object()


@dataclass(frozen=True)
class Notification:
    """One thing to tell the user: a finding transition or an event."""

    kind: str  # "finding" or "event"
    key: str  # rate-limit key: the gotcha, or "event:<kind>"
    gotcha: str
    severity: str
    previous: str | None
    summary: str
    host: str
    ts: float
    advice: tuple[str, ...] = ()
    event: str | None = None
    count: int = 1

    @property
    def title(self) -> str:
        """Short headline: what, how bad, where."""
        if self.kind == "event":
            what = f"{self.event} ({self.gotcha})" + (f" x{self.count}" if self.count > 1 else "")
        elif self.severity == "ok":
            what = f"{self.gotcha} back to ok (was {self.previous})"
        else:
            what = f"{self.gotcha} {self.severity}"
        return f"spark-watchd: {what} on {self.host}"

    def as_json(self) -> dict[str, Any]:
        """The generic JSON body."""
        return {
            "source": "spark-watchd",
            "kind": self.kind,
            "host": self.host,
            "gotcha": self.gotcha,
            "severity": self.severity,
            "previous": self.previous,
            "event": self.event,
            "count": self.count,
            "title": self.title,
            "summary": self.summary,
            "advice": list(self.advice),
            "ts": self.ts,
        }


def render(n: Notification, settings: NotifySettings) -> tuple[bytes, dict[str, str]]:
    """The request body and headers for one notification under the configured preset."""
    headers = {"User-Agent": "spark-watchd"}
    if settings.preset == "ntfy":
        text = n.summary + "".join(f"\n- {a}" for a in n.advice)
        # HTTP headers are latin-1: keep the ntfy title plain ASCII.
        headers.update(
            {
                "Content-Type": "text/plain; charset=utf-8",
                "Title": n.title.encode("ascii", "replace").decode(),
                "Priority": NTFY_PRIORITY.get(n.severity, "default"),
                "Tags": f"{NTFY_TAGS.get(n.severity, 'information_source')},{n.gotcha}",
            }
        )
        body = text.encode()
    elif settings.preset == "slack":
        mark = {"critical": ":rotating_light:", "warning": ":warning:", "ok": ":white_check_mark:"}
        text = f"{mark.get(n.severity, '')} *{n.title}*\n{n.summary}" + "".join(f"\n• {a}" for a in n.advice)
        headers["Content-Type"] = "application/json"
        body = dumps_strict({"text": text.strip()}).encode()
    else:
        headers["Content-Type"] = "application/json"
        body = dumps_strict(n.as_json()).encode()
    if settings.token:
        headers["Authorization"] = f"Bearer {settings.token}"
    headers.update(settings.headers)
    return body, headers


class TransitionTracker:
    """Pure part: which notifications one diagnosis brings, given the levels seen before."""

    def __init__(self, settings: NotifySettings):
        self.settings = settings
        self.levels: dict[str, str] = {}
        self.last_ts: float | None = None

    def _wanted(self, severity: str) -> bool:
        return SEVERITY_LEVEL[severity] >= SEVERITY_LEVEL[self.settings.min_severity]

    def observe(self, snap: Snapshot) -> list[Notification]:
        """Notifications for the transitions and events in this snapshot (each diagnosis counted once)."""
        d = snap.diagnosis
        if d is None or d.ts == self.last_ts:
            return []
        self.last_ts = d.ts
        host = (snap.sample.host if snap.sample else None) or socket.gethostname()
        shift = snap.wall_shift()  # a replay's times dated by the wall clock, as on the page and /metrics
        out = []
        for gotcha, f in sorted(d.findings.items()):
            # Unknown (no data) is neither a problem nor a recovery: keep the last known level.
            if f.severity == "unknown":
                continue
            prev = self.levels.get(gotcha, "ok")
            self.levels[gotcha] = f.severity
            if f.severity == prev:
                continue
            if not (self._wanted(f.severity) or self._wanted(prev)):
                continue
            if f.severity == "ok" and not self.settings.resolved:
                continue
            out.append(
                Notification(
                    "finding",
                    gotcha,
                    gotcha,
                    f.severity,
                    prev,
                    f.summary,
                    host,
                    d.ts + shift,
                    tuple(f.advice),
                )
            )
        if self.settings.events:
            for e in d.events:
                severity = event_severity(e)
                if severity is None or not self._wanted(severity):
                    continue
                name = "reboot after throttle" if e.after_throttle else e.kind
                out.append(
                    Notification(
                        "event",
                        f"event:{e.kind}",
                        e.gotcha,
                        severity,
                        None,
                        e.summary,
                        host,
                        e.ts + shift,
                        event=name,
                    )
                )
        return out


@dataclass
class _Limiter:
    """Per-key minimum interval plus a burst cap over all keys."""

    settings: NotifySettings
    last_sent: dict[str, float] = field(default_factory=dict)
    last_level: dict[str, str] = field(default_factory=dict)
    recent: deque = field(default_factory=deque)

    def wait_s(self, n: Notification, now: float) -> float:
        """Seconds until `n` may go out (0: now)."""
        s = self.settings
        while self.recent and now - self.recent[0] >= s.burst_window_s:
            self.recent.popleft()
        burst_wait = s.burst_window_s - (now - self.recent[0]) if len(self.recent) >= s.burst else 0.0
        # Pages never wait for the per-gotcha interval, only for the burst cap.
        escalation = n.severity == "critical" and self.last_level.get(n.key) != "critical"
        last = self.last_sent.get(n.key)
        key_wait = 0.0 if escalation or last is None else max(0.0, s.min_interval_s - (now - last))
        return max(burst_wait, key_wait)

    def sent(self, n: Notification, now: float) -> None:
        self.last_sent[n.key] = now
        self.last_level[n.key] = n.severity
        self.recent.append(now)


class Notifier:
    """Snapshot subscriber that posts transitions and events to a webhook from its own thread."""

    def __init__(
        self,
        settings: NotifySettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        opener: Callable[..., Any] = urllib.request.urlopen,
    ):
        if not settings.url:
            raise ValueError("notify.url is not set")
        self.settings = settings
        self._clock = clock
        # Slack and ntfy URLs carry secrets in their path: logs name the host only.
        self._host = urllib.parse.urlsplit(settings.url).netloc
        self._open = opener
        self._tracker = TransitionTracker(settings)
        self._queue: queue.Queue = queue.Queue(maxsize=settings.queue_size)
        self._pending: dict[str, Notification] = {}
        self._limiter = _Limiter(settings)
        self._closing = threading.Event()
        self._deadline = float("inf")
        self.stats = {"queued": 0, "sent": 0, "failed": 0, "retried": 0, "dropped": 0, "coalesced": 0}
        self._thread = threading.Thread(target=self._run, name="spark-watchd-notify", daemon=True)
        self._thread.start()

    # -- subscriber side: never blocks, never raises --------------------------------
    def __call__(self, snap: Snapshot) -> None:
        """Queue the notifications this snapshot brings; returns at once."""
        try:
            for n in self._tracker.observe(snap):
                self._put(n)
        except Exception:  # a subscriber must never take the tick down
            log.exception("could not judge the snapshot")

    def _put(self, n: Notification) -> None:
        while True:
            try:
                self._queue.put_nowait(n)
                self.stats["queued"] += 1
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()  # drop the oldest: the newest state matters most
                    self.stats["dropped"] += 1
                except queue.Empty:
                    pass

    def pending(self) -> int:
        """Notifications received but not posted yet (queued or held by the rate limit)."""
        return self._queue.qsize() + len(self._pending)

    def close(self, timeout: float = 10.0) -> bool:
        """Post what is left (rate limits lifted) within `timeout` seconds; True if all went out."""
        start = time.monotonic()
        self._deadline = self._clock() + timeout
        self._closing.set()
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(max(0.0, timeout - (time.monotonic() - start)))
        return not self._thread.is_alive() and not self._pending

    # -- worker side ----------------------------------------------------------------
    def _hold(self, n: Notification) -> None:
        old = self._pending.get(n.key)
        if old is not None:
            self.stats["coalesced"] += 1
            if n.kind == "event":
                n = replace(n, count=old.count + n.count)
            else:
                n = replace(n, previous=old.previous)
        if n.kind == "finding" and self._limiter.last_level.get(n.key, n.previous) == n.severity:
            self._pending.pop(n.key, None)  # flapped back to what the user last heard: nothing to say
            return
        self._pending[n.key] = n

    def _send(self, n: Notification) -> None:
        self._limiter.sent(n, self._clock())
        self._post(n)

    def _offer(self, n: Notification, stopping: bool) -> None:
        """Post at once when the limits allow, else hold (coalescing with what is held for the key)."""
        if n.key in self._pending or (not stopping and self._limiter.wait_s(n, self._clock()) > 0):
            self._hold(n)
        else:
            self._send(n)

    def _flush(self, stopping: bool) -> None:
        """Post the held notifications whose wait is over (all of them while closing)."""
        for key, n in sorted(self._pending.items(), key=lambda kv: kv[1].ts):
            if stopping and self._clock() >= self._deadline:
                return
            # Closing lifts the rate limits: a daemon shutting down must not swallow a page.
            if stopping or self._limiter.wait_s(n, self._clock()) <= 0:
                del self._pending[key]
                self._send(n)

    def _run(self) -> None:
        stopping = False
        while True:
            if stopping and self._clock() >= self._deadline:
                return
            waits = [self._limiter.wait_s(n, self._clock()) for n in self._pending.values()]
            try:
                if stopping:
                    item = self._queue.get_nowait()
                else:
                    item = self._queue.get(timeout=max(min(waits), 0.01) if waits else None)
            except queue.Empty:
                item = None
            if item is _STOP:
                stopping = True
            elif item is not None:
                self._offer(item, stopping)
            self._flush(stopping)
            if stopping and item is None and not self._pending:
                return

    def _post(self, n: Notification) -> None:
        body, headers = render(n, self.settings)
        delay = self.settings.backoff_s
        for attempt in range(self.settings.retries + 1):
            if attempt:
                self.stats["retried"] += 1
                if self._closing.is_set() and self._clock() + delay >= self._deadline:
                    break
                self._closing.wait(delay)  # close() cuts the back-off short
                delay *= 2
            req = urllib.request.Request(self.settings.url, data=body, headers=headers, method="POST")
            try:
                with self._open(req, timeout=self.settings.timeout_s) as resp:
                    resp.read()
                self.stats["sent"] += 1
                return
            except urllib.error.HTTPError as e:
                # A 4xx other than 429 will not get better by retrying (bad token, bad topic).
                if 400 <= e.code < 500 and e.code != 429:
                    log.warning("webhook refused the post; not retrying", host=self._host, status=e.code)
                    break
                log.info("webhook post failed", host=self._host, status=e.code, attempt=attempt + 1)
            except Exception as e:  # network errors, bad status lines...: the worker must live on
                log.info("webhook post failed", host=self._host, error=str(e), attempt=attempt + 1)
        self.stats["failed"] += 1
        log.warning("gave up on a notification", title=n.title, host=self._host)


def build_notifier(settings: NotifySettings) -> Notifier | None:
    """The subscriber for these settings, or None while no webhook is configured."""
    return Notifier(settings) if settings.url else None
