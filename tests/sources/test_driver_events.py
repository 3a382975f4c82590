"""Driver events: kernel log parsing on journal excerpts, NVML Xid events on the fake, every feed optional."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import structlog

from spark_watchd.sample.driver import DriverEvent, event_kind
from spark_watchd.sources.driver_events import DriverEventsSource
from spark_watchd.testing import FakeNvml
from tests.conftest import FIXTURES

JOURNAL = FIXTURES / "journal"
KERNEL = {"_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0", "SYSLOG_IDENTIFIER": "kernel"}


def _lines(name: str) -> list[str]:
    return (JOURNAL / name).read_text().splitlines()


def _until(fn, timeout: float = 5.0):
    """Poll fn() until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError("condition not met before the deadline")


def _runner(stdout: str = "", stderr: str = "", rc: int = 0):
    calls = []

    def run(argv, timeout):
        calls.append((list(argv), timeout))
        return subprocess.CompletedProcess(list(argv), rc, stdout, stderr)

    run.calls = calls
    return run


def test_first_collect_hands_over_the_previous_boot_then_only_new_events():
    run = _runner("\n".join(_lines("previous-boot-xid79.jsonl")))
    src = DriverEventsSource(None, runner=run, follow=False, nvml_events=False)
    try:
        first = src.collect({})["driver_events"]
        assert [e.xid for e in first][-1] == 79
        assert run.calls[0][0] == ["journalctl", "-k", "-b", "-1", "-o", "json", "--no-pager", "-q"]
        assert src.collect({})["driver_events"] == []
        assert src.states["previous-boot"] == "read: 4 driver fault(s) from 6 line(s)"
        assert src.feed_status()["previous-boot"] == {
            "state": "read",
            "detail": "read: 4 driver fault(s) from 6 line(s)",
            "lines_rejected": 0,
        }
    finally:
        src.close()


@pytest.mark.parametrize(
    ("raise_", "state"),
    [
        (OSError(2, "No such file or directory"), "journalctl not available (No such file or directory)"),
        (subprocess.TimeoutExpired(["journalctl"], 5), "journalctl took over 5 s: skipped"),
    ],
)
def test_unreadable_journal_is_a_state_not_an_error(raise_, state):
    def run(argv, timeout):
        raise raise_

    src = DriverEventsSource(None, runner=run, follow=False, nvml_events=False)
    try:
        assert src.collect({}) == {"driver_events": [], "oom_kills": []}
        assert src.states["previous-boot"] == state
    finally:
        src.close()


def test_nvml_xid_event_arrives_with_its_gpu_index_and_code():
    nvml = FakeNvml([FakeNvml.gb10().gpus[0], FakeNvml.gb10(index=1, uuid="GPU-b").gpus[0]])
    src = DriverEventsSource(nvml, journalctl=None, follow=False, wait_ms=50, clock=lambda: 1764400000.0)
    try:
        src.collect({})
        _until(lambda: "watching" in src.states.get("nvml-events", ""))
        assert nvml.inject_xid(79, gpu=1) == 1
        got = _until(lambda: src.collect({})["driver_events"])
        assert got == [DriverEvent(1764400000.0, 1, 79, "nvml", "Xid 79 (NVML event)")]
        assert src.states["nvml-events"] == "watching Xid events on 2 GPU(s)"
    finally:
        src.close()
    assert nvml.call_counts["nvmlEventSetFree"] == 1 and not nvml.initialized


def test_driver_without_xid_events_is_a_state_and_the_source_stays_up():
    nvml = FakeNvml.gb10()
    nvml.not_supported = {"nvmlDeviceRegisterEvents"}
    src = DriverEventsSource(nvml, journalctl=None, follow=False, wait_ms=50)
    try:
        assert src.collect({}) == {"driver_events": [], "oom_kills": []}
        _until(lambda: "not supported" in src.states.get("nvml-events", ""))
        assert nvml.inject_xid(79) == 0 and src.collect({}) == {"driver_events": [], "oom_kills": []}
    finally:
        src.close()


def test_lost_gpu_stops_the_watch_and_it_comes_back_after_recovery():
    nvml = FakeNvml.gb10()
    src = DriverEventsSource(nvml, journalctl=None, follow=False, wait_ms=20, retry_s=0.05)
    try:
        src.collect({})
        _until(lambda: "watching" in src.states.get("nvml-events", ""))
        nvml.lose_gpu_after(0)
        nvml.lost = True
        _until(lambda: src.states["nvml-events"].startswith(("lost", "not available")))
        nvml.recover()
        _until(lambda: "watching" in src.states["nvml-events"])
        _until(lambda: nvml.inject_xid(119))
        assert [e.xid for e in _until(lambda: src.collect({})["driver_events"])] == [119]
    finally:
        src.close()


