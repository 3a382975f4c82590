"""Which workload a process is, and which memory caps it was launched with. Pure functions of argv.

Shared by the process scan (which keeps only relevant processes), the
diagnosis (G6 contention) and the exporter (`sparkwatchd_workloads{kind}`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

KINDS = ("vllm", "sglang", "ollama", "llamacpp", "trtllm", "trainer", "notebook", "other")
# Servers: memory is theirs to take unless a flag on the launcher bounds it.
SERVER_KINDS = frozenset(("vllm", "sglang", "ollama", "llamacpp", "trtllm"))

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
# Script names that make a GPU-resident `python SCRIPT` a trainer.
_TRAIN_SCRIPT = re.compile(r"(train|finetune|fine_tune|sft|dpo|grpo|pretrain)", re.IGNORECASE)
_TRAINER_BINARIES = {"torchrun", "axolotl", "deepspeed", "tune", "llamafactory-cli"}
_TRAINER_MODULES = (
    "torch.distributed.run",
    "torch.distributed.launch",
    "axolotl",
    "trl",
    "unsloth",
    "deepspeed",
)
_TRL_VERBS = {"sft", "dpo", "grpo", "kto", "reward", "rloo", "ppo", "orpo"}
# A Jupyter kernel (`python -m ipykernel_launcher -f kernel.json`): a notebook workload while it holds GPU memory.
_NOTEBOOK_MODULES = ("ipykernel_launcher", "ipykernel", "colab_kernel_launcher")
# The Ray runtime a vLLM (--distributed-executor-backend ray) or a Ray trainer starts: its workers hold the
# memory under titles that name no workload (ray::IDLE, ray::RayWorkerWrapper, ray::<Actor>).
_RAY_PROGRAMS = ("raylet", "gcs_server")


def _base(arg: str) -> str:
    return os.path.basename(arg)


def _program(argv: Sequence[str]) -> tuple[str, str | None, list[str]]:
    """(program basename, `-m` module or None, remaining args) looking through a python interpreter.

    `python3 /usr/local/bin/vllm serve` (how a console script really runs) and
    `python -m vllm.entrypoints.openai.api_server` both resolve to what runs.
    """
    if not argv:
        return "", None, []
    prog = _base(argv[0])
    if not _PYTHON.match(prog):
        return prog, None, list(argv[1:])
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m" and i + 1 < len(argv):
            return prog, argv[i + 1], list(argv[i + 2 :])
        if a.startswith("-m") and len(a) > 2:
            return prog, a[2:], list(argv[i + 1 :])
        if a == "-c":
            return prog, None, list(argv[i + 1 :])
        if a in ("-W", "-X", "-Q"):
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        return _base(a), None, list(argv[i + 1 :])  # the script
    return prog, None, []


def classify(cmdline: Sequence[str] | Any, name: str = "", gpu_resident: bool = False) -> str:
    """The workload kind of a process: vllm, sglang, ollama, llamacpp, trainer or other.

    Takes argv, its process name and whether NVML lists it; or a ProcessInfo alone.
    """
    if hasattr(cmdline, "cmdline"):  # a ProcessInfo (or anything shaped like one)
        proc = cmdline
        cmdline, name, gpu_resident = proc.cmdline, proc.name, proc.gpu_resident
    argv = list(cmdline)
    # Engine sub-processes retitle themselves ("VLLM::EngineCore", "sglang::scheduler") and hold the GPU memory.
    title = argv[0] if argv else name
    titled = _titled_kind(title) or _titled_kind(name)
    if titled:
        return titled
    prog, module, rest = _program(argv)
    if not prog:
        prog = name
    mod_root = (module or "").split(".")[0]
    first = rest[0] if rest else ""
    if prog == "vllm" or mod_root == "vllm":
        return "vllm"
    if mod_root == "sglang" or (prog == "sglang" and first in ("serve", "launch_server")):
        return "sglang"
    if prog in ("ollama_llama_server",) or (prog == "ollama" and first in ("serve", "runner")):
        return "ollama"
    if prog.startswith("llama-server") or module == "llama_cpp.server":
        return "llamacpp"
    if prog == "trtllm-serve" or mod_root == "tensorrt_llm":
        return "trtllm"
    if module and any(module == m or module.startswith(m + ".") for m in _TRAINER_MODULES):
        return "trainer"
    if prog in _TRAINER_BINARIES or "unsloth" in prog:
        return "trainer"
    if prog == "accelerate" and first == "launch":
        return "trainer"
    if prog == "trl" and first in _TRL_VERBS:
        return "trainer"
    # A plain `python train.py` counts only while it holds GPU memory (else it is any script).
    if gpu_resident and is_training_script(argv):
        return "trainer"
    if gpu_resident and (module in _NOTEBOOK_MODULES or prog in ("ipykernel_launcher.py",)):
        return "notebook"
    return "other"


def is_ray_runtime(cmdline: Sequence[str], name: str = "") -> bool:
    """raylet, the Ray GCS server, or a Ray worker retitled `ray::IDLE` / `ray::<Actor>`."""
    argv = list(cmdline)
    title = argv[0] if argv else name
    if title.startswith("ray::") or name.startswith("ray::"):
        return True
    return (_program(argv)[0] if argv else name) in _RAY_PROGRAMS


def uses_ray(cmdline: Sequence[str]) -> bool:
    """A launcher that runs on Ray: `--distributed-executor-backend ray` (vLLM), `=ray`, or `python -m ray...`."""
    argv = list(cmdline)
    return (
        any(a == "ray" or a.endswith("=ray") for a in argv)
        or (_program(argv)[1] or "").split(".")[0] == "ray"
    )


# vLLM V1 titles its processes PREFIX::EngineCore[_DP0], ::EngineCoreProc_0, ::Worker_TP1_DP0, ::APIServer_0,
# ::DPCoordinator; VLLM_PROCESS_NAME_PREFIX replaces "VLLM", so the role after "::" is what identifies them.
_VLLM_TITLE = re.compile(r"^[A-Za-z0-9_.-]+::(EngineCore|Worker|APIServer|DPCoordinator)")


def _titled_kind(title: str) -> str | None:
    if title.startswith("sglang::"):
        return "sglang"
    if title.startswith("VLLM::") or _VLLM_TITLE.match(title):
        return "vllm"
    return None


def is_member_title(cmdline: Sequence[str], name: str = "") -> bool:
    """A server's child that carries no flags of its own: a retitled engine/worker or an `ollama runner`."""
    argv = list(cmdline)
    title = argv[0] if argv else name
    if _titled_kind(title) or _titled_kind(name):
        return True
    prog = _base(argv[0]) if argv else name
    return prog == "ollama_llama_server" or (prog == "ollama" and len(argv) > 1 and argv[1] == "runner")


