"""Parsers and /proc sources on files captured from real machines and on broken ones."""

from __future__ import annotations

import json
import threading

import pytest

from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.kernel import BootSource, MeminfoSource, PsiSource, VmstatSource
from spark_watchd.sources.parsers import (
    parse_boot_id,
    parse_meminfo,
    parse_psi,
    parse_uptime,
    parse_vmstat,
)
from tests.conftest import FIXTURES, TRACES

HOSTS = FIXTURES / "hosts"
VM = HOSTS / "x86-vm" / "proc"
GB10 = HOSTS / "gb10-eviction" / "proc"


def test_meminfo_real_capture_keeps_every_key_as_the_file_gives_it():
    text = (VM / "meminfo").read_text()
    m = parse_meminfo(text)
    assert len(m) == len([ln for ln in text.splitlines() if ln.strip()])
    assert m["MemTotal"] == 24683656
    assert m["MemAvailable"] == 24262732
    # HugePages_* are counts, Hugepagesize is kB: both integers as written.
    assert m["HugePages_Total"] == 0 and m["Hugepagesize"] == 2048
    assert "Active(anon)" in m


def test_meminfo_gb10_fixture_round_trips_the_trace_sample():
    trace_line = (TRACES / "eviction.jsonl").read_text().splitlines()[158]
    m = parse_meminfo((GB10 / "meminfo").read_text())
    assert m["MemTotal"] == 127600748 and m["MemAvailable"] == 2919641
    assert m == json.loads(trace_line)["meminfo"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("MemTotal:       1 kB\nMemFree:  lots kB\n", "line 2"),
        ("MemFree:       1 kB\n", "no MemTotal"),
        ("", "no MemTotal"),
        ("MemTotal 12 kB\n", "line 1"),
    ],
)
def test_meminfo_malformed_names_the_problem(text, needle):
    with pytest.raises(ValueError, match=needle):
        parse_meminfo(text)


def test_psi_real_capture_has_trace_v1_shape():
    p = parse_psi((VM / "pressure" / "memory").read_text())
    assert set(p) == {"some", "full"}
    assert set(p["some"]) == {"avg10", "avg60", "avg300", "total"}
    assert isinstance(p["some"]["total"], int) and isinstance(p["some"]["avg10"], float)


def test_psi_gb10_values():
    p = parse_psi((GB10 / "pressure" / "memory").read_text())
    assert p == {
        "some": {"avg10": 35.63, "avg60": 29.69, "avg300": 17.81, "total": 276246416},
        "full": {"avg10": 17.81, "avg60": 14.85, "avg300": 8.91, "total": 135123202},
    }


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg6", "line 2"),
        ("full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", "no 'some'"),
        ("some avg10=x avg60=0.00 avg300=0.00 total=0\n", "bad field"),
        ("most avg10=0.00\n", "line 1"),
    ],
)
def test_psi_malformed(text, needle):
    with pytest.raises(ValueError, match=needle):
        parse_psi(text)


def test_vmstat_real_capture():
    text = (VM / "vmstat").read_text()
    v = parse_vmstat(text)
    assert len(v) == len(text.splitlines())
    assert v["pgmajfault"] == 916 and v["oom_kill"] == 0 and "pswpout" in v


def test_vmstat_malformed():
    with pytest.raises(ValueError, match="line 2"):
        parse_vmstat("pgmajfault 1\npswpout\n")
    with pytest.raises(ValueError, match="empty"):
        parse_vmstat("\n")


def test_uptime_and_boot_id():
    assert parse_uptime((VM / "uptime").read_text()) == 369.34
    assert (
        parse_boot_id((VM / "sys/kernel/random/boot_id").read_text())
        == "b0887ce8-ece7-46ef-ad6e-49e7895e6c2c"
    )
    with pytest.raises(ValueError, match="uptime"):
        parse_uptime("up since tuesday")
    with pytest.raises(ValueError, match="not a UUID"):
        parse_boot_id("not-a-uuid\n")


