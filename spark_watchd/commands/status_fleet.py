"""`spark-watchd status --fleet`: the pair view in a terminal, the same document the page draws.

One row per Spark (this one first): up or down, worst finding, temperature, SM clock, utilisation,
memory budget, tokens/s; then the straggler verdict judged in the daemon (diagnose/straggler.py, the
definition SparkWatchdStraggler is generated from). Exit status as `status`: the worst severity over
the Sparks that answer, 3 when the daemon cannot be asked or no peer is configured.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from spark_watchd.commands import term
from spark_watchd.commands.status import EXIT, RANK, fetch_status
from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.text import printable_tree


def _cell(v: Any, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)


def render(doc: dict[str, Any], cols: int | None = None) -> str:
    """The pair table and the verdict, folded to the terminal."""
    cols = cols or term.width()
    view = doc.get("view")
    if not doc.get("configured"):
        return 'no [fleet] peers configured (config.toml: [fleet] peers = ["spark-b.local:9761"])\n'
    if not view:
        return "fleet: no peer read yet\n"
    columns = (
        term.Column("SPARK"),
        term.Column("STATE"),
        term.Column("WORST"),
        term.Column("TEMP", ">"),
        term.Column("SM CLOCK", ">"),
        term.Column("UTIL", ">"),
        term.Column("BUDGET", ">"),
        term.Column("TOKENS/S", ">"),
        term.Column("LINK", flex=True, min_width=8),
    )
    body, down = [], []
    for m in view.get("members") or ():
        name = m.get("name", "?") + (" (this)" if m.get("self") else "")
        if not m.get("up"):  # why it is down goes under the table, never in the LINK column
            body.append((name, "DOWN", "-", "-", "-", "-", "-", "-", "-"))
            down.append(f"{m.get('name', '?')} down: {m.get('error') or 'no answer'}")
            continue
        link = (m.get("link") or {}).get("summary") or "-"
        budget = m.get("budget_bytes")
        body.append(
            (
                name,
                "up" if m.get("fresh", True) else "stale",
                m.get("worst") or "unknown",
                _cell(m.get("temp_c"), "{:.0f} C"),
                _cell(m.get("sm_clock_mhz"), "{:.0f} MHz"),
                _cell(m.get("util_pct"), "{:.0f}%"),
                term.human_bytes(budget) if budget is not None else "-",
                _cell(m.get("tokens_per_second"), "{:,.0f}"),
                link,
            )
        )
    out = term.table(columns, body, cols)
    for line in down:
        out += term.wrap(line, "    ", cols=cols)
    out.append("")
    out += term.wrap(f"pair: {view.get('summary', '')}", "      ", cols=cols)
    return "\n".join(out) + "\n"


def worst(doc: dict[str, Any]) -> str:
    """The worst severity over the Sparks that answered; unknown without a view."""
    view = doc.get("view") or {}
    sev = [m.get("worst") for m in view.get("members") or () if m.get("up") and m.get("worst") in RANK]
    if not doc.get("configured") or not sev:
        return "unknown"
    w = max(sev, key=RANK.__getitem__)
    return "warning" if view.get("straggler") and RANK[w] < RANK["warning"] else w


def run(args: argparse.Namespace) -> int:
    """`status --fleet`: fetch the pair view, print it, exit with its worst severity."""
    try:
        doc = fetch_status(args, "/api/v1/fleet", "configured")
    except (OSError, ValueError) as exc:
        print(f"spark-watchd status --fleet: UNKNOWN: {exc}", file=sys.stderr)
        return EXIT["unknown"]
    try:
        code = EXIT[worst(doc)]
        out = dumps_strict(doc, indent=2) + "\n" if args.json else render(printable_tree(doc))
    except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as exc:  # not a daemon's view
        why = f"{type(exc).__name__}: {str(exc)[:120]}"
        print(
            f"spark-watchd status --fleet: UNKNOWN: the pair view is not well formed ({why})", file=sys.stderr
        )
        return EXIT["unknown"]
    sys.stdout.write(out)  # peer names and errors come from the network: printable_tree made them printable
    return code
