"""trace-v1 driver events: DriverEvent's JSON form and validation, what a kernel line or event is."""

from __future__ import annotations

import json

import pytest

from spark_watchd.sample.driver import DriverEvent, event_kind, kernel_line_kind
from spark_watchd.sample.model import Sample

XID_LINE = "NVRM: Xid (PCI:0000:01:00): 79, pid=1234, name=python, GPU has fallen off the bus."
NO_MEMORY = "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051)"
AER_FATAL = "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0"
AER_SEVERITY = (
    "mlx5_core 0000:01:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer"
)


def test_sample_round_trips_driver_events_and_old_traces_stay_valid():
    ev = DriverEvent(1764400000.5, 0, 79, "nvml", "Xid 79 (NVML event)")
    s = Sample(ts=1764400001.0, driver_events=(ev,))
    d = s.to_dict()
    assert d["driver_events"] == [
        {"ts": 1764400000.5, "gpu": 0, "xid": 79, "source": "nvml", "text": "Xid 79 (NVML event)"}
    ]
    assert Sample.from_dict(json.loads(json.dumps(d))) == s
    del d["driver_events"]
    assert Sample.from_dict(d).driver_events == ()


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"driver_events": {"xid": 79}}, "'driver_events' must be a list"),
        ({"driver_events": [{"ts": 1, "xid": "79", "source": "nvml"}]}, "'xid' must be an integer"),
        ({"driver_events": [{"ts": 1, "xid": 79, "source": "dmesg"}]}, "'source' must be nvml or journal"),
    ],
)
def test_malformed_driver_events_name_the_key(bad, match):
    with pytest.raises((TypeError, ValueError), match=match):
        Sample.from_dict({"v": 1, "ts": 1.0, **bad})


def test_event_round_trips_through_its_dict():
    ev = DriverEvent(12.5, None, None, "journal", NO_MEMORY)
    assert DriverEvent.from_dict(ev.to_dict()) == ev


def test_from_dict_defaults_the_source_to_journal_and_the_text_to_empty():
    ev = DriverEvent.from_dict({"ts": 3, "xid": 13, "text": None})
    assert ev == DriverEvent(3.0, None, 13, "journal", "")


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"ts": 1, "gpu": True}, "'gpu' must be an integer or null"),
        ({"ts": 1, "gpu": 0.5}, "'gpu' must be an integer or null"),
        ({"ts": 1, "xid": False}, "'xid' must be an integer or null"),
        ({"ts": 1, "source": None}, "'source' must be nvml or journal"),
    ],
)
def test_from_dict_rejects_a_wrong_field_naming_it(bad, match):
    with pytest.raises(ValueError, match=match):
        DriverEvent.from_dict(bad)


def test_from_dict_without_a_timestamp_raises_key_error():
    with pytest.raises(KeyError, match="ts"):
        DriverEvent.from_dict({"xid": 79})


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (XID_LINE, ("xid", 79)),
        ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed", ("xid", 154)),
        (NO_MEMORY, ("driver_oom", None)),
        (AER_FATAL, ("pcie_fatal", None)),
        (AER_SEVERITY, ("pcie_fatal", None)),
        ("NVRM: Xid (PCI:0000:01:00): abc", None),  # no code: not an Xid
        ("Xid (PCI:0000:01:00): 79", None),  # not from the NVIDIA driver
        ("[NV_ERR_NO_MEMORY] without the driver prefix", None),
        ("AER: Corrected error received: 0000:01:00.0", None),
        ("", None),
    ],
)
def test_kernel_line_kind_names_xids_driver_oom_and_fatal_aer_only(text, kind):
    assert kernel_line_kind(text) == kind


def test_event_kind_trusts_nvml_and_reads_a_journal_events_text_by_the_trust_rule():
    assert event_kind(DriverEvent(1.0, 0, 79, "nvml", "Xid 79 (NVML event)")) == "xid"
    assert event_kind(DriverEvent(1.0, None, 31, "journal", NO_MEMORY)) == "driver_oom"
    # A trace an older release wrote may hold a forged line recorded as Xid 79: it is no fault.
    forged = "tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.'"
    assert event_kind(DriverEvent(1.0, None, 79, "journal", forged)) == "other"


def test_event_kind_reads_the_text_when_there_is_no_xid():
    assert event_kind(DriverEvent(1.0, None, None, "journal", NO_MEMORY)) == "driver_oom"
    assert event_kind(DriverEvent(1.0, None, None, "journal", AER_FATAL)) == "pcie_fatal"
    assert event_kind(DriverEvent(1.0, None, None, "journal", "something else")) == "other"
