"""Kernel log text into driver events: journald JSON excerpts, single messages, journalctl's failures."""

from __future__ import annotations

import json

import pytest

from spark_watchd.sample.driver import DriverEvent, event_kind, kernel_line_kind
from spark_watchd.sources.driverlog import (
    MAX_EVENTS_PER_READ,
    StormFolder,
    driver_event,
    journal_problem,
    message_text,
    parse_journal_json,
    read_journal,
)
from tests.conftest import FIXTURES

JOURNAL = FIXTURES / "journal"
XID_31 = "NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=x"


def _lines(name: str) -> list[str]:
    return (JOURNAL / name).read_text().splitlines()


KERNEL = {"_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0", "SYSLOG_IDENTIFIER": "kernel"}


def _entry(message, ts: str = "1764400000250000", **fields) -> str:
    return json.dumps({"__REALTIME_TIMESTAMP": ts, **KERNEL, "MESSAGE": message, **fields})


def test_previous_boot_excerpt_yields_xids_no_memory_and_nothing_else():
    events = parse_journal_json(_lines("previous-boot-xid79.jsonl"))
    kinds = [(event_kind(e), e.xid, e.count) for e in events]
    # The two Xid 13 lines of one exception fold into one event with a count; so do the Xid 79 line and
    # the "GPU has fallen off the bus" line of the same GPU right after it.
    assert kinds == [("xid", 13, 2), ("xid", 43, 1), ("driver_oom", None, 1), ("xid", 79, 2)]
    last = events[-1]
    assert last.source == "journal" and last.gpu is None and last.pci == "000f:01:00.0"
    assert last.ts == pytest.approx(1764410800.5) and "fallen off the bus" in last.text


def test_wedge_excerpt_reads_no_memory_and_fatal_aer_but_not_corrected_aer_or_bad_lines():
    events = parse_journal_json(_lines("previous-boot-nomem-wedge.jsonl"))
    assert [event_kind(e) for e in events] == ["driver_oom", "driver_oom", "pcie_fatal", "pcie_fatal"]
    corrected = (
        "mlx5_core 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"
    )
    assert kernel_line_kind(corrected) is None
    assert kernel_line_kind("NVRM: GPU 000f:01:00.0: GPU has fallen off the bus.") == ("xid", 79)


def test_parse_keeps_only_the_latest_events_of_a_fault_storm():
    lines = [_entry(XID_31, ts=str(i * 120_000_000)) for i in range(500)]  # one every 2 min: no storm
    assert len(parse_journal_json(lines, limit=50)) == 50


def test_journal_problem_names_the_missing_group_and_journalctl_failures():
    hint = "Hint: You are currently not seeing messages from other users and the system.\n"
    assert "systemd-journal" in journal_problem(0, hint, events_seen=False)
    assert journal_problem(0, hint, events_seen=True) is None
    assert journal_problem(
        1, "Specifying boot ID or boot offset has no effect, no persistent journal was found.\n", False
    ).startswith("journalctl exited 1: Specifying")


def test_parse_with_no_limit_argument_keeps_the_default_number_of_latest_events():
    lines = [_entry(XID_31, ts=str(i * 120_000_000)) for i in range(MAX_EVENTS_PER_READ + 30)]
    events = parse_journal_json(lines)
    assert len(events) == MAX_EVENTS_PER_READ
    assert events[0].ts == 30 * 120.0 and events[-1].ts == float(MAX_EVENTS_PER_READ + 29) * 120.0


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
        # issue 18: each of these ended the live follower thread
        _entry(XID_31, ts="9" * 400),  # a 400-digit timestamp (float overflow)
        _entry("NVRM: Xid (PCI:0000:01:00): " + "7" * 5000 + ", x"),  # a 5,000-digit code
        '{"__REALTIME_TIMESTAMP": "1", "MESSAGE": "NVRM", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "NVRM " + "x" * 70_000,  # over the line cap
    ],
)
def test_a_bad_line_is_skipped_counted_and_the_good_lines_around_it_are_kept(line):
    got = read_journal([_entry(XID_31, ts="1000000"), line, _entry(XID_31, ts="900000000")])
    assert [e.xid for e in got.records["driver_events"]] == [31, 31]
    assert got.rejected == (0 if "7" * 5000 in line else 1)


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


