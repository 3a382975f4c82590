"""Kernel log text into driver events: journald JSON excerpts, single messages, journalctl's failures."""

from __future__ import annotations

import json

import pytest

from spark_watchd.sample.driver import DriverEvent, event_kind, kernel_line_kind
from spark_watchd.sources.driverlog import (
    MAX_EVENTS_PER_READ,
    event_from_message,
    journal_problem,
    message_text,
    parse_journal_json,
)
from tests.conftest import FIXTURES

JOURNAL = FIXTURES / "journal"
XID_31 = "NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=x"


def _lines(name: str) -> list[str]:
    return (JOURNAL / name).read_text().splitlines()


def _entry(message, ts: str = "1764400000250000") -> str:
    return json.dumps({"__REALTIME_TIMESTAMP": ts, "MESSAGE": message})


def test_previous_boot_excerpt_yields_xids_no_memory_and_nothing_else():
    events = parse_journal_json(_lines("previous-boot-xid79.jsonl"))
    kinds = [(event_kind(e), e.xid) for e in events]
    assert kinds == [("xid", 13), ("xid", 13), ("xid", 43), ("driver_oom", None), ("xid", 79)]
    last = events[-1]
    assert last.source == "journal" and last.gpu is None
    assert last.ts == pytest.approx(1764410800.5) and "fallen off the bus" in last.text


def test_wedge_excerpt_reads_no_memory_and_fatal_aer_but_not_corrected_aer_or_bad_lines():
    events = parse_journal_json(_lines("previous-boot-nomem-wedge.jsonl"))
    assert [event_kind(e) for e in events] == ["driver_oom", "driver_oom", "pcie_fatal", "pcie_fatal"]
    corrected = (
        "mlx5_core 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"
    )
    assert kernel_line_kind(corrected) is None
    assert kernel_line_kind("NVRM: GPU 000f:01:00.0: GPU has fallen off the bus.") is None


def test_parse_keeps_only_the_latest_events_of_a_fault_storm():
    line = json.dumps(
        {"__REALTIME_TIMESTAMP": "1", "MESSAGE": "NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=x"}
    )
    assert len(parse_journal_json([line] * 500, limit=50)) == 50


def test_journal_problem_names_the_missing_group_and_journalctl_failures():
    hint = "Hint: You are currently not seeing messages from other users and the system.\n"
    assert "systemd-journal" in journal_problem(0, hint, events_seen=False)
    assert journal_problem(0, hint, events_seen=True) is None
    assert journal_problem(
        1, "Specifying boot ID or boot offset has no effect, no persistent journal was found.\n", False
    ).startswith("journalctl exited 1: Specifying")


def test_parse_with_no_limit_argument_keeps_the_default_number_of_latest_events():
    lines = [_entry(XID_31, ts=str(i * 1_000_000)) for i in range(MAX_EVENTS_PER_READ + 30)]
    events = parse_journal_json(lines)
    assert len(events) == MAX_EVENTS_PER_READ
    assert events[0].ts == 30.0 and events[-1].ts == float(MAX_EVENTS_PER_READ + 29)


def test_parse_reads_the_realtime_timestamp_in_microseconds():
    (ev,) = parse_journal_json([_entry(XID_31)])
    assert ev.ts == pytest.approx(1764400000.25) and ev.xid == 31


@pytest.mark.parametrize(
    "line",
    [
        "not json NVRM",
        '{"MESSAGE": "NVRM: Xid (PCI:0000:01:00): 31, x"}',  # no timestamp
        '{"__REALTIME_TIMESTAMP": "soon", "MESSAGE": "NVRM: Xid (PCI:0000:01:00): 31, x"}',
        '{"__REALTIME_TIMESTAMP": "1", "MESSAGE": "NVRM: Xid (PCI:0000:01:00): 31, x"',  # truncated
        '{"__REALTIME_TIMESTAMP": "1", "MESSAGE": 31, "NVRM": 1}',  # MESSAGE of the wrong type
        '["NVRM: Xid (PCI:0000:01:00): 31"]',
        "",
    ],
)
def test_a_bad_line_is_skipped_and_the_good_lines_around_it_are_kept(line):
    events = parse_journal_json([_entry(XID_31), line, _entry(XID_31)])
    assert [e.xid for e in events] == [31, 31]


def test_a_byte_list_message_from_a_non_utf8_line_is_decoded_and_read():
    raw = list(b"NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus \xff")
    (ev,) = parse_journal_json([_entry(raw)])
    assert ev.xid == 79 and ev.text.endswith("\ufffd")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        ([104, 105], "hi"),
        ([0xFF], "\ufffd"),
        ([], ""),
        ([256], None),
        ([-1], None),
        (["a"], None),
        (None, None),
        (42, None),
    ],
)
def test_message_text_accepts_strings_and_byte_lists_only(value, text):
    assert message_text(value) == text


def test_event_from_message_strips_and_caps_the_text_and_keeps_the_source():
    ev = event_from_message(5.0, "  NVRM: Xid (PCI:0000:01:00): 13, " + "x" * 1000 + "\n", source="nvml")
    assert ev is not None and ev.xid == 13 and ev.source == "nvml" and ev.gpu is None and ev.ts == 5.0
    assert ev.text.startswith("NVRM: Xid") and len(ev.text) == 500


def test_event_from_message_of_a_non_driver_line_is_none():
    assert event_from_message(1.0, "usb 1-1: new high-speed USB device") is None


def test_event_from_message_of_a_no_memory_line_has_no_xid():
    ev = event_from_message(1.0, "NVRM: alloc failed [NV_ERR_NO_MEMORY] (0x51)")
    assert ev == DriverEvent(1.0, None, None, "journal", "NVRM: alloc failed [NV_ERR_NO_MEMORY] (0x51)")
    assert event_kind(ev) == "driver_oom" and kernel_line_kind(ev.text) == ("driver_oom", None)


def test_journal_problem_is_none_when_journalctl_answered_cleanly():
    assert journal_problem(0, "", events_seen=False) is None


def test_journal_problem_without_stderr_says_no_message():
    assert journal_problem(3, "\n  \n", events_seen=False) == "journalctl exited 3: no message"


def test_journal_problem_quotes_the_first_non_blank_stderr_line_only():
    got = journal_problem(1, "\n  first problem  \nsecond\n", events_seen=True)
    assert got == "journalctl exited 1: first problem"
