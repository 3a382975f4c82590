"""The embedded webhook notifier, posting to a real HTTP server on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
from pydantic import ValidationError

from spark_watchd.notify.notifier import Notifier, TransitionTracker, build_notifier
from spark_watchd.notify.settings import NotifySettings
from spark_watchd.sample.findings import Diagnosis, Event, Finding
from spark_watchd.sample.model import Sample
from spark_watchd.snapshot import Snapshot
from tests.conftest import REPO, cli_env, free_port
from tests.support.fakes import CaptureServer, Recorded, Reply


class Hook(CaptureServer):
    """A webhook receiver: records posts, answers with scripted status codes, can hold requests."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.gate = threading.Event()
        self.gate.set()
        super().__init__(self._answer)
        self.url += "/hook"

    def _answer(self, req: Recorded) -> Reply:
        self.gate.wait(30)
        return Reply(self.statuses.pop(0) if self.statuses else 200)

    @property
    def posts(self) -> list[dict]:
        return [{"status": r.status, "headers": r.headers, "body": r.body} for r in self.requests]

    def ok_posts(self) -> list[dict]:
        return [p for p in self.posts if p["status"] < 300]

    def close(self):
        self.gate.set()
        super().close()


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.close()


def snap(ts: float, g3="ok", g4="ok", g6="ok", events=()) -> Snapshot:
    findings = {
        g: Finding(g, sev, f"{g} is {sev}", advice=(f"advice for {g}",) if sev != "ok" else ())
        for g, sev in (("G3", g3), ("G4", g4), ("G6", g6))
    }
    return Snapshot(sample=Sample(ts=ts, host="spark-01"), diagnosis=Diagnosis(ts, findings, tuple(events)))


def settings(url: str, **kw) -> NotifySettings:
    base = {"url": url, "min_interval_s": 0, "backoff_s": 0.05, "timeout_s": 5}
    return NotifySettings(**{**base, **kw})


def test_transitions_up_and_back_are_posted_as_json_in_order(hook):
    n = Notifier(settings(hook.url))
    for i, g4 in enumerate(["ok", "warning", "warning", "critical", "ok"]):
        n(snap(100 + i, g4=g4))
    assert n.close(10)
    bodies = [json.loads(p["body"]) for p in hook.posts]
    assert [(b["gotcha"], b["previous"], b["severity"]) for b in bodies] == [
        ("G4", "ok", "warning"),
        ("G4", "warning", "critical"),
        ("G4", "critical", "ok"),
    ]
    assert bodies[1]["host"] == "spark-01" and bodies[1]["advice"] == ["advice for G4"]
    assert hook.posts[0]["headers"]["Content-Type"] == "application/json"


def test_ntfy_preset_posts_plain_text_with_title_priority_tags_and_token(hook):
    n = Notifier(settings(hook.url, preset="ntfy", token="tk_secret"))
    n(snap(1, g6="critical"))
    assert n.close(10)
    (post,) = hook.posts
    h = post["headers"]
    assert post["body"].decode().startswith("G6 is critical\n- advice for G6")
    assert h["Title"] == "spark-watchd: G6 critical on spark-01"
    assert h["Priority"] == "urgent" and h["Tags"] == "rotating_light,G6"
    assert h["Authorization"] == "Bearer tk_secret"
    assert h["Content-Type"].startswith("text/plain")


def test_slack_preset_posts_a_text_object(hook):
    n = Notifier(settings(hook.url, preset="slack", headers={"X-Extra": "1"}))
    n(snap(1, g3="warning"))
    assert n.close(10)
    (post,) = hook.posts
    assert set(json.loads(post["body"])) == {"text"}
    assert "*spark-watchd: G3 warning on spark-01*" in json.loads(post["body"])["text"]
    assert post["headers"]["X-Extra"] == "1"


def test_events_are_posted_and_reboot_after_throttle_is_critical(hook):
    n = Notifier(settings(hook.url))
    ev = Event("eviction", "G6", 5.0, "trainer lost 9 GiB RSS")
    boot = Event("reboot", "G4", 6.0, "new boot id", after_throttle=True)
    n(snap(5, events=[ev]))
    n(snap(6, events=[boot, Event("throttle_end", "G4", 6.0, "cooler")]))
    assert n.close(10)
    bodies = [json.loads(p["body"]) for p in hook.posts]
    assert [(b["kind"], b["event"], b["severity"]) for b in bodies] == [
        ("event", "eviction", "critical"),
        ("event", "reboot after throttle", "critical"),
    ]


def test_failing_webhook_is_retried_until_it_accepts():
    hook = Hook(statuses=[500, 503])
    try:
        n = Notifier(settings(hook.url, retries=3))
        n(snap(1, g4="critical"))
        assert n.close(10)
        assert [p["status"] for p in hook.posts] == [500, 503, 200]
        assert n.stats["retried"] == 2 and n.stats["sent"] == 1 and n.stats["failed"] == 0
    finally:
        hook.close()


def test_client_errors_are_not_retried():
    hook = Hook(statuses=[403])
    try:
        n = Notifier(settings(hook.url, retries=3))
        n(snap(1, g4="critical"))
        n.close(10)
        assert len(hook.posts) == 1 and n.stats["failed"] == 1
    finally:
        hook.close()


