"""bench/nvml_device_check.py (the script a real GPU runs once) checked on the shim before device time is spent."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.e2e


def test_device_check_reports_the_gb10_answers(shim_gpu, tmp_path):
    shim_gpu.write("driver=580.95.05-nvmlshim\n")
    out = tmp_path / "check.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "nvml_device_check.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(shim_gpu.env()),
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["error"] is None and doc["driver_version"] == "580.95.05-nvmlshim"
    assert doc["own_pid_is_gpu_process"] is False and doc["cuda_modules_loaded"] == []
    (raw,) = doc["raw"]
    assert raw["memory"] == raw["memory_v2"] == "NVMLError 3: Not Supported"
    assert raw["temp_c"] == raw["temp_v_c"] == 38 and raw["pci_bus_id"] == "0000000F:01:00.0"
    assert raw["violation_thermal_ns"] == 173_453_251_000
    assert [f["id"] for f in raw["fields"] if f["ret"] == 0] == [74, 269, 270, 271]
    events = doc["event_api"]
    assert events["gpus"] == [{"supported_event_types": "0x8", "register_xid": "ok"}]
    assert events["wait_200ms"] == "NVMLError 10: Timeout" and 0.19 <= events["wait_s"] < 2
    assert doc["driver_events_source"]["states"]["nvml-events"] == "watching Xid events on 1 GPU(s)"
    assert doc["gpus"][0]["temp_c"] == 38.0 and doc["gpus"][0]["mem_total_bytes"] is None
