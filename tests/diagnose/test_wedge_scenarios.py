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
    """When a slow failure came: its first OOM kill, else the last sample before a wedge's gap; None: no
    slow failure (a healthy load, a container's own limit, a deliberate reboot)."""
    expected = json.loads(trace.with_name(trace.name[: -len(".jsonl")] + ".events.json").read_text())
    kills = [e["ts"] for e in expected if e["kind"] == "oom_kill" and e.get("slow_failure")]
    if kills:
        return min(kills)
    reboots = [e["ts"] for e in expected if e["kind"] == "reboot" and e.get("wedge")]
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
    if any(e["kind"] == "engine_stall" for o in out for e in o["events"]):
        return  # a sudden wedge: test_the_engine_stall_is_critical_before_the_freeze
    if end is None:
        assert max(r for _, r in sev) < 2
        return
    before = [(ts, r) for ts, r in sev if ts < end]
    for level, lead in ((1, 15 * 60), (2, 3 * 60)):
        held = [ts for ts, r in before if ts >= end - lead]
        assert held and all(r >= level for ts, r in before if ts >= end - lead), (level, lead)


def test_the_engine_stall_is_critical_before_the_freeze_with_the_memory_state_beside_it():
    """open-gpu-kernel-modules#1358: prompt throughput 0.0 with the request running, the freeze seconds later."""
    trace = WEDGE / "engine_stall_wedge_5s.jsonl"
    out = _replay(trace)
    end = _end(trace, out)
    stall = [(o, e) for o in out for e in o["events"] if e["kind"] == "engine_stall"]
    assert len(stall) == 1
    o, e = stall[0]
    assert o["ts"] <= end and o["findings"]["G3"]["severity"] == "critical"
    assert "the last sign before a wedge" in o["findings"]["G3"]["summary"]
    d = e["details"]
    assert d["server"] == "vllm:8000" and d["requests_running"] == 1 and d["thin"] is True
    assert 5 * 1024**3 < d["usable_bytes"] < 6 * 1024**3 and d["kv_usage"] == 0.04
    assert all(x["findings"]["G3"]["severity"] == "critical" for x in out if o["ts"] <= x["ts"] <= end)


def test_the_set_covers_the_cited_incidents():
    names = {p.name for p in _traces(WEDGE)}
    for needle in (
        "psi_blind_kill",
        "vllm094_start_settles",
        "engine_stall_wedge",
        "oom_cascade_sshd",
        "nomem_roomy",
    ):
        assert any(needle in n for n in names), needle


def test_a_container_kill_with_a_roomy_pool_is_never_critical_and_names_the_limit():
    """22 GiB usable, a 64 MiB process killed at its container's limit, the report a tick late."""
    out = _replay(WEDGE / "container_kill_roomy_30s.jsonl")
    sev = [o["findings"]["G3"]["severity"] for o in out]
    assert "critical" not in sev
    k = next(i for i, o in enumerate(out) if any(e["kind"] == "oom_kill" for e in o["events"]))
    g3 = out[k]["findings"]["G3"]
    assert g3["severity"] == "warning" and "pool roomy" in g3["summary"]
    assert any("memory limit" in a for a in g3["advice"])
    assert sev[k + 2 :] == ["ok"] * (len(sev) - k - 2)  # the report named the cgroup's limit: back to ok
