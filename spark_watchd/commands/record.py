"""Write a trace-v1 file from the live sources (one line per sample, flushed; a torn tail is repaired first)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from spark_watchd.commands.run import add_common_arguments, load_or_report
from spark_watchd.config import INTERVAL_MAX_S, INTERVAL_MIN_S
from spark_watchd.errors import EX_CONFIG
from spark_watchd.logs import get_logger


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("out", metavar="OUT", help="trace file to append to")
    parser.add_argument(
        "--interval", type=float, metavar="SECONDS", help="seconds between samples (default: daemon.interval)"
    )
    parser.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="stop after this long (default: until SIGINT/SIGTERM)",
    )


def main(args: argparse.Namespace) -> int:
    if args.interval is not None and not 0 < args.interval <= INTERVAL_MAX_S:
        print(f"spark-watchd: --interval must be in (0, {INTERVAL_MAX_S}]", file=sys.stderr)
        return 2
    # The recording's interval may be sub-second; daemon.interval (which load_or_report would set from the same
    # flag) starts at INTERVAL_MIN_S, so the flag stays out of the settings.
    settings = load_or_report(argparse.Namespace(**{**vars(args), "interval": None}))
    if settings is None:
        return EX_CONFIG
    from spark_watchd import app
    from spark_watchd.sample.trace import TraceWriter

    log = get_logger("record")
    interval = args.interval or settings.daemon.interval
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        writer = TraceWriter(args.out)
    except OSError as exc:
        print(f"spark-watchd: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if writer.repaired_bytes:
        log.warning(
            "repaired a torn last line (a recorder was killed mid-write)",
            path=args.out,
            dropped_bytes=writer.repaired_bytes,
        )
    # The servers' scrapers follow the daemon interval: here that is the recording's, floored at the daemon's
    # minimum (a sub-second recording still scrapes each server at most once a second).
    settings = settings.model_copy(
        update={
            "daemon": settings.daemon.model_copy(update={"interval": float(max(interval, INTERVAL_MIN_S))})
        }
    )
    daemon = app.build(settings, state_dir=None, serve=False)  # its collector only: a trace holds samples
    collector = daemon.collector
    deadline = time.monotonic() + args.duration if args.duration is not None else None
    n = 0
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            sample, _ = collector.collect()
            writer.write(sample)
            n += 1
            if deadline is not None and time.monotonic() >= deadline:
                break
            wait = interval - (time.monotonic() - t0)
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
            if wait > 0:
                stop.wait(wait)
            if deadline is not None and time.monotonic() >= deadline:
                break
    finally:
        daemon.close()
        writer.close()
    log.info("recorded", path=args.out, samples=n)
    return 0
