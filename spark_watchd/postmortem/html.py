"""The post-mortem report: one self-contained HTML file (inline CSS and SVG, no script, no fetch).

Charts on one time axis, each with the events marked: memory (available, its window minimum, the budget)
and the runway, PSI, temperature, power and SM clock, throughput. Then the events, the finding changes and
the workload table. Every text from the host (process names, command lines, journal lines) is escaped.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from spark_watchd.postmortem.final import progress_series, still
from spark_watchd.sample.model import Sample

GIB = 1024**3
W, PAD_L, PAD_R, PAD_T, PAD_B = 1000, 64, 16, 22, 26
COLOURS = ("#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2")
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#111;background:#fff}
main{max-width:1400px;margin:0 auto;padding:16px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:20px 0 6px}
.meta{color:#555}.trigger{border-left:4px solid #dc2626;background:#fef2f2;padding:8px 12px;margin:12px 0}
.chart{margin:6px 0 2px}.chart svg{width:100%;height:auto;display:block}
table{border-collapse:collapse;width:100%;font-size:13px}td,th{border-bottom:1px solid #e5e7eb;
padding:3px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}th{background:#f9fafb}
.sev-critical{color:#b91c1c;font-weight:600}.sev-warning{color:#b45309;font-weight:600}
.legend span{margin-right:14px;white-space:nowrap}.legend i{display:inline-block;width:14px;height:3px;
vertical-align:middle;margin-right:4px}
.advice li{margin:2px 0}.empty{fill:#6b7280}
@media (max-width:900px){main{padding:8px}td,th{padding:2px 3px}}
@media (max-width:640px){.chart{overflow-x:auto}.chart svg{min-width:680px}}
"""


def _utc(ts: float, fmt: str = "%H:%M:%S") -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime(fmt)


def ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """Round axis values from at most lo to at least hi: steps of 1, 2, 2.5 or 5 times a power of ten."""
    raw = (hi - lo) / n or 1.0
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    v = math.floor(lo / step) * step
    out = [round(v, 10)]
    while out[-1] < hi - step * 1e-9:
        v += step
        out.append(round(v, 10))
    return out


def tick_label(v: float, step: float) -> str:
    """'2,500', '0.25', '-1.5': the decimals the step needs, thousands separated, never 2.67e+03 or -0."""
    decimals = next((d for d in range(7) if abs(step * 10**d - round(step * 10**d)) < 1e-6), 6)
    text = f"{v:,.{decimals}f}"
    return text.lstrip("-") if float(text.replace(",", "")) == 0 else text


def _path(points: Sequence[tuple[float, float | None]], x, y) -> str:
    """An SVG path of the points, broken where a value is missing."""
    out, pen = [], "M"
    for t, v in points:
        if v is None:
            pen = "M"
            continue
        out.append(f"{pen}{x(t):.1f},{y(v):.1f}")
        pen = "L"
    return "".join(out)


