"""The daemon: tick (collect or replay, diagnose, publish by reference swap), subscribers, scheduler, signals."""

from __future__ import annotations

import dataclasses
import datetime as dt
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from spark_watchd import __version__
from spark_watchd.config import Settings
from spark_watchd.logs import get_logger
from spark_watchd.sample.memory import memory_view
from spark_watchd.sample.model import Sample
from spark_watchd.service.sdnotify import SystemdNotifier
from spark_watchd.snapshot import Snapshot, SourceStatus, state_status
from spark_watchd.sources.collect import Collector
from spark_watchd.sources.replay import ReplayFeed

Subscriber = Callable[[Snapshot], None]
RESTART_KEYS = ("listen", "web_config_file", "http_workers", "http_timeout", "allowed_hosts")
RESTART_KEYS += ("state_dir", "record_dir")


class Daemon:
    """Owns the tick and the published snapshot over the parts spark_watchd.app.build hands it."""

    def __init__(
        self,
        settings: Settings,
        *,
        runtime: Any,
        sources: tuple | None = None,
        replay: ReplayFeed | None = None,
        make_sources: Callable[[Settings], tuple] | None = None,
        make_runtime: Callable[[Settings], Any] | None = None,
        contributors: tuple = (),
        extras: tuple[tuple[str, Callable[[], Any]], ...] = (),
        subscribers: tuple[Subscriber, ...] = (),
        closers: tuple[Callable[[], Any], ...] = (),
        routes: Callable[[Daemon], Iterable[Any]] | None = None,
        expected_down: Iterable[str] = (),
        clock: Callable[[], float] = time.time,
        systemd: SystemdNotifier | None = None,
        state_dir: str | None = None,
    ):
        self.settings = settings
        self.clock = clock
        self.log = get_logger("daemon")
        self.replay = replay
        self.mode = "replay" if replay is not None else "live"
        self.notifier = systemd or SystemdNotifier()
        self.state_dir = state_dir  # None: nothing on disk (a replay must not touch the real journal)
        self.runtime = runtime
        self.make_sources = make_sources
        self.make_runtime = make_runtime
        if replay is None and sources is None:
            raise ValueError("a live daemon needs its sources (spark_watchd.app.build makes them)")
        # Sources the start-up lines already named as missing: their first "down" is not news.
        self.expected_down = frozenset(expected_down)
        self.collector = (
            Collector(sources, clock, expected_down=self.expected_down) if replay is None else None
        )
        # Parts that report like a source beside the sample (the throughput tracker), guarded the same way.
        self.contributors = Collector(contributors, clock) if contributors else None
        self.extras = tuple(extras)
        self.closers = tuple(closers)
        self.version = __version__
        self.ticks = 0
        self.overruns = 0
        self.last_tick_seconds = 0.0
        self._subscribers: list[Subscriber] = list(subscribers)
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
        self.stopping = False
        self._notify_lock = threading.Lock()
        # A tick now, off the schedule (the Runner's; the armed fast ring calls it on an engine stall).
        self.wake: Callable[[], None] = lambda: None
        # The HTTP routes over this daemon, made once it is whole (spark_watchd.app.build names them).
        self.routes: tuple = tuple(routes(self)) if routes is not None else ()

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
            sample = self._with_contributions(sample, statuses)
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
                extras=self._extras(),
                memory=self._guard(
                    "memory view",
                    lambda: memory_view(
                        sample,
                        self.settings.thresholds.os_reserve_bytes,
                        self.settings.thresholds.budget_subtracts_cma_free,
                    ),
                ),
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

    def republish(self) -> None:
        """Publish the last snapshot again with current extras (an acknowledgement shows at once); no sampling."""
        with self._tick_lock:
            if self._snapshot.sample is not None:
                self._snapshot = dataclasses.replace(self._snapshot, extras=self._extras())

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

    def _with_contributions(self, sample: Sample, statuses: dict) -> Sample:
        """The throughput tracker's readings (live), or in place of the trace's jobs when it has any (replay)."""
        if self.contributors is None:
            return sample
        parts, contributed = self.contributors.gather({"ts": sample.ts})
        statuses.update(contributed)
        if "throughput" not in parts:  # down: the sample keeps what it had
            return sample
        readings = tuple(parts["throughput"])
        if self.mode == "replay" and not readings:
            return sample
        return dataclasses.replace(sample, throughput=readings)

    def _extras(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if hasattr(self.runtime, "throttle_seconds"):  # sparkwatchd_throttled_seconds_total
            out["throttle_seconds_total"] = self._guard("extras throttle", self.runtime.throttle_seconds)
        if hasattr(self.runtime, "xid_error_counts"):  # sparkwatchd_gpu_xid_errors_total (export/driver.py)
            out["xid_counts"] = self._guard("extras xid", self.runtime.xid_error_counts)
        if hasattr(self.runtime, "workload_exit_counts"):  # sparkwatchd_workload_exits_total (export/runway)
            out["exit_counts"] = self._guard("extras exits", self.runtime.workload_exit_counts)
        if hasattr(self.runtime, "link_status"):  # the ConnectX-7 verdict (diagnose/link.py)
            out["link"] = self._guard("extras link", self.runtime.link_status)
        for src in self.collector.sources if self.collector is not None else ():
            if hasattr(src, "feed_status"):  # the driver-events feeds (sparkwatchd_driver_feed_state)
                out["driver_feeds"] = self._guard("extras driver feeds", src.feed_status)
        if hasattr(self.runtime, "platform_status"):  # the boot's stack (diagnose/platform.py)
            out["platform"] = self._guard("extras platform", self.runtime.platform_status)
        if hasattr(self.runtime, "clock_cap_status"):  # the SM clock cap (diagnose/clockcap.py)
            out["clock_cap"] = self._guard("extras clock cap", self.runtime.clock_cap_status)
        out.update((k, self._guard(f"extras {k}", fn)) for k, fn in self.extras)
        return out

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
        rebuild the diagnosis runtime (it persists its state on close and restores it on open); new [serving]
        rebuilds the sources too (the scrapers live in the serving source)."""
        with self._tick_lock:
            old, self.settings = self.settings, new
            if (
                self.collector is not None
                and self.make_sources is not None
                and (new.sources != old.sources or new.serving != old.serving)
            ):
                fresh = Collector(self.make_sources(new), self.clock, expected_down=self.expected_down)
                self.collector.close()
                self.collector = fresh
            if self.make_runtime is not None and new.thresholds != old.thresholds:
                self.runtime.close()
                self.runtime = self.make_runtime(new)

    def begin_stop(self) -> None:
        """Tell systemd STOPPING=1; no publish pings the watchdog after this."""
        with self._notify_lock:
            self.stopping = True
            self.notifier.stopping()

    def close(self) -> None:
        """Close sources (stopping their threads), the contributors, the runtime (flushing its state), then
        the closers (recorder, notifier) in order; a failure in one never skips the rest."""
        for what, fn in (
            ("sources", self.collector.close if self.collector is not None else None),
            ("diagnosis runtime", self.runtime.close),
            ("contributors", self.contributors.close if self.contributors is not None else None),
            *((getattr(c, "__qualname__", "closer"), c) for c in self.closers),
        ):
            if fn is None:
                continue
            try:
                fn()
            except Exception as exc:
                self.log.warning(f"{what} close failed", error=str(exc))

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
        self.daemon.wake = self.tick_now

    def tick_now(self) -> None:
        """Run the tick at once; the interval goes on from it (an engine stall seen at 1 s: postmortem/fast.py)."""
        if self._scheduler is not None:
            # A tick under way would make this one an overrun, skipped: a second later then.
            later = dt.timedelta(seconds=1 if self.daemon._tick_lock.locked() else 0)
            self._scheduler.modify_job("tick", next_run_time=dt.datetime.now(dt.timezone.utc) + later)

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
        for key in RESTART_KEYS:
            if getattr(new.daemon, key) != getattr(old.daemon, key):
                self.log.warning(f"daemon.{key} changed: takes effect after a restart")
        if getattr(new, "fleet", None) != getattr(old, "fleet", None):
            self.log.warning("[fleet] changed: takes effect after a restart")
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
