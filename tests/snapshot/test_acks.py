"""Acknowledged findings: what an acknowledgement covers, what ends it, and that it survives a restart."""

from __future__ import annotations

import json

import pytest

from spark_watchd.sample.findings import Diagnosis, Finding
from spark_watchd.snapshot import Snapshot
from spark_watchd.snapshot.acks import (
    Ack,
    AckError,
    Acks,
    acknowledged,
    covers,
    subject,
    worst_unacknowledged,
)
from spark_watchd.web.acks import routes
from spark_watchd.web.http import Request


def g6(severity="warning", kinds=(("trainer", "accelerate"), ("vllm", "vllm"))):
    rows = [{"pid": 100 + i, "kind": k, "name": n} for i, (k, n) in enumerate(kinds)]
    return Finding("G6", severity, "2 heavy GPU workloads share the pool", {"workloads": rows})


def diag(*findings, ts=1000.0):
    base = {"G3": Finding("G3", "ok", "Memory OK"), "G4": Finding("G4", "ok", "Cool")}
    return Diagnosis(ts=ts, findings={**base, **{f.gotcha: f for f in findings}}, events=())


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def snap(d, acks, t):
    return Snapshot(sample=None, diagnosis=d, extras={"acks": acks.active()}, published_at=t)


def test_an_acknowledgement_covers_the_same_finding_and_nothing_worse_or_new():
    clock = Clock()
    acks = Acks(None, clock)
    acks.observe(snap(diag(g6()), acks, clock.t))
    ack = acks.add("G6", 8 * 3600, "vLLM kept on purpose")
    assert ack.severity == "warning" and ack.subject == "workloads trainer:accelerate, vllm:vllm"
    assert covers(ack, g6(), clock.t + 60)
    restarted = g6(kinds=(("trainer", "accelerate"), ("vllm", "vllm")))  # other pids, same workloads
    assert subject(restarted) == ack.subject and covers(ack, restarted, clock.t + 60)
    assert not covers(ack, g6("critical"), clock.t + 60)  # worse
    assert not covers(ack, g6(kinds=(("trainer", "accelerate"), ("ollama", "ollama"))), clock.t)  # another
    assert not covers(ack, g6(), clock.t + 8 * 3600)  # expired
    s = snap(diag(g6()), acks, clock.t + 60)
    assert set(acknowledged(s)) == {"G6"} and worst_unacknowledged(s) == "ok"
    s = snap(diag(g6(), Finding("G3", "warning", "Budget thin")), acks, clock.t + 60)
    assert worst_unacknowledged(s) == "warning"  # G3 is not covered by G6's


def test_a_worse_episode_or_a_return_to_ok_ends_it_and_unknown_keeps_it():
    clock = Clock()
    acks = Acks(None, clock)
    acks.observe(snap(diag(g6()), acks, clock.t))
    acks.add("G6", 3600)
    acks.observe(snap(diag(g6("unknown")), acks, clock.t))  # not judged (warm-up): nothing to say
    assert [a.gotcha for a in acks.active()] == ["G6"]
    acks.observe(snap(diag(g6("critical")), acks, clock.t))
    assert acks.active() == ()  # the worse episode counts again, and after it too
    acks.observe(snap(diag(g6()), acks, clock.t))
    acks.add("G6", 3600)
    for _ in range(2):  # a restart's first samples, or one flicker: not the end of the episode
        acks.observe(snap(diag(g6("ok")), acks, clock.t))
    acks.observe(snap(diag(g6()), acks, clock.t))
    assert [a.gotcha for a in acks.active()] == ["G6"]
    for _ in range(3):
        acks.observe(snap(diag(g6("ok")), acks, clock.t))
    assert acks.active() == ()  # the episode is over: a new one is not covered


def test_only_a_warning_or_critical_finding_can_be_acknowledged_and_values_are_checked():
    acks = Acks(None, Clock())
    with pytest.raises(AckError, match="not judged yet"):
        acks.add("G6", 3600)
    acks.observe(snap(diag(g6()), acks, 1000.0))
    with pytest.raises(AckError, match="G3 is ok"):
        acks.add("G3", 3600)
    with pytest.raises(AckError, match="one of G3, G4, G6"):
        acks.add("G9", 3600)
    with pytest.raises(AckError, match="at most"):
        acks.add("G6", 365 * 86400)
    with pytest.raises(AckError, match="one line"):
        acks.add("G6", 60, "two\nlines")


def test_acknowledgements_survive_a_restart_and_a_bad_entry_is_skipped(tmp_path):
    clock = Clock()
    acks = Acks(str(tmp_path), clock)
    acks.observe(snap(diag(g6()), acks, clock.t))
    acks.add("G6", 3600, "kept")
    doc = json.loads((tmp_path / "acks.json").read_text())
    doc["acks"].append({"gotcha": "G9", "severity": "warning", "subject": "x", "at": 1, "until": 2})
    (tmp_path / "acks.json").write_text(json.dumps(doc))
    again = Acks(str(tmp_path), clock)
    assert [(a.gotcha, a.note) for a in again.active()] == [("G6", "kept")]
    assert again.clear("G6") and not again.clear("G6")
    assert Acks(str(tmp_path), clock).active() == ()


def _req(method, body=b"", client="127.0.0.1", authenticated=False, query=None):
    headers = {"content-type": "application/json"} if body else {}
    return Request(method, "/api/v1/acks", query or {}, headers, body, client, authenticated)


def test_the_api_takes_changes_from_loopback_or_an_authenticated_client_only():
    acks, published = Acks(None, Clock()), []
    acks.observe(snap(diag(g6()), acks, 1000.0))
    get, post, delete = (r.handler for r in routes(acks, lambda: published.append(1)))
    body = json.dumps({"gotcha": "G6", "for_s": 3600, "note": "kept"}).encode()
    assert post(_req("POST", body, client="192.0.2.7")).status == 403
    assert published == []
    ok = post(_req("POST", body, client="192.0.2.7", authenticated=True))
    assert ok.status == 200 and json.loads(ok.body)["ack"]["note"] == "kept" and published == [1]
    assert json.loads(get(_req("GET")).body)["acks"][0]["gotcha"] == "G6"
    bad = post(_req("POST", json.dumps({"gotcha": "G3", "for_s": 60}).encode()))
    assert bad.status == 409 and "G3 is ok" in json.loads(bad.body)["error"]
    assert post(_req("POST", b"[1]")).status == 400
    assert post(_req("POST", json.dumps({"gotcha": "G6", "for_s": "8h"}).encode())).status == 400
    assert delete(_req("DELETE", client="192.0.2.7", query={"gotcha": ["G6"]})).status == 403
    assert delete(_req("DELETE", query={"gotcha": ["G6"]})).status == 200
    assert delete(_req("DELETE", query={"gotcha": ["G6"]})).status == 404


def test_an_ack_record_that_is_not_one_is_refused():
    with pytest.raises(ValueError):
        Ack.from_dict({"gotcha": "G6", "severity": "ok", "subject": "s", "at": 1, "until": 2})
