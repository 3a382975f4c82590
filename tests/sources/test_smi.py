"""nvidia-smi fallback: parsers on the GB10 captures, the source through a fake nvidia-smi, the timeout."""

from __future__ import annotations

import os
import stat
import sys
import time

import pytest

from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.smi import SmiSource, parse_smi_csv, parse_smi_performance, parse_value, run_command

# Verbatim from tests/fixtures/captures/gb10-nvidia-smi.md.
GB10_INDEX_NAME = """index, name, memory.total [MiB], memory.free [MiB]
0, NVIDIA GB10, [N/A], [N/A]
"""
GB10_MEM_POWER = """memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], power.draw [W], temperature.gpu
[N/A], [N/A], [N/A], 0 %, 11.17 W, 35
"""
GB10_LOOP = """timestamp, utilization.gpu [%], memory.used [MiB], temperature.gpu
2025/11/24 14:08:55.751, 0 %, [N/A], 38
2025/11/24 14:08:56.756, 2 %, [N/A], 38
"""
GB10_PERF = """
==============NVSMI LOG==============

Timestamp                                 : Mon Nov 24 14:08:55 2025
Driver Version                            : 580.95.05
CUDA Version                              : 13.0

Attached GPUs                             : 1
GPU 0000000F:01:00.0
    Performance State                     : P0
    Clocks Event Reasons
        Idle                              : Not Active
        Applications Clocks Setting       : Not Active
        SW Power Cap                      : Not Active
        HW Slowdown                       : Not Active
            HW Thermal Slowdown           : Not Active
            HW Power Brake Slowdown       : Not Active
        Sync Boost                        : Not Active
        SW Thermal Slowdown               : Active
        Display Clock Setting             : Not Active
    Clocks Event Reasons Counters
        SW Power Capping                  : 0 us
        SW Thermal Slowdown               : 173453251 us
        HW Thermal Slowdown               : 403805 us
        HW Power Braking                  : 0 us
    Sparse Operation Mode                 : N/A
"""


def test_gb10_csv_captures():
    assert parse_smi_csv(GB10_INDEX_NAME) == [
        {"index": 0, "name": "NVIDIA GB10", "memory.total": None, "memory.free": None}
    ]
    assert parse_smi_csv(GB10_MEM_POWER) == [
        {
            "memory.total": None,
            "memory.used": None,
            "memory.free": None,
            "utilization.gpu": 0,
            "power.draw": 11.17,
            "temperature.gpu": 35,
        }
    ]
    rows = parse_smi_csv(GB10_LOOP)
    assert [r["timestamp"] for r in rows] == ["2025/11/24 14:08:55.751", "2025/11/24 14:08:56.756"]
    assert [r["utilization.gpu"] for r in rows] == [0, 2]
    assert rows[0]["memory.used"] is None and rows[1]["temperature.gpu"] == 38


def test_noheader_and_values():
    assert parse_smi_csv("114687, 19135 MiB\n", ("pid", "used_memory")) == [
        {"pid": 114687, "used_memory": 19135}
    ]
    assert parse_value("Not Supported") is None and parse_value("[Not Supported]") is None
    assert parse_value("0x0000000000000024") == 0x24
    assert parse_value("2418 MHz") == 2418
    assert parse_smi_csv("driver_version\n580.95\n") == [{"driver_version": "580.95"}]
    with pytest.raises(ValueError, match="line 2: 1 values for 2 fields"):
        parse_smi_csv("a, b\n1\n")


def test_performance_counters_capture():
    assert parse_smi_performance(GB10_PERF) == [
        {
            "sw_power_cap": 0,
            "hw_slowdown": None,
            "sw_thermal": 173453251,
            "hw_thermal": 403805,
            "hw_power_brake": 0,
        }
    ]


