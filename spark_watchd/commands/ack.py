"""Acknowledge a finding you accept: shown as acknowledged, no longer failing `status` or alerts, until it expires.

`spark-watchd ack G6 --for 8h --note "vLLM kept on purpose"` covers G6's finding as it is now: the same
severity or better, the same workloads. A worse or new episode counts again. `--list` shows them,
`--clear G6` withdraws one. The daemon keeps them in its state directory across restarts.

Exit status: 0 done, 1 refused by the daemon (nothing to acknowledge, bad value), 3 daemon unreachable.
"""

from __future__ import annotations

import argparse
import re
import sys

from spark_watchd.commands import term
from spark_watchd.commands.status import call, connection_arguments
from spark_watchd.errors import EX_USAGE

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("gotcha", nargs="?", choices=("G3", "G4", "G6"), help="the finding to acknowledge")
    parser.add_argument(
        "--for", dest="duration", default="8h", metavar="DURATION", help="how long: 90m, 8h, 2d (default 8h)"
    )
    parser.add_argument("--note", default="", help="why (one line, shown beside the finding)")
    parser.add_argument("--list", action="store_true", help="list the acknowledgements in force")
    parser.add_argument("--clear", metavar="GOTCHA", choices=("G3", "G4", "G6"), help="withdraw one")
    connection_arguments(parser)


def duration_s(text: str) -> float:
    """'8h' -> 28800.0; ValueError naming the accepted forms."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not m:
        raise ValueError(f"--for {text!r}: give a number with s, m, h or d (e.g. 90m, 8h, 2d)")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def main(args: argparse.Namespace) -> int:
    if sum(bool(x) for x in (args.gotcha, args.list, args.clear)) != 1:
        print("spark-watchd ack: give one of GOTCHA, --list or --clear GOTCHA", file=sys.stderr)
        return EX_USAGE
    try:
        if args.list:
            doc = call(args, "GET", "/api/v1/acks", key="acks")
            for a in doc["acks"]:
                print(_line(a))
            if not doc["acks"]:
                print("no acknowledgements in force")
            return 0
        if args.clear:
            call(args, "DELETE", f"/api/v1/acks?gotcha={args.clear}")
            print(f"{args.clear}: acknowledgement withdrawn")
            return 0
        try:
            seconds = duration_s(args.duration)
        except ValueError as exc:
            print(f"spark-watchd ack: {exc}", file=sys.stderr)
            return EX_USAGE
        doc = call(args, "POST", "/api/v1/acks", {"gotcha": args.gotcha, "for_s": seconds, "note": args.note})
        print(_line(doc["ack"]))
        return 0
    except OSError as exc:
        unreachable = " HTTP " not in str(exc)
        print(f"spark-watchd ack: {exc}", file=sys.stderr)
        return 3 if unreachable else 1
    except ValueError as exc:
        print(f"spark-watchd ack: {exc}", file=sys.stderr)
        return 3


def _line(a: dict) -> str:
    note = f": {a['note']}" if a.get("note") else ""
    until = term.stamp(float(a.get("until") or 0))
    return f"{a.get('gotcha')} {a.get('severity')} acknowledged until {until} ({a.get('subject')}){note}"