def test_driver_event_strips_and_caps_the_text_and_keeps_the_pci_address():
    ev = driver_event(5.0, "  NVRM: Xid (PCI:0000:01:00): 13, " + "x" * 1000 + "\n", {})
    assert ev is not None and ev.xid == 13 and ev.source == "journal" and ev.gpu is None and ev.ts == 5.0
    assert ev.text.startswith("NVRM: Xid") and len(ev.text) == 500 and ev.pci == "0000:01:00.0"


def test_driver_event_of_a_non_driver_line_is_none():
    assert driver_event(1.0, "usb 1-1: new high-speed USB device", {}) is None


def test_driver_event_of_a_no_memory_line_has_no_xid():
    ev = driver_event(1.0, "NVRM: alloc failed [NV_ERR_NO_MEMORY] (0x51)", {})
    assert ev == DriverEvent(1.0, None, None, "journal", "NVRM: alloc failed [NV_ERR_NO_MEMORY] (0x51)")
    assert event_kind(ev) == "driver_oom" and kernel_line_kind(ev.text) == ("driver_oom", None)


def test_journal_problem_is_none_when_journalctl_answered_cleanly():
    assert journal_problem(0, "", events_seen=False) is None


def test_journal_problem_without_stderr_says_no_message():
    assert journal_problem(3, "\n  \n", events_seen=False) == "journalctl exited 3: no message"


def test_journal_problem_quotes_the_first_non_blank_stderr_line_only():
    got = journal_problem(1, "\n  first problem  \nsecond\n", events_seen=True)
    assert got == "journalctl exited 1: first problem"


# ---- issue 18: only the kernel speaks for the driver ----------------------------------------------------
FORGED = [
    # An unprivileged user's tmpfs mount option, echoed by the kernel inside its own message.
    "tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.'",
    "tmpfs: Unknown parameter 'x NVRM: nvCheckOkFailedNoLog: Out of memory [NV_ERR_NO_MEMORY] (0x51)'",
    "tmpfs: Unknown parameter 'pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received'",
    "tmpfs: Unknown parameter 'mlx5_core 0000:01:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=x'",
    # A message whose own first line is not the driver's, with driver text on the next line.
    "tmpfs: Unknown parameter 'a\nNVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.'",
    "EXT4-fs (loop0): mounted; NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.",
    # A process report the kernel starts with the process's name (any user sets it: prctl PR_SET_NAME, 15
    # characters), here a process named "NVRM: x" whose binary is named after the driver's words.
    "NVRM: x[4242]: unhandled exception: DABT (lower EL), ESR 0x92000006, in fallen off the bus[aaaa+1000]",
    "NVRM: x[4242]: segfault at 0 ip 0 sp 0 error 4 in [NV_ERR_NO_MEMORY] (0x51)[55d0+1000]",
    "NVRM: Xid (PCI:[4242]: unhandled exception: in 0000:01:00): 79, GPU has fallen off the bus.",
    # "fallen off the bus" only in the driver's own wordings, not anywhere in an NVRM line.
    "NVRM: loading module: fallen off the bus",
]


