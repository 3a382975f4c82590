"""/proc parsers (pure text -> data) on files captured from real machines and on broken ones."""

from __future__ import annotations

import json

import pytest

from spark_watchd.sources.parsers import (
    parse_boot_id,
    parse_meminfo,
    parse_psi,
    parse_uptime,
    parse_vmstat,
)
from tests.conftest import FIXTURES, TRACES

VM = FIXTURES / "hosts" / "x86-vm" / "proc"
GB10 = FIXTURES / "hosts" / "gb10-eviction" / "proc"


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


def test_meminfo_and_vmstat_names_are_one_copy_for_every_sample_held():
    """The capture ring holds 30 whole samples: each tick's parse shares the names, not a copy of its own."""
    vmstat = "".join(f"counter_{i} {i}\n" for i in range(190))
    meminfo = "MemTotal:       127600748 kB\nMemAvailable:    50000000 kB\n"
    a, b = parse_vmstat(vmstat), parse_vmstat(vmstat)
    assert all(x is y for x, y in zip(a, b, strict=True))
    m1, m2 = parse_meminfo(meminfo), parse_meminfo(meminfo)
    assert all(x is y for x, y in zip(m1, m2, strict=True))
