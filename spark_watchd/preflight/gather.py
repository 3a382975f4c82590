"""What preflight reads: the probe in the target interpreter, ldconfig, NVML, /proc, container markers.

Every reader fails alone and returns (None, reason) or an empty result; nothing here raises on a
missing driver, tool, interpreter or file. Roots and the command runner are injectable for tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

from spark_watchd.diagnose.thresholds import Thresholds

# The daemon's own G6 judgement of kind and cap, so preflight and the live finding agree.
from spark_watchd.sample.workloads import SERVER_KINDS, cap_flag, classify, is_capped, read_caps
from spark_watchd.sources.command import run_argv
from spark_watchd.sources.nvml import read_temperature

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
PROBE_TIMEOUT_S = 120.0  # importing torch and initialising CUDA can take a while on a cold cache

Runner = Callable[[Sequence[str], float], subprocess.CompletedProcess]


# Never through a shell, in its own process group, the whole group killed at the timeout: a probe
# whose CUDA init hangs, or that left children holding the pipes, must not hang preflight.
run_command = run_argv


def run_probe(python: str | None = None, runner: Runner = run_command, timeout: float = PROBE_TIMEOUT_S):
    """(probe JSON, None) from `python probe.py`, or (None, reason)."""
    argv = [python or sys.executable, PROBE]
    try:
        proc = runner(argv, timeout)
    except OSError as exc:  # missing, not executable, not a program (Exec format error)
        return None, f"{argv[0]}: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return None, f"{argv[0]}: probe timed out after {timeout:g} s"
    lines = (proc.stdout or "").strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return None, f"{argv[0]}: probe exited {proc.returncode}: {tail[0][:200]}"
    try:
        data = json.loads(lines[-1])
    except ValueError:
        return None, f"{argv[0]}: probe printed no JSON"
    if not isinstance(data, dict):
        return None, f"{argv[0]}: probe printed {type(data).__name__}, not an object"
    return data, None


def ldconfig_cudart12(runner: Runner = run_command) -> list[str]:
    """Paths of libcudart.so.12 in the dynamic linker cache (`ldconfig -p`); [] when ldconfig is absent."""
    for exe in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            proc = runner([exe, "-p"], 30.0)
        except (OSError, subprocess.TimeoutExpired):
            continue
        hits = []
        for line in proc.stdout.splitlines():
            name, _, path = line.strip().partition(" => ")
            if name.startswith("libcudart.so.12") and path:
                hits.append(path.strip())
        return sorted(set(hits))
    return []


def container_markers(root: str = "/") -> dict[str, Any]:
    """The files G9 looks at, under root."""

    def read(rel: str) -> str | None:
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                return f.read(65536)
        except OSError:
            return None

    return {
        "dockerenv": os.path.exists(os.path.join(root, ".dockerenv")),
        "containerenv": os.path.exists(os.path.join(root, "run", ".containerenv")),
        "cgroup": read("proc/1/cgroup"),
    }


def proc_hidepid(proc_root: str = "/proc") -> str | None:
    """The hidepid= option of the /proc mount ("2", "invisible"...), None when absent or unreadable."""
    try:
        with open(os.path.join(proc_root, "self", "mountinfo"), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        pre, sep, post = line.partition(" - ")
        fields = pre.split()
        if not sep or len(fields) < 5 or fields[4] != "/proc":
            continue
        for opt in (post.split() + [""])[2].split(","):
            if opt.startswith("hidepid="):
                value = opt.split("=", 1)[1]
                return None if value in ("0", "off") else value
    return None


SMI_FIELDS = ("index", "name", "temperature.gpu", "power.draw", "clocks.current.sm")


def smi_snapshot(path: str = "nvidia-smi", timeout: float = 10.0):
    """G4's readings from nvidia-smi when NVML cannot be loaded: ([{index, name, temp_c, power_w,
    sm_clock_mhz}], None), or (None, reason) when it is missing or fails (as the daemon's fallback)."""
    import shutil

    from spark_watchd.sources.base import SourceUnavailable
    from spark_watchd.sources.smi import parse_smi_csv, run_command

    exe = shutil.which(path)
    if exe is None:
        return None, f"{path} not found"
    try:
        text = run_command([exe, "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader"], timeout)
        rows = parse_smi_csv(text, SMI_FIELDS)
    except (SourceUnavailable, ValueError) as exc:
        return None, str(exc)
    return [
        {
            "index": r.get("index", i),
            "name": r.get("name"),
            "temp_c": r.get("temperature.gpu"),
            "power_w": r.get("power.draw"),
            "sm_clock_mhz": r.get("clocks.current.sm"),
            "slowdown_temp_c": None,  # nvidia-smi prints N/A for it on GB10
        }
        for i, r in enumerate(rows)
    ], None


def clock_cap_unit(root: str = "/") -> int | None:
    """The cap the installed spark-watchd-clock-cap.service applies at boot (None: no such unit)."""
    from spark_watchd.service import clockcap

    for unit_dir in ("etc/systemd/system", "lib/systemd/system"):
        try:
            with open(os.path.join(root, unit_dir, clockcap.UNIT_NAME), encoding="utf-8") as f:
                return clockcap.installed_cap(f.read(16384))
        except OSError:
            continue
    return None


def nvml_snapshot(nvml: Any = None):
    """([{index, name, temp_c, power_w, slowdown_temp_c, sm_clock_mhz}], None) or (None, reason)."""
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded
        return None, f"{type(exc).__name__}: {exc}".strip(": ")
    gpus = []
    try:

        def get(fn, *args):
            # Not Supported (GB10 memory, power limits) is None, never a failure.
            try:
                return fn(*args)
            except Exception:
                return None

        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = get(nvml.nvmlDeviceGetName, h)
            power_mw = get(nvml.nvmlDeviceGetPowerUsage, h)
            clock = get(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM)
            gpus.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "temp_c": get(read_temperature, nvml, h),
                    "power_w": power_mw / 1000.0 if power_mw is not None else None,
                    "slowdown_temp_c": get(
                        nvml.nvmlDeviceGetTemperatureThreshold, h, nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
                    ),
                    "sm_clock_mhz": clock,
                    "processes": [
                        (p.pid, getattr(p, "usedGpuMemory", None))
                        for p in (get(nvml.nvmlDeviceGetComputeRunningProcesses, h) or ())
                    ],
                }
            )
    except Exception as exc:  # GPU lost mid-query
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return gpus, None


