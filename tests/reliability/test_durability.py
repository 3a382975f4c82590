"""Nothing lost: the state file and the event journal survive kill -9 at any moment; counters never go back."""

from __future__ import annotations

import json
import random
import shutil
import signal
import time

import pytest

from spark_watchd.diagnose.journal import read_events
from tests.conftest import FIXTURES, REPO
from tests.daemon_helpers import http_get, running_daemon, samples

SCENARIOS = REPO / "spark_watchd" / "scenarios"
COUNTED = ("eviction", "oom_kill", "reboot", "reboot_after_throttle", "throttle_start")


def _eventful_trace(path) -> str:
    """The bundled eviction then throttle scenarios back to back: an eviction, a throttle, and a new boot_id at
    each seam (a reboot), so events keep coming while the trace loops."""
    lines = (SCENARIOS / "eviction.jsonl").read_text().splitlines()
    shift = json.loads(lines[-1])["ts"] - json.loads(lines[0])["ts"] + 30
    for line in (SCENARIOS / "throttle.jsonl").read_text().splitlines():
        doc = json.loads(line)
        doc["ts"] += shift
        lines.append(json.dumps(doc))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _exported_counts(base: str) -> dict[str, float]:
    status, text = http_get(base + "/metrics")
    assert status == 200
    return {
        dict(labels)["kind"]: v
        for (name, labels), v in samples(text).items()
        if name == "sparkwatchd_events_total"
    }


def _check_state_dir(state) -> tuple[dict[str, int], int, int]:
    """state.json parses (when written); journal lines parse but for torn ones. Returns counts, events, torn."""
    counts: dict[str, int] = {}
    if (state / "state.json").exists():
        doc = json.loads((state / "state.json").read_text())  # never a torn file: written by rename
        counts = doc["event_counts"]
    journal = state / "events.jsonl"
    lines = journal.read_bytes().split(b"\n") if journal.exists() else []
    events = torn = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            json.loads(line)
            events += 1
        except ValueError:
            torn += 1
    return counts, events, torn


@pytest.mark.slow
def test_state_and_journal_survive_repeated_kill_9_and_counters_never_go_back(tmp_path):
    trace = _eventful_trace(tmp_path / "eventful.jsonl")
    state = tmp_path / "state"
    rng = random.Random(8)
    prev_counts = dict.fromkeys(COUNTED, 0)
    prev_events = 0
    torn_allowed = 0  # fragments left by kills mid-write (each start closes one off on its own line)
    for round_ in range(4):
        args = ("--replay", trace, "--speed", "6000", "--loop", "--state-dir", str(state))
        with running_daemon(*args, ready_timeout=30) as (proc, base):
            exported = _exported_counts(base)
            # A restarted daemon carries its counters on: it starts from where the last one got to.
            for kind in COUNTED:
                assert exported.get(kind, 0) >= prev_counts.get(kind, 0), (
                    round_,
                    kind,
                    exported,
                    prev_counts,
                )
            time.sleep(rng.uniform(0.3, 1.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        counts, events, torn = _check_state_dir(state)
        assert torn <= torn_allowed + 1, (round_, torn)  # at most the one this kill may have torn
        torn_allowed = torn
        for kind in COUNTED:
            assert counts.get(kind, 0) >= prev_counts.get(kind, 0), (round_, kind, counts, prev_counts)
        assert events >= prev_events  # the journal only grows
        prev_counts, prev_events = counts, events
        if round_ == 1:
            # As if the kill had landed mid-write: a torn journal line and a half-written state tmp file.
            with open(state / "events.jsonl", "ab") as fh:
                fh.write(b'{"kind":"eviction","ts":17644')
            (state / "state.json.tmp").write_bytes(b'{"version":1,"eng')
            torn_allowed += 1
    assert sum(prev_counts.values()) > 0 and prev_events > 0  # events did happen across the kills
    # The torn line was closed off by the next start and is the only line a reader skips.
    events, skipped = read_events(state / "events.jsonl")
    assert skipped == torn_allowed >= 1 and len(events) == prev_events


@pytest.mark.slow
def test_reboot_detection_carries_on_across_kill_9(tmp_path):
    host = tmp_path / "host"
    shutil.copytree(FIXTURES / "hosts" / "daemon-vm", host)
    boot_id = host / "proc" / "sys" / "kernel" / "random" / "boot_id"
    env = {
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(host / "proc"),
        "SPARK_WATCHD_SOURCES__FAST_WATCH_INTERVAL_S": "0",
    }
    state = tmp_path / "state"
    args = ("--interval", "1", "--state-dir", str(state))

    def run_once() -> dict[str, float]:
        with running_daemon(*args, env=env) as (proc, base):
            counts = _exported_counts(base)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        return counts

    assert run_once().get("reboot", 0) == 0
    assert run_once().get("reboot", 0) == 0  # same boot: a crash and restart is not a reboot
    boot_id.write_text("0b7a3c55-1d2e-4f60-9a8b-7c6d5e4f3a21\n")
    after = run_once()  # new boot_id: the killed daemon's saved boot is compared with this one
    assert after.get("reboot", 0) == 1  # counted once (the restart also carried the count on)
    events, _ = read_events(state / "events.jsonl")
    assert [e.kind for e in events].count("reboot") == 1