def script_of(cmdline: Sequence[str]) -> str | None:
    """The script a `python [-u] SCRIPT ...` runs, as written on its command line (None for anything else)."""
    argv = list(cmdline)
    if not argv or not _PYTHON.match(_base(argv[0])):
        return None
    prog, module, rest = _program(argv)
    if module is not None or not prog.endswith(".py"):
        return None
    idx = len(argv) - len(rest) - 1
    return argv[idx] if 0 <= idx < len(argv) else None


def is_training_script(cmdline: Sequence[str]) -> bool:
    """`python train.py`-like: a trainer once it holds GPU memory, worth watching before (model load)."""
    prog, module, _ = _program(list(cmdline))
    return module is None and prog.endswith(".py") and bool(_TRAIN_SCRIPT.search(prog))


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT])$")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int | None:
    """A byte count as vLLM reads it: `40G` = 40 GiB, `40g` = 40e9, `25.6k` = 25600, plain integers."""
    text = text.strip()
    if text.isascii() and text.isdigit():  # "²".isdigit() is True, int("²") raises
        return int(text)
    m = _SIZE.match(text)
    if not m:
        return None
    number, suffix = m.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    if not number.isdigit():
        return None  # vLLM refuses decimals with binary suffixes
    return int(number) * _BINARY[suffix]


