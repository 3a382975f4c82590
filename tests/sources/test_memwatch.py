"""The fast memory watch: raw scans of meminfo and PSI, the window kept between ticks, its thread and descriptors."""

from __future__ import annotations

import os

import pytest

from spark_watchd.sources.memwatch import MemWatch, scan_mem_available_kb, scan_psi_some_avg10
from tests.conftest import FIXTURES
from tests.support.poll import wait_until
from tests.support.resources import open_fds

GB10 = FIXTURES / "hosts" / "gb10-eviction" / "proc"


def test_scans_read_the_gb10_capture_like_the_parsers():
    assert scan_mem_available_kb((GB10 / "meminfo").read_bytes()) == 2919641
    assert scan_psi_some_avg10((GB10 / "pressure" / "memory").read_bytes()) == 35.63


@pytest.mark.parametrize(
    "data",
    [b"", b"MemTotal: 1 kB\n", b"MemAvailable:\n", b"MemAvailable: lots kB\n", b"MemAvailable: 12"],
)
def test_meminfo_scan_without_a_number_is_none_or_the_last_value(data):
    # A line cut at the end of the buffer still carries its number; anything else is None, never a raise.
    assert scan_mem_available_kb(data) == (12 if data.endswith(b"12") else None)


@pytest.mark.parametrize("data", [b"", b"full avg10=1.00 avg60=0", b"some avg10=x avg60=0"])
def test_psi_scan_without_some_avg10_is_none(data):
    assert scan_psi_some_avg10(data) is None


def test_window_keeps_the_lowest_available_and_highest_pressure_until_taken():
    watch = MemWatch(str(GB10))
    assert watch.take_window() == (None, None)
    for avail, some in ((900, 1.0), (300, None), (None, 7.5), (500, 2.0)):
        watch.observe(avail, some)
    assert watch.take_window() == (300, 7.5)
    assert watch.take_window() == (None, None)  # a new window starts empty


def test_read_once_folds_the_files_into_the_window(tmp_path):
    proc = tmp_path / "proc"
    (proc / "pressure").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 800 kB\n")
    (proc / "pressure" / "memory").write_text("some avg10=0.50 avg60=0.00 avg300=0.00 total=1\n")
    watch = MemWatch(str(proc))
    watch.read_once()
    (proc / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 60 kB\n")  # same inode, re-read by pread
    watch.read_once()
    assert watch.readings == 2
    assert watch.take_window() == (60, 0.5)
    watch.stop()


def test_a_missing_file_reads_as_nothing_and_is_reopened_once_it_exists(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    watch = MemWatch(str(proc))  # no meminfo, no PSI (kernel without CONFIG_PSI)
    watch.read_once()
    assert watch.take_window() == (None, None)
    (proc / "meminfo").write_text("MemAvailable: 42 kB\n")
    watch.read_once()
    assert watch.take_window() == (42, None)
    watch.stop()


def test_thread_reads_in_the_background_and_stop_joins_it_and_closes_its_descriptors():
    before = open_fds()
    watch = MemWatch(str(GB10), interval_s=0.05)
    watch.start()
    watch.start()  # idempotent: still one thread
    wait_until(lambda: watch.readings >= 2, what="two background readings")
    held = open_fds() - before
    assert held[os.fspath(GB10 / "meminfo")] == 1 and held[os.fspath(GB10 / "pressure" / "memory")] == 1
    watch.stop()
    assert not watch.running
    assert watch.take_window() == (2919641, 35.63)
    assert not (open_fds() - before)  # both descriptors closed