def _follower(messages: list[str]) -> list[str]:
    """A stand-in for `journalctl -k -f -o json`: prints the messages as journal JSON, then waits."""
    lines = [
        json.dumps({"__REALTIME_TIMESTAMP": str(1764400000000000 + i), **KERNEL, "MESSAGE": m})
        for i, m in enumerate(messages)
    ]
    code = f"import sys, time\nsys.stdout.write({chr(10).join(lines) + chr(10)!r})\nsys.stdout.flush()\ntime.sleep(60)\n"
    return [sys.executable, "-c", code]


LIVE = [
    "NVRM: Xid (PCI:000f:01:00): 109, pid=777, name=python3, Ch 00000010, errorString CTX SWITCH TIMEOUT, Info 0x3c040",
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359",
    "systemd-journald[412]: Time spent on flushing to /var/log/journal is 1.2ms",
]


def test_live_kernel_log_gives_xid_lines_when_nvml_events_are_off():
    src = DriverEventsSource(None, runner=_runner(), nvml_events=False, follow_argv=_follower(LIVE))
    try:
        src.collect({})
        got = _until(lambda: src.collect({})["driver_events"])
        assert [(event_kind(e), e.xid) for e in got] == [("xid", 109), ("driver_oom", None)]
    finally:
        src.close()
    assert src._follower.proc.poll() is not None  # the follower is stopped with the source


def test_live_kernel_xid_is_not_recorded_twice_while_nvml_delivers_it():
    nvml = FakeNvml.gb10()
    src = DriverEventsSource(nvml, runner=_runner(), wait_ms=20, follow_argv=None)
    src.follow_argv = _follower(LIVE)
    src._nvml_watching.set()  # as once NVML registered; the follower starts with it
    try:
        src.collect({})
        got = _until(lambda: src.collect({})["driver_events"])
        assert [event_kind(e) for e in got] == ["driver_oom"]
    finally:
        src.close()


def test_a_driver_that_fails_to_load_is_retried_and_watched_once_it_loads():
    nvml = FakeNvml.gb10()
    nvml.fail_init = nvml.NVML_ERROR_DRIVER_NOT_LOADED
    src = DriverEventsSource(nvml, journalctl=None, follow=False, wait_ms=20, retry_s=0.05)
    try:
        src.collect({})
        _until(lambda: "nvmlInit failed" in src.states.get("nvml-events", ""))
        nvml.fail_init = None
        _until(lambda: "watching" in src.states["nvml-events"])
    finally:
        src.close()


def test_previous_boot_lines_carry_that_boots_last_journal_entry():
    kernel = "\n".join(_lines("previous-boot-xid79.jsonl"))
    shutdown = json.dumps({"__REALTIME_TIMESTAMP": "1764411000000000", "MESSAGE": "Reached target reboot"})

    def run(argv, timeout):
        out = shutdown if "-n" in argv else kernel
        return subprocess.CompletedProcess(list(argv), 0, out, "")

    src = DriverEventsSource(None, runner=run, follow=False, nvml_events=False)
    try:
        events = src.collect({})["driver_events"]
        assert events and {e.boot_end_ts for e in events} == {1764411000.0}
        assert events[-1].to_dict()["boot_end_ts"] == 1764411000.0
    finally:
        src.close()


def test_previous_boot_end_falls_back_to_its_last_kernel_line():
    kernel = _lines("previous-boot-xid79.jsonl")
    last = int(json.loads(kernel[-1])["__REALTIME_TIMESTAMP"]) / 1e6

    def run(argv, timeout):
        if "-n" in argv:
            raise subprocess.TimeoutExpired(list(argv), timeout)
        return subprocess.CompletedProcess(list(argv), 0, "\n".join(kernel), "")

    src = DriverEventsSource(None, runner=run, follow=False, nvml_events=False)
    try:
        assert {e.boot_end_ts for e in src.collect({})["driver_events"]} == {last}
    finally:
        src.close()


