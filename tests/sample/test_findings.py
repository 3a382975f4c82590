"""Findings, events and the diagnosis of one tick, as the replay output and the journal write them."""

from __future__ import annotations

import json

import pytest

from spark_watchd.sample.findings import Diagnosis, Event, Finding


def test_finding_dict_is_the_replay_shape_and_names_an_anomaly_only_when_there_is_one():
    plain = Finding("G4", "warning", "hot", {"temp_c": 87.0}, ("cool it",))
    assert plain.to_dict() == {
        "severity": "warning",
        "summary": "hot",
        "evidence": {"temp_c": 87.0},
        "advice": ["cool it"],
    }
    odd = Finding("G4", "warning", "clocks pinned", anomaly="power_delivery")
    assert odd.to_dict()["anomaly"] == "power_delivery"


def test_levels_rank_unknown_below_ok_below_warning_below_critical():
    levels = [Finding("G3", s, "").level for s in ("unknown", "ok", "warning", "critical")]
    assert levels == sorted(levels) and levels[1] < levels[2] < levels[3]
    with pytest.raises(KeyError):
        _ = Finding("G3", "fine", "").level  # not a severity trace-v1 knows


def test_event_round_trips_through_json_and_optional_keys_appear_only_when_set():
    reboot = Event("reboot", "G4", 120.5, "rebooted", after_throttle=True, details={"gap_s": 390})
    assert Event.from_dict(json.loads(json.dumps(reboot.to_dict()))) == reboot
    assert set(Event("eviction", "G6", 1.0, "x").to_dict()) == {"kind", "gotcha", "ts", "summary"}


def test_event_from_an_older_journal_line_fills_what_is_missing():
    e = Event.from_dict({"kind": "oom_kill", "ts": "42"})
    assert (e.gotcha, e.ts, e.summary, e.after_throttle, dict(e.details)) == ("", 42.0, "", None, {})
    with pytest.raises(KeyError):
        Event.from_dict({"gotcha": "G6", "ts": 1.0})  # no kind: not an event


def test_diagnosis_replay_dict_and_worst_severity():
    d = Diagnosis(
        10.0,
        {
            "G3": Finding("G3", "ok", "fine"),
            "G4": Finding("G4", "critical", "throttled"),
            "G6": Finding("G6", "unknown", "?"),
        },
        (Event("throttle_start", "G4", 10.0, "began"),),
    )
    out = d.to_replay_dict()
    assert out["ts"] == 10.0 and set(out["findings"]) == {"G3", "G4", "G6"}
    assert out["events"] == [{"kind": "throttle_start", "gotcha": "G4", "ts": 10.0, "summary": "began"}]
    assert d.worst() == "critical"
    assert Diagnosis(0.0, {"G3": Finding("G3", "unknown", "")}).worst() == "unknown"
    assert Diagnosis(0.0, {}).worst() == "unknown"


def test_a_deferred_finding_builds_its_words_once_on_first_read_and_equals_an_eager_one():
    calls = []

    def build():
        calls.append(1)
        return "hot", {"temp_c": 87.0}

    lazy = Finding.deferred("G4", "warning", build, ("cool it",))
    assert calls == [] and lazy.level == Finding("G4", "warning", "").level  # severity needs no words
    held = lazy.replace(severity="critical")  # a copy that keeps the words deferred
    assert calls == []
    assert lazy == Finding("G4", "warning", "hot", {"temp_c": 87.0}, ("cool it",))
    assert lazy.summary == "hot" and lazy.to_dict()["evidence"] == {"temp_c": 87.0}
    assert calls == [1]  # built once, for every later read
    assert held.summary == "hot" and held.severity == "critical" and calls == [1, 1]
    louder = lazy.replace(summary="hotter")
    assert (louder.summary, louder.evidence, lazy.summary) == ("hotter", {"temp_c": 87.0}, "hot")
    with pytest.raises(TypeError, match="'temp'"):
        lazy.replace(temp=1)


def test_a_reworded_finding_keeps_a_deferred_one_deferred_until_its_words_are_read():
    calls = []

    def build():
        calls.append("base")
        return "hot", {"temp_c": 87.0}

    base = Finding.deferred("G4", "warning", build, ("cool it",))
    noted = base.reworded(lambda s, ev: (f"{s}; noted", dict(ev, note=1)), advice=("first", "cool it"))
    assert calls == [] and noted.severity == "warning" and noted.advice == ("first", "cool it")
    assert noted.summary == "hot; noted" and noted.evidence == {"temp_c": 87.0, "note": 1}
    assert calls == ["base"] and (base.summary, base.evidence) == ("hot", {"temp_c": 87.0})
    eager = Finding("G3", "ok", "fine", {"a": 1}).reworded(lambda s, ev: (s + "!", ev))
    assert eager == Finding("G3", "ok", "fine!", {"a": 1})
    with pytest.raises(TypeError, match="words"):
        base.reworded(lambda s, ev: (s, ev), summary="x")


def test_a_deferred_finding_read_by_two_threads_at_once_gives_both_its_words():
    """The live daemon reads one Diagnosis from its tick and its HTTP workers at once: a reader that saw the
    words unbuilt, then lost the GIL while another reader built them, must still get them (not call None)."""
    import sys
    import threading

    f = Finding.deferred("G3", "warning", lambda: ("low memory", {"budget_bytes": 1}))
    at_words, go = threading.Event(), threading.Event()
    got: list = []

    def pause_at_words(frame, event, arg):  # this thread has seen _build set and is entering _words
        if event == "call" and frame.f_code.co_name == "_words":
            at_words.set()
            go.wait(5)
        return None

    def reader():
        sys.settrace(pause_at_words)
        try:
            got.append(f.summary)
        except Exception as exc:  # noqa: BLE001 - the race under test
            got.append(exc)
        finally:
            sys.settrace(None)

    t = threading.Thread(target=reader)
    t.start()
    assert at_words.wait(5)
    assert f.summary == "low memory" and f.evidence == {"budget_bytes": 1}  # the other reader builds them
    go.set()
    t.join(5)
    assert got == ["low memory"]
