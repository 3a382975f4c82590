"""Workload classification and cap parsing on the command lines workloads really run with."""

from __future__ import annotations

import pytest

from spark_watchd.sample.model import ProcessInfo
from spark_watchd.sample.workloads import KINDS, classify, is_capped, parse_size, read_caps


@pytest.mark.parametrize(
    ("argv", "name", "resident", "kind"),
    [
        (["vllm", "serve", "Qwen/Qwen3-32B"], "vllm", False, "vllm"),
        (["/usr/local/bin/vllm", "serve", "m", "--gpu-memory-utilization", "0.5"], "vllm", False, "vllm"),
        # How a console script really shows in /proc: the interpreter, then the script.
        (["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m"], "python3", False, "vllm"),
        (
            ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
            "python3",
            False,
            "vllm",
        ),
        (["python", "-m", "vllm.entrypoints.api_server"], "python", False, "vllm"),
        (["python3.12", "-u", "-m", "vllm.entrypoints.openai.api_server"], "python3.12", False, "vllm"),
        (["VLLM::EngineCore"], "VLLM::EngineCor", True, "vllm"),
        (["python", "-m", "sglang.launch_server", "--model-path", "m"], "python", False, "sglang"),
        (["sglang::scheduler"], "sglang::schedul", True, "sglang"),
        (["/usr/local/bin/ollama", "serve"], "ollama", False, "ollama"),
        (["/usr/bin/ollama", "runner", "--model", "/x/blobs/sha256-1"], "ollama", True, "ollama"),
        (
            ["/tmp/ollama1/runners/cuda_v12/ollama_llama_server", "--model", "x"],
            "ollama_llama_se",
            True,
            "ollama",
        ),
        (["ollama", "run", "llama3"], "ollama", False, "other"),  # the client, not the server
        (["./llama-server", "-m", "model.gguf", "-ngl", "99"], "llama-server", True, "llamacpp"),
        (["python3", "-m", "llama_cpp.server", "--model", "m.gguf"], "python3", False, "llamacpp"),
        (
            ["/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node", "1", "train.py"],
            "torchrun",
            False,
            "trainer",
        ),
        (["torchrun", "train.py"], "torchrun", False, "trainer"),
        (["python", "-m", "torch.distributed.run", "x.py"], "python", False, "trainer"),
        (["/usr/bin/python3", "/usr/local/bin/accelerate", "launch", "sft.py"], "python3", False, "trainer"),
        (["accelerate", "config"], "accelerate", False, "other"),
        (["trl", "sft", "--model_name_or_path", "m"], "trl", False, "trainer"),
        (["axolotl", "train", "cfg.yml"], "axolotl", False, "trainer"),
        (["python", "-m", "axolotl.cli.train", "cfg.yml"], "python", False, "trainer"),
        (["python", "unsloth-cli.py", "--model_name", "m"], "python", False, "trainer"),
        (["python3", "train.py", "--config", "configs/qwen-30b-qlora.yaml"], "python3", True, "trainer"),
        (["python3", "train.py"], "python3", False, "other"),  # not holding GPU memory: any script
        (["python3", "notebook.py"], "python3", True, "other"),
        (["bash"], "bash", False, "other"),
        ([], "kworker/0:1", False, "other"),
    ],
)
def test_classify(argv, name, resident, kind):
    assert kind in KINDS
    assert classify(argv, name, resident) == kind


def test_classify_trace_processes(traces_dir):
    import json

    kinds = set()
    # By sample 100 the LoRA trainer has joined the capped vLLM.
    for line in (traces_dir / "benign.jsonl").read_text().splitlines()[:101]:
        for p in json.loads(line)["processes"]:
            kinds.add(classify(p["cmdline"], p["name"], p["gpu_resident"]))
    assert {"vllm", "trainer"} <= kinds


