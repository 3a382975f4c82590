"""Classify a recorded trace offline: `spark-watchd replay TRACE --format jsonl|table [--skip-bad]`.

Exit status: 0 replayed, 65 a malformed line (named) or an unreadable file, 66 no such file,
78 bad configuration.
"""

from __future__ import annotations

import os
import sys

from spark_watchd.commands import term
from spark_watchd.errors import EX_CONFIG, EX_DATAERR, EX_NOINPUT
from spark_watchd.sample.codec import dumps_compact
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
        fd = {"severity": f.severity, "summary": f.summary, "evidence": f.evidence, "advice": f.advice}
        if f.anomaly:
            fd["anomaly"] = f.anomaly
        findings[g] = fd
    return {"ts": d.ts, "findings": findings, "events": [e.to_dict() for e in d.events] if d.events else []}


BATCH = 256  # output lines written per write() call
INDENT = " " * 22  # a folded table line continues under the gotcha column


def main(args) -> int:
    """Replay the trace through the diagnosis engine and print jsonl or a table of changes."""
    from spark_watchd import app
    from spark_watchd.errors import ConfigError

    overrides = {"daemon": {"state_dir": args.state_dir}} if args.state_dir else None
    try:  # the [thresholds] of --config and the environment, as `run --replay` judges with them
        settings = app.settings_for(args, overrides)
    except ConfigError as exc:
        print(f"spark-watchd replay: bad configuration: {exc}", file=sys.stderr)
        return EX_CONFIG
    eng = app.diagnoser(settings)
    out = sys.stdout
    dumps = dumps_compact
    jsonl = args.format == "jsonl"
    observe = eng.observe
    buf: list[str] = []
    cols = term.width()  # the table folds to the terminal; jsonl lines are never folded
    last = {}
    n = 0
    try:
        for sample in _samples(_locate(args, settings), args.skip_bad):
            d = observe(sample)
            n += 1
            if jsonl:
                buf.append(dumps(_replay_obj(d)))
                if len(buf) >= BATCH:
                    buf.append("")
                    out.write("\n".join(buf))
                    buf.clear()
                continue
            for g in GOTCHAS:
                fnd = d.findings[g]
                key = (fnd.severity, fnd.anomaly)
                if last.get(g) != key:
                    was = last.get(g, ("-",))[0]
                    tag = f" [{fnd.anomaly}]" if fnd.anomaly else ""
                    line = f"{_fmt_ts(d.ts)}  {g}  {was:>8} -> {fnd.severity:<8}  {fnd.summary}{tag}"
                    out.write("\n".join(term.wrap(line, INDENT, cols=cols)) + "\n")
                    last[g] = key
            for e in d.events:
                extra = (
                    f" after_throttle={str(e.after_throttle).lower()}" if e.after_throttle is not None else ""
                )
                line = f"{_fmt_ts(d.ts)}  {e.gotcha}  event {e.kind}{extra}: {e.summary}"
                out.write("\n".join(term.wrap(line, INDENT, cols=cols)) + "\n")
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
        _flush(out, buf)  # what was judged before the bad line still goes out
        print(f"spark-watchd replay: {err}", file=sys.stderr)
        return EX_DATAERR
    _flush(out, buf)
    if args.format == "table":
        out.write(f"{n} samples replayed\n")
    out.flush()
    return 0


def _flush(out, buf) -> None:
    if buf:
        buf.append("")
        out.write("\n".join(buf))
        buf.clear()
        out.flush()
