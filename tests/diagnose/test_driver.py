"""DriverTracker and its helpers: which boot a fault belongs to, its event, the reboot cause, G3 and G4 additions."""

from __future__ import annotations

import dataclasses

import pytest

from spark_watchd.diagnose.driver import ADVICE_DRIVER_OOM, DriverTracker, fault_text, previous_boot
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sample.findings import Finding
from spark_watchd.sample.model import Sample

TH = Thresholds()
BOOT = 10_000.0  # the sample's boot started here
NO_MEMORY = "NVRM: alloc failed [NV_ERR_NO_MEMORY] (0x51)"
AER_FATAL = "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received"


def _at(ts: float, *events: DriverEvent, boot: float = BOOT) -> Sample:
    return Sample(ts=ts, uptime_s=ts - boot, driver_events=tuple(events))


def _xid(ts: float, code: int, source: str = "journal", gpu: int | None = None) -> DriverEvent:
    return DriverEvent(ts, gpu, code, source, f"NVRM: Xid (PCI:0000:01:00): {code}, pid=1")


def _oom(ts: float) -> DriverEvent:
    return DriverEvent(ts, None, None, "journal", NO_MEMORY)


def _aer(ts: float) -> DriverEvent:
    return DriverEvent(ts, None, None, "journal", AER_FATAL)


G3_OK = Finding("G3", "ok", "memory fine", {"mem_available_kb": 1}, ("keep going",))
HUNG = Finding("G4", "warning", "engine busy at idle power", {"util": 100}, (), anomaly="hung_engine")


@pytest.mark.parametrize(
    ("ev", "prev"),
    [
        (_xid(BOOT - 5, 79), True),
        (_xid(BOOT - 0.5, 79), False),  # inside the second the clocks may disagree by
        (_xid(BOOT + 5, 79), False),
        (_xid(BOOT - 5, 79, source="nvml"), False),  # NVML only reports this boot
    ],
)
def test_previous_boot_is_a_journal_event_older_than_the_boot(ev, prev):
    assert previous_boot(ev, _at(BOOT + 100)) is prev


def test_without_uptime_no_event_is_taken_for_the_previous_boot():
    assert not previous_boot(_xid(1.0, 79), Sample(ts=BOOT))


@pytest.mark.parametrize(
    ("ev", "words"),
    [
        (_xid(1, 79), "Xid 79 (GPU fell off the bus)"),
        (_xid(1, 13), None),  # an application's fault does not end a boot
        (_oom(1), "the GPU driver out of memory (NV_ERR_NO_MEMORY)"),
        (_aer(1), "a PCIe AER fatal error"),
        (DriverEvent(1, None, None, "journal", "something else"), None),
    ],
)
def test_fault_text_names_only_faults_that_can_end_a_boot(ev, words):
    assert fault_text(ev) == words


def test_a_live_xid_becomes_an_event_with_gpu_meaning_and_next_step():
    (e,) = DriverTracker(TH).update(_at(BOOT + 100, _xid(BOOT + 90, 79, source="nvml", gpu=0)))
    assert (e.kind, e.gotcha, e.ts) == ("xid", "driver", BOOT + 90)
    assert e.summary.startswith("Xid 79 on GPU 0: GPU fell off the bus (fatal).")
    assert e.details["fatal"] is True and e.details["gpu"] == 0 and "previous_boot" not in e.details


def test_a_previous_boot_fault_is_reported_as_such_but_not_remembered():
    t = DriverTracker(TH)
    events = t.update(_at(BOOT + 100, _xid(BOOT - 50, 43), _oom(BOOT - 40)))
    assert [e.kind for e in events] == ["xid", "driver_oom"]
    assert all(e.summary.startswith("Previous boot: ") and e.details["previous_boot"] for e in events)
    assert not t.recent and t.last_oom_ts is None and t.last_fault is None


def test_oom_and_aer_events_carry_their_gotcha_and_lines_of_no_kind_are_dropped():
    other = DriverEvent(BOOT + 3, None, None, "journal", "usb 1-1: reset")
    events = DriverTracker(TH).update(_at(BOOT + 100, _oom(BOOT + 1), _aer(BOOT + 2), other))
    assert [(e.kind, e.gotcha) for e in events] == [("driver_oom", "G3"), ("pcie_fatal", "driver")]
    assert "ConnectX-7" in events[1].summary


