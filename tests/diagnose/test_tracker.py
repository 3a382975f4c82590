"""The tracker interface: a Verdict's fields, Unpersisted's empty state, the trackers that offer it."""

from __future__ import annotations

import pytest

from spark_watchd.diagnose.g3 import G3Tracker
from spark_watchd.diagnose.g4 import G4Tracker
from spark_watchd.diagnose.g6 import G6Tracker
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.diagnose.tracker import Unpersisted, Verdict
from spark_watchd.sample.findings import Finding

OK = Finding("G3", "ok", "fine")


def test_a_verdict_without_workloads_has_an_empty_table():
    v = Verdict(OK, [])
    assert v.workloads == () and v.finding is OK and v.events == []
    finding, events, workloads = v
    assert (finding, events, workloads) == (OK, [], ())


def test_unpersisted_writes_nothing_and_ignores_what_it_is_given():
    t = Unpersisted()
    assert t.state() == {}
    t.restore({"g4_episode": True, "anything": 1})
    assert t.state() == {}


def test_state_of_an_unpersisted_tracker_is_a_fresh_dict_each_time():
    t = Unpersisted()
    first = t.state()
    first["x"] = 1
    assert t.state() == {}


@pytest.mark.parametrize(("cls", "gotcha"), [(G3Tracker, "G3"), (G4Tracker, "G4"), (G6Tracker, "G6")])
def test_every_classifier_offers_the_whole_interface_under_its_gotcha(cls, gotcha):
    t = cls(Thresholds())
    assert t.gotcha == gotcha
    missing = [
        name
        for name in ("observe", "reboot", "time_jump", "state", "restore", "set_thresholds")
        if not callable(getattr(t, name, None))
    ]
    assert missing == []
    assert isinstance(t.state(), dict)


def test_g3_and_g6_persist_nothing_while_g4_keeps_its_episode_across_a_restart():
    assert isinstance(G3Tracker(Thresholds()), Unpersisted) and isinstance(
        G6Tracker(Thresholds()), Unpersisted
    )
    g4 = G4Tracker(Thresholds())
    assert not isinstance(g4, Unpersisted)
    state = dict(g4.state(), throttle_active=True, throttle_start_ts=100.0)
    again = G4Tracker(Thresholds())
    again.restore(state)
    assert again.state()["throttle_active"] is True and again.state()["throttle_start_ts"] == 100.0