# ---- issue 18: feeds that never die silently ---------------------------------------------------------------
XID_79 = "NVRM: Xid (PCI:000f:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def _raw_follower(raw: str) -> list[str]:
    """A follower that writes the line `raw` (a Python expression) then a real Xid 79 line, then waits."""
    good = json.dumps({"__REALTIME_TIMESTAMP": "1764400009000000", **KERNEL, "MESSAGE": XID_79})
    code = (
        "import sys, time\n"
        f"sys.stdout.write({raw})\nsys.stdout.write({chr(10) + good + chr(10)!r})\n"
        "sys.stdout.flush()\ntime.sleep(60)\n"
    )
    return [sys.executable, "-c", code]


MALFORMED = [
    repr(json.dumps({"__REALTIME_TIMESTAMP": "9" * 400, **KERNEL, "MESSAGE": XID_79})),  # 400-digit timestamp
    repr(
        json.dumps(
            {"__REALTIME_TIMESTAMP": "1", **KERNEL, "MESSAGE": "NVRM: Xid (PCI:000f:01:00): " + "7" * 5000}
        )
    ),
    '\'{"__REALTIME_TIMESTAMP": "1", "MESSAGE": "NVRM", "x": \' + \'[\' * 50000 + \']\' * 50000 + \'}\'',
    repr("{not json NVRM"),
    "'x' * (3 * 1024 * 1024)",  # 3 MiB with no newline until the end
]


@pytest.mark.parametrize("raw", MALFORMED, ids=["ts400", "code5000", "nested", "notjson", "nonewline"])
def test_a_malformed_live_line_is_skipped_and_counted_and_the_next_xid_79_still_arrives(raw):
    src = DriverEventsSource(None, runner=_runner(), nvml_events=False, follow_argv=_raw_follower(raw))
    try:
        src.collect({})
        got = _until(lambda: src.collect({})["driver_events"], timeout=15)
        assert [(e.xid, e.pci) for e in got] == [(79, "000f:01:00.0")]
        assert src.feed_status()["kernel-log"]["state"] == "watching"
        assert src.feed_status()["kernel-log"]["lines_rejected"] == (0 if "7" * 5000 in raw else 1)
        assert src.states["kernel-log"] == "following"  # the same follower: it never died
    finally:
        src.close()


def test_a_line_with_no_newline_is_not_buffered_without_bound():
    raw = "'y' * (32 * 1024 * 1024)"  # issue 18: 32 MiB cost 8 CPU-s and 80 MB RSS
    src = DriverEventsSource(None, runner=_runner(), nvml_events=False, follow_argv=_raw_follower(raw))
    try:
        src.collect({})
        assert _until(lambda: src.collect({})["driver_events"], timeout=30)[0].xid == 79
        assert src.rejected["kernel-log"] == 1
    finally:
        src.close()


def test_a_follower_that_fails_restarts_with_backoff_and_says_so(monkeypatch):
    from spark_watchd.sources import kernel_follow

    real = kernel_follow.read_journal
    calls = {"n": 0}

    def flaky(lines, **kw):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a parser bug")
        return real(lines, **kw)

    monkeypatch.setattr(kernel_follow, "read_journal", flaky)
    monkeypatch.setattr(kernel_follow, "BACKOFF_FIRST_S", 0.05)
    src = DriverEventsSource(None, runner=_runner(), nvml_events=False, follow_argv=_follower([XID_79]))
    try:
        src.collect({})
        _until(lambda: src.feed_status()["kernel-log"]["state"] == "restarting")
        assert "failed (RuntimeError)" in src.states["kernel-log"]
        got = _until(lambda: src.collect({})["driver_events"], timeout=10)
        assert got[0].xid == 79 and src.feed_status()["kernel-log"]["state"] == "watching"
    finally:
        src.close()


def test_a_previous_boot_that_cannot_be_read_never_keeps_the_live_feed_from_starting():
    def run(argv, timeout):
        raise RuntimeError("journalctl answered something no one foresaw")

    src = DriverEventsSource(None, runner=run, nvml_events=False, follow_argv=_follower([XID_79]))
    try:
        assert src.collect({}) == {"driver_events": [], "oom_kills": []}
        assert src.feed_status()["previous-boot"]["state"] == "unreadable"
        assert _until(lambda: src.collect({})["driver_events"])[0].xid == 79
    finally:
        src.close()


def test_a_live_storm_is_one_event_with_a_count():
    lines = [XID_79.replace("79", "13", 1)] * 500
    src = DriverEventsSource(None, runner=_runner(), nvml_events=False, follow_argv=_follower(lines))
    try:
        src.collect({})
        time.sleep(1.0)
        got = _until(lambda: src.collect({})["driver_events"])
        assert len(got) == 1 and got[0].xid == 13 and got[0].count == 500
    finally:
        src.close()


