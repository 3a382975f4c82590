"""Every distinct non-ok finding the real engine gives for each labelled trace in tests/fixtures/traces."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.sample.trace import read_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
ALL_TRACES = sorted(p for p in TRACES.rglob("*.jsonl") if not p.name.endswith(".truth.jsonl"))


@cache
def findings_of(trace: Path) -> tuple:
    """(gotcha, severity, summary, evidence, advice) per distinct warning/critical finding, in order."""
    seen = {}
    for d in Diagnoser().run(read_trace(trace)):
        for g, f in d.findings.items():
            if f.severity in ("warning", "critical"):
                seen.setdefault((g, f.advice), (g, f.severity, f.summary, f.evidence, f.advice))
    return tuple(seen.values())