def chart(
    title: str,
    unit: str,
    series: Sequence[tuple[str, Sequence[tuple[float, float | None]]]],
    t0: float,
    t1: float,
    marks: Sequence[tuple[float, int]] = (),
    lines: Sequence[tuple[float, str]] = (),
    height: int = 150,
    empty: str = "no readings in these minutes",
) -> str:
    """One chart: series as (label, [(ts, value or None)]), event marks as (ts, number), level lines; with no
    reading at all, the chart's frame says why (`empty`) instead of vanishing."""
    data = [v for _, pts in series for _, v in pts if v is not None]
    if not data:
        return (
            f'<div class="chart"><svg viewBox="0 0 {W} 60" role="img" aria-label="{escape(title)}: {escape(empty)}">'
            f'<text x="{PAD_L}" y="16" font-size="14" font-weight="600">{escape(title)} ({escape(unit)})</text>'
            f'<text x="{W / 2}" y="44" font-size="14" text-anchor="middle" class="empty">{escape(empty)}</text>'
            "</svg></div>"
        )
    vals = data + [v for v, _ in lines]
    axis = ticks(min(0.0, min(vals)), max(vals))
    lo, hi = axis[0], axis[-1]
    if hi <= lo:
        hi = lo + 1.0
    step = axis[1] - axis[0] if len(axis) > 1 else 1.0
    span = (t1 - t0) or 1.0

    def x(t):
        return PAD_L + (t - t0) / span * (W - PAD_L - PAD_R)

    def y(v):
        return PAD_T + (1 - (v - lo) / (hi - lo)) * (height - PAD_T - PAD_B)

    parts = [f'<svg viewBox="0 0 {W} {height}" role="img" aria-label="{escape(title)}">']
    parts.append(
        f'<text x="{PAD_L}" y="14" font-size="13" font-weight="600">{escape(title)} ({escape(unit)})</text>'
    )
    for v in axis:
        parts.append(
            f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
            f'<text x="{PAD_L - 4}" y="{y(v) + 4:.1f}" font-size="13" text-anchor="end">{tick_label(v, step)}</text>'
        )
    for k in range(6):
        t = t0 + span * k / 5
        parts.append(
            f'<text x="{x(t):.1f}" y="{height - 8}" font-size="13" text-anchor="middle">{_utc(t, "%H:%M")}</text>'
        )
    for v, label in lines:
        parts.append(
            f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#9ca3af" '
            f'stroke-dasharray="4 3"/><text x="{W - PAD_R}" y="{y(v) - 3:.1f}" font-size="10" '
            f'text-anchor="end" fill="#6b7280">{escape(label)}</text>'
        )
    for t, n in marks:
        parts.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{PAD_T}" y2="{height - PAD_B}" stroke="#dc2626" '
            f'stroke-dasharray="3 3"/><text x="{x(t) + 2:.1f}" y="{PAD_T + 10}" font-size="11" fill="#dc2626">{n}</text>'
        )
    for i, (_, pts) in enumerate(series):
        d = _path(pts, x, y)
        if d:
            parts.append(
                f'<path d="{d}" fill="none" stroke="{COLOURS[i % len(COLOURS)]}" stroke-width="1.6"/>'
            )
    parts.append("</svg>")
    legend = "".join(
        f'<span><i style="background:{COLOURS[i % len(COLOURS)]}"></i>{escape(label)}</span>'
        for i, (label, _) in enumerate(series)
    )
    return f'<div class="chart">{"".join(parts)}<div class="legend">{legend}</div></div>'


def _gpu(s: Sample, attr: str) -> float | None:
    return getattr(s.gpus[0], attr) if s.gpus else None


def _psi(s: Sample, kind: str) -> float | None:
    return ((s.psi_memory or {}).get(kind) or {}).get("avg10")


def _kb_gib(v: int | None) -> float | None:
    return None if v is None else v / (1024 * 1024)


def series_of(samples: Sequence[Sample], timeline: Sequence[dict[str, Any]]) -> dict[str, list]:
    """The charts' series from the ring's samples and the findings re-judged on them (same order)."""
    ts = [s.ts for s in samples]
    g3 = [(row.get("G3") or {}).get("evidence") or {} for row in timeline] or [{} for _ in samples]
    budget = [None if e.get("budget_bytes") is None else e["budget_bytes"] / GIB for e in g3]
    runway = [None if e.get("runway_s") is None else e["runway_s"] / 60 for e in g3]
    jobs: dict[str, list] = {}
    for s in samples:
        for t in s.throughput:
            jobs.setdefault(t.job, [])
    for s in samples:
        by = {t.job: t for t in s.throughput}
        for job, pts in jobs.items():
            r = by.get(job)
            pts.append((s.ts, None if r is None else (r.tokens_per_second or r.step_seconds)))
    return {
        "memory": [
            (
                "MemAvailable",
                list(zip(ts, [_kb_gib(s.meminfo.get("MemAvailable")) for s in samples], strict=True)),
            ),
            (
                "lowest between samples",
                list(zip(ts, [_kb_gib(s.mem_available_min_kb) for s in samples], strict=True)),
            ),
            ("budget", list(zip(ts, budget, strict=True))),
        ],
        "runway": [("runway", list(zip(ts, runway, strict=True)))],
        "psi": [
            ("some avg10", [(s.ts, _psi(s, "some")) for s in samples]),
            ("full avg10", [(s.ts, _psi(s, "full")) for s in samples]),
        ],
        "temp": [("GPU", [(s.ts, _gpu(s, "temp_c")) for s in samples])],
        "power": [("GPU power", [(s.ts, _gpu(s, "power_w")) for s in samples])],
        "clock": [("SM clock", [(s.ts, _gpu(s, "sm_clock_mhz")) for s in samples])],
        "throughput": [(job, pts) for job, pts in jobs.items()],
    }


