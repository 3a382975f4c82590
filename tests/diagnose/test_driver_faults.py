"""Driver faults in the diagnosis: Xid events, the reboot's stated cause, the G3 signal, the hung engine's Xid."""

from __future__ import annotations

import dataclasses

from spark_watchd.diagnose import xid
from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.runtime import DiagnosisRuntime
from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sources.driverlog import parse_journal_json
from tests.conftest import FIXTURES
from tests.diagnose.diag_builders import Host

NO_MEMORY = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
    "_memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
)


def _journal(name: str) -> tuple[DriverEvent, ...]:
    return tuple(parse_journal_json((FIXTURES / "journal" / name).read_text().splitlines()))


def _with(sample, *events):
    return dataclasses.replace(sample, driver_events=tuple(events))


def _shift(events, to_before: float):
    """Move a journal excerpt so it ends just before `to_before` (the previous boot of a sample)."""
    delta = to_before - 120.0 - max(e.ts for e in events)
    return tuple(dataclasses.replace(e, ts=e.ts + delta) for e in events)


def _restarted_after_reboot(excerpt: str | None):
    """A daemon that ran in boot A, restarted in boot B, first sample carrying boot A's journal lines."""
    host = Host()
    d = Diagnoser()
    for s in host.run(5, temp=60.0):
        d.observe(s)
    state = d.state()
    host.reboot(gap=600.0)
    first = host.sample(temp=40.0, util=0.0, power=10.0)
    if excerpt:
        first = _with(first, *_shift(_journal(excerpt), first.ts - first.uptime_s))
    d2 = Diagnoser()
    d2.restore(state)
    return d2.observe(first)


def test_reboot_names_the_xid_79_that_ended_the_previous_boot():
    d = _restarted_after_reboot("previous-boot-xid79.jsonl")
    reboot = next(e for e in d.events if e.kind == "reboot")
    assert "the previous boot ended with Xid 79 (GPU fell off the bus)" in reboot.summary
    assert reboot.after_throttle is False and reboot.details["driver_cause"].endswith(
        "(GPU fell off the bus), 2.0 min before this boot began"
    )
    shown = [e for e in d.events if e.kind == "xid"]
    assert [(e.details["xid"], e.details["count"]) for e in shown] == [(13, 2), (43, 1), (79, 2)]
    assert shown[-1].details["pci"] == "000f:01:00.0" and "(2 lines)" in shown[-1].summary
    assert all(e.details["previous_boot"] and e.summary.startswith("Previous boot: ") for e in shown)
    assert d.findings["G3"].severity != "critical"  # a previous boot's out-of-memory is not this boot's G3


def test_reboot_after_a_driver_out_of_memory_wedge_says_so():
    d = _restarted_after_reboot("previous-boot-nomem-wedge.jsonl")
    reboot = next(e for e in d.events if e.kind == "reboot")
    # The AER fatal line came last in that boot: it is the stated end; the out-of-memory is shown too.
    assert "the previous boot ended with a PCIe AER fatal error" in reboot.summary
    assert [e.kind for e in d.events if e.details.get("previous_boot")].count("driver_oom") == 2


def test_reboot_with_no_driver_fault_says_neither():
    d = _restarted_after_reboot(None)
    reboot = next(e for e in d.events if e.kind == "reboot")
    assert "previous boot ended" not in reboot.summary and "driver_cause" not in reboot.details


def test_live_xid_79_seen_before_a_reboot_is_its_cause_in_a_continuous_trace():
    host = Host()
    d = Diagnoser()
    samples = host.run(4, temp=60.0)
    samples[-1] = _with(samples[-1], DriverEvent(samples[-1].ts - 5, 0, 79, "nvml", "Xid 79 (NVML event)"))
    events = [e for s in samples for e in d.observe(s).events]
    live = next(e for e in events if e.kind == "xid")
    assert live.summary.startswith("Xid 79 on GPU 0: GPU fell off the bus (fatal).") and live.details["fatal"]
    host.reboot()
    reboot = next(e for e in d.observe(host.sample()).events if e.kind == "reboot")
    assert "the previous boot ended with Xid 79 (GPU fell off the bus)" in reboot.summary


