"""Classify a recorded trace offline: `spark-watchd replay TRACE --format jsonl|table [--skip-bad]`.

Exit status: 0 replayed, 65 a malformed line (named) or an unreadable file, 66 no such file,
78 bad configuration.
"""

from __future__ import annotations

import codecs
import os
import sys

from spark_watchd.errors import EX_CONFIG, EX_DATAERR, EX_NOINPUT
from spark_watchd.sample.codec import dumps_compact, dumps_line
from spark_watchd.sample.model import GOTCHAS
from spark_watchd.sample.trace import TraceError, read_trace


def add_arguments(parser):
    parser.add_argument(
        "trace",
        metavar="TRACE",
        help="trace-v1 JSON Lines file, a post-mortem bundle's directory, or a capture or bundle name",
    )
    parser.add_argument(
        "--format", choices=("jsonl", "table"), default="table", help="output format (default table)"
    )
    parser.add_argument(
        "--skip-bad", action="store_true", help="skip malformed lines with a warning instead of failing"
    )
    parser.add_argument("--state-dir", metavar="DIR", help="where a bare capture name is looked up")
    parser.add_argument(
        "--config", metavar="PATH", help="configuration file: its [thresholds] and the state directory"
    )


def _locate(args, settings) -> str:
    """TRACE as given (a post-mortem bundle's directory: its trace), or a capture or bundle of that name in the
    state directory `run` uses (same rule as `runs`)."""
    if os.path.isdir(args.trace) and os.path.isfile(os.path.join(args.trace, "trace.jsonl")):
        return os.path.join(args.trace, "trace.jsonl")
    if os.path.exists(args.trace) or os.sep in args.trace:
        return args.trace
    from spark_watchd.commands.statedir import resolve_state_dir
    from spark_watchd.errors import ConfigError

    try:
        state_dir = resolve_state_dir(settings, create=False)
    except ConfigError:
        return args.trace
    capture = os.path.join(state_dir, "captures", args.trace)
    bundle = os.path.join(state_dir, "bundles", args.trace, "trace.jsonl")
    return capture if os.path.exists(capture) else bundle if os.path.exists(bundle) else args.trace


def _samples(path, skip_bad):
    def warn(err):
        print(f"spark-watchd replay: warning: skipping {err}", file=sys.stderr)

    return read_trace(path, skip_bad=skip_bad, on_skip=warn)


def _fmt_ts(ts: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + "Z"


def _replay_obj(d) -> dict:
    """Diagnosis.to_replay_dict() without copying evidence and advice (they are only serialised here)."""
    findings = {}
    for g, f in d.findings.items():
        ev = f.evidence
        fd = {
            "severity": f.severity,
            "summary": f.summary,
            "evidence": ev if type(ev) is dict else dict(ev),  # a read-only mapping: its dict
            "advice": f.advice,
        }
        if f.anomaly:
            fd["anomaly"] = f.anomaly
        findings[g] = fd
    return {"ts": d.ts, "findings": findings, "events": [e.to_dict() for e in d.events] if d.events else []}


class _Lines:
    """jsonl output, BATCH lines per write(). On a UTF-8 stream with a byte buffer (sys.stdout) each line goes
    as the bytes dumps_line makes, with no decode to str and encode back; elsewhere (io.StringIO) as text.
    Each line is encoded when its sample is judged: a later sample never changes what an earlier one wrote."""

    BATCH = 256

    def __init__(self, out):
        raw, enc = getattr(out, "buffer", None), getattr(out, "encoding", None)
        if raw is not None and enc and codecs.lookup(enc).name == "utf-8":
            out.flush()  # what already went through the text layer goes out first
            self.encode, self.join, self.write = dumps_line, b"".join, raw.write
        else:
            self.encode, self.join, self.write = _text_line, "".join, out.write
        self.buf: list = []

    def add(self, obj) -> None:
        buf = self.buf
        buf.append(self.encode(obj))
        if len(buf) >= self.BATCH:
            self.write(self.join(buf))
            buf.clear()

    def flush(self) -> None:
        if self.buf:
            self.write(self.join(self.buf))
            self.buf.clear()


def _text_line(obj) -> str:
    return dumps_compact(obj) + "\n"


INDENT = " " * 22  # a folded table line continues under the gotcha column


def main(args) -> int:
    """Replay the trace through the diagnosis engine and print jsonl or a table of changes."""
    # The composition root's settings and classifiers (app imports the daemon's parts only where it builds
    # them, so this verb, a new process for each trace, loads no more than it runs).
    from spark_watchd import app
    from spark_watchd.errors import ConfigError

    overrides = {"daemon": {"state_dir": args.state_dir}} if args.state_dir else None
    try:  # the [thresholds] of --config and the environment, as `run --replay` judges with them
        settings = app.settings_for(args, overrides)
    except ConfigError as exc:
        print(f"spark-watchd replay: bad configuration: {exc}", file=sys.stderr)
        return EX_CONFIG
    observe = app.diagnoser(settings).observe
    out = sys.stdout
    jsonl = args.format == "jsonl"
    n = 0
    try:
        lines = _Lines(out) if jsonl else None
        table = None if jsonl else _Table(out)
        for sample in _samples(_locate(args, settings), args.skip_bad):
            d = observe(sample)
            n += 1
            if jsonl:
                lines.add(_replay_obj(d))
            else:
                table.add(d)
    except BrokenPipeError:  # `replay ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except FileNotFoundError:
        print(f"spark-watchd replay: {args.trace}: no such file", file=sys.stderr)
        return EX_NOINPUT
    except OSError as exc:  # a directory, a file without read permission, an I/O error
        print(f"spark-watchd replay: {args.trace}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return EX_DATAERR
    except TraceError as err:
        if jsonl:  # what was judged before the bad line still goes out
            lines.flush()
        out.flush()
        print(f"spark-watchd replay: {err}", file=sys.stderr)
        return EX_DATAERR
    if jsonl:
        lines.flush()
    else:
        out.write(f"{n} samples replayed\n")
    out.flush()
    return 0


class _Table:
    """The table: a line per change of a gotcha's severity or anomaly, and one per event."""

    def __init__(self, out):
        from spark_watchd.commands import term

        self.out, self.term, self.cols = out, term, term.width()  # folded to the terminal
        self.last: dict = {}

    def add(self, d) -> None:
        last, wrap, cols, write = self.last, self.term.wrap, self.cols, self.out.write
        for g in GOTCHAS:
            fnd = d.findings[g]
            key = (fnd.severity, fnd.anomaly)
            if last.get(g) != key:
                was = last.get(g, ("-",))[0]
                tag = f" [{fnd.anomaly}]" if fnd.anomaly else ""
                line = f"{_fmt_ts(d.ts)}  {g}  {was:>8} -> {fnd.severity:<8}  {fnd.summary}{tag}"
                write("\n".join(wrap(line, INDENT, cols=cols)) + "\n")
                last[g] = key
        for e in d.events:
            extra = f" after_throttle={str(e.after_throttle).lower()}" if e.after_throttle is not None else ""
            line = f"{_fmt_ts(d.ts)}  {e.gotcha}  event {e.kind}{extra}: {e.summary}"
            write("\n".join(wrap(line, INDENT, cols=cols)) + "\n")