# What an uncapped server of each kind should be told, for the G6 line.
CAP_HINTS = {
    "vllm": "vLLM takes 0.9 of the whole pool by default: pass --gpu-memory-utilization 0.5 or less",
    "sglang": "SGLang sizes its pool from free memory: pass --mem-fraction-static 0.5 or less",
    "ollama": "Ollama takes what it finds: stop it while training or set OLLAMA_MAX_LOADED_MODELS=1",
    "llamacpp": "llama.cpp holds the whole model: stop it while training",
}


def _cmdline(proc_root: str, pid: int) -> list[str] | None:
    try:
        with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:  # gone mid-scan, or hidden by hidepid
        return None


def scan_workloads(
    proc_root: str = "/proc",
    nvml_processes: Sequence[tuple[int, int | None]] = (),
    th: Thresholds | None = None,
):
    """([{pid, kind, capped, cap, cap_hint, gpu_memory_bytes}], None) for other GPU users, or (None, reason).

    `th`: the configured thresholds (capped_utilization_max decides what counts as capped, as in G6).
    """
    th = th or Thresholds()
    try:
        pids = [int(p) for p in os.listdir(proc_root) if p.isdigit()]
    except OSError as exc:
        return None, f"{proc_root}: {exc.strerror}"
    gpu_mem = {pid: mem for pid, mem in nvml_processes}
    skip = {os.getpid(), os.getppid()}
    found = []
    for pid in sorted(pids):
        argv = _cmdline(proc_root, pid) if pid not in skip else None
        if not argv:
            continue
        kind = classify(argv, os.path.basename(argv[0]), pid in gpu_mem)
        if kind == "other" and pid not in gpu_mem:
            continue
        caps = read_caps(argv) if kind in SERVER_KINDS else {}
        capped = is_capped(kind, caps, th.capped_utilization_max)
        entry = {"pid": pid, "kind": kind, "capped": capped, "gpu_memory_bytes": gpu_mem.get(pid)}
        flag, _ = cap_flag(kind, caps)
        if flag is not None:
            entry["cap"] = flag
        if capped is False:
            entry["cap_hint"] = CAP_HINTS.get(kind)
        found.append(entry)
    return found, None
