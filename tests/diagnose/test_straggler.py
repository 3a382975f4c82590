"""The straggler judgement: the shipped alert's own promtool cases, replayed through the daemon's judge().

The thresholds are one definition (diagnose/straggler.py, imported by deploy/prometheus/fleet_rules.py):
every fleet case of deploy/prometheus/unit_cases.py must come out the same through the Python rule.
"""

from __future__ import annotations

import re

import pytest

from spark_watchd.diagnose import straggler as st
from tests.deploy.deploy_helpers import PROM, load_module, rules_gen

CASES = load_module(PROM / "unit_cases.py", "sparkwatchd_unit_cases")
FLEET = [c for c in CASES.CASES if c[0].startswith("fleet_")]


def expand(values: str) -> list[float]:
    """promtool's expanding notation: `2.4e9x4 2.0e9x36` is five 2.4e9 then thirty-seven 2.0e9."""
    out: list[float] = []
    for part in values.split():
        m = re.fullmatch(r"([-+0-9.e]+)(?:([-+][0-9.e]+))?x(\d+)", part)
        if not m:
            out.append(float(part))
            continue
        start, step, n = float(m.group(1)), float(m.group(2) or 0), int(m.group(3))
        out.extend(start + step * i for i in range(n + 1))
    return out


def members_at(series: dict[str, str], minute: int) -> dict[str, st.Member]:
    """The clustered Sparks of a case at one minute, as the daemon sees them (status documents)."""
    docs: dict[str, dict] = {}
    for sel, values in series.items():
        if 'cluster="' not in sel:
            continue  # a Spark without the cluster label is never compared
        inst = re.search(r'instance="([^"]+)"', sel).group(1)
        v = expand(values)[minute]
        doc = docs.setdefault(inst, {"ts": minute * 60.0, "gpus": [{}], "findings": {}})
        g = doc["gpus"][0]
        if sel.startswith("sparkwatchd_gpu_sm_clock_hertz"):
            g["sm_clock_mhz"] = v / 1e6
        elif sel.startswith("sparkwatchd_gpu_temperature_celsius"):
            g["temp_c"] = v
        elif sel.startswith("sparkwatchd_gpu_utilization_ratio"):
            g["util_pct"] = v * 100
        elif sel.startswith("sparkwatchd_finding_level"):
            doc["findings"]["G4"] = {"severity": ("ok", "warning", "critical")[int(v)]}
    return {inst: st.member(inst, doc) for inst, doc in docs.items()}


@pytest.mark.parametrize("case", FLEET, ids=[c[0] for c in FLEET])
def test_the_python_rule_fires_where_the_prometheus_rule_fires(case):
    _, series, checks = case
    hold = st.StragglerHold()
    firing: dict[int, set[str]] = {}
    last = max(t for t, _, _ in checks)
    for minute in range(last + 1):
        ms = members_at(series, minute)
        firing[minute] = set()
        for name, m in ms.items():
            verdict, _ = hold.update(st.judge(m, [o for n, o in ms.items() if n != name]), minute * 60.0)
            if verdict == "straggler":
                firing[minute].add(name)
    for t, alert, expected in checks:
        if alert != "SparkWatchdStraggler":
            continue
        assert firing[t] == {e["instance"] for e in expected}, (case[0], t)


def test_the_alert_is_written_from_the_same_thresholds():
    rule = next(r for r in rules_gen().alert_rules(rules_gen().Ctx()) if r["alert"] == "SparkWatchdStraggler")
    assert f"< {st.CLOCK_SHORTFALL} * " in rule["expr"] and f"+ {st.TEMP_EXCESS_C}\n" in rule["expr"]
    assert f"+ {st.UTIL_GAP})" in rule["expr"] and rule["for"] == "15m"
    rec = {r["record"]: r["expr"] for r in rules_gen().recording_rules(rules_gen().Ctx())}
    assert f">= {st.LOAD_RATIO}" in rec["sparkwatchd:cluster_gpu_sm_clock_loaded:hertz"]


def test_throttling_while_the_peer_waits_reads_as_the_issue_says_on_both_spark():
    hot = st.member("spark-a", {"ts": 0, "gpus": [{"util_pct": 91, "sm_clock_mhz": 2300, "temp_c": 82}],
                                "findings": {"G4": {"severity": "warning"}}})  # fmt: skip
    cool = st.member("spark-b", {"ts": 0, "gpus": [{"util_pct": 62, "sm_clock_mhz": 2400, "temp_c": 79}]})
    j = st.judge(hot, [cool])
    assert j.reasons == ("waiting",) and not st.judge(cool, [hot]).straggling
    assert st.sentence(j, "spark-a", ["spark-b"]) == (
        "this Spark is throttling and its DDP peer spark-b waits (utilisation 62% vs 91%)"
    )
    assert st.sentence(j, "spark-b", ["spark-a"]) == (
        "DDP peer spark-a is throttling and this Spark waits on it (utilisation 62% vs 91%)"
    )


def test_a_down_peer_or_an_idle_one_is_never_compared():
    hot = st.member("a", {"gpus": [{"util_pct": 97, "sm_clock_mhz": 1900, "temp_c": 88}]})
    assert not st.judge(hot, [st.member("b", None, "connection refused")]).straggling
    idle = st.member("b", {"gpus": [{"util_pct": 2, "sm_clock_mhz": 600, "temp_c": 45}]})
    assert st.judge(hot, [idle]).reasons == ()  # no loaded peer clock or temperature, no G4 warning


def test_the_hold_restarts_when_the_judgement_breaks_or_time_steps_back():
    hold = st.StragglerHold(for_s=900)
    j = st.Judgement("a", ("clock",))
    assert hold.update(j, 0.0) == ("pending", 0.0)
    assert hold.update(j, 900.0) == ("straggler", 900.0)
    assert hold.update(st.Judgement("a", ()), 960.0) == (None, 0.0)
    assert hold.update(j, 1000.0) == ("pending", 0.0)
    assert hold.update(j, 10.0) == ("pending", 0.0)
