"""The servers' own telemetry in the findings: a throttle's damage to decode (G4), contention seen from inside
the server (G6), Ollama's keep-alive unload explained by expires_at (never an eviction), a shrinking KV budget
on the G3 card. Fed the scenario traces of tests/fixtures/traces/serving/ (their generator, not the files)."""

from __future__ import annotations

import copy
import importlib.util

import pytest

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.sample.model import Sample
from tests.conftest import FIXTURES

_spec = importlib.util.spec_from_file_location(
    "make_serving", FIXTURES / "traces" / "serving" / "make_serving.py"
)
make_serving = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_serving)


def _run(rows):
    d = Diagnoser()
    return [d.observe(Sample.from_dict(s)) for s in rows]


@pytest.fixture(scope="module")
def scenarios():
    return {name: [s for s, _ in rows] for name, rows, _ in make_serving.scenarios()}


def test_a_throttle_cutting_decode_on_a_serving_only_spark_is_g4_critical_with_the_numbers(scenarios):
    out = _run(scenarios["inference_throttle_30s"])
    g4 = out[-1].findings["G4"]
    assert g4.severity == "critical" and "slowing inference" in g4.summary
    (cut,) = g4.evidence["serving_damage"]
    assert cut["server"] == "vllm:8000" and cut["decode_ratio"] >= 1.5
    assert cut["tokens_per_s"] < 0.67 * cut["baseline_tokens_per_s"]


def test_without_the_servers_telemetry_the_same_throttle_is_only_a_warning(scenarios):
    rows = copy.deepcopy(scenarios["inference_throttle_30s"])
    for s in rows:
        s.pop("serving")
    assert {d.findings["G4"].severity for d in _run(rows)[200:]} == {"warning"}


def test_a_bursty_idle_server_through_the_same_throttle_never_makes_damage(scenarios):
    out = _run(scenarios["bursty_idle_30s"])
    assert "critical" not in {d.findings["G4"].severity for d in out}
    assert out[-1].findings["G4"].severity == "warning"


def test_preemptions_rising_beside_an_uncapped_trainer_are_on_the_g6_card(scenarios):
    out = _run(scenarios["preemption_storm_45s"])
    g6 = out[-1].findings["G6"]
    assert g6.severity == "warning" and "preempted" in g6.summary
    assert [e["signal"] for e in g6.evidence["serving_contention"]] == ["preemption_storm"]
    assert not any(e.kind == "eviction" for d in out for e in d.events)


def test_ollamas_keepalive_unload_is_never_an_eviction_but_the_same_drop_before_expiry_is(scenarios):
    rows = scenarios["ollama_keepalive_45s"]
    out = _run(rows)
    assert not any(e.kind == "eviction" for d in out for e in d.events)
    assert "critical" not in {d.findings["G6"].severity for d in out}
    # The same memory gone while its expires_at was still an hour away: taken, not given up.
    early = copy.deepcopy(rows)
    for s in early:
        for m in s["serving"][0].get("models", ()):
            m["expires_at"] = s["ts"] + 3600
    assert any(e.kind == "eviction" for d in _run(early) for e in d.events)


def test_a_server_restarted_into_a_smaller_kv_cache_is_on_the_g3_card(scenarios):
    rows = copy.deepcopy(scenarios["preemption_storm_45s"][:40])
    for i, s in enumerate(rows):
        r = s["serving"][0]
        if i >= 20:  # restarted under pressure: another pid, half the KV budget
            r["pid"], r["kv_capacity_tokens"] = 3999, 30600
    ev = _run(rows)[-1].findings["G3"].evidence
    (shrunk,) = ev["serving_kv_budget"]
    assert shrunk["kv_capacity_tokens"] == 30600 and shrunk["kv_capacity_tokens_before"] == 61200


def _as_llamacpp(rows, in_flight):
    """The throttle scenario's server as a llama-server: with its slots' progress (a live rate) or without."""
    rows = copy.deepcopy(rows)
    for s in rows:
        for r in s.get("serving", ()):
            r["kind"], r["server"] = "llamacpp", "llamacpp:8080"
            r["generation_tokens_in_flight"] = 37.0 if in_flight and r.get("up", True) else None
    return rows


def test_a_llamacpp_rate_that_moves_only_at_request_end_is_never_read_as_a_throughput_collapse(scenarios):
    """llama-server adds a request's tokens to its counter only when the request ends: without its slots'
    progress, the rate over an interval is not the decode speed, and G4 never makes damage of it; with the
    slots' progress (a live rate) the same cut is judged as any server's."""
    counter_only = _run(_as_llamacpp(scenarios["inference_throttle_30s"], in_flight=False))
    assert "critical" not in {d.findings["G4"].severity for d in counter_only}
    assert not any(d.findings["G4"].evidence.get("serving_damage") for d in counter_only)
    live = _run(_as_llamacpp(scenarios["inference_throttle_30s"], in_flight=True))[-1].findings["G4"]
    assert live.severity == "critical"
    assert [c["server"] for c in live.evidence["serving_damage"]] == ["llamacpp:8080"]
