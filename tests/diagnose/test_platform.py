"""The platform watch: a change between two boots evented and kept across restarts, a reboot soon after an
update named by it, the Xid table's advice following the modules' flavour."""

from __future__ import annotations

import dataclasses
import json

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.runtime import DiagnosisRuntime
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sample.platform import PlatformReading
from tests.diagnose.diag_builders import Host

# The pair the threads give: the kernel and driver owners went back to (6.17.0-1031-nvidia,
# 580.173.02: NVIDIA/open-gpu-kernel-modules#1358) and a routine apt upgrade's 7.0.0-1019-nvidia with 595.91.07.
OLD = PlatformReading(kernel="6.17.0-1031-nvidia", driver="580.173.02", driver_flavour="open", ota="7.5.0")
NEW = dataclasses.replace(OLD, kernel="7.0.0-1019-nvidia", driver="595.91.07")
WORDS = "kernel 6.17.0-1031-nvidia -> 7.0.0-1019-nvidia; driver 580.173.02 -> 595.91.07"


def _boot(rt, host, platform, n=3):
    """n samples of one boot, the platform on its first only (as the source writes it)."""
    out = []
    for i in range(n):
        s = host.sample()
        if i == 0:
            s = dataclasses.replace(s, platform=platform)
        out.append(rt.observe(s))
    return out


def test_a_change_between_two_boots_is_an_event_with_both_versions_and_survives_restarts(tmp_path):
    host = Host()
    rt = DiagnosisRuntime(Thresholds(), tmp_path)
    assert all(not d.events for d in _boot(rt, host, OLD))
    rt.close()
    host.reboot("boot-b")
    rt2 = DiagnosisRuntime(Thresholds(), tmp_path)  # a new daemon in the new boot
    first = _boot(rt2, host, NEW)[0]
    change = [e for e in first.events if e.kind == "platform_change"]
    assert len(change) == 1 and change[0].summary == f"Platform changed since the last boot: {WORDS}"
    status = rt2.platform_status()
    assert status["change"]["summary"] == WORDS and "kernel 7.0.0-1019-nvidia" in status["summary"]
    rt2.close()
    journal = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["summary"] for e in journal if e["kind"] == "platform_change"] == [change[0].summary]
    # A third daemon in the same boot: no new event, the change still shown as this boot's.
    rt3 = DiagnosisRuntime(Thresholds(), tmp_path)
    assert not [e for d in _boot(rt3, host, NEW) for e in d.events if e.kind == "platform_change"]
    assert rt3.platform_status()["change"]["summary"] == WORDS
    assert [e.kind for e in rt3.recent_events()].count("platform_change") == 1
    rt3.close()


def test_the_same_platform_after_a_reboot_is_no_event():
    host, eng = Host(), Diagnoser()
    _boot(eng, host, OLD)
    host.reboot("boot-b")
    assert not [e for d in _boot(eng, host, OLD) for e in d.events if e.kind == "platform_change"]
    assert eng.platform.status()["change"] is None


def test_a_reboot_soon_after_an_update_is_named_by_it_and_a_later_one_is_not(tmp_path):
    host = Host()
    rt = DiagnosisRuntime(Thresholds(), tmp_path)
    _boot(rt, host, OLD)
    host.reboot("boot-b")
    _boot(rt, host, NEW, n=20)  # ten minutes on the new kernel
    rt.close()
    host.reboot("boot-c")  # it wedged: a power cycle, a new daemon
    rt2 = DiagnosisRuntime(Thresholds(), tmp_path)
    reboot = [e for e in _boot(rt2, host, NEW, n=1)[0].events if e.kind == "reboot"]
    assert len(reboot) == 1 and f"after an update ({WORDS})" in reboot[0].summary
    assert "the previous boot ended 10 min after an update" in reboot[0].summary
    rt2.close()
    # boot-c brought nothing new: its end, whenever, names no update.
    eng = Diagnoser(Thresholds())
    host2 = Host()
    _boot(eng, host2, OLD)
    host2.reboot("boot-b")
    _boot(eng, host2, NEW, n=2)
    host2.ts += 2 * 86400  # a boot that lasted two days before it ended
    _boot(eng, host2, None, n=1)
    host2.reboot("boot-c")
    reboot = [e for e in _boot(eng, host2, NEW, n=1)[0].events if e.kind == "reboot"]
    assert len(reboot) == 1 and "update" not in reboot[0].summary


def _xid(eng, host, code):
    s = dataclasses.replace(
        host.sample(), driver_events=(DriverEvent(host.ts - 1, 0, code, "nvml", f"Xid {code}"),)
    )
    return [e for e in eng.observe(s).events if e.kind == "xid"][0]


def test_xid_169_advice_follows_the_module_flavour():
    host = Host()
    proprietary = Diagnoser()
    proprietary.observe(
        dataclasses.replace(host.sample(), platform=dataclasses.replace(OLD, driver_flavour="proprietary"))
    )
    e = _xid(proprietary, host, 169)
    assert "install the open modules" in e.summary and "reset will not help" in e.details["next_step"]
    open_ = Diagnoser()
    open_.observe(dataclasses.replace(host.sample(), platform=OLD))
    assert "Reset the GPU" in _xid(open_, host, 169).details["next_step"]
    assert "Reset the GPU" in _xid(Diagnoser(), host, 169).details["next_step"]  # flavour unknown: as before


def test_a_malformed_platform_in_the_state_file_is_forgotten_not_fatal(tmp_path):
    state = {"version": 1, "engine": {}, "platform": {"platform": {"kernel": 7}, "platform_change": "x",
                                                       "platform_boot_id": 3, "platform_last_ts": "never"}}  # fmt: skip
    (tmp_path / "state.json").write_text(json.dumps(state))
    rt = DiagnosisRuntime(Thresholds(), tmp_path)
    assert rt.engine.platform.current is None and rt.engine.platform.change is None
    host = Host()
    assert not [e for d in _boot(rt, host, NEW) for e in d.events if e.kind == "platform_change"]
    assert rt.platform_status()["platform"]["kernel"] == "7.0.0-1019-nvidia"
    rt.close()
    assert (
        json.loads((tmp_path / "state.json").read_text())["platform"]["platform"]["kernel"]
        == "7.0.0-1019-nvidia"
    )


def test_known_bad_entries_reach_the_status_from_the_samples():
    from spark_watchd.sample.link import LinkPort, LinkReading

    host, eng = Host(), Diagnoser()
    port = LinkPort("rocep1s0f0", 1, state="ACTIVE")
    s = dataclasses.replace(host.sample(), platform=NEW, link=LinkReading((port,)))
    s = dataclasses.replace(s, meminfo={**s.meminfo, "CmaTotal": 0, "CmaFree": 940604})
    eng.observe(s)
    assert [p["check"] for p in eng.platform.status()["problems"]] == ["cma_zero_rdma", "kernel_7_0_0_1019"]
    healthy = dataclasses.replace(host.sample(), link=LinkReading((port,)))  # no CMA keys: the entry lifts
    eng.observe(healthy)
    assert [p["check"] for p in eng.platform.status()["problems"]] == ["kernel_7_0_0_1019"]
