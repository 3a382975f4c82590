"""The SM clock cap: seen as a cap (not a throttle, not a power fault), lost at a reboot, and what it costs.

Scored on the pair set (tests/fixtures/traces/pair/, make_pair.py), plus the edges: a configured cap, a cap
restored by hand, no cap expected, the cap carried across a daemon restart, traces that hold no cap.
"""

from __future__ import annotations

import dataclasses

import pytest

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.trace import read_trace
from tests.diagnose.test_scenarios import OWN, _check, _traces, score

PAIR = OWN / "pair"


def _run(name: str, th: Thresholds | None = None, samples=None):
    d = Diagnoser(th)
    return d, [d.observe(s) for s in (samples if samples is not None else read_trace(PAIR / f"{name}.jsonl"))]


@pytest.mark.parametrize("trace", _traces(PAIR), ids=lambda p: p.name)
def test_pair_scenarios_score_in_full_with_no_false_warning(trace):
    r = score(trace)
    _check(r)
    assert r["agree"] == r["total"]


def test_a_capped_run_is_a_cap_with_its_value_not_a_throttle_nor_a_power_fault():
    d, out = _run("capped_2100_45s")
    g4 = out[-1].findings["G4"]
    assert g4.severity == "ok" and g4.anomaly is None
    assert g4.evidence["clock_cap_cap_mhz"] == 2100 and g4.evidence["clock_cap_lost"] is False
    assert g4.summary.endswith("SM clock capped at 2100 MHz (a cap, not a throttle)")
    assert all(o.findings["G4"].severity == "ok" for o in out)


def test_a_boot_without_the_cap_raises_clock_cap_lost_with_the_restoring_command_and_its_cost():
    d, out = _run("cap_lost_at_reboot_45s")
    g4 = out[-1].findings["G4"]
    assert (g4.severity, g4.anomaly) == ("warning", "clock_cap_lost")
    assert g4.summary.startswith("clock cap lost at reboot: SM clock ")
    assert "above the 2100 MHz cap; cap 2100 MHz: -1" in g4.summary and "-3% tokens/s" in g4.summary
    assert g4.advice[0] == "Re-apply the cap now: sudo nvidia-smi -lgc 0,2100"
    assert "install-service --clock-cap 2100" in g4.advice[1]
    cost = d.cap.status.cost
    assert -15 < cost["temp_delta_c"] < -10 and -4 < cost["tokens_delta_pct"] < -2
    reboot = next(i for i, o in enumerate(out) if any(e.kind == "reboot" for e in o.events))
    assert all(o.findings["G4"].severity == "ok" for o in out[:reboot])


def test_the_learned_cap_survives_a_daemon_restart_between_the_boots():
    samples = list(read_trace(PAIR / "cap_lost_at_reboot_45s.jsonl"))
    cut = next(i for i, s in enumerate(samples) if s.boot_id != samples[0].boot_id)
    first, _ = _run("", samples=samples[:cut])
    state = first.state()
    assert state["clock_cap_mhz"] == 2100
    again = Diagnoser()
    again.restore(state)
    out = [again.observe(s) for s in samples[cut:]]
    assert out[-1].findings["G4"].anomaly == "clock_cap_lost"


def test_a_configured_cap_is_expected_in_every_boot_and_zero_expects_none():
    samples = list(read_trace(OWN / "healthy_hot_60s.jsonl"))  # 2418 MHz under load, one boot
    _, out = _run("", Thresholds(expected_clock_cap_mhz=2100), samples)
    assert out[-1].findings["G4"].anomaly == "clock_cap_lost"
    _, out = _run("cap_lost_at_reboot_45s", Thresholds(expected_clock_cap_mhz=0))
    assert all(o.findings["G4"].severity == "ok" for o in out)


def test_a_cap_restored_by_hand_clears_the_warning():
    samples = list(read_trace(PAIR / "cap_lost_at_reboot_45s.jsonl"))
    tail = [dataclasses.replace(s, ts=s.ts + 7200, gpus=(dataclasses.replace(s.gpus[0], sm_clock_mhz=2100,
                                                                            temp_c=69.0),))
            for s in samples[-40:]]  # fmt: skip
    _, out = _run("", samples=samples + tail)
    assert out[len(samples) - 1].findings["G4"].anomaly == "clock_cap_lost"
    assert out[-1].findings["G4"].severity == "ok" and "capped at 2100 MHz" in out[-1].findings["G4"].summary


@pytest.mark.parametrize("name", ["healthy_hot_60s", "power_delivery_60s", "throttle_60s_slowdown84"])
def test_runs_without_a_cap_show_none(name):
    _, out = _run("", samples=read_trace(OWN / f"{name}.jsonl"))
    assert not any("clock_cap_cap_mhz" in o.findings["G4"].evidence for o in out)


def _cap_then_reboot(after, interval=45.0):
    """A run capped at 2100 MHz for an hour (69 C), a reboot, then `after(host)` samples."""
    from tests.diagnose.diag_builders import Host

    h = Host(interval=interval)
    samples = h.run(80, temp=69.0, clk=2100, util=97.0, step=1.03, job="sft")
    h.reboot(gap=180.0)
    return samples + after(h)


def test_the_cost_never_compares_a_capped_plateau_with_a_cooler_warm_up():
    """Owners' traces: the cap's cost read '+3 C' from a capped run against the warm-up after a reboot."""
    warm = _cap_then_reboot(lambda h: [h.sample(temp=60.0 + 0.6 * i, clk=2418, util=97.0, step=1.0, job="sft")
                                       for i in range(12)])  # fmt: skip
    d, _ = _run("", samples=warm)
    assert d.cap.status is None or d.cap.status.cost is None  # 9 minutes of warm-up: nothing settled yet


def test_the_cost_compares_the_same_load_capped_and_uncapped():
    other = _cap_then_reboot(lambda h: h.run(40, temp=82.0, clk=2418, util=97.0, step=0.4, job="another"))
    d, _ = _run("", samples=other)
    assert d.cap.status.cost is None  # another job uncapped: not the same load
    same = _cap_then_reboot(lambda h: h.run(40, temp=82.0, clk=2418, util=97.0, step=1.0, job="sft"))
    d, _ = _run("", samples=same)
    assert d.cap.status.cost["temp_delta_c"] == pytest.approx(-13.0, abs=0.5)
