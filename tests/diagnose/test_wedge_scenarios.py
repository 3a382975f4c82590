"""The wedge traces (tests/fixtures/traces/wedge, issue 31), rebuilt from owners' incident logs: lead times
before each kill or freeze, no critical on a healthy load, every sample agreeing with its label."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.sample.trace import read_trace
from tests.diagnose.test_scenarios import _check, _traces, score

WEDGE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "wedge"
RANK = {"ok": 0, "unknown": 0, "warning": 1, "critical": 2}


def _replay(trace: Path) -> list[dict]:
    return [d.to_replay_dict() for d in Diagnoser().run(read_trace(trace))]


def _end(trace: Path, out: list[dict]) -> float | None:
    """When the failure came: the first OOM kill, else the last sample before a reboot's gap; None: healthy."""
    expected = json.loads(trace.with_name(trace.name[: -len(".jsonl")] + ".events.json").read_text())
    kills = [e["ts"] for e in expected if e["kind"] == "oom_kill"]
    if kills:
        return min(kills)
    reboots = [e["ts"] for e in expected if e["kind"] == "reboot"]
    if reboots:
        return max(o["ts"] for o in out if o["ts"] < min(reboots))
    return None


@pytest.mark.parametrize("trace", _traces(WEDGE), ids=lambda p: p.name)
def test_wedge_traces_score_in_full(trace):
    r = score(trace)
    _check(r)
    assert r["agree"] == r["total"]


@pytest.mark.parametrize("trace", _traces(WEDGE), ids=lambda p: p.name)
def test_slow_failures_warn_15_min_and_go_critical_3_min_ahead(trace):
    """Every slow failure: G3 warning held from at least 15 minutes, critical from at least 3 minutes before
    the kill or the freeze; a healthy trace is never G3 critical."""
    out = _replay(trace)
    end = _end(trace, out)
    sev = [(o["ts"], RANK[o["findings"]["G3"]["severity"]]) for o in out]
    if end is None:
        assert max(r for _, r in sev) < 2
        return
    before = [(ts, r) for ts, r in sev if ts < end]
    for level, lead in ((1, 15 * 60), (2, 3 * 60)):
        held = [ts for ts, r in before if ts >= end - lead]
        assert held and all(r >= level for ts, r in before if ts >= end - lead), (level, lead)


def test_the_set_covers_the_cited_incidents():
    names = {p.name for p in _traces(WEDGE)}
    for needle in ("psi_blind_kill", "vllm094_start_settles"):
        assert any(needle in n for n in names), needle