def test_sources_on_gb10_fixture_root():
    root = str(HOSTS / "gb10-eviction" / "proc")
    mem = MeminfoSource(root, watch_interval_s=0)
    out = mem.collect({})
    assert out["meminfo"]["MemAvailable"] == 2919641
    assert out["mem_available_min_kb"] == 2919641
    assert PsiSource(root).collect({})["psi_memory"]["full"]["avg10"] == 17.81
    assert VmstatSource(root).collect({})["vmstat"]["pswpout"] == 1429410
    boot = BootSource(root).collect({})
    assert boot == {
        "boot_id": "b8a1abcd-1a69-16c7-4da4-f9fc3c6da5d7",
        "uptime_s": 22740.0,
        "host": "spark-01",
    }


def test_missing_psi_is_not_supported_not_down():
    assert PsiSource(str(HOSTS / "no-psi" / "proc")).collect({}) == {"psi_memory": None}


def test_unreadable_and_malformed_files_mark_the_source_down_naming_the_file():
    root = str(HOSTS / "broken" / "proc")
    with pytest.raises(SourceUnavailable, match=r"pressure/memory"):
        PsiSource(root).collect({})
    with pytest.raises(SourceUnavailable, match=r"meminfo: meminfo line 2"):
        MeminfoSource(root, watch_interval_s=0).collect({})
    with pytest.raises(SourceUnavailable, match=r"vmstat"):
        VmstatSource(root).collect({})
    with pytest.raises(SourceUnavailable, match=r"boot_id"):
        BootSource(root).collect({})
    with pytest.raises(SourceUnavailable, match=r"truncated-psi/proc/pressure/memory: pressure line 2"):
        PsiSource(str(HOSTS / "truncated-psi" / "proc")).collect({})


def test_missing_root_marks_meminfo_down(tmp_path):
    with pytest.raises(SourceUnavailable, match="cannot read"):
        MeminfoSource(str(tmp_path), watch_interval_s=0).collect({})


def test_live_proc_reads_on_this_machine():
    out = MeminfoSource("/proc", watch_interval_s=0).collect({})
    assert out["meminfo"]["MemTotal"] > 0
    assert BootSource("/proc").collect({})["uptime_s"] > 0
    assert "pgmajfault" in VmstatSource("/proc").collect({})["vmstat"]


def test_meminfo_source_reports_watch_window_minimum_and_stops_its_thread(tmp_path):
    proc = tmp_path / "proc"
    (proc / "pressure").mkdir(parents=True)
    meminfo = proc / "meminfo"
    meminfo.write_text("MemTotal: 1000 kB\nMemAvailable: 800 kB\n")
    (proc / "pressure" / "memory").write_text(
        "some avg10=1.50 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    before = threading.active_count()
    src = MeminfoSource(str(proc), watch_interval_s=3600)  # the test drives readings itself
    assert src.collect({})["mem_available_min_kb"] == 800
    assert src.watch.running
    meminfo.write_text("MemTotal: 1000 kB\nMemAvailable: 90 kB\n")  # the dip between ticks
    src.watch.read_once()
    meminfo.write_text("MemTotal: 1000 kB\nMemAvailable: 700 kB\n")
    out = src.collect({})
    assert out["meminfo"]["MemAvailable"] == 700
    assert out["mem_available_min_kb"] == 90
    assert out["_psi_some_avg10_max"] == 1.5
    # A new window: the dip is forgotten.
    assert src.collect({})["mem_available_min_kb"] == 700
    src.close()
    assert not src.watch.running
    assert threading.active_count() == before


def test_memwatch_thread_reads_in_the_background_and_joins():
    from spark_watchd.sources.memwatch import MemWatch

    watch = MemWatch(str(GB10), interval_s=0.05)
    watch.start()
    for _ in range(400):
        if watch.readings >= 2:
            break
        threading.Event().wait(0.01)
    watch.stop()
    assert watch.readings >= 2 and not watch.running
    assert watch.take_window() == (2919641, 35.63)
