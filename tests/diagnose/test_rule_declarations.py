"""Every rule in RULES runs: the quiet shortcut is made from what each rule declares (`fires_when`), the
declarations hold for every value of every signal and state field, and a new rule fires in G3, G4 and G6."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_watchd.diagnose import g3, g3_rules, g4, g4_rules, g6, g6_rules
from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.diagnose.tracker import Ruling, fires_when, judge, shortcut
from spark_watchd.export.diagnosis import ANOMALY_KINDS
from tests.diagnose.diag_builders import Host, proc

TH = Thresholds()
GIB = 1024**3
# gotcha -> (its rules module, its signals record, its state record)
GOTCHAS = {
    "G3": (g3_rules, g3.G3Signals, g3_rules.G3Now),
    "G4": (g4_rules, g4.G4Signals, g4_rules.G4Now),
    "G6": (g6_rules, g6.G6Signals, g6_rules.G6Now),
}
# Values the rules compare against: their thresholds' neighbourhoods and the words they test for.
FLOATS = st.one_of(st.sampled_from((0.0, 1.0, 1.1, 1.2, 2.0, 70.0, 86.0, 90.0)), st.floats(0, 1e12))
INTS = st.one_of(st.sampled_from((0, 1, 2, 2100, 4 * GIB, 20 * GIB)), st.integers(0, 2**40))
WORDS = st.sampled_from(("power_delivery", "hung_engine", "pl1", "vllm", "ollama", "trainer", "other"))
CUT = {"server": "vllm", "decode_ratio": 2.0, "tokens_per_s": 9.0, "baseline_tokens_per_s": 20.0}
LOOSE = {  # a bare `tuple` or a mapping field: what the rules read of it (only whether it is empty)
    "serving_cut": st.sampled_from(((), (CUT,))),
    "inside": st.sampled_from(((), ({"signal": "preemption_storm"},))),
    "caps": st.sampled_from(({}, {"kv_cache_memory_bytes": 40 * GIB})),
    "cost": st.none(),
    "growth": st.just(()),
    "stall": st.sampled_from((None, (3, 1800.0, 600.0))),  # G4Now.stall: (stalls, spacing s, length s)
    "engine_stalled": st.sampled_from(((), ("vllm",))),  # G3Now: the stalled engines (only their presence)
    "collateral": st.sampled_from(((), ("sshd",))),  # G3Now: the services the held OOM kills took
}


def _strategy(hint, name: str) -> st.SearchStrategy:
    """Every value a field of this type can hold, from its annotation (records built field by field)."""
    if name in LOOSE:
        return LOOSE[name]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(st.none() if a is type(None) else _strategy(a, name) for a in args))
    if origin is tuple:
        return st.lists(_strategy(args[0], name), max_size=3).map(tuple)
    if hint is bool:
        return st.one_of(st.just(False), st.booleans())  # False 3 times in 4: quiet states get drawn
    if hint is float:
        return FLOATS
    if hint is int:
        return INTS
    if hint is str:
        return WORDS
    if isinstance(hint, type) and (issubclass(hint, tuple) or dataclasses.is_dataclass(hint)):
        return record(hint)
    if hint is Mapping or origin is Mapping:
        return LOOSE["caps"]
    raise AssertionError(f"no strategy for {name}: {hint!r}")


def record(cls) -> st.SearchStrategy:
    """Any record of cls: each field drawn over every value its type allows."""
    hints = typing.get_type_hints(cls)
    return st.builds(cls, **{k: _strategy(h, k) for k, h in hints.items()})


def _states(gotcha: str) -> st.SearchStrategy:
    _, signals, now = GOTCHAS[gotcha]
    return st.tuples(record(signals), record(now))


# Derandomized: the same draws on every run, so a pass or a failure is the code's, never the seed's.
SETTINGS = settings(
    max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("gotcha", GOTCHAS)
def test_the_shortcut_rules_as_walking_every_rule_would(gotcha):
    rules = GOTCHAS[gotcha][0]
    last = rules.RULES[-1]
    seen = set()

    @SETTINGS
    @given(_states(gotcha))
    def agree(state):
        s, now = state
        walked = judge(rules.RULES, s, now, TH)
        assert rules.ruling(s, now, TH) == walked
        seen.add(walked == last(s, now, TH))

    agree()
    assert seen == {True, False}  # quiet states (the last rule's) and others were both drawn


def _passes(s, now, th) -> Ruling:
    return Ruling("ok", "passed")


@pytest.mark.parametrize(
    ("gotcha", "rule"),
    [(g, r) for g, (m, _, _) in GOTCHAS.items() for r in m.RULES[:-1]],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_each_rule_rules_only_when_a_condition_it_declares_holds(gotcha, rule):
    assert rule.fires_when, f"{rule.__name__} declares no condition: the shortcut must always run it"
    alone = (rule, _passes)
    decide = shortcut(alone)

    @settings(SETTINGS, max_examples=150)
    @given(_states(gotcha))
    def sound(state):
        s, now = state
        assert decide(s, now, TH) == judge(alone, s, now, TH), (
            f"{rule.__name__} ruled with {rule.fires_when} false"
        )

    sound()


def test_a_declaration_that_does_not_hold_is_caught():
    @fires_when("now.hold")
    def throttling(s, now, th):
        return Ruling("warning", "throttling") if now.throttling else None

    decide = shortcut((throttling, _passes))
    s = g4.G4Signals(*([None] * len(g4.G4Signals._fields)))
    now = g4_rules.G4Now(True, False, False, None, None, None)
    assert decide(s, now, TH) != judge((throttling, _passes), s, now, TH)


def _quiet_samples(gotcha: str):
    """Samples every shipped rule of the gotcha calls ok, each carrying what the new rule reads."""
    h = Host()
    if gotcha == "G4":
        return h.run(4, temp=84.5)  # within slowdown_margin_c of the 86 C slowdown, no reason bit
    if gotcha == "G3":
        return h.run(4, psi_some=0.6)  # stalls starting, under psi_some_warn_pct
    return h.run(4, processes=[proc(1, ["python3", "train.py"], 10.0, 8.0)])  # one heavy workload


def _last(samples, gotcha: str):
    """The gotcha's finding at the last sample, the daemon's engine fed them all."""
    d = Diagnoser(TH)
    return [d.observe(s) for s in samples][-1].findings[gotcha]


NEW_RULE = {  # gotcha -> (what it reads, which makes it rule)
    "G4": "s.near",
    "G3": "s.some >= 0.5",
    "G6": "len(now.heavy) == 1",
}


@pytest.mark.parametrize("declared", [False, True], ids=["undeclared", "declared"])
@pytest.mark.parametrize("gotcha", GOTCHAS)
def test_a_new_rule_fires_on_an_otherwise_quiet_sample(monkeypatch, gotcha, declared):
    rules = GOTCHAS[gotcha][0]
    condition = NEW_RULE[gotcha]

    def fan_stopped(s, now, th):
        """The new rule: a warning on what no shipped rule reads."""
        return Ruling("warning", "the new rule ruled") if eval(condition) else None

    samples = _quiet_samples(gotcha)
    assert _last(samples, gotcha).severity == "ok"
    rule = fires_when(condition)(fan_stopped) if declared else fan_stopped
    # Inserted just above the last rule: the lowest priority, below every shipped rule.
    monkeypatch.setattr(rules, "RULES", rules.RULES[:-1] + (rule, rules.RULES[-1]))
    finding = _last(samples, gotcha)
    assert (finding.severity, finding.summary) == ("warning", "the new rule ruled")


def test_every_anomaly_a_g4_rule_gives_is_a_kind_the_exporter_publishes():
    given_anomalies = set()

    @SETTINGS
    @given(_states("G4"))
    def collect(state):
        given_anomalies.add(judge(g4_rules.RULES, *state, TH).anomaly)

    collect()
    # A new anomaly name needs its row in sparkwatchd_anomaly{kind} (export/diagnosis.py), or it is never seen.
    assert given_anomalies - {None} <= set(ANOMALY_KINDS)
    # The draws reach the anomaly rules, so the check above is not empty: the kinds reached vary with the
    # draws hypothesis makes in a whole-suite run (2 or 3 of them), never none.
    assert len(given_anomalies - {None}) >= 2