def _rows(cells: Iterable[Sequence[str]]) -> str:
    return "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells)


def render_report(
    samples: Sequence[Sample],
    timeline: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
    workloads: Sequence[dict[str, Any]],
    trigger: dict[str, Any],
    final_seconds: Sequence[Sample] = (),
) -> str:
    """The report's HTML (UTF-8 text, self-contained); `final_seconds` (1 s readings) get a chart of their own."""
    if samples:
        t0, t1 = samples[0].ts, samples[-1].ts
    else:
        t0 = t1 = float(trigger.get("ts") or 0.0)
    t1 = max(t1, float(trigger.get("ts") or t1))
    marks = [(float(e["ts"]), i + 1) for i, e in enumerate(events) if t0 <= float(e["ts"]) <= t1]
    sr = series_of(samples, timeline)
    host = escape(next((s.host for s in reversed(samples) if s.host), None) or "?")
    slowdown = next((g.slowdown_temp_c for s in reversed(samples) for g in s.gpus if g.slowdown_temp_c), None)
    no_gpu = "no GPU readings in these samples (NVML missing or not supported)"
    charts = [
        chart("Memory", "GiB", sr["memory"], t0, t1, marks, [(0.0, "budget gone")]),
        chart(
            "Runway at the trend",
            "min",
            sr["runway"],
            t0,
            t1,
            marks,
            [(30.0, "warn")],
            empty="no runway: the budget was not falling at a sustained trend in these minutes",
        ),
        chart(
            "Memory pressure (PSI)",
            "%",
            sr["psi"],
            t0,
            t1,
            marks,
            empty="no PSI readings (no /proc/pressure/memory on this kernel)",
        ),
        chart(
            "Temperature",
            "C",
            sr["temp"],
            t0,
            t1,
            marks,
            [(slowdown, "slowdown")] if slowdown else (),
            empty=no_gpu,
        ),
        chart("Power", "W", sr["power"], t0, t1, marks, empty=no_gpu),
        chart("SM clock", "MHz", sr["clock"], t0, t1, marks, empty=no_gpu),
        chart(
            "Throughput",
            "tokens/s or s/step",
            sr["throughput"],
            t0,
            t1,
            marks,
            empty="no training job reported progress (POST /api/v1/progress)",
        ),
    ]
    ev_rows = _rows(
        (
            str(i + 1),
            _utc(float(e["ts"]), "%Y-%m-%d %H:%M:%SZ"),
            escape(str(e.get("kind", ""))),
            escape(str(e.get("summary", ""))),
        )
        for i, e in enumerate(events)
    )
    changes = []
    last: dict[str, str] = {}
    for row in timeline:
        for g in ("G3", "G4", "G6"):
            f = row.get(g) or {}
            sev = f.get("severity")
            if sev and sev != last.get(g):
                last[g] = sev
                changes.append(
                    (
                        _utc(float(row["ts"])),
                        g,
                        f'<span class="sev-{sev}">{sev}</span>',
                        escape(str(f.get("summary", ""))[:300]),
                    )
                )
    wl_rows = _rows(
        (
            escape(str(w.get("kind"))),
            escape(str(w.get("pid"))),
            f"{(w.get('footprint_bytes') or 0) / GIB:.1f} GiB",
            escape(str(w.get("cap") or ("uncapped" if w.get("capped") is False else "-"))),
            escape(str(w.get("cmdline", ""))[:200]),
        )
        for w in workloads
    )
    advice = _advice(timeline)
    when = _utc(float(trigger.get("ts") or t1), "%Y-%m-%d %H:%M:%SZ")
    span = f"{_utc(t0, '%Y-%m-%d %H:%M:%S')} to {_utc(t1)} UTC, {len(samples)} samples"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>spark-watchd post-mortem: {escape(str(trigger.get("kind", "")))} on {host} at {when}</title>
