"""The composition root: the one place that builds and wires the daemon's parts.

Sources, the diagnosis runtime, the throughput service, the page's chart store,
the exporter, the web routes and the snapshot subscribers are all built here,
with plain imports and explicit tuples. Nothing else wires anything: the daemon
only runs the tick over what it is handed, and the route modules only turn
what they are given into handlers. Adding a part touches its module and one
line below.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from spark_watchd.config import Settings, load_settings
from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.errors import ConfigError

if TYPE_CHECKING:
    from spark_watchd.daemon import Daemon
    from spark_watchd.diagnose.runtime import DiagnosisRuntime
    from spark_watchd.service.sdnotify import SystemdNotifier
    from spark_watchd.sources.replay import ReplayFeed

# The daemon's parts are imported by the functions that build them: the verbs that only judge
# (replay: a new process for each trace) import this root for settings_for() and diagnoser() alone.
# Parts only some configurations have are imported where they are built (the recorder, the webhook
# notifier, the web config's TLS and basic auth): a daemon on the default config does not carry them.

# "settings": daemon.state_dir from the settings; None: nothing on disk (replay, once, tests).
FROM_SETTINGS = "settings"


def nvml_from_env() -> Any:
    """The fake NVML named by SPARK_WATCHD_FAKE_NVML (see spark_watchd.testing), else None (the real one)."""
    if not os.environ.get("SPARK_WATCHD_FAKE_NVML"):
        return None  # production never imports the fake
    from spark_watchd.sources.fake_nvml import nvml_from_env as fake

    try:
        return fake()
    except ValueError as exc:  # a bad value is the user's configuration, not a crash with a traceback
        raise ConfigError(str(exc)) from None


def live_sources(settings: Settings, nvml: Any = None) -> tuple:
    """The live source tuple; SPARK_WATCHD_FAKE_NVML lets end-to-end tests run the real daemon on a fake GPU."""
    from spark_watchd.sources import build_sources

    return tuple(build_sources(settings, nvml if nvml is not None else nvml_from_env()))


def missing_live_sources(settings: Settings) -> list[tuple[str, str]]:
    """(source, reason) for what this machine cannot provide (the daemon's start-up lines)."""
    from spark_watchd.sources import missing_sources

    return missing_sources(settings, nvml_from_env())


def runtime_for(settings: Settings, state_dir: str | None) -> DiagnosisRuntime:
    """The diagnosis runtime; state_dir None keeps everything in memory (replay, once, tests)."""
    from spark_watchd.diagnose.runtime import DiagnosisRuntime

    return DiagnosisRuntime(settings.thresholds, state_dir)


def build(
    settings: Settings,
    *,
    replay: ReplayFeed | None = None,
    sources: tuple | None = None,
    runtime: Any = None,
    state_dir: str | None = FROM_SETTINGS,
    expected_down: Iterable[str] = (),
    clock: Callable[[], float] = time.time,
    systemd: SystemdNotifier | None = None,
    demo: str | None = None,
    serve: bool = True,
) -> Daemon:
    """A daemon with every part wired; serve=False builds only sources and diagnosis (once, record).

    `sources` replaces the live tuple (tests hand in fakes), `runtime` the diagnosis
    runtime; `demo` names the bundled scenario the page's DEMO badge shows; `expected_down` the
    sources the start-up lines already named as missing (their first "down" is not logged again).
    """
    from spark_watchd.daemon import Daemon
    from spark_watchd.export.prometheus import build_registry
    from spark_watchd.postmortem import PostMortem
    from spark_watchd.postmortem.fast import FastRing
    from spark_watchd.service.selfcost import SelfCost
    from spark_watchd.snapshot.acks import Acks
    from spark_watchd.throughput.service import Throughput
    from spark_watchd.web import acks as acks_web
    from spark_watchd.web import api, fabric_test, page, progress
    from spark_watchd.web import postmortem as postmortem_web
    from spark_watchd.web.charts import History
    from spark_watchd.web.fleet import FleetWatch
    from spark_watchd.web.fleet import routes as fleet_routes
    from spark_watchd.web.http import parse_listen

    state = settings.daemon.state_dir if state_dir == FROM_SETTINGS else state_dir
    recorder = None
    if serve and settings.daemon.record_dir:  # first: a bad directory must not leave sources open
        from spark_watchd.snapshot.recorder import RollingRecorder

        try:
            recorder = RollingRecorder(settings.daemon.record_dir, settings.daemon.record_keep_days)
        except OSError as exc:
            raise ConfigError(
                f"key 'daemon.record_dir': cannot write {settings.daemon.record_dir}: {exc.strerror or exc}"
            ) from None
    core = dict(
        replay=replay,
        sources=None if replay is not None else (sources if sources is not None else live_sources(settings)),
        runtime=runtime if runtime is not None else runtime_for(settings, state),
        # On reload, new [sources] / [thresholds] sections rebuild what this root built.
        make_sources=live_sources if sources is None else None,
        make_runtime=(lambda s: runtime_for(s, state)) if runtime is None else None,
        expected_down=expected_down,
        clock=clock,
        systemd=systemd,
        state_dir=state,
    )
    if not serve:
        return Daemon(settings, **core)
    # The throughput service: its tracker reports like a source, its ledger follows each snapshot.
    throughput = None
    if settings.progress.enabled:
        progress_settings = settings.progress
        if state is None:  # nothing from a replay without a state dir may land next to the live state
            progress_settings = progress_settings.model_copy(update={"ledger": False})
        throughput = Throughput(progress_settings, state or ".", clock)
    charts = History(settings.web)
    # The ring of recent samples and the bundles on critical events live in the state directory.
    postmortem = PostMortem(state, settings.thresholds) if state is not None else None
    # While G3 is warning or worse, memory and PSI every second, the last two minutes fsynced on disk.
    # The servers' progress too, read every second then: an engine stall asks for a tick at once (daemon.wake).
    fast = None
    if state is not None and replay is None:
        fast = FastRing(os.path.join(state, "fast"), proc_root=settings.sources.proc_root)
    notifier = None
    if settings.notify.url:  # webhook posts of finding transitions ([notify])
        from spark_watchd.notify.notifier import Notifier

        notifier = Notifier(settings.notify)
    extras: tuple[tuple[str, Callable[[], Any]], ...] = ()
    if throughput is not None:
        extras += (("jobs", throughput.tracker.stats),)
        if throughput.ledger is not None:  # J per training token and per step of each running job
            extras += (("job_energy", throughput.ledger.running_energy),)
    if replay is not None:  # the page dates a replay by its recording and shows it as if it ended now
        extras += (("replay", replay.info),)
    if demo is not None:  # the page's DEMO badge
        extras += (("demo", lambda: demo),)
    # The daemon's own CPU share and memory, one line on the page and in `status` (/metrics: process_*).
    extras += (("daemon_cost", SelfCost().read),)
    # Acknowledged findings (state dir: acks.json), published with each snapshot and matched against its findings.
    acks = Acks(state, clock)
    extras += (("acks", acks.active),)
    if postmortem is not None:  # the page's link to the latest post-mortem
        extras += (("postmortem", lambda: postmortem_web.latest_info(postmortem.root)),)
        extras += (("postmortem_storage", postmortem.storage_status),)  # ring and bundle write failures
    # The pair view ([fleet] peers): its own worker reads the peers and, once started, this daemon's status.
    fleet = FleetWatch(settings.fleet) if settings.fleet.peers else None
    if fleet is not None:
        extras += (("fleet", fleet.view),)
    daemon = Daemon(
        settings,
        **core,
        contributors=(throughput.tracker,) if throughput is not None else (),
        extras=extras,
        subscribers=_present(
            charts,
            throughput.observe if throughput is not None else None,
            recorder,
            postmortem,
            notifier,
            acks.observe,
            fast,
            fleet.observe if fleet is not None else None,  # a peer read at once after the first sample
        ),
        # After the tick stops and the sources close (the tracker closes with them, ledger last).
        closers=_present(
            recorder.close if recorder is not None else None,
            postmortem.close if postmortem is not None else None,
            fast.close if fast is not None else None,
            (lambda: notifier.close(timeout=10)) if notifier is not None else None,
            fleet.close if fleet is not None else None,
        ),
        # The HTTP routes, made over the daemon once it is whole.
        routes=lambda d: (
            *api.routes(d, build_registry(d, own_process=True)),
            *page.routes(d, charts, settings.web),
            *(progress.routes(throughput.tracker) if throughput is not None else ()),
            *(postmortem_web.routes(postmortem.root) if postmortem is not None else ()),
            *fleet_routes(fleet),
            *acks_web.routes(acks, d.republish),
            # The peer side of `spark-watchd fabric-test`: refuses unless [fleet] fabric_test is on.
            *fabric_test.routes(
                fabric_test.FabricSink(settings.fleet, parse_listen(settings.daemon.listen)[0])
                if settings.fleet.peers
                else None
            ),
        ),
    )
    if fast is not None:
        fast.servers = lambda: _serving_source(daemon)
        fast.thresholds = lambda: daemon.settings.thresholds
        fast.on_stall = lambda: daemon.wake()
    if fleet is not None:
        fleet.start(own_status=lambda: api.status_dict(daemon))
    if throughput is not None:
        throughput.start()  # follow the configured logs
    return daemon


def settings_for(args: Any, overrides: dict | None = None) -> Settings:
    """The settings every verb runs on: --config (or its default path) < environment < flags; ConfigError."""
    return load_settings(getattr(args, "config", None), overrides)


def settings_or_say(args: Any, verb: str) -> Settings | None:
    """settings_for(args), or None once a bad configuration is said on stderr, named for the verb."""
    try:
        return settings_for(args)
    except ConfigError as exc:
        print(f"spark-watchd {verb}: bad configuration: {exc}", file=sys.stderr)
        return None


def diagnoser(settings: Settings) -> Diagnoser:
    """The classifiers on the configured [thresholds] (replay judges a trace as `run --replay` would)."""
    return Diagnoser(settings.thresholds)


def serving_parts(settings: Settings, daemon: Daemon, reload: Callable[[], Settings]):
    """(HTTP server, runner) for a built daemon: the web config (TLS, basic auth), the listener, the
    scheduler with its signals and SIGHUP reload. ConfigError for a bad web config; OSError/ValueError
    when the address cannot be listened on."""
    from spark_watchd.daemon import Runner
    from spark_watchd.web.server import HttpServer

    d = settings.daemon
    web = None
    if d.web_config_file:
        from spark_watchd.web.auth import load_web_config  # the TLS stack and bcrypt: only when configured

        web = load_web_config(d.web_config_file)
    server = HttpServer(
        d.listen,
        daemon.routes,
        workers=d.http_workers,
        timeout=d.http_timeout,
        web=web,
        allowed_hosts=d.allowed_hosts,
    )
    return server, Runner(daemon, reload=reload)


def _present(*parts: Any) -> tuple:
    """The parts this configuration has (None dropped), in order."""
    return tuple(p for p in parts if p is not None)


def _serving_source(daemon: Daemon) -> Any:
    """The daemon's serving source now (a reload builds new sources), or None."""
    sources = daemon.collector.sources if daemon.collector is not None else ()
    return next((src for src in sources if getattr(src, "name", None) == "serving"), None)
