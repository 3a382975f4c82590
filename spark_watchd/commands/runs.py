"""The per-run training ledger: one line per finished run (duration, steps, tokens/s, throttling, energy)."""

from __future__ import annotations

import sys
from pathlib import Path

from spark_watchd.commands import term
from spark_watchd.errors import EX_CONFIG
from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.files import StateFileError
from spark_watchd.throughput.ledger import LEDGER_FILE, read_runs


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print the runs as a JSON array")
    parser.add_argument("--state-dir", help="the daemon's state directory (default: from the configuration)")
    parser.add_argument("--config", help="configuration file to read the state directory from")
    parser.add_argument("--job", help="only runs of this job")
    parser.add_argument("--last", type=int, metavar="N", help="only the N most recent runs")


def _state_dir(args) -> str:
    """Where `run` keeps state for this user and configuration (the same rule, nothing created)."""
    from spark_watchd.app import settings_for
    from spark_watchd.commands.statedir import resolve_state_dir

    overrides = {"daemon": {"state_dir": args.state_dir}} if args.state_dir else None
    return resolve_state_dir(settings_for(args, overrides), create=False)


def _fmt(v, spec: str = "", none: str = "-") -> str:
    return none if v is None else format(v, spec)


def _energy(j: float | None) -> str:
    if j is None:
        return "-"
    return f"{j / 1e6:.2f} MJ" if j >= 1e6 else f"{j / 1e3:.1f} kJ"


def _jpt(r: dict):
    """J/token of a run: the ledger's own figure, or energy over tokens for lines written before it existed."""
    if r.get("joules_per_token") is not None:
        return r["joules_per_token"]
    e, t = r.get("energy_j"), r.get("tokens")
    return e / t if isinstance(e, (int, float)) and isinstance(t, (int, float)) and t > 0 else None


# The columns a person reads first stay; at 80 columns the rarer ones give way (named under the table).
COLUMNS = (
    term.Column("START (UTC)"),
    term.Column("JOB", flex=True, min_width=6),
    term.Column("DURATION", ">"),
    term.Column("STEPS", ">", drop=3),
    term.Column("TOKENS", ">", drop=8),
    term.Column("TOK/S", ">"),
    term.Column("STEP S", ">", drop=4),
    term.Column("SLOW", ">"),  # the worst step-time ratio against the run's own baseline
    term.Column("THERMAL", ">"),
    term.Column("PWRCAP", ">", drop=5),
    term.Column("ENERGY", ">", drop=6),
    term.Column("J/TOKEN", ">", drop=7),
    term.Column("PEAK C", ">", drop=2),
    term.Column("MIN AVAIL", ">", drop=1),
    term.Column("EVICT", ">"),
    term.Column("OOM", ">"),
    term.Column("END"),
)


def format_table(runs: list[dict], cols: int | None = None) -> str:
    """Human table, one row per run (thermal = time under thermal/slowdown reasons, power cap apart),
    fitted to the terminal."""
    rows = []
    for r in runs:
        thr = r.get("throttle_seconds") or {}
        thermal = sum(
            float(thr.get(k) or 0) for k in ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
        )
        start = str(r.get("start") or "-").replace("T", " ").rstrip("Z")
        rows.append(
            (
                start[:16],  # to the minute
                r.get("job"),
                term.human_seconds(r.get("duration_s")),
                _fmt(r.get("steps")),
                term.human_count(r.get("tokens")),
                _fmt(r.get("mean_tokens_per_second"), ",.0f"),
                _fmt(r.get("mean_step_seconds"), ".3g"),
                "-" if r.get("max_slowdown_ratio") is None else f"x{r['max_slowdown_ratio']:.2f}",
                term.human_seconds(thermal),
                term.human_seconds(thr.get("power_cap")),
                _energy(r.get("energy_j")),
                _fmt(_jpt(r), ".3g"),
                _fmt(r.get("peak_temp_c"), ".0f"),
                term.human_bytes(r.get("mem_available_min_bytes")),
                _fmt(r.get("evictions")),
                _fmt(r.get("oom_kills")),
                r.get("end_reason"),
            )
        )
    return "\n".join(term.table(COLUMNS, rows, cols))


def main(args) -> int:
    """List the ledger's runs as a table or JSON."""
    try:
        state_dir = _state_dir(args)
    except Exception as e:  # ConfigError (or a validation error) from the configuration
        print(f"spark-watchd runs: {e}", file=sys.stderr)
        return int(getattr(e, "exit_code", EX_CONFIG))
    path = Path(state_dir) / LEDGER_FILE
    try:
        runs, bad = read_runs(path)
    except StateFileError as e:  # a link or a FIFO as runs.jsonl: not read through
        print(f"spark-watchd runs: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        print(f"spark-watchd runs: cannot read {path}: {e.strerror or e}", file=sys.stderr)
        return 1
    if bad:
        print(f"spark-watchd runs: skipped {bad} unreadable line(s) in {path}", file=sys.stderr)
    if args.job:
        runs = [r for r in runs if r.get("job") == args.job]
    if args.last:
        runs = runs[-args.last :]
    if args.json:
        print(dumps_strict(runs, indent=2))
    elif not runs:
        print(f"no finished runs in {path}", file=sys.stderr)
    else:
        print(format_table(runs))
    return 0
