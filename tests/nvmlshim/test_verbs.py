"""`once` and `preflight` on the real binding over the shim: every GB10 field, and the defects it found."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.e2e
GIB = 1024**3


def once_json(gpu) -> dict:
    r = run_cli("once", "--json", env=gpu.env())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_once_reads_every_gb10_field_through_the_binding(shim_gpu):
    doc = once_json(shim_gpu)
    assert doc["sources"]["nvml"] == {"up": True, "error": None}
    (g,) = doc["gpus"]
    assert g["name"] == "NVIDIA GB10" and g["uuid"].startswith("GPU-2dee1e25")
    assert (g["power_w"], g["temp_c"], g["sm_clock_mhz"], g["applications_clock_mhz"]) == (
        11.17,
        38.0,
        2405,
        2418,
    )
    assert (g["slowdown_temp_c"], g["shutdown_temp_c"]) == (86.0, 90.0)
    assert g["energy_j"] == 1_200_121.0 and g["util_pct"] == 0.0 and g["clocks_event_reasons"] == 1
    # GB10: NVML memory info is Not Supported, so NVML reports no memory of its own.
    assert g["mem_used_bytes"] is None and g["mem_total_bytes"] is None
    assert g["clocks_event_counters_us"] == {
        "sw_power_cap": 0,
        "hw_slowdown": None,
        "sw_thermal": 173_453_251,
        "hw_thermal": 403_805,
        "hw_power_brake": 0,
    }
    assert g["driver_version"] == "580.95.05"


@pytest.fixture
def gpu_pid():
    """A live process the scenario lists as a GPU process (the process scan must find it in /proc)."""
    child = subprocess.Popen(["sleep", "60"])
    yield child.pid
    child.kill()
    child.wait()


def gpu_process(gpu, pid: int) -> dict:
    (p,) = [p for p in once_json(gpu)["processes"] if p["pid"] == pid]
    assert p["gpu_resident"] is True
    return p


def test_a_process_in_both_lists_is_counted_once(shim_gpu, gpu_pid):
    # Found by the shim: a 1 GiB process in the compute and the graphics list was reported as 2 GiB.
    shim_gpu.write(f"compute={gpu_pid}:{GIB}\ngraphics={gpu_pid}:{GIB}\n")
    assert gpu_process(shim_gpu, gpu_pid)["gpu_mem_bytes"] == GIB


def test_gb10_per_process_memory_not_available_is_null_not_a_huge_number(shim_gpu, gpu_pid):
    shim_gpu.write(f"compute={gpu_pid}:na\n")
    assert gpu_process(shim_gpu, gpu_pid)["gpu_mem_bytes"] is None


def test_temperature_survives_a_driver_that_drops_the_deprecated_call(shim_gpu):
    # nvml.h marks nvmlDeviceGetTemperature deprecated for nvmlDeviceGetTemperatureV: prefer the new one.
    shim_gpu.write("fault.nvmlDeviceGetTemperature=NOT_SUPPORTED\n")
    (g,) = once_json(shim_gpu)["gpus"]
    assert g["temp_c"] == 38.0
    r = run_cli("thermal-log", "--count", "1", "--no-header", env=shim_gpu.env())
    assert r.returncode == 0 and r.stdout.endswith(", 38, 11.17 W\n"), r.stdout + r.stderr


def test_a_pre_r510_library_loses_only_the_process_list(legacy_shim_gpu):
    # Without nvmlDeviceGetComputeRunningProcesses_v3 the binding raises NVMLLibraryMismatchError (not an
    # NVMLError): it took every GPU reading down. Temperature falls back to the old call.
    doc = once_json(legacy_shim_gpu)
    assert doc["sources"]["nvml"] == {"up": True, "error": None}
    (g,) = doc["gpus"]
    assert g["temp_c"] == 38.0 and g["power_w"] == 11.17
    assert g["clocks_event_reasons"] == 1  # through ...ThrottleReasons: the old name
    r = run_cli("thermal-log", "--count", "1", "--no-header", env=legacy_shim_gpu.env())
    assert r.returncode == 0 and r.stdout.endswith(", 38, 11.17 W\n"), r.stdout + r.stderr


def test_once_without_a_gpu_name_prints_no_empty_name(shim_gpu):
    shim_gpu.write("name=NO_PERMISSION\n")
    r = run_cli("once", env=shim_gpu.env())
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("gpu 0")]
    assert line.startswith("gpu 0: 11.17 W 38 C"), line


def test_preflight_reads_the_gpu_and_names_no_none(shim_gpu):
    r = run_cli("preflight", env=shim_gpu.env())
    assert "G4 INFO: GPU 0 NVIDIA GB10: 38 C 11.2 W (slowdown at 86 C) SM 2405 MHz" in r.stdout, r.stdout
    # Found by the shim: a failing name call printed "GPU 0 None:".
    shim_gpu.write("name=NO_PERMISSION\n")
    r = run_cli("preflight", env=shim_gpu.env())
    assert "G4 INFO: GPU 0: 38 C 11.2 W (slowdown at 86 C) SM 2405 MHz" in r.stdout, r.stdout


def test_record_writes_trace_lines_read_through_the_binding(shim_gpu, tmp_path):
    out = tmp_path / "trace.jsonl"
    r = run_cli("record", str(out), "--interval", "1", "--duration", "2.5", env=shim_gpu.env())
    assert r.returncode == 0, r.stderr
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert len(lines) >= 2
    assert all(
        ln["gpus"][0]["name"] == "NVIDIA GB10" and ln["gpus"][0]["mem_total_bytes"] is None for ln in lines
    )
