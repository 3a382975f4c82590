"""Each classifier judges in three stages: pure signals, ordered RULES, one advance() that moves state."""

from __future__ import annotations

import inspect
import pickle

import pytest

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose import g3, g3_rules, g4, g4_rules, g6, g6_rules
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.diagnose.tracker import Ruling
from tests.diagnose.diag_builders import Host

RULE_SETS = {"G3": g3_rules.RULES, "G4": g4_rules.RULES, "G6": g6_rules.RULES}


@pytest.mark.parametrize("gotcha", RULE_SETS)
def test_every_rule_is_a_documented_pure_function_and_the_last_always_rules(gotcha):
    rules = RULE_SETS[gotcha]
    assert len(set(rules)) == len(rules) >= 5
    for rule in rules:
        doc = inspect.getdoc(rule)
        assert doc and "\n" not in doc, f"{rule.__name__}: one-line docstring"
        assert list(inspect.signature(rule).parameters) == ["s", "now", "th"], rule.__name__
    # The last rule never passes, whatever it is shown.
    assert inspect.signature(rules[-1]).return_annotation in ("Ruling", Ruling)


def _window():
    host = Host()
    return host.run(4, temp=80.0) + host.run(6, temp=88.0, thermal_share=0.8, psi_some=30.0, swapout=900.0)


@pytest.mark.parametrize(
    ("tracker", "read"),
    [
        (g4.G4Tracker, lambda s, f, th: g4.signals(s, f, th)),
        (g3.G3Tracker, lambda s, f, th: g3.signals(f, th)),
        (g6.G6Tracker, lambda s, f, th: g6.signals(f, th)),
    ],
)
def test_signals_touch_no_state_and_advance_alone_moves_it(tracker, read):
    th = Thresholds()
    t = tracker(th)
    prev = None
    for s in _window():
        f = feat.compute(prev, s, th)
        before = pickle.dumps(t.__dict__)
        a, b = read(s, f, th), read(s, f, th)
        assert a == b and pickle.dumps(t.__dict__) == before  # reading the signals moved nothing
        t.observe(s, f)
        prev = f


def test_the_g4_verdict_carries_the_throttle_its_reason_and_the_counter_share():
    host = Host()
    t = g4.G4Tracker(Thresholds())
    finding = feat.fold(t, host.run(3, temp=80.0) + host.run(3, temp=88.0, thermal_share=0.8), Thresholds())
    st = finding.state
    assert finding.severity == "warning" and st.throttling and st.reason == "counters"
    assert st.counter_share == pytest.approx(0.8) and st.throttled_seconds_total == 90.0
    assert st.duration_s == 60.0 and st.step is None