def test_reboot_cause_prefers_the_journal_line_of_the_previous_boot():
    t = DriverTracker(TH)
    t.update(_at(BOOT - 200, _oom(BOOT - 300), boot=0.0))  # seen live in the old boot
    assert t.last_fault is not None
    cause = t.reboot_cause(_at(BOOT + 10, _xid(BOOT - 60, 13), _xid(BOOT - 30, 79)), last_ts=BOOT - 250)
    assert cause == "the previous boot ended with Xid 79 (GPU fell off the bus), 30 s before this boot began"


def test_reboot_cause_falls_back_to_the_last_live_fault_within_the_window():
    t = DriverTracker(TH)
    t.update(_at(BOOT - 200, _aer(BOOT - 300), boot=0.0))
    cause = t.reboot_cause(_at(BOOT + 10), last_ts=BOOT - 250)
    assert cause == (
        "the previous boot ended with a PCIe AER fatal error, 50 s before the last sample before the gap"
    )
    too_late = BOOT - 300 + TH.driver_fault_reboot_window_s + 1
    assert t.reboot_cause(_at(too_late + 100), last_ts=too_late) is None
    assert t.reboot_cause(_at(BOOT + 10)) is None  # no sample before the reboot: nothing measured


def test_a_wedge_seen_live_is_the_cause_after_a_long_outage():
    # Issue 18: NV_ERR_NO_MEMORY 20 s before the host froze, power-cycled 6 h later: the window ends at the
    # last sample before the gap, not at the first sample after the reboot.
    t = DriverTracker(TH)
    t.update(_at(BOOT - 21_600, _oom(BOOT - 21_620), boot=BOOT - 40_000))
    cause = t.reboot_cause(_at(BOOT + 60), last_ts=BOOT - 21_600)
    assert cause == (
        "the previous boot ended with the GPU driver out of memory (NV_ERR_NO_MEMORY), 20 s before the last "
        "sample before the gap"
    )


def test_a_stale_previous_boot_line_is_not_the_cause_of_a_planned_reboot():
    # Issue 18: a benign NV_ERR_NO_MEMORY 6 h before a `sudo reboot` was named as the reboot's cause.
    end = BOOT - 30  # the previous boot's last journal entry (its shutdown)
    stale = dataclasses.replace(_oom(end - 6 * 3600), boot_end_ts=end)
    assert DriverTracker(TH).reboot_cause(_at(BOOT + 10, stale)) is None
    fresh = dataclasses.replace(_oom(end - 20), boot_end_ts=end)
    assert DriverTracker(TH).reboot_cause(_at(BOOT + 10, stale, fresh)) == (
        "the previous boot ended with the GPU driver out of memory (NV_ERR_NO_MEMORY), 20 s before its last "
        "journal entry"
    )
    # Without boot_end_ts (an older trace) the window ends at this boot's start.
    assert DriverTracker(TH).reboot_cause(_at(BOOT + 10, _oom(BOOT - 6 * 3600))) is None


def test_a_lost_gpu_is_the_cause_however_long_before_the_end():
    end = BOOT - 30
    old = dataclasses.replace(_xid(end - 6 * 3600, 79), boot_end_ts=end)
    assert DriverTracker(TH).reboot_cause(_at(BOOT + 10, old)).endswith("6.0 h before its last journal entry")


def test_a_live_fatal_xid_is_the_reboot_cause_however_long_ago():
    t = DriverTracker(TH)
    t.update(_at(BOOT + 1, _xid(BOOT + 1, 79, source="nvml")))
    late = BOOT + 10 * TH.driver_fault_reboot_window_s
    assert "Xid 79" in t.reboot_cause(Sample(ts=late + 60), last_ts=late)


def test_reboot_forgets_this_boots_faults():
    t = DriverTracker(TH)
    t.update(_at(BOOT + 10, _xid(BOOT + 5, 43), _oom(BOOT + 6)))
    t.reboot()
    assert t.reboot_cause(_at(BOOT + 20)) is None
    assert t.g3(G3_OK, BOOT + 20) is G3_OK and t.g4(HUNG, BOOT + 20) is HUNG


