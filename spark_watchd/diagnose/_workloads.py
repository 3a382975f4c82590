"""Minimal workload classifier for G6, used until the shared `spark_watchd.workloads` lands on main.

Same contract as the shared module: `classify(cmdline, name, gpu_resident) -> kind` and
`read_caps(cmdline) -> dict` with `gpu_memory_utilization` / `kv_cache_memory_bytes` / `mem_fraction_static`.
"""

from __future__ import annotations

from collections.abc import Sequence

SERVER_KINDS = ("vllm", "sglang", "ollama", "llamacpp")
_TRAINER_WORDS = (
    "train",
    "torchrun",
    "accelerate",
    "trl",
    "axolotl",
    "unsloth",
    "finetune",
    "deepspeed",
    "lora",
)


def classify(cmdline: Sequence[str], name: str, gpu_resident: bool) -> str:
    """Kind of workload: vllm, sglang, ollama, llamacpp, trainer or other."""
    joined = " ".join(cmdline).lower()
    base = (name or "").lower()
    first = cmdline[0].rsplit("/", 1)[-1].lower() if cmdline else ""
    if "vllm" in joined or base == "vllm":
        return "vllm"
    if "sglang" in joined:
        return "sglang"
    if "ollama" in base or first == "ollama" or first.startswith("ollama"):
        return "ollama"
    if "llama-server" in joined or "llama_cpp" in joined or first in ("llama-server", "llama-cli", "server"):
        return "llamacpp"
    if any(w in joined for w in _TRAINER_WORDS):
        return "trainer"
    return "other"


def _flag(cmdline: Sequence[str], flag: str) -> str | None:
    for i, arg in enumerate(cmdline):
        if arg == flag and i + 1 < len(cmdline):
            return cmdline[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _float(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def read_caps(cmdline: Sequence[str]) -> dict:
    """Memory caps named on a server's command line (absent ones are None)."""
    kv = _flag(cmdline, "--kv-cache-memory-bytes") or _flag(cmdline, "--kv-cache-memory")
    return {
        "gpu_memory_utilization": _float(_flag(cmdline, "--gpu-memory-utilization")),
        "kv_cache_memory_bytes": kv,
        "mem_fraction_static": _float(_flag(cmdline, "--mem-fraction-static")),
    }
