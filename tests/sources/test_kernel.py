"""The /proc sources (meminfo with its watch window, psi, vmstat, boot) on fixture roots, broken files and this machine."""

from __future__ import annotations

import threading

import pytest

from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.kernel import BootSource, MeminfoSource, PsiSource, VmstatSource
from tests.conftest import FIXTURES

HOSTS = FIXTURES / "hosts"
VM = HOSTS / "x86-vm" / "proc"
GB10 = HOSTS / "gb10-eviction" / "proc"


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
        "kernel": None,  # the capture has no sys/kernel/osrelease
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


def test_the_running_kernels_release_is_read_for_the_sample(tmp_path):
    """vllm-project/vllm#56824: 7.0.0-1019-nvidia reports CmaTotal 0; what usable memory is differs by kernel."""
    import shutil

    from spark_watchd.sources.collect import build_sample
    from spark_watchd.sources.kernel import BootSource
    from tests.conftest import REPO

    root = tmp_path / "proc"
    shutil.copytree(REPO / "tests" / "fixtures" / "hosts" / "gb10-eviction" / "proc", root)
    (root / "sys" / "kernel" / "osrelease").write_text("7.0.0-1019-nvidia\n")
    out = BootSource(str(root)).collect({})
    assert out["kernel"] == "7.0.0-1019-nvidia"
    s = build_sample(1.0, out)
    assert s.kernel == "7.0.0-1019-nvidia" and s.to_dict()["kernel"] == "7.0.0-1019-nvidia"
    (root / "sys" / "kernel" / "osrelease").write_text("bad\x1b[2Jname\n")  # not printable: not a release
    assert BootSource(str(root)).collect({})["kernel"] is None