<style>{CSS}</style></head><body><main>
<h1>Post-mortem: {escape(str(trigger.get("kind", "")))} on {host}</h1>
<div class="meta">{escape(span)}; written by spark-watchd</div>
<div class="trigger"><b>{when}</b> {escape(str(trigger.get("summary", "")))}</div>
{advice}
<h2>The minutes before</h2>
{"".join(charts)}
{_final(final_seconds)}
<h2>Events</h2>
<table><tr><th>#</th><th>time</th><th>kind</th><th>what happened</th></tr>{ev_rows}</table>
<h2>Findings as they changed</h2>
<table><tr><th>time</th><th>gotcha</th><th>severity</th><th>summary</th></tr>{_rows(changes)}</table>
<h2>Workloads at the end</h2>
<table><tr><th>kind</th><th>pid</th><th>memory</th><th>cap</th><th>command</th></tr>{wl_rows}</table>
</main></body></html>
"""


def _advice(timeline: Sequence[dict[str, Any]]) -> str:
    """What to do: the advice the page gave for each gotcha at its worst in these minutes (latest first)."""
    rank = {"warning": 1, "critical": 2}
    blocks = []
    for g in ("G3", "G4", "G6"):
        worst = None
        for row in timeline:
            f = row.get(g) or {}
            if f.get("advice") and rank.get(f.get("severity"), 0) >= rank.get(
                (worst or {}).get("severity"), 0
            ):
                worst = {**f, "ts": row.get("ts")}
        if worst is None:
            continue
        items = "".join(f"<li>{escape(str(a))}</li>" for a in worst["advice"])
        sev = escape(str(worst["severity"]))
        at = _utc(float(worst["ts"])) if worst.get("ts") is not None else ""
        blocks.append(
            f'<p><b>{g}</b> <span class="sev-{sev}">{sev}</span> at {at}: {escape(str(worst.get("summary", "")))}</p>'
            f'<ul class="advice">{items}</ul>'
        )
    return "<h2>What to do</h2>" + "".join(blocks) if blocks else ""


def _final(samples: Sequence[Sample]) -> str:
    """The final seconds at 1 s: usable memory (MemAvailable - CmaFree), MemAvailable, PSI some and full."""
    if not samples:
        return ""
    t0, t1 = samples[0].ts, samples[-1].ts

    def usable(s: Sample) -> float | None:
        avail = s.meminfo.get("MemAvailable")
        return None if avail is None else (avail - (s.meminfo.get("CmaFree") or 0)) / (1024 * 1024)

    mem = [
        ("usable (MemAvailable - CmaFree)", [(s.ts, usable(s)) for s in samples]),
        ("MemAvailable", [(s.ts, _kb_gib(s.meminfo.get("MemAvailable"))) for s in samples]),
    ]
    psi = [
        ("some avg10", [(s.ts, _psi(s, "some")) for s in samples]),
        ("full avg10", [(s.ts, _psi(s, "full")) for s in samples]),
    ]
    last = _utc(t1, "%H:%M:%S")
    served = progress_series(samples)  # the servers' progress read each second (postmortem/final.py)
    return (
        f"<h2>The final seconds (1 s readings, {len(samples)} to {last} UTC)</h2>"
        + chart("Memory, every second", "GiB", mem, t0, t1, (), [(0.0, "gone")])
        + chart("Memory pressure (PSI), every second", "%", psi, t0, t1, ())
        + (
            chart("Serving progress, every second", "tokens/s, requests", served, t0, t1, ())
            if served
            else ""
        )
        + "".join(f"<p>{escape(line)}</p>" for line in still(samples))
    )
