"""Terminal output for every verb: fit the width, humanise units, never a Python repr, nothing raw.

`table(columns, rows)` lays rows out in columns when they fit the terminal and as one wrapped block per
row when they do not; `wrap(text, indent)` folds prose; `evidence_text(key, value)` shows a finding's
evidence value with the unit its key names (the same rules as the page's app.js). Every cell and line
goes through `printable`, so a string from another user (argv, a job name, an error) cannot drive the
terminal. Widths come from `COLUMNS` or the terminal, 80 when neither says.
"""

from __future__ import annotations

import math
import re
import shutil
import textwrap
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from spark_watchd.sample.text import printable

GIB = 1024**3
ELLIPSIS = "..."


def width() -> int:
    """Columns to fit: $COLUMNS, else the terminal's, else 80 (never under 40)."""
    return max(40, shutil.get_terminal_size((80, 24)).columns)


def _scaled(n: float | None, units: tuple[tuple[str, float], ...], spec: str, bare: str) -> str:
    """n in the largest of units (largest first) it reaches, formatted by spec; bare (n's own) under them all."""
    if n is None:
        return "-"
    for unit, size in units:
        if abs(n) >= size:
            return f"{n / size:{spec}} {unit}"
    return f"{round(n)}{bare}"  # round(): a tiny fall reads "0 B", never "-0 B"


def human_bytes(n: float | None) -> str:
    """1536 -> '1.5 KiB'; GiB with one decimal for the sizes this tool deals in."""
    return _scaled(n, (("TiB", 1024**4), ("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)), ".1f", " B")


def human_count(n: float | None) -> str:
    """7626000 -> '7.63 M', 12400 -> '12.4 k', 950 -> '950' (tokens, steps, requests)."""
    return _scaled(n, (("G", 1e9), ("M", 1e6), ("k", 1e3)), ".3g", "")


def human_seconds(s: float | None) -> str:
    """42 -> '42 s', 754 -> '12m34s', 7380 -> '2h03m'."""
    if s is None:
        return "-"
    if abs(s) < 60:
        return f"{s:.3g} s" if abs(s) < 10 else f"{s:.0f} s"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


def stamp(ts: float | None, shift: float = 0.0) -> str:
    """A time as UTC '2026-12-01 11:42:05Z' (`shift`: a replay's offset that dates it by the wall clock)."""
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(ts) + shift)) + "Z"


def number(v: float | int) -> str:
    """A reading: ints as they are, floats to 3-4 significant digits, never 'nan' for a missing value."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        return "-"
    return f"{v:.4g}" if abs(v) < 1e6 else f"{v:,.0f}"


# Evidence keys carry their unit as a suffix: (suffix, formatter, label suffix removed). Mirrors app.js.
_UNITS = (
    ("_bytes_per_s", lambda v: f"{human_bytes(v)}/s"),
    ("_gib_per_h", lambda v: f"{number(v)} GiB/h"),
    ("_bytes", human_bytes),
    ("_kb", lambda v: human_bytes(v * 1024)),
    ("_pct", lambda v: f"{number(v)} %"),
    ("_per_s", lambda v: f"{number(v)}/s"),
    ("_w", lambda v: f"{number(v)} W"),
    ("_c", lambda v: f"{number(v)} C"),
    ("_mhz", lambda v: f"{v:.0f} MHz"),
    ("_seconds_total", human_seconds),
    ("_seconds", human_seconds),
    ("_s", human_seconds),
)
# Identifiers, not quantities: printed as they are (never "5,120").
IDS = frozenset(("pid", "pids", "members", "gpu", "index", "xid"))
# Keys whose values are counts, names or flags: no unit to show.
UNITLESS = frozenset(
    (
        "heavy_workloads",
        "uncapped_workloads",
        "large_workloads",
        "kind",
        "name",
        "cap",
        "capped",
        "thermal_reasons_active",
        "board_prochot",
        "board_pl_level",
        "board_power_limit",
        "workloads",
        "kinds",
        # the servers' own telemetry (serving_damage, serving_contention, serving_kv_budget): counts
        "running_requests",
        "baseline_points",
        "preemptions",
        "preemptions_before",
        "kv_capacity_tokens",
        "kv_capacity_tokens_before",
        "server",
        "signal",
    )
)


def unit_of(key: str):
    """(label, formatter) for an evidence key, or (label, None) when it names no unit."""
    if key.endswith("bytes_per_second"):
        return key[: -len("bytes_per_second")].replace(
            "_", " "
        ).strip() or "rate", lambda v: f"{human_bytes(v)}/s"
    if key.endswith("gib_per_hour"):
        return key[: -len("gib_per_hour")].replace("_", " ").strip() or "rate", lambda v: f"{number(v)} GiB/h"
    if key.endswith("_share"):
        return key.replace("_", " "), lambda v: f"{number(v * 100)} %"
    if key.endswith("_ratio"):
        return key.replace("_", " "), lambda v: f"x{number(v)}"
    if key.startswith("step_seconds_"):
        return "step time " + key[len("step_seconds_") :], human_seconds
    for suffix, fmt in _UNITS:
        if key.endswith(suffix):
            return key[: -len(suffix)].replace("_", " "), fmt
    if key.endswith("_ts"):
        return key[:-3].replace("_", " "), stamp
    return key.replace("_", " "), None


def evidence_text(key: str, value: Any) -> str:
    """One evidence value as a person reads it: units from the key, lists and rows spelled out."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if key in IDS:
            return str(value)
        _, fmt = unit_of(key)
        return fmt(value) if fmt else number(value)
    if isinstance(value, (list, tuple)):
        shown = [evidence_text(key, v) for v in value[:8]]
        return ", ".join(shown) + (f" (+{len(value) - 8} more)" if len(value) > 8 else "")
    if isinstance(value, dict) and "kind" in value and "pid" in value:  # a workload row
        members = value.get("members") or ()
        text = f"{value['kind']} pid {value['pid']}" + (f" +{len(members) - 1}" if len(members) > 1 else "")
        for k, v in value.items():
            if k in ("kind", "pid", "members", "name", "cap", "capped") or v is None:
                continue
            label = unit_of(k)[0]
            text += (
                f" {evidence_text(k, v)}" if label in ("footprint", "") else f" {label} {evidence_text(k, v)}"
            )
        if value.get("capped") is not None:
            text += " capped" if value["capped"] else " uncapped"
            text += f" {value['cap']}" if value.get("cap") else ""
        return printable(text)
    if isinstance(value, dict):
        return " ".join(
            f"{unit_of(k)[0]} {evidence_text(k, v)}" for k, v in value.items() if v is not None and v != []
        )
    return printable(value)


def evidence_lines(evidence: dict[str, Any]) -> list[str]:
    """`label value` per evidence entry, skipping empty lists (no heavy workloads is no evidence) and figures
    not known at this sample (None)."""
    out = []
    for k, v in evidence.items():
        if v is None or (isinstance(v, (list, tuple, dict)) and not v):  # not known at this sample
            continue
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], dict):  # rows: one entry each
            out.extend(f"{unit_of(k)[0]}: {evidence_text(k, row)}" for row in v)
            continue
        out.append(f"{unit_of(k)[0]} {evidence_text(k, v)}")
    return out


