"""The daemon: sample every interval (or replay a trace), classify, serve /metrics, /healthz and the API."""

from __future__ import annotations

import argparse
import os

from spark_watchd import __version__
from spark_watchd.commands.statedir import is_explicit, resolve_state_dir
from spark_watchd.config import INTERVAL_MAX_S, INTERVAL_MIN_S, Settings
from spark_watchd.errors import EX_CONFIG, EX_DATAERR, EX_SOFTWARE, EX_TEMPFAIL, EX_USAGE, ConfigError
from spark_watchd.logs import configure_logging, get_logger, report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--listen", metavar="HOST:PORT", help="HTTP address (default 127.0.0.1:9761)")
    parser.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help=f"seconds between samples ({INTERVAL_MIN_S}-{INTERVAL_MAX_S})",
    )
    parser.add_argument(
        "--replay", metavar="TRACE", help="serve a recorded trace-v1 file instead of live sources"
    )
    parser.add_argument(
        "--speed", type=float, default=1.0, metavar="X", help="replay X times faster than recorded"
    )
    parser.add_argument("--loop", action="store_true", help="repeat the replayed trace, time moving forward")
    parser.add_argument("--record", metavar="DIR", help="also keep rolling daily trace-v1 files in DIR")
    parser.add_argument(
        "--web.config.file",
        dest="web_config_file",
        metavar="FILE",
        help="TLS / basic auth (exporter-toolkit format)",
    )


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="PATH", help="config file (default /etc/spark-watchd/config.toml if present)"
    )
    parser.add_argument("--state-dir", metavar="DIR", help="state file, event journal, captures")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"))


def overrides_from(args: argparse.Namespace) -> dict:
    """Flags as a nested settings dict (only those given)."""
    daemon = {
        key: getattr(args, attr)
        for key, attr in (
            ("listen", "listen"),
            ("interval", "interval"),
            ("state_dir", "state_dir"),
            ("log_level", "log_level"),
            ("web_config_file", "web_config_file"),
            ("record_dir", "record"),
        )
        if getattr(args, attr, None) is not None
    }
    return {"daemon": daemon} if daemon else {}


def load_or_report(args: argparse.Namespace) -> Settings | None:
    """Load settings; on a bad configuration print the reason (file, key, why) and return None."""
    from spark_watchd.app import settings_for

    try:
        settings = settings_for(args, overrides_from(args))
    except ConfigError as exc:
        report(f"spark-watchd: bad configuration: {exc}")
        return None
    configure_logging(settings.daemon.log_level, settings.daemon.log_format)
    return settings


def usable_state_dir(settings: Settings, explicit: bool) -> str:
    """The configured state dir if writable; the default falls back to a per-user one (unprivileged runs)."""
    path = resolve_state_dir(settings, explicit=explicit)
    if path != settings.daemon.state_dir:
        get_logger("run").info(f"state dir {settings.daemon.state_dir} not writable; using {path}")
    return path


def main(args: argparse.Namespace) -> int:
    settings = load_or_report(args)
    if settings is None:
        return EX_CONFIG
    return serve(settings, args)


