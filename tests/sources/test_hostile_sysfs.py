"""Absurd sysfs (issue 20 §4): 400-digit hwmon readings and symlink cycles under hwmon/, against a real daemon.

A number past 64 bits is refused where it is read, naming the file: that source is down (logged once per
state change, never a traceback or a line per tick), the others and every scrape go on, and it recovers
once the file reads sanely. Link cycles read as absent.
"""

from __future__ import annotations

import json
import os
import shutil
import time

from spark_watchd.sources.sensors import read_hwmon, read_int
from tests.conftest import FIXTURES
from tests.daemon_helpers import http_get, running_daemon, samples, value

SPBM = FIXTURES / "hosts" / "gb10-spbm" / "sys"


def _hostile_sys(tmp_path):
    root = tmp_path / "sys"
    shutil.copytree(SPBM, root)
    hw = root / "class" / "hwmon"
    (hw / "hwmon1" / "temp1_input").write_text("9" * 300 + "\n")  # float() takes it: 1e297 C got through
    (hw / "hwmon4" / "energy1_input").write_text("9" * 400 + "\n")  # int/float overflow, no file named
    (hw / "hwmon7").mkdir()
    (hw / "hwmon7" / "name").write_text("nvme\n")
    os.symlink("temp2_input", hw / "hwmon7" / "temp1_input")  # a cycle: temp1 -> temp2 -> temp1
    os.symlink("temp1_input", hw / "hwmon7" / "temp2_input")
    os.symlink("hwmon8", hw / "hwmon8")  # a directory link to itself
    os.symlink("..", hw / "hwmon9")  # and one up the tree
    return root


def test_read_int_refuses_past_64_bits_and_skips_garbage(tmp_path):
    f = tmp_path / "v"
    for text, want in (("42000", 42000), ("-5", -5), ("abc", None), ("", None), ("1e3", None)):
        f.write_text(text + "\n")
        assert read_int(str(f)) == want, text
    for text in ("9" * 400, "9" * 21, str(2**64), "-" + "9" * 30):
        f.write_text(text)
        try:
            read_int(str(f))
        except ValueError as exc:
            assert str(f) in str(exc) and "not a 64-bit number" in str(exc)
        else:
            raise AssertionError(f"{text[:30]} accepted")


def test_placeholder_temperatures_and_link_cycles_are_skipped(tmp_path):
    root = _hostile_sys(tmp_path)
    (root / "class" / "hwmon" / "hwmon1" / "temp1_input").write_text("65261850\n")  # NVMe "not implemented"
    assert read_hwmon(str(root), frozenset({"spbm"})) == []


def test_a_daemon_on_absurd_sysfs_marks_sensors_and_board_down_once_and_recovers(tmp_path):
    root = _hostile_sys(tmp_path)
    env = {"SPARK_WATCHD_FAKE_NVML": "gb10", "SPARK_WATCHD_SOURCES__SYS_ROOT": str(root)}
    with running_daemon("--interval", "1", "--state-dir", str(tmp_path / "s"), env=env) as (proc, base):
        time.sleep(3.5)  # three ticks or more
        for _ in range(3):
            assert http_get(base + "/metrics")[0] == 200
        status = json.loads(http_get(base + "/api/v1/status")[1])["sources"]
        hw = root / "class" / "hwmon"
        assert (
            not status["sensors"]["up"] and str(hw / "hwmon1" / "temp1_input") in status["sensors"]["error"]
        )
        assert not status["board"]["up"] and str(hw / "hwmon4" / "energy1_input") in status["board"]["error"]
        assert status["meminfo"]["up"] and status["nvml"]["up"]
        (hw / "hwmon1" / "temp1_input").write_text("41000\n")
        (hw / "hwmon4" / "energy1_input").write_text("123456789\n")
        time.sleep(2.5)
        parsed = samples(http_get(base + "/metrics")[1])
        assert value(parsed, "sparkwatchd_source_up", source="sensors") == 1.0
        assert value(parsed, "sparkwatchd_source_up", source="board") == 1.0
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    records = [json.loads(line) for line in err.splitlines()]  # JSON lines, no traceback among them
    events = [r["event"] for r in records if r.get("source") in ("sensors", "board")]
    assert sorted(events) == sorted(["sensors down: " + status["sensors"]["error"], "sensors recovered",
                                     "board down: " + status["board"]["error"], "board recovered"]), events  # fmt: skip
    assert not any("Traceback" in r.get("exception", "") for r in records)
