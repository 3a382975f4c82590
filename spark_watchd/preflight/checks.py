"""Pure launch checks: gathered facts in, `Check` lines out (no I/O, no clock)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from spark_watchd.preflight import Check

GIB = 1024**3
KIB = 1024
# GB10 is compute capability 12.1; its arch-specific kernels are sm_121a.
GB10_CAPABILITY = (12, 1)
# The GPU slows itself at 86 C on GB10; starting a long run already this close leaves no head-room.
HOT_START_MARGIN_C = 10.0
# Below this share of MemTotal available, a launch starts already squeezed (G3).
LOW_AVAILABLE_SHARE = 0.25


def _gib(kb: int | float) -> str:
    return f"{kb * KIB / GIB:.1f} GiB"


def g1_torch_cuda(
    probe: Mapping[str, Any] | None,
    ldconfig_cudart12: Sequence[str] = (),
    probe_error: str | None = None,
    explicit_python: bool = False,
) -> list[Check]:
    """G1: torch built for CUDA 13, and no libcudart.so.12 left where a loader could find it."""
    if probe is None:
        # An interpreter the operator named must work; our own failing is a gap the verdict must show.
        msg = f"could not run the probe: {probe_error or 'unknown error'}"
        return [Check("G1", "FAIL", msg)] if explicit_python else [Check("G1", "SKIP", msg, gap=True)]
    torch = probe.get("torch")
    out: list[Check] = []
    if not torch:
        # Unavailable, so SKIP (the contract); never "fine": the verdict counts the gap as a warning.
        why = probe.get("torch_error") or "import failed"
        out.append(
            Check(
                "G1",
                "SKIP",
                f"torch not installed ({why}): CUDA build not checked; --python the training venv",
                gap=True,
            )
        )
    else:
        cuda = torch.get("cuda")
        version = torch.get("version", "?")
        if not cuda:
            out.append(
                Check("G1", "FAIL", f"torch {version} is a CPU-only build: install a CUDA 13 (cu130) wheel")
            )
        elif str(cuda).startswith("13"):
            out.append(Check("G1", "PASS", f"torch {version} built for CUDA {cuda}"))
        else:
            out.append(
                Check(
                    "G1",
                    "FAIL",
                    f"torch {version} built for CUDA {cuda}: GB10 needs a CUDA 13 build (cu130 wheel)",
                )
            )
    for path in list(probe.get("cudart12") or ()) + list(ldconfig_cudart12):
        out.append(
            Check("G1", "WARN", f"stray libcudart.so.12 at {path}: CUDA 12 leftovers can be loaded first")
        )
    return out


def g2_flash_attn(probe: Mapping[str, Any] | None) -> list[Check]:
    """G2: flash-attn importable or not (and not broken) in the target interpreter."""
    if not probe or not probe.get("torch"):
        return [Check("G2", "SKIP", "torch not installed")]
    fa = probe.get("flash_attn") or {}
    if not fa.get("installed"):
        return [Check("G2", "PASS", "flash-attn not installed: attention uses PyTorch SDPA")]
    if fa.get("error"):
        return [Check("G2", "WARN", f"flash-attn installed but does not import: {fa['error']}")]
    return [Check("G2", "PASS", f"flash-attn {fa.get('version', 'unknown')} imports")]


def g3_memory(meminfo: Mapping[str, int] | None) -> list[Check]:
    """G3: free and used memory of the one pool, page cache a drop would free, swap."""
    if not meminfo:
        return [Check("G3", "SKIP", "/proc/meminfo unreadable")]
    total = meminfo["MemTotal"]
    avail = meminfo.get("MemAvailable", meminfo.get("MemFree", 0))
    used = total - avail
    # Shmem sits in Cached but survives drop_caches (tmpfs, CUDA IPC).
    droppable = max(0, meminfo.get("Cached", 0) + meminfo.get("Buffers", 0) - meminfo.get("Shmem", 0))
    out = [
        Check(
            "G3",
            "INFO",
            f"memory: {_gib(total)} total, {_gib(used)} used, {_gib(avail)} available "
            f"(MemAvailable, the truth on GB10: NVML memory is Not Supported)",
        ),
        Check(
            "G3", "INFO", f"page cache a drop would free: about {_gib(droppable)} (Cached + Buffers - Shmem)"
        ),
    ]
    swap_total = meminfo.get("SwapTotal", 0)
    swap_used = swap_total - meminfo.get("SwapFree", swap_total)
    if swap_total:
        out.append(Check("G3", "INFO", f"swap: {_gib(swap_used)} used of {_gib(swap_total)}"))
    else:
        out.append(Check("G3", "INFO", "swap: none configured"))
    if avail < LOW_AVAILABLE_SHARE * total:
        out.append(
            Check(
                "G3",
                "WARN",
                f"only {_gib(avail)} available ({100 * avail / total:.0f}% of the pool): stop other jobs or drop caches",
            )
        )
    return out


def g4_thermal(
    gpus: Sequence[Mapping[str, Any]] | None,
    error: str | None = None,
    smi_error: str | None = None,
    via: str | None = None,
) -> list[Check]:
    """G4: temperature and power snapshot before the run starts (`via`: "nvidia-smi" when NVML is missing
    and nvidia-smi gave the readings; `smi_error`: why it could not either)."""
    # No GPU readings: SKIP on the line (nothing to check), a gap for the verdict (never "ready").
    if gpus is None:
        also = f"; {smi_error}" if smi_error else ""
        return [
            Check("G4", "SKIP", f"no GPU readings: NVML missing ({error or 'no driver'}){also}", gap=True)
        ]
    if not gpus:
        return [Check("G4", "SKIP", "no GPU readings: NVML reports no GPU", gap=True)]
    out = []
    for g in gpus:
        temp, power, slow = g.get("temp_c"), g.get("power_w"), g.get("slowdown_temp_c")
        name = f" {g['name']}" if g.get("name") else ""  # the name call can fail alone: no "GPU 0 None:"
        parts = [f"GPU {g.get('index', 0)}{name}:"]
        parts.append(f"{temp:.0f} C" if temp is not None else "temperature n/a")
        parts.append(f"{power:.1f} W" if power is not None else "power n/a")
        if slow is not None:
            parts.append(f"(slowdown at {slow:.0f} C)")
        if g.get("sm_clock_mhz") is not None:
            parts.append(f"SM {g['sm_clock_mhz']} MHz")
        msg = " ".join(parts) + (f" (from {via}: NVML missing, {error})" if via else "")
        if temp is not None and slow is not None and temp >= slow - HOT_START_MARGIN_C:
            out.append(Check("G4", "WARN", f"{msg}: already within {HOT_START_MARGIN_C:.0f} C of slowdown"))
        else:
            out.append(Check("G4", "INFO", msg))
    return out


def g4_clock_cap(unit_cap: int | None) -> list[Check]:
    """G4: whether an SM clock cap is applied at boot (the one lever: GB10 accepts no power limit)."""
    if unit_cap is not None:
        return [
            Check(
                "G4",
                "INFO",
                f"clock cap {unit_cap} MHz applied at every boot (spark-watchd-clock-cap.service); GB10 accepts "
                "no power limit, the clock cap is the lever against G4",
            )
        ]
    return [
        Check(
            "G4",
            "INFO",
            "no clock cap at boot: the SM clock runs free (GB10 accepts no power limit: nvidia-smi -pl is not "
            "supported; `sudo spark-watchd install-service --clock-cap 2100` caps the clock at every boot)",
        )
    ]


def g6_contention(
    workloads: Sequence[Mapping[str, Any]] | None, error: str | None = None, hidepid: str | None = None
) -> list[Check]:
    """G6: other GPU-resident processes (servers, trainers) and whether their memory is capped."""
    out = []
    if hidepid:
        # With hidepid, another user's vLLM or trainer is invisible: "no contention" would be a guess.
        out.append(
            Check("G6", "WARN", f"/proc is mounted hidepid={hidepid}: other users' processes are hidden")
        )
    if workloads is None:
        return out + [Check("G6", "SKIP", f"process scan unavailable ({error or 'unknown'})")]
    if not workloads:
        return out + [Check("G6", "PASS", "no other GPU workloads running")]
    for w in workloads:
        mem = w.get("gpu_memory_bytes")
        what = f"{w.get('kind', 'other')} (pid {w.get('pid')}{f', {mem / GIB:.1f} GiB' if mem else ''})"
        if w.get("capped") is False:
            out.append(
                Check("G6", "WARN", f"{what} is uncapped: {w.get('cap_hint') or 'it can evict the trainer'}")
            )
        else:
            cap = w.get("cap")
            out.append(Check("G6", "PASS", f"{what} running" + (f", capped: {cap}" if cap else "")))
    return out


def g7_capability(probe: Mapping[str, Any] | None) -> list[Check]:
    """G7: the device is compute capability 12.1 and torch carries kernels for it (sm_121 / sm_121a)."""
    torch = (probe or {}).get("torch")
    if not torch:
        return [Check("G7", "SKIP", "torch not installed: sm_121 kernels not checked", gap=True)]
    if not torch.get("cuda_available"):
        why = torch.get("cuda_error") or (
            "CPU-only build" if not torch.get("cuda") else "no CUDA device visible"
        )
        return [Check("G7", "WARN", f"torch.cuda not available ({why}): sm_121 kernels not checked")]
    cap = tuple(torch.get("capability") or ())
    name = torch.get("device_name", "?")
    out = []
    if cap == GB10_CAPABILITY:
        out.append(Check("G7", "PASS", f"{name} compute capability 12.1"))
    else:
        out.append(Check("G7", "WARN", f"{name} compute capability {'.'.join(map(str, cap))}: not a GB10"))
    archs = set(torch.get("arch_list") or ())
    native = sorted(archs & {"sm_121", "sm_121a"})
    major = f"sm_{cap[0]}0" if cap else None
    if native:
        out.append(Check("G7", "PASS", f"torch kernels target {', '.join(native)}"))
    elif cap == GB10_CAPABILITY and major in archs:
        out.append(
            Check("G7", "WARN", f"no sm_121 kernels: running {major} binaries; sm_121a-specific paths unused")
        )
    elif cap == GB10_CAPABILITY and any(a.startswith("compute_12") for a in archs):
        out.append(Check("G7", "WARN", "no sm_121 kernels: PTX is JIT-compiled at first use (slow start)"))
    elif cap == GB10_CAPABILITY:
        out.append(
            Check("G7", "FAIL", f"torch has no kernels for sm_121 (arch list: {' '.join(sorted(archs))})")
        )
    return out


def g9_container(markers: Mapping[str, Any]) -> list[Check]:
    """G9: PASS inside a container, WARN on the bare host (the community's contract: train in NGC containers)."""
    found = []
    if markers.get("dockerenv"):
        found.append("/.dockerenv")
    if markers.get("containerenv"):
        found.append("/run/.containerenv")
    cgroup = markers.get("cgroup") or ""
    m = re.search(r"(docker|containerd|kubepods|libpod|lxc)", cgroup)
    if m:
        found.append(f"cgroup mentions {m.group(1)}")
    if found:
        return [
            Check("G9", "PASS", f"container ({', '.join(found)}): host memory and NVML are shared with it")
        ]
    return [
        Check(
            "G9",
            "WARN",
            "bare host (no /.dockerenv, no /run/.containerenv, cgroup not a container's): "
            "an NGC container gives a matched CUDA 13 torch stack",
        )
    ]


_TP = re.compile(r"(?:--tensor[-_]parallel[-_]size|tensor_parallel_size|--tp(?:-size)?)[\s=:\"']+(\d+)", re.I)
_MULTINODE = re.compile(
    r"(--nnodes[\s=]+[2-9]|ray\s+start|--distributed-executor-backend[\s=]+ray|MASTER_ADDR|--address[\s=])",
    re.I,
)


def g10_tensor_parallel(
    launch_text: str | None, env: Mapping[str, str], source: str | None = None
) -> list[Check]:
    """G10: tensor parallel across two Sparks (one GPU each) in the launch config."""
    if launch_text is None and not any(k.startswith(("VLLM_", "NCCL_")) for k in env):
        return [Check("G10", "SKIP", "no launch config given (--launch-config)")]
    text = launch_text or ""
    sizes = [int(s) for s in _TP.findall(text)]
    tp = max(sizes) if sizes else 1
    where = f" in {source}" if source else ""
    if tp <= 1:
        return [Check("G10", "PASS", f"no tensor parallel across Sparks{where} (tensor parallel size 1)")]
    # Each Spark has one GPU, so tensor parallel 2 always crosses the ConnectX-7 link between two boxes.
    out = [Check("G10", "PASS", f"tensor parallel size {tp}{where}: spans {tp} Sparks over the network")]
    if not _MULTINODE.search(text):
        out.append(Check("G10", "WARN", "no multi-node setting (Ray cluster, --nnodes, MASTER_ADDR) found"))
    if "NCCL_SOCKET_IFNAME" not in text and "NCCL_SOCKET_IFNAME" not in env:
        out.append(
            Check(
                "G10", "WARN", "NCCL_SOCKET_IFNAME not set: NCCL may pick the slow LAN port, not ConnectX-7"
            )
        )
    return out
