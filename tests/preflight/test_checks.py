"""The preflight checks as pure functions of what was gathered, one function per gotcha (G1-G4, G6, G7, G9, G10)."""

from __future__ import annotations

from spark_watchd.preflight import checks


def test_g4_snapshot_warns_when_already_near_slowdown():
    gb10 = {
        "index": 0,
        "name": "NVIDIA GB10",
        "temp_c": 45,
        "power_w": 11.17,
        "slowdown_temp_c": 86,
        "sm_clock_mhz": 2418,
    }
    assert (
        checks.g4_thermal([gb10])[0].line()
        == "G4 INFO: GPU 0 NVIDIA GB10: 45 C 11.2 W (slowdown at 86 C) SM 2418 MHz"
    )
    hot = checks.g4_thermal([{**gb10, "temp_c": 79}])[0]
    assert hot.status == "WARN" and "within 10 C of slowdown" in hot.message
    # Unavailable is SKIP on the line, a gap for the verdict.
    missing = checks.g4_thermal(None, "NVMLError_DriverNotLoaded", "nvidia-smi not found")[0]
    assert (
        missing.line()
        == "G4 SKIP: no GPU readings: NVML missing (NVMLError_DriverNotLoaded); nvidia-smi not found"
    )
    assert missing.gap
    via = checks.g4_thermal(
        [{**gb10, "slowdown_temp_c": None}], "NVMLError_LibraryNotFound", via="nvidia-smi"
    )[0]
    assert via.line() == (
        "G4 INFO: GPU 0 NVIDIA GB10: 45 C 11.2 W SM 2418 MHz (from nvidia-smi: NVML missing, NVMLError_LibraryNotFound)"
    )


def test_g3_low_available_warns():
    mi = {
        "MemTotal": 127600748,
        "MemAvailable": 20000000,
        "Cached": 9000000,
        "Buffers": 0,
        "Shmem": 1000000,
        "SwapTotal": 16777216,
        "SwapFree": 8388608,
    }
    found = checks.g3_memory(mi)
    assert found[1].message.startswith("page cache a drop would free: about 7.6 GiB")
    assert found[2].message == "swap: 8.0 GiB used of 16.0 GiB"
    assert found[-1].status == "WARN"


def _statuses(found) -> list[tuple[str, str]]:
    return [(c.status, c.message.split(":")[0]) for c in found]


def test_g1_passes_a_cuda13_torch_and_fails_cpu_only_and_cuda12_builds():
    assert checks.g1_torch_cuda({"torch": {"version": "2.9.0", "cuda": "13.0"}})[0].status == "PASS"
    cpu = checks.g1_torch_cuda({"torch": {"version": "2.9.0", "cuda": None}})[0]
    assert cpu.status == "FAIL" and "CPU-only build" in cpu.message
    cu12 = checks.g1_torch_cuda({"torch": {"version": "2.7.0", "cuda": "12.8"}})[0]
    assert cu12.status == "FAIL" and "needs a CUDA 13 build" in cu12.message


def test_g1_warns_for_each_stray_cudart12_and_when_torch_was_never_checked():
    found = checks.g1_torch_cuda(
        {"torch": {"version": "2.9", "cuda": "13.0"}, "cudart12": ["/a/x.so.12"]}, ["/b/y.so.12"]
    )
    assert [c.status for c in found] == ["PASS", "WARN", "WARN"]
    assert "/a/x.so.12" in found[1].message and "/b/y.so.12" in found[2].message
    missing = checks.g1_torch_cuda({"torch": None, "torch_error": "No module named 'torch'"})[0]
    assert missing.status == "SKIP" and missing.gap and "No module named 'torch'" in missing.message


def test_g1_probe_failure_fails_only_for_an_interpreter_the_operator_named():
    assert checks.g1_torch_cuda(None, probe_error="exit 1")[0].status == "SKIP"
    named = checks.g1_torch_cuda(None, probe_error="exit 1", explicit_python=True)[0]
    assert named.status == "FAIL" and named.message == "could not run the probe: exit 1"


def test_g2_flash_attn_absent_is_fine_broken_warns_and_without_torch_skips():
    torch = {"version": "2.9", "cuda": "13.0"}
    assert checks.g2_flash_attn(None)[0].status == "SKIP"
    assert checks.g2_flash_attn({"torch": torch})[0].message.startswith("flash-attn not installed")
    broken = checks.g2_flash_attn(
        {"torch": torch, "flash_attn": {"installed": True, "error": "undefined symbol"}}
    )
    assert broken[0].status == "WARN" and "undefined symbol" in broken[0].message
    ok = checks.g2_flash_attn({"torch": torch, "flash_attn": {"installed": True, "version": "2.8.3"}})
    assert ok[0].line() == "G2 PASS: flash-attn 2.8.3 imports"


def test_g7_wants_sm121_kernels_on_a_gb10():
    gb10 = {"cuda_available": True, "capability": [12, 1], "device_name": "NVIDIA GB10"}
    native = checks.g7_capability({"torch": {**gb10, "arch_list": ["sm_90", "sm_121"]}})
    assert [c.status for c in native] == ["PASS", "PASS"]
    family = checks.g7_capability({"torch": {**gb10, "arch_list": ["sm_120"]}})
    assert family[1].status == "WARN" and "running sm_120 binaries" in family[1].message
    ptx = checks.g7_capability({"torch": {**gb10, "arch_list": ["compute_120"]}})
    assert ptx[1].status == "WARN" and "JIT-compiled" in ptx[1].message
    none = checks.g7_capability({"torch": {**gb10, "arch_list": ["sm_80", "sm_90"]}})
    assert none[1].status == "FAIL" and "sm_80 sm_90" in none[1].message
    other = checks.g7_capability({"torch": {**gb10, "capability": [9, 0], "arch_list": ["sm_90"]}})
    assert [c.status for c in other] == ["WARN"] and "not a GB10" in other[0].message
    assert checks.g7_capability({"torch": {"cuda_available": False, "cuda": None}})[0].message.startswith(
        "torch.cuda not available (CPU-only build)"
    )


def test_g9_container_markers_pass_and_a_bare_host_warns():
    assert checks.g9_container({"cgroup": "0::/system.slice/containerd.service"})[0].message.startswith(
        "container (cgroup mentions containerd)"
    )
    both = checks.g9_container({"dockerenv": True, "containerenv": True})[0]
    assert both.status == "PASS" and "/.dockerenv, /run/.containerenv" in both.message
    assert checks.g9_container({"cgroup": "0::/user.slice"})[0].status == "WARN"