@pytest.mark.parametrize("text", FORGED)
def test_driver_text_inside_another_kernel_message_never_counts(text):
    assert kernel_line_kind(text) is None
    assert parse_journal_json([_entry(text)]) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"_TRANSPORT": "syslog"},  # logger(1) or any syslog client
        {
            "_TRANSPORT": "journal",
            "SYSLOG_IDENTIFIER": "kernel",
        },  # a journal client claiming to be the kernel
        {"_TRANSPORT": "stdout"},
        {"SYSLOG_FACILITY": "1", "SYSLOG_IDENTIFIER": "evil"},  # a user space write to /dev/kmsg
        {"SYSLOG_IDENTIFIER": "python3"},
        {"_TRANSPORT": None},
    ],
)
def test_a_driver_line_that_did_not_come_from_the_kernel_never_counts(fields):
    line = json.dumps({"__REALTIME_TIMESTAMP": "1", **KERNEL, "MESSAGE": XID_31, **fields})
    got = read_journal([line])
    assert got.records["driver_events"] == [] and got.untrusted == 1 and got.rejected == 0


BUS_LOSS = [
    ("NVRM: GPU 0000:29:00.0: GPU has fallen off the bus.", "0000:29:00.0"),
    ("NVRM: GPU 18:00.0: GPU has fallen off the bus.", "0000:18:00.0"),
    (
        "NVRM: The NVIDIA GPU 0000:18:00.0 (PCI ID: 10de:1db6)\nNVRM: installed in this system has\n"
        "NVRM: fallen off the bus and is not responding to commands.",
        "0000:18:00.0",
    ),
    (
        "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "0000:18:00.0",
    ),
]


@pytest.mark.parametrize(("text", "pci"), BUS_LOSS)
def test_every_wording_of_a_gpu_off_the_bus_is_xid_79_with_its_pci_address(text, pci):
    (ev,) = parse_journal_json([_entry(text)])
    assert (ev.xid, ev.pci, event_kind(ev)) == (79, pci, "xid")


def test_a_probe_time_bus_loss_split_over_entries_is_one_xid_79_on_its_gpu():
    # The probe routine's report with no Xid at all, as separate journal entries (NVSentinel issue #155).
    lines = [
        _entry("NVRM: The NVIDIA GPU 0000:b3:00.0", ts="1843308145"),
        _entry("NVRM: (PCI ID: 10de:26b5) installed in this system has", ts="1843308146"),
        _entry("NVRM: fallen off the bus and is not responding to commands.", ts="1843308147"),
        _entry("NVRM: The NVIDIA probe routine failed for 1 device(s).", ts="1843439662"),
    ]
    (ev,) = parse_journal_json(lines)
    assert (ev.xid, ev.pci) == (79, "0000:b3:00.0")


PEERS = json.loads((JOURNAL / "peer-lines.json").read_text())["lines"]


@pytest.mark.parametrize("case", PEERS, ids=lambda c: c["text"][:60])
def test_peers_and_owners_real_lines_parse_to_the_same_codes_and_pci_ids(case):
    events = parse_journal_json([_entry(case["text"])])
    if case["kind"] is None:
        assert events == [], case["from"]
    else:
        (ev,) = events
        assert (event_kind(ev), ev.xid, ev.pci) == (case["kind"], case["xid"], case["pci"]), case["from"]


def test_a_storm_is_one_event_with_a_count_and_a_bounded_number_of_events():
    # Issue 18: 2,000 lines in 8 s became 2,000 journal entries.
    lines = [_entry(XID_31, ts=str(1_764_400_000_000_000 + i * 4000)) for i in range(2000)]
    (ev,) = parse_journal_json(lines)
    assert ev.count == 2000 and ev.ts == pytest.approx(1764400007.996) and ev.text == XID_31
    folder = StormFolder(60.0)
    ev = DriverEvent(100.0, 0, 13, "nvml", "Xid 13 (NVML event)")
    assert folder.add(ev) is ev and folder.add(DriverEvent(101.0, 0, 13, "nvml", "x")) is None
    assert folder.folding_started and folder.flush(120.0) == []
    (summary,) = folder.flush(161.0)
    assert (summary.count, summary.ts) == (1, 101.0) and folder.flush(500.0) == []
    other_gpu = DriverEvent(102.0, 1, 13, "nvml", "x")
    assert folder.add(other_gpu) is other_gpu  # per GPU and code