def serve(settings: Settings, args: argparse.Namespace, *, announce: bool = False) -> int:
    """Start the daemon and its HTTP server; block until SIGTERM/SIGINT. Shared by run and demo."""
    from spark_watchd.sample.files import StateDirBusy, lock_state_dir
    from spark_watchd.service.malloc import limit_arenas
    from spark_watchd.sources.replay import ReplayFeed

    limit_arenas()  # before any thread starts: one malloc arena for all of them (service/malloc.py)
    log = get_logger("run")
    try:
        feed = None
        if args.replay:
            if args.speed <= 0:
                report("spark-watchd: --speed must be positive")
                return EX_USAGE
            try:
                feed = ReplayFeed(
                    args.replay, speed=args.speed, loop=args.loop, on_bad_line=_bad_line_logger(log)
                )
            except (OSError, ValueError) as exc:
                report(f"spark-watchd: cannot replay {args.replay}: {exc}")
                return EX_DATAERR
            if getattr(args, "state_dir", None):
                # An explicit --state-dir keeps the replay's state there (soak and crash tests restart on it).
                state_dir = usable_state_dir(settings, explicit=True)
            else:
                state_dir = None  # replayed events must not land in the real journal and counters
        else:
            # Set by file, environment or flag: the user meant it, so no silent fallback.
            state_dir = usable_state_dir(settings, explicit=is_explicit(settings))
    except ConfigError as exc:
        report(f"spark-watchd: bad configuration: {exc}")
        return EX_CONFIG
    lock = None
    if state_dir is not None:  # one daemon per state dir, taken before any state file is opened
        try:
            lock = lock_state_dir(state_dir)
        except StateDirBusy as exc:
            report(f"spark-watchd: {exc}")
            return EX_TEMPFAIL
        except ConfigError as exc:  # DIR/lock is a link or a FIFO
            report(f"spark-watchd: bad configuration: {exc}")
            return EX_CONFIG
        except OSError as exc:  # a full disk: serve anyway, as with any other state write failure
            log.warning("state dir lock not taken", state_dir=state_dir, error=str(exc))
    try:
        return _serve_locked(settings, args, feed, state_dir, log, announce)
    finally:
        if lock is not None:
            os.close(lock)


def _serve_locked(settings: Settings, args, feed, state_dir, log, announce: bool) -> int:
    from spark_watchd import app

    # The demo verb: the status page shows a DEMO badge naming the scenario.
    demo = os.path.splitext(os.path.basename(args.replay))[0] if announce else None
    # What this machine cannot provide: its sources' first "down" is no news (said once below, after the build).
    missing = _missing_sources(settings, log) if feed is None else []
    try:
        daemon = app.build(
            settings,
            replay=feed,
            state_dir=state_dir,
            demo=demo,
            expected_down={name for name, _ in missing if name != "sensors"},
        )
    except ConfigError as exc:  # e.g. --record /var/lib/... as an unprivileged user: say so, no traceback
        report(f"spark-watchd: bad configuration: {exc}")
        return EX_CONFIG
    _log_missing_sources(missing, log)
    # The HTTP server, its web config and the runner come from the composition root like every other part.
    try:
        server, runner = app.serving_parts(
            settings, daemon, reload=lambda: app.settings_for(args, overrides_from(args))
        )
    except ConfigError as exc:  # the --web.config.file: names file, key and reason
        daemon.close()
        report(f"spark-watchd: bad configuration: {exc}")
        return EX_CONFIG
    except (OSError, ValueError) as exc:
        daemon.close()
        hint = "; pick another address with --listen HOST:PORT" if isinstance(exc, OSError) else ""
        report(f"spark-watchd: cannot listen on {settings.daemon.listen}: {exc}{hint}")
        return EX_SOFTWARE
    runner.install_signals()
    server.start()
    log.info(
        "spark-watchd started",
        version=__version__,
        mode=daemon.mode,
        url=server.url,
        interval_s=daemon.expected_period(),
        replay=args.replay,
    )
    if announce:
        print(f"spark-watchd demo: open {server.url}  (metrics: {server.url}metrics)", flush=True)
    try:
        runner.start()
        runner.wait_until_stopped()
        log.info("stopping")
    finally:
        runner.stop()  # closes the daemon's parts (recorder, notifier...) after the last tick
        server.stop()
    return 0


def _missing_sources(settings: Settings, log) -> list[tuple[str, str]]:
    """(source, reason) for each source this machine cannot provide (none when the check itself fails)."""
    from spark_watchd.app import missing_live_sources

    try:
        return missing_live_sources(settings)
    except Exception as exc:  # the check is advisory; the first tick reports real state anyway
        log.debug("missing-source check failed", error=str(exc))
        return []


def _log_missing_sources(missing: list[tuple[str, str]], log) -> None:
    """One line per source this machine cannot provide, and why (what a user on a non-Spark machine sees)."""
    for name, reason in missing:
        if name == "sensors":  # up with nothing to read (not down): "missing" would contradict source_up 1
            log.info(f"sensors: {reason}; the source stays up with no readings", source=name)
            continue
        log.warning(f"{name} missing: {reason}", source=name)


def _bad_line_logger(log):
    def on_bad(err) -> None:
        log.warning("skipping bad trace line", error=str(err))

    return on_bad
