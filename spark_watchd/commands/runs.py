"""The per-run training ledger: one line per finished run (duration, steps, tokens/s, throttling, energy)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from spark_watchd.errors import EX_CONFIG
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


def _duration(s: float | None) -> str:
    if s is None:
        return "-"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


def _jpt(r: dict):
    """J/token of a run: the ledger's own figure, or energy over tokens for lines written before it existed."""
    if r.get("joules_per_token") is not None:
        return r["joules_per_token"]
    e, t = r.get("energy_j"), r.get("tokens")
    return e / t if isinstance(e, (int, float)) and isinstance(t, (int, float)) and t > 0 else None


def format_table(runs: list[dict]) -> str:
    """Human table, one row per run (throttle = seconds under thermal/slowdown reasons, power cap apart)."""
    header = ("START (UTC)", "JOB", "DURATION", "STEPS", "TOKENS", "TOK/S", "STEP S", "SLOWDOWN", "THERMAL S",
              "PWRCAP S", "ENERGY KJ", "J/TOKEN", "PEAK C", "MIN AVAIL GiB", "EVICT", "OOM", "END")  # fmt: skip
    rows = [header]
    for r in runs:
        thr = r.get("throttle_seconds") or {}
        thermal = sum(
            float(thr.get(k) or 0) for k in ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
        )
        energy = r.get("energy_j")
        mem = r.get("mem_available_min_bytes")
        rows.append((
            str(r.get("start", "-")).replace("T", " ").rstrip("Z"),
            str(r.get("job", "-")),
            _duration(r.get("duration_s")),
            _fmt(r.get("steps")),
            _fmt(r.get("tokens")),
            _fmt(r.get("mean_tokens_per_second"), ".0f"),
            _fmt(r.get("mean_step_seconds"), ".3g"),
            _fmt(r.get("max_slowdown_ratio"), ".2f"),
            f"{thermal:.0f}",
            _fmt(thr.get("power_cap"), ".0f"),
            _fmt(None if energy is None else energy / 1000, ".1f"),
            _fmt(_jpt(r), ".3g"),
            _fmt(r.get("peak_temp_c"), ".0f"),
            _fmt(None if mem is None else mem / 2**30, ".1f"),
            _fmt(r.get("evictions")),
            _fmt(r.get("oom_kills")),
            str(r.get("end_reason", "-")),
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


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
        print(json.dumps(runs, indent=2))
    elif not runs:
        print(f"no finished runs in {path}", file=sys.stderr)
    else:
        print(format_table(runs))
    return 0