# "64.0 GiB", "85 C", "1402 MHz": a number and its unit stay on one line.
_UNIT_GAP = re.compile(r"(?<=\d) (?=(?:B|KiB|MiB|GiB|TiB|C|W|MHz|s|%|tokens/s|s/step)\b)")


def wrap(text: str, indent: str = "", first: str = "", cols: int | None = None) -> list[str]:
    """`text` made printable and folded to the width: `first` before the first line, `indent` before the rest."""
    cols = cols or width()
    glued = _UNIT_GAP.sub("\x00", printable(text))  # printable left no NUL of its own
    lines = textwrap.wrap(
        glued, width=cols, initial_indent=first, subsequent_indent=indent, break_on_hyphens=False
    )
    return [ln.replace("\x00", " ") for ln in lines] or [first.rstrip()]


def elide(text: str, n: int) -> str:
    """`text` cut to `n` characters with a visible '...' when it is longer."""
    return text if len(text) <= n else text[: max(0, n - len(ELLIPSIS))] + ELLIPSIS[:n]


@dataclass(frozen=True)
class Column:
    """A table column: its title, alignment ('<' or '>'), whether it may be elided ('flex') or left out
    ('drop') to fit."""

    title: str
    align: str = "<"
    flex: bool = False
    min_width: int = 8
    drop: int = (
        0  # >0: may be left out when the row cannot fit otherwise, highest first (said under the table)
    )


def table(columns: Sequence[Column], rows: Iterable[Sequence[Any]], cols: int | None = None) -> list[str]:
    """Rows in columns that fit `cols`: flex columns elided first (the last one first), then `drop`
    columns left out (named on a last line); when even that does not fit, one wrapped block per row
    (the first cell as a heading, `TITLE value` pairs folded under it), so nothing is lost.
    """
    cols = cols or width()
    cells = [[printable(c) if c not in (None, "") else "-" for c in row] for row in rows]
    keep = list(range(len(columns)))
    droppable = sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: -columns[i].drop)
    while True:
        widths = _fit([columns[i] for i in keep], [[r[i] for i in keep] for r in cells], cols)
        if widths is not None or not droppable:
            break
        keep.remove(droppable.pop(0))
    if widths is None:
        return _blocks(columns, cells, cols)
    shown = [columns[i] for i in keep]

    def line(row):
        parts = []
        for c, w, col in zip(row, widths, shown, strict=True):
            c = elide(c, w)
            parts.append(c.rjust(w) if col.align == ">" else c.ljust(w))
        return (" " * GAP).join(parts).rstrip()

    out = [line([c.title for c in shown])] + [line([r[i] for i in keep]) for r in cells]
    hidden = [c.title for i, c in enumerate(columns) if i not in keep]
    if hidden:
        out += wrap(f"(not shown at this width: {', '.join(hidden)})", cols=cols)
    return out


GAP = 2


def _fit(columns: Sequence[Column], cells: list[list[str]], cols: int) -> list[int] | None:
    """Column widths that fit `cols` after eliding flex columns, or None."""
    widths = [max([len(col.title)] + [len(r[i]) for r in cells]) for i, col in enumerate(columns)]
    over = sum(widths) + GAP * (len(widths) - 1) - cols
    for i, col in reversed(list(enumerate(columns))):  # the last flex column gives way first
        if over <= 0:
            break
        if col.flex:
            cut = min(over, widths[i] - max(col.min_width, len(col.title)))
            if cut > 0:
                widths[i] -= cut
                over -= cut
    return widths if over <= 0 else None


def _blocks(columns, cells, cols) -> list[str]:
    out = []
    for row in cells:
        out.append(elide(f"{columns[0].title} {row[0]}", cols))
        pairs = ", ".join(f"{c.title} {v}" for c, v in zip(columns[1:], row[1:], strict=True) if v != "-")
        out.extend(wrap(pairs, "  ", "  ", cols))
    return out