def test_a_hung_webhook_never_blocks_the_subscriber(hook):
    hook.gate.clear()  # the receiver holds every request until released
    n = Notifier(settings(hook.url, queue_size=4, timeout_s=30))
    n(snap(0, g4="critical"))
    calls = threading.Thread(target=lambda: [n(snap(i, g3=("warning", "ok")[i % 2])) for i in range(1, 200)])
    calls.start()
    calls.join(20)
    # All 199 subscriber calls returned while the first post is provably still held by the server.
    assert not calls.is_alive()
    assert hook.posts == [] and not hook.gate.is_set()
    assert n.stats["dropped"] > 0  # bounded queue: the oldest went
    assert n.close(0.3) is False  # close gives up at its deadline instead of hanging
    hook.gate.set()


def test_min_interval_holds_and_coalesces_repeats_but_not_escalations(hook):
    n = Notifier(settings(hook.url, min_interval_s=3600))
    n(snap(1, g3="warning"))  # posted: first word on G3
    n(snap(2, g3="ok"))  # held by the interval...
    n(snap(3, g3="warning"))  # ...and cancelled: the user last heard "warning"
    n(snap(4, g3="critical"))  # an escalation to critical goes out at once
    hook.wait_for(2)
    assert [json.loads(p["body"])["severity"] for p in hook.posts] == ["warning", "critical"]
    n(snap(5, g3="warning"))  # held: de-escalation inside the interval
    n(snap(6, g3="ok"))
    assert n.pending() >= 1 or len(hook.posts) == 2
    assert n.close(10)  # close lifts the limit: the last state is delivered, coalesced
    last = json.loads(hook.posts[-1]["body"])
    assert len(hook.posts) == 3 and (last["previous"], last["severity"]) == ("critical", "ok")


def test_burst_cap_limits_posts_across_gotchas(hook):
    n = Notifier(settings(hook.url, burst=2, burst_window_s=3600))
    n(snap(1, g3="warning", g4="warning", g6="warning"))
    hook.wait_for(2)
    with hook.arrived:
        hook.arrived.wait_for(lambda: n.pending() == 1 and len(hook.posts) == 2, 5)
    assert len(hook.posts) == 2 and n.pending() == 1
    assert n.close(10)
    assert sorted(json.loads(p["body"])["gotcha"] for p in hook.posts) == ["G3", "G4", "G6"]


def test_tracker_respects_min_severity_unknown_and_repeated_diagnoses():
    t = TransitionTracker(NotifySettings(url="http://x", min_severity="critical"))
    assert t.observe(snap(1, g4="warning")) == []  # below the floor
    assert t.observe(snap(2, g4="unknown")) == []  # no data is not a recovery
    (up,) = t.observe(snap(3, g4="critical"))
    assert (up.previous, up.severity) == ("warning", "critical")
    assert t.observe(snap(3, g4="ok")) == []  # same diagnosis published twice
    (down,) = t.observe(snap(4, g4="warning"))
    assert (down.previous, down.severity) == ("critical", "warning")


def test_settings_validate_and_disable_without_url():
    assert build_notifier(NotifySettings()) is None
    with pytest.raises(ValidationError, match="http"):
        NotifySettings(url="ftp://x")
    with pytest.raises(ValidationError):
        NotifySettings(url="http://x", preset="teams")


@pytest.mark.slow
def test_the_daemon_posts_a_replayed_throttle_to_the_configured_webhook(hook, tmp_path):
    env = cli_env({"SPARK_WATCHD_NOTIFY__URL": hook.url, "SPARK_WATCHD_NOTIFY__MIN_INTERVAL_S": "0"})
    trace = REPO / "spark_watchd" / "scenarios" / "throttle.jsonl"
    args = ["run", "--replay", str(trace), "--speed", "600", "--listen", f"127.0.0.1:{free_port()}"]
    with subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", *args, "--state-dir", str(tmp_path)],
        env=env,
        cwd=str(REPO),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            with hook.arrived:
                hook.arrived.wait_for(
                    lambda: any(json.loads(p["body"])["severity"] == "critical" for p in hook.posts), 60
                )
        finally:
            proc.terminate()
            err = proc.communicate(timeout=30)[1]
    bodies = [json.loads(p["body"]) for p in hook.posts]
    g4 = [(b["previous"], b["severity"]) for b in bodies if b["gotcha"] == "G4" and b["kind"] == "finding"]
    assert ("warning", "critical") in g4 or ("ok", "critical") in g4, (bodies, err[-2000:])
    assert all(b["host"] == "spark-01" for b in bodies)


def test_an_unreachable_webhook_is_retried_then_given_up_without_stopping_the_worker():
    dead = f"http://127.0.0.1:{free_port()}/nothing-listens"
    n = Notifier(settings(dead, retries=2))
    n(snap(1, g4="critical"))
    n(snap(2, g4="ok"))
    assert n.close(10)
    assert n.stats["failed"] == 2 and n.stats["retried"] == 4 and n.stats["sent"] == 0


@pytest.mark.parametrize(
    ("kind", "details", "severity"),
    [
        ("xid", {"xid": 79, "fatal": True}, "critical"),
        ("xid", {"xid": 13, "fatal": False}, "warning"),
        ("xid", {"xid": 79, "fatal": True, "previous_boot": True}, "warning"),
        ("driver_oom", {}, "warning"),
        ("pcie_fatal", {}, "critical"),
        ("throttle_end", {}, None),
        ("engine_stall", {"thin": True}, "critical"),  # the last sign before a wedge
        ("engine_stall", {"thin": False}, "warning"),
    ],
)
def test_driver_fault_events_page_when_fatal_this_boot_and_inform_about_the_previous_one(
    kind, details, severity
):
    from spark_watchd.notify.notifier import event_severity
    from spark_watchd.sample.findings import Event

    assert event_severity(Event(kind, "driver", 1.0, "s", details=details)) == severity