def _flag(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """Value of the last `--flag value` or `--flag=value` among names (argparse: the last one wins)."""
    value = None
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                value = argv[i + 1]
            elif a.startswith(n + "="):
                value = a[len(n) + 1 :]
    return value


def read_caps(cmdline: Sequence[str] | Any) -> dict[str, float | int | None]:
    """The memory caps on a command line (None where absent or unparseable).

    `gpu_memory_utilization` (vLLM, fraction), `kv_cache_memory_bytes` (vLLM, bytes:
    `40G` = 40 GiB as vLLM reads it), `mem_fraction_static` (SGLang, fraction),
    `kv_cache_free_gpu_memory_fraction` (TensorRT-LLM, fraction of the memory left after the weights).
    Takes argv or a ProcessInfo. The dict is never empty: whether the caps make
    the workload capped is `is_capped(kind, caps)`, not the dict's truth.
    """
    if hasattr(cmdline, "cmdline"):  # a ProcessInfo: its argv
        cmdline = cmdline.cmdline
    kv_text = _flag(cmdline, ("--kv-cache-memory-bytes", "--kv_cache_memory_bytes", "--kv-cache-memory"))
    return {
        "gpu_memory_utilization": _fraction(
            _flag(cmdline, ("--gpu-memory-utilization", "--gpu_memory_utilization"))
        ),
        "kv_cache_memory_bytes": parse_size(kv_text) if kv_text is not None else None,
        "mem_fraction_static": _fraction(_flag(cmdline, ("--mem-fraction-static", "--mem_fraction_static"))),
        "kv_cache_free_gpu_memory_fraction": _fraction(
            _flag(cmdline, ("--kv_cache_free_gpu_memory_fraction", "--kv-cache-free-gpu-memory-fraction"))
        ),
    }


def _fraction(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        return None
    return v if 0.0 < v <= 1.0 else None


# Per server kind: the cap keys it reads, most binding first, and the flag each is written as.
_CAP_FLAGS = {
    "vllm": (
        ("kv_cache_memory_bytes", "--kv-cache-memory-bytes"),
        ("gpu_memory_utilization", "--gpu-memory-utilization"),
    ),
    "sglang": (("mem_fraction_static", "--mem-fraction-static"),),
    "trtllm": (("kv_cache_free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction"),),
}


def cap_flag(kind: str, caps: Mapping[str, Any]) -> tuple[str | None, float | int | None]:
    """(the flag that caps this server as it would be written, its value), or (None, None) when none does."""
    for key, flag in _CAP_FLAGS.get(kind, ()):
        v = caps.get(key)
        if v:
            shown = f"{v / 2**30:g}GiB" if key == "kv_cache_memory_bytes" else f"{v:g}"
            return f"{flag} {shown}", v
    return None, None


def is_capped(kind: str, caps: Mapping[str, Any], max_fraction: float = 0.5) -> bool | None:
    """Whether a server's memory is bounded on its command line (None for non-servers).

    vLLM: `--kv-cache-memory-bytes` (the KV cache is that many bytes beside the
    weights: bounded; it takes precedence over the utilisation fraction) or
    `--gpu-memory-utilization` at or below max_fraction (the default 0.9 takes the
    whole UMA pool on GB10). SGLang: `--mem-fraction-static`; TensorRT-LLM:
    `--kv_cache_free_gpu_memory_fraction`, each at or below max_fraction.
    Ollama and llama.cpp take what they find.
    """
    if kind not in SERVER_KINDS:
        return None
    if kind in ("ollama", "llamacpp"):
        return False
    if kind == "vllm" and caps.get("kv_cache_memory_bytes"):
        return True
    key = {"vllm": "gpu_memory_utilization", "sglang": "mem_fraction_static"}.get(
        kind, "kv_cache_free_gpu_memory_fraction"
    )
    frac = caps.get(key)
    return frac is not None and frac <= max_fraction


# Another user's argv is foreign input: bounded as it is read, before it reaches a sample, a trace or a response
# (issue 20: 10 processes with 1.9 MB of argv made /api/v1/status 19.4 MB and the RSS 54.8 -> 132 MB).
ARG_MAX_BYTES = 1024  # one argument
ARGV_MAX_BYTES = 8192  # one process's argv, in order from argv[0]
SAMPLE_ARGV_MAX_BYTES = 128 * 1024  # every process of one sample; past it each keeps ARGV_HEAD_BYTES
ARGV_HEAD_BYTES = 512
# Flags read by read_caps and the serving endpoints: kept past the budget (their last occurrence, as argparse
# reads them), so a cap or a port written after a megabyte of padding still counts.
LAUNCHER_FLAGS = frozenset(
    (
        "--gpu-memory-utilization",
        "--gpu_memory_utilization",
        "--kv-cache-memory-bytes",
        "--kv_cache_memory_bytes",
        "--kv-cache-memory",
        "--mem-fraction-static",
        "--mem_fraction_static",
        "--kv_cache_free_gpu_memory_fraction",
        "--kv-cache-free-gpu-memory-fraction",
        "--host",
        "--port",
    )
)
_MORE = re.compile(r"^\.\.\. \((\d+) more bytes\)$")


def _launcher_flag(arg: str) -> tuple[str, bool] | None:
    """(flag name, whether its value follows as the next argument) for a kept launcher flag, else None."""
    name, eq, _ = arg.partition("=")
    return (name, not eq) if name in LAUNCHER_FLAGS else None


def _cut(arg: str, size: int, max_arg: int) -> str:
    return arg if size <= max_arg else arg[:max_arg] + f"... ({size - max_arg} more bytes)"


def bound_args(
    items, max_total: int = ARGV_MAX_BYTES, max_arg: int = ARG_MAX_BYTES, rebound: bool = False
) -> tuple[str, ...]:
    """A bounded argv from (prefix, size in bytes) items, one per argument.

    Arguments are kept from argv[0] while `max_total` lasts, each cut at `max_arg` with "... (N more bytes)";
    past the budget only launcher flags (LAUNCHER_FLAGS, the last occurrence of each, with its value) are
    kept, and one "... (N more bytes)" says what was left out. With `rebound` (an argv bounded once already)
    the earlier marker's count is summed in.
    """
    head: list[str] = []
    late: dict[str, tuple[str, ...]] = {}
    used = dropped = 0
    over = False
    want_value: str | None = None  # a late flag whose value is the next argument
    for prefix, size in items:
        m = _MORE.match(prefix) if rebound and prefix.startswith("... (") else None
        if m:  # what an earlier bound left out
            dropped += int(m.group(1))
            continue
        if want_value is not None:
            late[want_value] += (_cut(prefix, size, max_arg),)
            want_value = None
            continue
        shown = min(size, max_arg)
        if not over and used + shown <= max_total:
            head.append(_cut(prefix, size, max_arg))
            used += shown
            continue
        if not over and head and (_launcher_flag(head[-1]) or ("", False))[1]:
            head.append(_cut(prefix, size, max_arg))  # the value of a flag kept at the end of the head
            used += shown
            over = True
            continue
        over = True
        flag = _launcher_flag(prefix) if size <= max_arg else None
        if flag is not None:
            late.pop(flag[0], None)  # the last occurrence wins, in its own place
            late[flag[0]] = (prefix,)
            want_value = flag[0] if flag[1] else None
        else:
            dropped += size
    tail = [a for args in late.values() for a in args]
    if dropped:
        head.append(f"... ({dropped} more bytes)")
    return tuple(head + tail)


def bound_cmdline(
    raw: bytes, max_total: int = ARGV_MAX_BYTES, max_arg: int = ARG_MAX_BYTES
) -> tuple[str, ...]:
    """/proc/PID/cmdline bytes as a bounded argv (bound_args); only each kept argument's prefix is decoded.

    NUL-separated; a process that rewrote its title with spaces and no NUL (setproctitle) is split on
    spaces, as psutil does.
    """
    end = len(raw) - 1 if raw.endswith(b"\0") else len(raw)
    if end <= 0:
        return ()
    sep = b"\0" if raw.find(b"\0", 0, end) >= 0 or raw.find(b" ", 0, end) < 0 else b" "
    if end <= min(max_arg, max_total):  # most argvs: nothing to cut, and a separator never splits a character
        return tuple(raw[:end].decode("utf-8", "replace").split(sep.decode()))

    def items():
        pos = 0
        while pos <= end:
            nxt = raw.find(sep, pos, end)
            nxt = end if nxt < 0 else nxt
            yield raw[pos : min(nxt, pos + max_arg)].decode("utf-8", "replace"), nxt - pos
            pos = nxt + 1

    return bound_args(items(), max_total, max_arg)


def bound_argv(
    argv: Sequence[str], max_total: int = ARGV_MAX_BYTES, max_arg: int = ARG_MAX_BYTES
) -> tuple[str, ...]:
    """bound_args again over an argv bounded once (a sample over the per-sample budget)."""
    sized = ((a, len(a.encode("utf-8", "surrogatepass"))) for a in argv)
    return bound_args(sized, max_total, max_arg, rebound=True)
