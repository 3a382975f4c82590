"""The real nvidia-ml-py on the GB10-shaped shim: the library loaded is the shim, and it answers as a GB10."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.e2e

# The binding's own calls, in a fresh interpreter (pynvml loads libnvidia-ml.so.1 once per process).
PROBE = """
import json, pynvml as n
n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
def answer(fn):
    try:
        return fn()
    except n.NVMLError as exc:
        return f"NVMLError {exc.value}"
maps = open("/proc/self/maps").read()
print(json.dumps({
    "driver": n.nvmlSystemGetDriverVersion(),
    "loaded": sorted({l.split()[-1] for l in maps.splitlines() if "libnvidia-ml" in l}),
    "memory": answer(lambda: n.nvmlDeviceGetMemoryInfo(h).total),
    "memory_v2": answer(lambda: n.nvmlDeviceGetMemoryInfo(h, n.nvmlMemory_v2).total),
    "procs": [(p.pid, p.usedGpuMemory) for p in n.nvmlDeviceGetComputeRunningProcesses(h)],
    "pci": n.nvmlDeviceGetPciInfo(h).busId,
    "temp_v": n.nvmlDeviceGetTemperatureV(h, n.NVML_TEMPERATURE_GPU),
    "power_limit": answer(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h)),
    "fields": [(f.fieldId, f.nvmlReturn, f.value.ullVal) for f in n.nvmlDeviceGetFieldValues(h, [74, 76, 269])],
}, default=str))
n.nvmlShutdown()
"""


def probe(env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(env),
        cwd=str(REPO),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_binding_loads_the_shim_and_reads_its_driver_version(shim_gpu):
    shim_gpu.write("driver=580.95.05-nvmlshim\ncompute=4242:na\n")
    got = probe(shim_gpu.env())
    assert got["driver"] == "580.95.05-nvmlshim"
    assert got["loaded"] == [str(shim_gpu.lib_dir / "libnvidia-ml.so.1")]
    # GB10: memory info Not Supported (v1 and v2), per-process memory NVML_VALUE_NOT_AVAILABLE (None).
    assert got["memory"] == got["memory_v2"] == "NVMLError 3"
    assert got["procs"] == [[4242, None]]
    assert got["pci"] == "0000000F:01:00.0" and got["temp_v"] == 38
    assert got["power_limit"] == "NVMLError 3"
    # Each field answers on its own: sync boost (76) is not a GB10 counter.
    assert got["fields"] == [[74, 0, 0], [76, 3, 0], [269, 0, 173_453_251_000]]
