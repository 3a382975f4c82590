"""The daemon: tick (collect or replay, diagnose, publish by reference swap), subscribers, scheduler, signals."""

from __future__ import annotations

import dataclasses
import datetime as dt
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from spark_watchd import __version__
from spark_watchd.config import Settings
from spark_watchd.logs import get_logger
from spark_watchd.sample.model import Sample
from spark_watchd.service.sdnotify import SystemdNotifier
from spark_watchd.snapshot import Snapshot, SourceStatus, state_status
from spark_watchd.sources.collect import Collector
from spark_watchd.sources.replay import ReplayFeed

Subscriber = Callable[[Snapshot], None]


# --- The one wiring place for parts other areas build. ---


def build_live_sources(settings: Settings) -> tuple:
    """The live source tuple (spark_watchd.sources.build_sources)."""
    from spark_watchd.sources import build_sources

    return tuple(build_sources(settings))


def build_runtime(settings: Settings, state_dir: str | None):
    """The diagnosis runtime; state_dir None keeps everything in memory (replay, once, tests)."""
    from spark_watchd.diagnose.runtime import DiagnosisRuntime

    return DiagnosisRuntime(settings.thresholds, state_dir)


# --- The daemon. ---


class Daemon:
    """Owns the tick and the published snapshot. Other areas use settings, snapshot(), subscribe(), tracker, history, runtime."""

    def __init__(
        self,
        settings: Settings,
        *,
        sources: tuple | None = None,
        replay: ReplayFeed | None = None,
        runtime=None,
        clock: Callable[[], float] = time.time,
        notifier: SystemdNotifier | None = None,
        state_dir: str | None | object = "settings",
    ):
        self.settings = settings
        self.clock = clock
        self.log = get_logger("daemon")
        self.replay = replay
        self.mode = "replay" if replay is not None else "live"
        self.notifier = notifier or SystemdNotifier()
        # "settings": daemon.state_dir; None: nothing on disk (a replay must not touch the real journal).
        self.state_dir = settings.daemon.state_dir if state_dir == "settings" else state_dir
        self._owns_runtime = runtime is None
        self.runtime = runtime if runtime is not None else build_runtime(settings, self.state_dir)
        self.collector = (
            Collector(sources if sources is not None else build_live_sources(settings), clock)
            if replay is None
            else None
        )
        self.tracker: Any = None  # throughput JobTracker: set by web.progress.routes(daemon); a Source
        self.history: Any = None  # web history store: set by web.page.routes(daemon)
        self.extras_providers: dict[str, Callable[[], Any]] = {}
        if hasattr(self.runtime, "throttle_seconds"):
            # Rendered by diagnose/metrics.py as sparkwatchd_throttled_seconds_total.
            self.extras_providers["throttle_seconds_total"] = self.runtime.throttle_seconds
        if hasattr(self.runtime, "xid_error_counts"):
            # sparkwatchd_gpu_xid_errors_total (export/driver.py); read through self.runtime: a reload swaps it.
            self.extras_providers["xid_counts"] = lambda: self.runtime.xid_error_counts()
        self.version = __version__
        self.ticks = 0
        self.overruns = 0
        self.last_tick_seconds = 0.0
        self._subscribers: list[Subscriber] = []
        self._tick_lock = threading.Lock()
        self._ready = threading.Event()
        self._replay_iter = iter(replay) if replay is not None else None
        self.replay_done = False
        self.replay_delay = 0.0  # seconds until the next replayed sample is due
        self._logged_failures: set[str] = set()
        # Restored counters from the first scrape on: a 0 before the first tick made increase() in the
        # Eviction, OOMKill and RebootAfterThrottle alerts fire on a restart.
        self._snapshot = Snapshot(
            sample=None,
            diagnosis=None,
            mode=self.mode,
            event_counts=dict(self._guard("event_counts", self.runtime.event_counts) or {}),
        )
        self._tracker_errors = 0
        self.stopping = False
        self._notify_lock = threading.Lock()

    # Public API for other areas.
    def snapshot(self) -> Snapshot:
        """The latest published snapshot (never None; sample is None before the first tick)."""
        return self._snapshot

    def subscribe(self, fn: Subscriber) -> None:
        """Call fn(snapshot) after each publish; fn must not block (it runs on the tick thread)."""
        self._subscribers.append(fn)

    @property
    def interval(self) -> float:
        return float(self.settings.daemon.interval)

    def is_fresh(self, now: float | None = None) -> bool:
        """True while the last publish is younger than three intervals (replay: three recorded steps / speed)."""
        snap = self._snapshot
        if snap.sample is None:
            return False
        if self.mode == "replay" and self.replay_done:
            return True  # a finished replay keeps serving its last state on purpose
        now = time.time() if now is None else now
        return (now - snap.published_at) < 3 * self.expected_period()

    def expected_period(self) -> float:
        """Seconds between publishes in this mode."""
        if self.replay is not None:
            return max(self.replay.step_s / self.replay.speed, 0.05)
        return self.interval

    # The tick.
    def tick(self) -> Snapshot | None:
        """Collect (or take the next replayed sample), diagnose, publish; returns the new snapshot."""
        with self._tick_lock:
            t0 = time.perf_counter()
            if self.collector is not None:
                sample, statuses = self.collector.collect()
            else:
                nxt = self._next_replayed()
                if nxt is None:
                    return None
                sample, statuses = nxt
            sample = self._with_throughput(sample, statuses)
            diagnosis = self._guard("diagnosis", lambda: self.runtime.observe(sample))
            if (state := state_status(self.runtime)) is not None:
                statuses = {**statuses, "state": state}
            snap = Snapshot(
                sample=sample,
                diagnosis=diagnosis,
                sources=statuses,
                workloads=diagnosis.workloads if diagnosis is not None else (),
                event_counts=dict(self._guard("event_counts", self.runtime.event_counts) or {}),
                recent_events=tuple(self._guard("recent_events", self.runtime.recent_events) or ()),
                extras={k: self._guard(f"extras {k}", fn) for k, fn in self.extras_providers.items()},
                published_at=time.time(),
                mode=self.mode,
            )
            self._snapshot = snap  # the publish: one reference swap
            self.ticks += 1
            self.last_tick_seconds = time.perf_counter() - t0
        for fn in list(self._subscribers):
            self._guard(f"subscriber {getattr(fn, '__qualname__', fn)}", lambda fn=fn: fn(snap))
        with self._notify_lock:
            if not self.stopping:  # no watchdog ping or READY may follow STOPPING=1
                self.notifier.watchdog()
                if not self._ready.is_set():
                    self._ready.set()
                    self.notifier.ready(status=f"serving {self.mode} samples")
        return snap

    def _next_replayed(self) -> tuple[Sample, dict[str, SourceStatus]] | None:
        t0 = time.perf_counter()
        try:
            sample, self.replay_delay = next(self._replay_iter)
        except StopIteration:
            if not self.replay_done:
                self.replay_done = True
                self.log.info("replay finished; serving the last sample", trace=self.replay.path)
            return None
        st = SourceStatus("replay", True, time.perf_counter() - t0, 0, None)
        return sample, {"replay": st}

    def _with_throughput(self, sample: Sample, statuses: dict) -> Sample:
        """The throughput tracker contributes like a source (live) or overrides the trace's jobs when it has any."""
        tracker = self.tracker
        if tracker is None:
            return sample
        name = getattr(tracker, "name", "throughput")
        t0 = time.perf_counter()
        try:
            out = tracker.collect({"ts": sample.ts}) or {}
            readings = tuple(out.get("throughput") or ())
            statuses[name] = SourceStatus(name, True, time.perf_counter() - t0)
        except Exception as exc:
            self._tracker_errors += 1
            statuses[name] = SourceStatus(
                name, False, time.perf_counter() - t0, self._tracker_errors, str(exc)
            )
            return sample
        if self.mode == "replay" and not readings:
            return sample
        return dataclasses.replace(sample, throughput=readings)

    def _guard(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run fn; log its failure once per kind and carry on (nothing a part does stops the tick)."""
        try:
            res = fn()
            self._logged_failures.discard(what)
            return res
        except Exception as exc:
            if what not in self._logged_failures:
                self._logged_failures.add(what)
                self.log.exception(f"{what} failed", error=str(exc))
            return None

    def apply_settings(self, new: Settings) -> None:
        """Swap in reloaded settings between ticks: new [sources] rebuild the sources, new [thresholds]
        rebuild the diagnosis runtime (it persists its state on close and restores it on open)."""
        with self._tick_lock:
            old, self.settings = self.settings, new
            if self.collector is not None and new.sources != old.sources:
                fresh = Collector(build_live_sources(new), self.clock)
                fresh.expected_down = self.collector.expected_down
                self.collector.close()
                self.collector = fresh
            if new.thresholds != old.thresholds and self._owns_runtime:
                self.runtime.close()
                self.runtime = build_runtime(new, self.state_dir)
                if "throttle_seconds_total" in self.extras_providers:
                    self.extras_providers["throttle_seconds_total"] = self.runtime.throttle_seconds

    def begin_stop(self) -> None:
        """Tell systemd STOPPING=1; no publish pings the watchdog after this."""
        with self._notify_lock:
            self.stopping = True
            self.notifier.stopping()

    def close(self) -> None:
        """Close sources (stopping their threads) and the runtime (flushing its state)."""
        if self.collector is not None:
            self.collector.close()
        try:
            self.runtime.close()
        except Exception as exc:
            self.log.warning("diagnosis runtime close failed", error=str(exc))
        for closer in (self.tracker, self.history):
            if closer is not None and hasattr(closer, "close"):
                try:
                    closer.close()
                except Exception as exc:
                    self.log.warning("close failed", part=type(closer).__name__, error=str(exc))

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._ready.wait(timeout)


class Runner:
    """Drives a Daemon: APScheduler interval job (live) or a paced thread (replay); signals; reload."""

    def __init__(self, daemon: Daemon, reload: Callable[[], Settings] | None = None):
        self.daemon = daemon
        self.reload_fn = reload
        self.log = get_logger("runner")
        self._stop = threading.Event()
        self._hup = threading.Event()
        self._wake = threading.Event()  # wakes wait_until_stopped for a stop or a reload
        self._scheduler = None
        self._replay_thread: threading.Thread | None = None

    def start(self) -> None:
        """Start ticking in the background (first tick now)."""
        if self.daemon.replay is not None:
            self._replay_thread = threading.Thread(target=self._replay_loop, name="replay", daemon=True)
            self._replay_thread.start()
            return
        from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
        from apscheduler.schedulers.background import BackgroundScheduler

        sched = BackgroundScheduler(timezone=dt.timezone.utc)
        sched.add_listener(self._on_job_event, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_ERROR)
        sched.add_job(
            self.daemon.tick,
            "interval",
            seconds=self.daemon.interval,
            id="tick",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(self.daemon.interval)),
            next_run_time=dt.datetime.now(dt.timezone.utc),
        )
        sched.start()
        self._scheduler = sched

    def _on_job_event(self, event) -> None:
        from apscheduler.events import EVENT_JOB_ERROR

        if event.code == EVENT_JOB_ERROR:
            self.log.error("tick failed", error=str(event.exception))
            return
        self.daemon.overruns += 1
        self.log.warning(
            "tick overrun: previous tick still running or late, skipped",
            interval_s=self.daemon.interval,
            last_tick_s=round(self.daemon.last_tick_seconds, 3),
            overruns_total=self.daemon.overruns,
        )

    def _replay_loop(self) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            try:
                snap = self.daemon.tick()
            except Exception as exc:  # never leave the replay thread dead silently
                self.log.exception("replay tick failed", error=str(exc))
                snap = None
            if snap is None and self.daemon.replay_done:
                return
            # Pace from a running deadline, so tick time does not slow the replay down.
            deadline = max(deadline + self.daemon.replay_delay, time.monotonic() - 1.0)
            self._stop.wait(max(0.0, deadline - time.monotonic()))

    def reschedule(self, interval: float) -> None:
        if self._scheduler is not None:
            self._scheduler.reschedule_job("tick", trigger="interval", seconds=interval)

    def install_signals(self) -> None:
        """SIGTERM/SIGINT stop, SIGHUP reloads (main thread only)."""
        signal.signal(signal.SIGTERM, lambda *_: self.request_stop())
        signal.signal(signal.SIGINT, lambda *_: self.request_stop())
        signal.signal(signal.SIGHUP, lambda *_: (self._hup.set(), self._wake.set()))

    def request_stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def wait_until_stopped(self) -> None:
        """Block until SIGTERM/SIGINT (or request_stop), handling SIGHUP reloads meanwhile."""
        while not self._stop.is_set():
            self._wake.wait(0.5)
            self._wake.clear()
            if self._hup.is_set():
                self._hup.clear()
                self.do_reload()

    def do_reload(self) -> None:
        """Reload configuration; an invalid one is logged and the old one kept."""
        if self.reload_fn is None:
            return
        # systemd (Type=notify-reload) wants the monotonic time with RELOADING=1.
        self.daemon.notifier.notify(f"RELOADING=1\nMONOTONIC_USEC={time.monotonic_ns() // 1000}")
        try:
            new = self.reload_fn()
        except Exception as exc:
            self.log.error("reload failed; keeping the previous configuration", error=str(exc))
            self.daemon.notifier.notify("READY=1")
            return
        old = self.daemon.settings
        try:
            self.daemon.apply_settings(new)
        except Exception as exc:
            self.log.exception("reload failed applying the new configuration", error=str(exc))
        if new.daemon.interval != old.daemon.interval:
            self.reschedule(new.daemon.interval)
        for key in (
            "listen",
            "web_config_file",
            "http_workers",
            "http_timeout",
            "state_dir",
            "record_dir",
            "allowed_hosts",
        ):
            if getattr(new.daemon, key) != getattr(old.daemon, key):
                self.log.warning(f"daemon.{key} changed: takes effect after a restart")
        from spark_watchd.logs import configure_logging

        configure_logging(new.daemon.log_level, new.daemon.log_format)
        self.log.info("configuration reloaded", interval_s=new.daemon.interval)
        self.daemon.notifier.notify("READY=1")

    def stop(self) -> None:
        """Stop ticking, then close the daemon's parts; tells systemd STOPPING=1."""
        self.daemon.begin_stop()
        self._stop.set()
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
        if self._replay_thread is not None:
            self._replay_thread.join(timeout=5)
        self.daemon.close()
