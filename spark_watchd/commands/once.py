"""Take one sample from the live sources, classify it, print it (--json: the trace-v1 sample plus findings)."""

from __future__ import annotations

import argparse
import dataclasses
import re

from spark_watchd.commands import term
from spark_watchd.commands.run import add_common_arguments, load_or_report
from spark_watchd.errors import EX_CONFIG, ConfigError
from spark_watchd.logs import configure_logging
from spark_watchd.sample.codec import dumps_strict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the trace-v1 sample with findings and events added"
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "envelope"),
        help="text (default), json (as --json), or envelope: NVIDIA's fleet-tool JSON envelope "
        '({"ok", "data", "errors", "meta"}; exit 0 ok, 1 a critical finding, 2 bad configuration, '
        "3 permission denied) for Landscape, Ansible or Tanium over SSH",
    )


def main(args: argparse.Namespace) -> int:
    fmt = args.format or ("json" if args.json else "text")
    if fmt == "envelope":
        return _envelope(args)
    settings = load_or_report(args)
    if settings is None:
        return EX_CONFIG
    _quiet_unless_asked(args, settings)
    snap = _one_tick(settings)
    sample, diagnosis, statuses = snap.sample, snap.diagnosis, snap.sources
    if fmt == "json":
        # Still a valid trace-v1 line: readers ignore the extra keys.
        out = sample.to_dict()
        out["findings"] = {g: f.to_dict() for g, f in diagnosis.findings.items()}
        out["events"] = [e.to_dict() for e in diagnosis.events]
        out["sources"] = {n: {"up": s.up, "error": _no_retry(s.error)} for n, s in statuses.items()}
        print(dumps_strict(out, separators=(",", ":")))
        return 0
    print(_human(sample, snap.memory, diagnosis, statuses))
    return 0


def _quiet_unless_asked(args: argparse.Namespace, settings) -> None:
    """The answer names every source that is down: the daemon's info lines about them would only come first."""
    if args.log_level is None:
        configure_logging("warning", settings.daemon.log_format)


def _envelope(args: argparse.Namespace) -> int:
    """One look as NVIDIA's fleet envelope on stdout, whatever happens (an orchestrator parses it off-box)."""
    from spark_watchd.app import settings_for
    from spark_watchd.commands import envelope
    from spark_watchd.commands.run import overrides_from

    try:
        settings = settings_for(args, overrides_from(args))
    except ConfigError as exc:
        doc, code = envelope.failure(
            "BAD_CONFIGURATION", f"bad configuration: {exc}", envelope.EXIT_USAGE, hint="fix the key named"
        )
    except PermissionError as exc:
        doc, code = envelope.failure(
            "PERMISSION_DENIED", str(exc), envelope.EXIT_PERMISSION, hint="run as a user that can read it"
        )
    else:
        configure_logging(args.log_level or "error", settings.daemon.log_format)
        snap = _one_tick(settings)
        statuses = {n: dataclasses.replace(s, error=_no_retry(s.error)) for n, s in snap.sources.items()}
        doc, code = envelope.from_tick(snap.sample, snap.memory, snap.diagnosis, statuses)
    print(dumps_strict(doc, separators=(",", ":")))
    return code


def _one_tick(settings):
    """One snapshot from the live sources, with no state dir (a one-off look must not touch the daemon's
    journal and counters)."""
    from spark_watchd import app

    daemon = app.build(settings, state_dir=None, serve=False)
    daemon.collector.log = _NoRetryLog(daemon.collector.log)
    try:
        return daemon.tick()
    finally:
        daemon.close()


def _human(sample, memory, diagnosis, statuses, cols: int | None = None) -> str:
    """The one sample as a person reads it, folded to the terminal; foreign strings made printable."""
    hb = term.human_bytes
    lines = [
        f"host {sample.host}  boot {sample.boot_id or '?'}  uptime {term.human_seconds(sample.uptime_s or 0)}"
    ]
    if memory is not None and memory.available_bytes is not None:
        lines.append(f"memory: {hb(memory.available_bytes)} available of {hb(memory.total_bytes or 0)}")
    for g in sample.gpus:
        name = f" {g.name}" if g.name else ""  # the name call can fail alone: no "gpu 0 :"
        lines.append(
            f"gpu {g.index}{name}: {_fmt(g.power_w, 'W')} {_fmt(g.temp_c, 'C')} "
            f"sm {_fmt(g.sm_clock_mhz, 'MHz')} util {_fmt(g.util_pct, '%')}"
        )
    b = sample.board
    if b is not None:  # GB10 board telemetry (community spbm driver)
        prochot = "n/a" if b.prochot is None else term.number(b.prochot)
        lines.append(
            f"board: system {_fmt(b.avg_power_w('sys_total'), 'W')} dc_input {_fmt(b.avg_power_w('dc_input'), 'W')} "
            f"Tj {_fmt(b.temps_c.get('tj_max'), 'C')} (headroom {_fmt(b.temps_c.get('tj_max_c'), 'C')}) "
            f"PROCHOT {prochot}"
        )
    for p in sample.link.ports if sample.link is not None else ():  # the ConnectX-7 ports (link source)
        rate = f" {p.rate_gbps:g} Gb/s" if p.up and p.rate_gbps else ""
        lines.append(f"link {p.device}/{p.port} ({p.netdev or '?'}): {'up' if p.up else 'down'}{rate}")
    for name, st in statuses.items():
        if not st.up:
            lines.append(f"source {name} down: {_no_retry(st.error)}")
    out = [ln for line in lines for ln in term.wrap(line, "    ", cols=cols)]
    for gotcha, f in diagnosis.findings.items():
        out += term.wrap(f"{gotcha} {f.severity.upper()}: {f.summary}", "    ", cols=cols)
        for a in f.advice:
            out += term.wrap(a, " " * 12, first="    advice: ", cols=cols)
    for e in diagnosis.events:
        out += term.wrap(f"event {e.kind} ({e.gotcha}): {e.summary}", "    ", cols=cols)
    return "\n".join(out)


def _fmt(v, unit: str) -> str:
    return "n/a" if v is None else f"{term.number(v)} {unit}"


# A source's "(next retry in N s)" aside is for the daemon's loop; a one-shot command never retries.
_RETRY = re.compile(r" \(next retry [^)]*\)")


def _no_retry(text: str | None) -> str | None:
    return None if text is None else _RETRY.sub("", text)


class _NoRetryLog:
    """The collector's logger with the retry aside taken out of each message."""

    def __init__(self, log) -> None:
        self._log = log

    def __getattr__(self, level: str):
        fn = getattr(self._log, level)
        return lambda msg, **kw: fn(
            _no_retry(msg), **{k: _no_retry(v) if k == "error" else v for k, v in kw.items()}
        )