def test_a_live_storm_is_logged_once():
    # Issue 18 §1: a storm is one event with a count *and one log line*, also while its first event is queued.
    lines = [XID_79.replace("79", "13", 1)] * 500
    with structlog.testing.capture_logs() as logs:
        src = DriverEventsSource(None, runner=_runner(), nvml_events=False, follow_argv=_follower(lines))
        try:
            src.collect({})
            time.sleep(1.0)
            assert _until(lambda: src.collect({})["driver_events"])[0].count == 500
        finally:
            src.close()
    storms = [e for e in logs if e["event"].startswith("driver fault storm")]
    assert len(storms) == 1, f"{len(storms)} storm log lines for one storm"


def test_feed_status_names_every_feed_with_a_bounded_state():
    src = DriverEventsSource(None, journalctl=None, follow=False, nvml_events=False)
    try:
        src.collect({})
        status = src.feed_status()
        assert set(status) == {"nvml-events", "previous-boot", "kernel-log"}
        assert {s["state"] for s in status.values()} == {"off"}
    finally:
        src.close()


def test_a_kernel_line_names_its_gpu_through_the_nvidia_device_under_sys_bus_pci(tmp_path):
    for name, vendor, cls in (("000f:01:00.0", "0x10de", "0x030200"), ("0000:00:01.0", "0x8086", "0x060400")):
        d = tmp_path / "bus" / "pci" / "devices" / name
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(cls + "\n")
    src = DriverEventsSource(
        None, runner=_runner(), nvml_events=False, follow_argv=_follower([XID_79]), sys_root=str(tmp_path)
    )
    try:
        src.collect({})
        (ev,) = _until(lambda: src.collect({})["driver_events"])
        assert (ev.gpu, ev.pci, ev.xid) == (0, "000f:01:00.0", 79)
    finally:
        src.close()


def test_the_gpu_index_is_read_at_start_so_a_gpu_gone_from_sys_still_has_it(tmp_path):
    d = tmp_path / "bus" / "pci" / "devices" / "000f:01:00.0"
    d.mkdir(parents=True)
    (d / "vendor").write_text("0x10de\n")
    (d / "class").write_text("0x030200\n")
    src = DriverEventsSource(None, journalctl=None, follow=False, nvml_events=False, sys_root=str(tmp_path))
    try:
        src.collect({})
        for f in d.iterdir():  # off the bus: the device leaves /sys/bus/pci
            f.unlink()
        d.rmdir()
        src._push(DriverEvent(1.0, None, 79, "journal", XID_79, pci="000f:01:00.0"))
        (ev,) = src.collect({})["driver_events"]
        assert ev.gpu == 0
    finally:
        src.close()


def test_malformed_lines_in_the_previous_boot_are_counted_and_the_live_feed_still_starts():
    bad = [
        json.dumps({"__REALTIME_TIMESTAMP": "9" * 400, **KERNEL, "MESSAGE": XID_79}),
        '{"__REALTIME_TIMESTAMP": "1", "MESSAGE": "NVRM", "x": ' + "[" * 50_000 + "]" * 50_000 + "}",
        "NVRM " + "x" * 70_000,
    ]
    run = _runner("\n".join(bad + _lines("previous-boot-xid79.jsonl")))
    src = DriverEventsSource(None, runner=run, nvml_events=False, follow_argv=_follower([XID_79]))
    try:
        first = src.collect({})["driver_events"]
        assert [e.xid for e in first][-1] == 79 and src.feed_status()["previous-boot"]["lines_rejected"] == 3
        # The previous boot's Xid 79 on the same GPU does not fold the first live one into itself.
        live = _until(lambda: src.collect({})["driver_events"])
        assert live[0].xid == 79 and live[0].boot_end_ts is None
    finally:
        src.close()


def test_a_journal_with_one_boot_is_read_not_unreadable():
    """Issue 34: `journalctl -b -1` on a machine whose journal holds only this boot exits 1 with "No such boot
    ID"; that is a first boot (or a volatile journal), not a fault to show in red."""
    stderr = "Data from the specified boot (-1) is not available: No such boot ID in journal\n"
    src = DriverEventsSource(None, runner=_runner(stderr=stderr, rc=1), follow=False, nvml_events=False)
    try:
        src.collect({})
        feed = src.feed_status()["previous-boot"]
        assert feed["state"] == "read" and "no previous boot" in feed["detail"]
    finally:
        src.close()