def test_benign_start_up_no_memory_line_is_recorded_not_paged():
    # Issue 18: a healthy vLLM start logs NV_ERR_NO_MEMORY with 68.5 GiB available and no reclaim stalls.
    host = Host()
    d = Diagnoser()
    for s in host.run(3, avail_gib=70.0):
        d.observe(s)
    s = host.sample(avail_gib=68.5)
    out = d.observe(_with(s, DriverEvent(s.ts - 2, None, None, "journal", NO_MEMORY)))
    assert [e.kind for e in out.events] == ["driver_oom"] and out.events[0].gotcha == "G3"
    g3 = out.findings["G3"]
    assert g3.severity == "ok" and "recorded, not paged" in g3.summary and "driver_oom_ts" in g3.evidence
    assert {d.observe(x).findings["G3"].severity for x in host.run(25, avail_gib=68.5)} == {"ok"}


def test_no_memory_line_under_real_pressure_leads_the_critical_g3():
    host = Host()
    d = Diagnoser()
    for s in host.run(3, avail_gib=20.0):
        d.observe(s)
    for s in host.run(2, avail_gib=1.5, psi_some=40.0, psi_full=25.0, swapout=3000.0):
        d.observe(s)
    s = host.sample(avail_gib=1.2, psi_some=45.0, psi_full=30.0, swapout=3000.0)
    g3 = d.observe(_with(s, DriverEvent(s.ts - 2, None, None, "journal", NO_MEMORY))).findings["G3"]
    assert g3.severity == "critical" and g3.summary.startswith("GPU driver out of unified memory")


def test_hung_engine_names_a_recent_xid_43():
    def run(xid_age_s):
        host = Host()
        d = Diagnoser()
        for s in host.run(6, temp=80.0, power=30.0, util=20.0):
            d.observe(s)
        out = None
        for i in range(8):
            s = host.sample(temp=78.0 - 2 * i, power=15.0, util=100.0)
            if i == 7:
                s = _with(s, DriverEvent(s.ts - 1, 0, 43, "nvml", "Xid 43 (NVML event)"))
            out = d.observe(s)
        later = host.run(max(1, int(xid_age_s // 30)), temp=60.0 - 1, power=15.0, util=100.0)
        for s in later:
            out = d.observe(s)
        return out.findings["G4"]

    g4 = run(30)
    assert g4.anomaly == "hung_engine" and "Xid 43 (GPU stopped processing" in g4.summary
    assert g4.evidence["xid"] == 43


def test_runtime_counts_live_xids_per_gpu_and_never_recounts_the_previous_boot(tmp_path):
    host = Host()
    rt = DiagnosisRuntime(state_dir=tmp_path)
    s = host.sample()
    prev = _shift(_journal("previous-boot-xid79.jsonl"), s.ts - s.uptime_s)
    live = (DriverEvent(s.ts - 1, 0, 79, "nvml", "x"), DriverEvent(s.ts - 1, 0, 4242, "nvml", "y"))
    d = rt.observe(_with(s, *prev, *live))
    counts = rt.xid_error_counts()
    assert {k: v for k, v in counts.items() if v} == {"0:79": 1, "0:other": 1}
    assert set(counts) == {f"0:{x}" for x in xid.XID_LABELS}  # every code at 0: increase() sees the first
    assert rt.event_counts()["xid"] == 2 and len([e for e in d.events if e.kind == "xid"]) == 5  # 3 folded
    rt.close()
    # A restart in the same boot reads the same previous boot again: shown once, counted never.
    rt2 = DiagnosisRuntime(state_dir=tmp_path)
    s2 = host.sample()
    d2 = rt2.observe(_with(s2, *prev))
    assert not [e for e in d2.events if e.kind == "xid"]
    assert rt2.xid_error_counts() == counts and rt2.event_counts()["xid"] == 2
    rt2.close()
