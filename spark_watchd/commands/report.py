"""Post-mortem bundles: `spark-watchd report` lists them; `--last` or NAME gives one; `--out` writes it.

`report` alone lists every bundle in the state directory, oldest first. `report --last` (or `report NAME`)
prints the path of that bundle's report.html to open in a browser; with `--out FILE.html` it writes the
report there, with `--out DIR` it copies the whole bundle (trace, timeline, workloads, report) into DIR.
The bundle's trace replays: `spark-watchd replay STATE_DIR/bundles/NAME`.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
from pathlib import Path

from spark_watchd.commands import term
from spark_watchd.errors import EX_NOPERM
from spark_watchd.postmortem import list_bundles
from spark_watchd.sample.codec import dumps_strict

EX_NONE = 1  # asked for a bundle there is none of


def add_arguments(parser) -> None:
    parser.add_argument("bundle", nargs="?", metavar="NAME", help="a bundle's name (as listed)")
    parser.add_argument("--last", action="store_true", help="the newest bundle")
    parser.add_argument(
        "--out", metavar="PATH", help="write the report to FILE.html, or copy the bundle into DIR"
    )
    parser.add_argument("--json", action="store_true", help="list the bundles as JSON")
    parser.add_argument("--state-dir", help="the daemon's state directory (default: from the configuration)")
    parser.add_argument("--config", help="configuration file to read the state directory from")


def _state_dir(args) -> str:
    """Where `run` keeps state for this user and configuration (the same rule as `runs`, nothing created)."""
    from spark_watchd.app import settings_for
    from spark_watchd.commands.statedir import resolve_state_dir

    overrides = {"daemon": {"state_dir": args.state_dir}} if args.state_dir else None
    return resolve_state_dir(settings_for(args, overrides), create=False)


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


class _SkipNotice:
    """Where `report` says a bundle was skipped: stderr, so `--json` stays one JSON document on stdout."""

    def warning(self, _event: str, bundle: str = "", reason: str = "", **_kw) -> None:
        print(f"spark-watchd report: skipped {bundle}: {reason}", file=sys.stderr)


def main(args) -> int:
    """List, show or write post-mortem bundles (one whose manifest cannot be read is skipped, said on stderr)."""
    root = Path(_state_dir(args)) / "bundles"
    if root.is_dir() and not os.access(root, os.R_OK | os.X_OK):
        print(
            f"spark-watchd report: {root} is private to the daemon's user (bundles keep what was running):"
            " run report as that user or as root",
            file=sys.stderr,
        )
        return EX_NOPERM
    bundles = list_bundles(root, _SkipNotice())
    if not args.last and not args.bundle:
        if args.json:
            print(dumps_strict([b.to_dict() for b in bundles], indent=1))
            return 0
        if not bundles:
            print("no post-mortem bundle yet (one is written on an OOM kill, an eviction, a driver fault...)")
            return 0
        for b in bundles:  # the summary folded under its bundle: every line fits the terminal
            head = f"{b.name}  {_when(b.ts)}  {b.samples} samples  {b.bytes / 1024:.0f} KiB"
            print("\n".join(term.wrap(f"{head}: {b.summary}", "    ")))
        return 0
    pick = bundles[-1:] if args.last else [b for b in bundles if b.name == args.bundle]
    if not pick:
        what = "no post-mortem bundle yet" if args.last else f"no bundle named {args.bundle!r}"
        print(f"spark-watchd report: {what}", file=sys.stderr)
        return EX_NONE
    b = pick[0]
    report = b.path / "report.html"
    if not args.out:
        print(report)
        return 0
    out = Path(args.out)
    try:
        if out.suffix.lower() in (".html", ".htm"):
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(report, out)
        else:
            out.mkdir(parents=True, exist_ok=True)
            out = out / b.name
            shutil.copytree(b.path, out, dirs_exist_ok=True)
    except OSError as exc:
        print(f"spark-watchd report: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return EX_NONE
    print(out)
    return 0