FAKE_SMI = r"""#!{python}
import sys, time
args = sys.argv[1:]
mode = open({mode!r}).read().strip()
if mode == "hang":
    time.sleep(60)
if mode == "hang-child":
    import subprocess
    subprocess.run([sys.executable, "-c", "import time; time.sleep(60)", "smi-grandchild-" + {mode!r}])
if mode == "perf-hang" and args[:2] == ["-q", "-d"]:
    time.sleep(60)
if mode == "fail":
    print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", file=sys.stderr)
    sys.exit(9)
if args[:2] == ["-q", "-d"]:
    sys.stdout.write({perf!r})
elif args[0].startswith("--query-compute-apps"):
    print("114687, 19135 MiB")
elif "clocks_event_reasons.active" in args[0] and mode == "old":
    print('Field "clocks_event_reasons.active" is not a valid field to query.', file=sys.stderr)
    sys.exit(2)
else:
    assert "noheader" in args[1]
    print("0, NVIDIA GB10, GPU-2dee1e25-b3b5-007e-2b55-79f2d0f2ebe5, 580.95.05, 11.17 W, 38, 2405 MHz, 2418 MHz, "
          "0 %, 0x0000000000000020, [N/A], [N/A]")
"""


@pytest.fixture
def fake_smi(tmp_path):
    mode = tmp_path / "mode"
    mode.write_text("ok")
    path = tmp_path / "nvidia-smi"
    path.write_text(FAKE_SMI.format(python=sys.executable, mode=str(mode), perf=GB10_PERF))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, mode


def test_source_reads_gb10_through_fake_binary(fake_smi):
    path, mode = fake_smi
    out = SmiSource(str(path), timeout_s=20).collect({})
    (g,) = out["gpus"]
    assert (g.name, g.driver_version, g.power_w, g.temp_c) == ("NVIDIA GB10", "580.95.05", 11.17, 38.0)
    assert (
        g.sm_clock_mhz == 2405
        and g.applications_clock_mhz == 2418
        and g.clocks_event_reasons == 0x20
        and g.util_pct == 0.0
    )
    assert g.mem_total_bytes is None and g.slowdown_temp_c is None
    assert g.clocks_event_counters_us["sw_thermal"] == 173453251
    assert out["_gpu_processes"] == {114687: 19135 * 2**20}


def test_old_driver_field_name_fallback(fake_smi):
    path, mode = fake_smi
    mode.write_text("old")
    calls = []

    def run(argv, timeout):
        calls.append(argv)
        return run_command(argv, timeout)

    src = SmiSource(str(path), timeout_s=20, run=run)
    src.collect({})
    assert any("clocks_throttle_reasons.active" in a[1] for a in calls)


def test_failing_smi_is_down_with_its_message(fake_smi):
    path, mode = fake_smi
    mode.write_text("fail")
    with pytest.raises(SourceUnavailable, match="exited 9: NVIDIA-SMI has failed"):
        SmiSource(str(path), timeout_s=20).collect({})


def test_missing_binary_is_down(tmp_path):
    with pytest.raises(SourceUnavailable, match="cannot run"):
        SmiSource(str(tmp_path / "nvidia-smi")).collect({})


def test_hung_smi_is_killed_at_the_timeout(fake_smi):
    path, mode = fake_smi
    mode.write_text("hang")
    before = set(os.listdir("/proc"))
    t0 = time.monotonic()
    with pytest.raises(SourceUnavailable, match="timed out after 1 s"):
        SmiSource(str(path), timeout_s=1).collect({})
    assert time.monotonic() - t0 < 30  # bounded (generous: the machine is shared)
    # No fake nvidia-smi left running.
    for pid in set(os.listdir("/proc")) - before:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                assert str(path).encode() not in f.read()
        except OSError:
            pass


def _running_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(pid)
            except OSError:
                pass
    return found


def test_hung_smi_child_processes_are_killed_too(fake_smi):
    path, mode = fake_smi
    mode.write_text("hang-child")
    with pytest.raises(SourceUnavailable, match="timed out"):
        SmiSource(str(path), timeout_s=2).collect({})
    for _ in range(100):  # SIGKILL is delivered asynchronously
        if not _running_with("smi-grandchild-" + str(mode)):
            break
        time.sleep(0.05)
    assert _running_with("smi-grandchild-" + str(mode)) == []


def test_one_budget_per_tick_and_readings_survive_a_hung_extra(fake_smi):
    path, mode = fake_smi
    mode.write_text("perf-hang")
    t0 = time.monotonic()
    out = SmiSource(str(path), timeout_s=3).collect({})
    assert time.monotonic() - t0 < 25  # one budget, not one per run (generous: shared machine)
    (g,) = out["gpus"]
    assert g.temp_c == 38.0 and g.clocks_event_counters_us is None and out["_gpu_processes"] == {}