def test_no_memory_line_is_g3_evidence_never_a_severity_of_its_own():
    # Issue 18: healthy vLLM starts log NV_ERR_NO_MEMORY with memory to spare; G3 went critical on the keyword.
    t = DriverTracker(TH)
    t.update(_at(BOOT + 100, _oom(BOOT + 100)))
    noted = t.g3(G3_OK, BOOT + 160)
    assert noted.severity == "ok" and noted.advice == G3_OK.advice
    assert noted.summary == (
        "memory fine; NV_ERR_NO_MEMORY logged 60 s ago without exhaustion signals (recorded, not paged)"
    )
    assert noted.evidence == {"mem_available_kb": 1, "driver_oom_ts": BOOT + 100}
    warn = G3_OK.replace(severity="warning")
    assert t.g3(warn, BOOT + 160).severity == "warning"


def test_no_memory_line_leads_a_g3_critical_the_memory_signals_made():
    t = DriverTracker(TH)
    t.update(_at(BOOT + 100, _oom(BOOT + 100)))
    crit = G3_OK.replace(severity="critical", summary="pool exhausted, PSI full 30%")
    held = t.g3(crit, BOOT + 160)
    assert held.severity == "critical" and held.summary.startswith("GPU driver out of unified memory")
    assert "60 s ago" in held.summary and held.evidence["driver_oom_ts"] == BOOT + 100
    assert held.advice == ADVICE_DRIVER_OOM + ("keep going",) and held.evidence["mem_available_kb"] == 1
    assert t.g3(crit, BOOT + 100 + TH.driver_oom_hold_s + 1) is crit
    assert t.g3(crit, BOOT + 100 - 61) is crit  # the clock stepped back past the line


def test_the_no_memory_line_keeps_a_deferred_g3_deferred_until_it_is_read():
    t = DriverTracker(TH)
    t.update(_at(BOOT + 100, _oom(BOOT + 100)))
    built = []
    lazy = Finding.deferred(
        "G3", "ok", lambda: (built.append(1), ("memory fine", {"mem_available_kb": 1}))[1]
    )
    noted = t.g3(lazy, BOOT + 160)
    t.update(_at(BOOT + 170, _oom(BOOT + 170)))  # a later line changes nothing already judged
    assert built == [] and noted.severity == "ok"
    assert noted.summary.startswith("memory fine; NV_ERR_NO_MEMORY logged 60 s ago") and built == [1]
    assert noted.evidence == {"mem_available_kb": 1, "driver_oom_ts": BOOT + 100}


def test_g3_is_unchanged_without_a_no_memory_line():
    assert DriverTracker(TH).g3(G3_OK, BOOT) is G3_OK


def test_g4_names_a_recent_hung_engine_xid_the_latest_first():
    t = DriverTracker(TH)
    t.update(_at(BOOT + 100, _xid(BOOT + 50, 109), _xid(BOOT + 60, 43), _xid(BOOT + 70, 13)))
    named = t.g4(HUNG, BOOT + 200)
    assert named.evidence == {"util": 100, "xid": 43} and named.summary.endswith(
        "the driver logged Xid 43 (GPU stopped processing (a channel was reset after an application fault))"
    )


def test_g4_ignores_old_xids_other_anomalies_and_unrelated_codes():
    t = DriverTracker(TH)
    t.update(_at(BOOT + 100, _xid(BOOT + 100, 43), _xid(BOOT + 900, 13)))
    assert t.g4(HUNG, BOOT + 100 + TH.hung_xid_window_s + 1) is HUNG
    assert t.g4(HUNG, BOOT + 99) is HUNG  # an Xid after the sample is not its cause
    plain = Finding("G4", "warning", "throttling", {}, ())
    assert t.g4(plain, BOOT + 200) is plain


def test_new_thresholds_apply_to_the_next_judgement():
    t = DriverTracker(TH)
    t.update(_at(BOOT + 100, _oom(BOOT + 100)))
    assert "driver_oom_ts" in t.g3(G3_OK, BOOT + 200).evidence
    t.set_thresholds(Thresholds(driver_oom_hold_s=50.0))
    assert t.g3(G3_OK, BOOT + 200) is G3_OK


@pytest.mark.parametrize("code", [46, 109, 110, 136, 140, 143, 151, 155, 156, 158, 4242])
def test_a_reset_or_reboot_xid_or_an_unknown_one_is_named_as_the_fault_that_ended_a_boot(code):
    end = BOOT - 30
    ev = dataclasses.replace(_xid(end - 20, code), boot_end_ts=end)
    cause = DriverTracker(TH).reboot_cause(_at(BOOT + 10, ev))
    assert cause is not None and cause.startswith(f"the previous boot ended with Xid {code} (")
