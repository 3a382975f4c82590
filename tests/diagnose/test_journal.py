"""The event journal (append-only, fsync per event, a torn last line survived) and the atomic state file."""

from __future__ import annotations

import json

import pytest

from spark_watchd.diagnose.journal import EventJournal, read_events, read_state, write_state_atomic
from spark_watchd.sample.findings import Event


def test_journal_tolerates_a_torn_last_line(tmp_path):
    path = tmp_path / "events.jsonl"
    j = EventJournal(path)
    j.append(Event("eviction", "G6", 1.0, "one"))
    j.close()
    with open(path, "ab") as fh:
        fh.write(b'{"kind": "oom_kill", "gotcha": "G3", "ts": 2.0, "summ')  # killed mid-write
    events, bad = read_events(path)
    assert [e.kind for e in events] == ["eviction"] and bad == 1
    j = EventJournal(path)  # appends start on a fresh line
    j.append(Event("reboot", "G4", 3.0, "three", after_throttle=False))
    j.close()
    events, bad = read_events(path)
    assert [e.kind for e in events] == ["eviction", "reboot"] and bad == 1
    assert events[1].after_throttle is False


def test_missing_journal_reads_as_no_events_and_blank_lines_are_not_errors(tmp_path):
    assert read_events(tmp_path / "none.jsonl") == ([], 0)
    path = tmp_path / "events.jsonl"
    path.write_text('\n{"kind":"eviction","gotcha":"G6","ts":1.0,"summary":"x"}\n\n[1,2]\n')
    events, bad = read_events(path)
    assert [e.kind for e in events] == ["eviction"] and bad == 1  # a JSON line that is no event is counted


def test_a_closed_journal_refuses_to_append_instead_of_losing_the_event(tmp_path):
    j = EventJournal(tmp_path / "sub" / "events.jsonl")  # the directory is made
    j.close()
    j.close()  # twice is harmless
    with pytest.raises(ValueError, match="journal is closed"):
        j.append(Event("eviction", "G6", 1.0, "lost?"))


def test_state_file_is_replaced_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "state.json"
    write_state_atomic(path, {"event_counts": {"eviction": 1}})
    write_state_atomic(path, {"event_counts": {"eviction": 2}, "boot_id": "b"})
    assert read_state(path) == {"boot_id": "b", "event_counts": {"eviction": 2}}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
    assert json.loads(path.read_text()) == read_state(path)


@pytest.mark.parametrize("content", [None, "", "{not json", "[1, 2]"])
def test_a_missing_or_unreadable_state_is_a_fresh_start(tmp_path, content):
    path = tmp_path / "state.json"
    if content is not None:
        path.write_text(content)
    assert read_state(path) is None
