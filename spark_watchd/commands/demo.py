"""Run the daemon over a bundled GB10 scenario (`run --replay`) so findings, alerts and the page show without a Spark."""

from __future__ import annotations

import argparse
import sys
from importlib import resources

from spark_watchd.commands.run import add_common_arguments, load_or_report, serve
from spark_watchd.errors import EX_CONFIG

SCENARIOS = ("eviction", "throttle")
# Scenarios are 3 h at 30 s spacing: 60x unfolds one in about 3 minutes.
DEFAULT_SPEED = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--scenario", choices=SCENARIOS, default="eviction", help="which bundled trace (default eviction)"
    )
    parser.add_argument("--listen", metavar="HOST:PORT", help="HTTP address (default 127.0.0.1:9761)")
    parser.add_argument(
        "--speed", type=float, default=DEFAULT_SPEED, help=f"replay speed (default {DEFAULT_SPEED:g}x)"
    )
    parser.add_argument(
        "--no-loop", dest="loop", action="store_false", help="stop at the end of the scenario"
    )


def main(args: argparse.Namespace) -> int:
    settings = load_or_report(args)
    if settings is None:
        return EX_CONFIG
    trace = resources.files("spark_watchd") / "scenarios" / f"{args.scenario}.jsonl"
    with resources.as_file(trace) as path:
        if not path.exists():
            print(
                f"spark-watchd: scenario {args.scenario} is missing from this installation", file=sys.stderr
            )
            return 1
        run_args = argparse.Namespace(**vars(args), replay=str(path), record=None, web_config_file=None)
        return serve(settings, run_args, announce=True)