@pytest.mark.parametrize(
    ("argv", "caps"),
    [
        (["vllm", "serve", "m", "--gpu-memory-utilization", "0.5"], (0.5, None)),
        (["vllm", "serve", "m", "--gpu-memory-utilization=0.94"], (0.94, None)),
        (
            ["python3", "-m", "vllm.entrypoints.openai.api_server", "--kv-cache-memory-bytes", "40G"],
            (None, 40 * 2**30),
        ),
        (["vllm", "serve", "--kv-cache-memory-bytes=25.6k"], (None, 25600)),
        (["vllm", "serve", "--kv-cache-memory-bytes", "8000000000"], (None, 8_000_000_000)),
        (["vllm", "serve", "--kv-cache-memory-bytes", "2g"], (None, 2_000_000_000)),
        (["vllm", "serve", "--kv-cache-memory-bytes", "1.5G"], (None, None)),  # vLLM refuses it too
        (["vllm", "serve", "--gpu-memory-utilization", "lots"], (None, None)),
        (["vllm", "serve", "--gpu-memory-utilization", "1.7"], (None, None)),
        (
            ["vllm", "serve", "--gpu-memory-utilization", "0.3", "--gpu-memory-utilization", "0.6"],
            (0.6, None),
        ),
        (["python", "-m", "sglang.launch_server", "--mem-fraction-static", "0.4"], (None, None)),
        (["vllm", "serve", "m"], (None, None)),
        (["vllm", "serve", "--gpu-memory-utilization"], (None, None)),
    ],
)
def test_read_caps(argv, caps):
    got = read_caps(argv)
    assert (got["gpu_memory_utilization"], got["kv_cache_memory_bytes"]) == caps


def test_parse_size():
    assert parse_size("40G") == 42949672960
    assert parse_size("512M") == 512 * 2**20
    assert parse_size("1t") == 10**12
    assert parse_size("12") == 12
    assert parse_size("²") is None and parse_size("4²G") is None  # digits int() refuses are no size
    assert parse_size("40GB") is None
    assert parse_size("") is None


def test_sglang_fraction_is_its_own_key():
    caps = read_caps(["python", "-m", "sglang.launch_server", "--mem-fraction-static=0.4"])
    assert caps == {
        "gpu_memory_utilization": None,
        "kv_cache_memory_bytes": None,
        "mem_fraction_static": 0.4,
        "kv_cache_free_gpu_memory_fraction": None,
    }


@pytest.mark.parametrize(
    ("kind", "argv", "capped"),
    [
        ("vllm", ["vllm", "serve", "--gpu-memory-utilization", "0.5"], True),
        ("vllm", ["vllm", "serve", "--gpu-memory-utilization", "0.94"], False),
        ("vllm", ["vllm", "serve"], False),  # default 0.9 of the whole pool
        # A KV budget in bytes bounds the server (it takes precedence over the fraction): capped.
        (
            "vllm",
            ["vllm", "serve", "--gpu-memory-utilization", "0.94", "--kv-cache-memory-bytes", "40G"],
            True,
        ),
        ("trtllm", ["trtllm-serve", "m", "--kv_cache_free_gpu_memory_fraction", "0.8"], False),
        ("trtllm", ["trtllm-serve", "m", "--kv_cache_free_gpu_memory_fraction", "0.4"], True),
        ("llamacpp", ["llama-server", "-m", "x.gguf", "-ngl", "99"], False),
        ("sglang", ["python", "-m", "sglang.launch_server", "--mem-fraction-static", "0.45"], True),
        ("ollama", ["ollama", "serve"], False),
        ("trainer", ["torchrun", "train.py"], None),
    ],
)
def test_is_capped(kind, argv, capped):
    assert classify(argv, "", True) == kind
    assert is_capped(kind, read_caps(argv)) is capped


def test_classify_and_read_caps_take_a_process_info():
    p = ProcessInfo(
        pid=1,
        create_time=0.0,
        name="python3",
        cmdline=("python3", "train.py"),
        rss_bytes=1,
        gpu_resident=True,
    )
    assert classify(p) == "trainer"
    argv = ("vllm", "serve", "--kv-cache-memory-bytes", "40G")
    v = ProcessInfo(pid=2, create_time=0.0, name="vllm", cmdline=argv, rss_bytes=1)
    assert read_caps(v)["kv_cache_memory_bytes"] == 40 * 2**30
    assert is_capped(classify(v), read_caps(v)) is True
