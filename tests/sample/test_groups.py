"""Processes grouped into workloads on the layouts today's servers run, with and without ppid."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_watchd.sample.groups import group_workloads
from spark_watchd.sample.model import ProcessInfo
from spark_watchd.sample.trace import read_trace

GIB = 1024**3


def p(pid, argv, rss_gib=0.5, gpu_gib=None, ct=1000.0, ppid=None, resident=None):
    gpu = None if gpu_gib is None else int(gpu_gib * GIB)
    res = gpu is not None if resident is None else resident
    return ProcessInfo(
        pid, ct, argv[0].rsplit("/", 1)[-1][:15], tuple(argv), int(rss_gib * GIB), gpu, res, ppid
    )


VLLM = ["vllm", "serve", "Qwen/Qwen3-32B", "--gpu-memory-utilization", "0.35"]


def _drop_ppid(procs):
    return [
        ProcessInfo(q.pid, q.create_time, q.name, q.cmdline, q.rss_bytes, q.gpu_mem_bytes, q.gpu_resident)
        for q in procs
    ]


def _vllm_tp2():
    return [
        p(100, VLLM, 1.5, ct=1000.0, ppid=1),
        p(101, ["VLLM::EngineCore_DP0"], 1.0, 0.2, ct=1004.0, ppid=100),
        p(102, ["VLLM::Worker_TP0_DP0"], 1.0, 20.0, ct=1006.0, ppid=101),
        p(103, ["VLLM::Worker_TP1_DP0"], 1.0, 20.0, ct=1006.1, ppid=101),
    ]


@pytest.mark.parametrize("with_ppid", [True, False])
def test_vllm_v1_tensor_parallel_is_one_workload_capped_by_its_launcher(with_ppid):
    procs = _vllm_tp2() if with_ppid else _drop_ppid(_vllm_tp2())
    (w,) = group_workloads(procs)
    assert (w.pid, w.kind, w.members) == (100, "vllm", (100, 101, 102, 103))
    assert w.capped is True and w.cap == "--gpu-memory-utilization 0.35" and w.cap_value == 0.35
    assert w.footprint_bytes == int(1.5 * GIB) + int(1.0 * GIB) + 2 * int(20.0 * GIB)
    assert w.cmdline == tuple(VLLM)


def test_without_ppid_a_child_joins_the_latest_launcher_of_its_kind_started_before_it():
    a = ["vllm", "serve", "a", "--gpu-memory-utilization", "0.3"]
    b = ["vllm", "serve", "b", "--gpu-memory-utilization", "0.4"]
    procs = [
        p(10, a, ct=1000.0),
        p(11, ["VLLM::EngineCore"], 1.0, 30.0, ct=1010.0),
        p(20, b, ct=2000.0),
        p(21, ["VLLM::EngineCore"], 1.0, 40.0, ct=2010.0),
    ]
    ws = {w.pid: w for w in group_workloads(procs)}
    assert ws[10].members == (10, 11) and ws[10].cap_value == 0.3
    assert ws[20].members == (20, 21) and ws[20].cap_value == 0.4


def test_a_renamed_prefix_still_reads_as_vllm():
    procs = [p(10, VLLM, ppid=1), p(11, ["MYAPP::EngineCore"], 1.0, 30.0, ppid=10)]
    (w,) = group_workloads(procs)
    assert w.kind == "vllm" and w.members == (10, 11)


@pytest.mark.parametrize("with_ppid", [True, False])
def test_sglang_scheduler_and_helpers_join_the_launcher(with_ppid):
    launcher = ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--mem-fraction-static", "0.8"]
    procs = [
        p(200, launcher, 1.0, ct=1000.0, ppid=1),
        p(201, ["sglang::scheduler_TP0"], 1.0, 90.0, ct=1003.0, ppid=200),
        p(202, ["sglang::detokenizer"], 0.3, ct=1003.5, ppid=200),
    ]
    (w,) = group_workloads(procs if with_ppid else _drop_ppid(procs))
    assert w.kind == "sglang" and w.members == (200, 201, 202)
    assert w.capped is False and w.cap == "--mem-fraction-static 0.8"


@pytest.mark.parametrize("with_ppid", [True, False])
def test_ollama_runner_is_the_servers_memory_and_ollama_is_never_capped(with_ppid):
    runner = ["/usr/local/bin/ollama", "runner", "--model", "/m/blobs/sha256-ab", "--port", "40001"]
    procs = [
        p(300, ["/usr/local/bin/ollama", "serve"], 0.5, ct=500.0, ppid=1),
        p(301, runner, 1.0, 20.0, ct=5000.0, ppid=300),
    ]
    (w,) = group_workloads(procs if with_ppid else _drop_ppid(procs))
    assert w.kind == "ollama" and w.members == (300, 301) and w.capped is False and w.cap is None
    assert w.cmdline == ("/usr/local/bin/ollama", "serve")


@pytest.mark.parametrize("with_ppid", [True, False])
def test_torchrun_workers_are_one_trainer(with_ppid):
    launcher = [
        "/usr/bin/python3",
        "/usr/local/bin/torchrun",
        "--nproc-per-node",
        "2",
        "train_sft.py",
        "--lr",
        "1e-4",
    ]
    procs = [
        p(400, launcher, 0.3, ct=1000.0, ppid=1),
        p(401, ["/usr/bin/python3", "-u", "train_sft.py", "--lr", "1e-4"], 6.0, 20.0, ct=1002.0, ppid=400),
        p(402, ["/usr/bin/python3", "-u", "train_sft.py", "--lr", "1e-4"], 6.0, 20.0, ct=1002.1, ppid=400),
    ]
    (w,) = group_workloads(procs if with_ppid else _drop_ppid(procs))
    assert w.kind == "trainer" and w.members == (400, 401, 402) and w.capped is None


def test_two_plain_trainers_stay_two_workloads():
    procs = [
        p(1, ["python3", "train.py"], 4.0, 10.0, ct=1.0),
        p(2, ["python3", "train.py"], 4.0, 10.0, ct=2.0),
    ]
    assert [w.members for w in group_workloads(procs)] == [(1,), (2,)]


def test_a_parent_started_after_its_child_is_a_reused_pid():
    procs = [p(10, VLLM, ct=5000.0, ppid=1), p(11, ["VLLM::EngineCore"], 1.0, 30.0, ct=1000.0, ppid=10)]
    assert len(group_workloads(procs)) == 2


def test_an_orphan_engine_has_no_known_cap():
    (w,) = group_workloads([p(11, ["VLLM::EngineCore"], 1.0, 30.0, ppid=1)])
    assert w.kind == "vllm" and w.capped is False and w.cap is None


def test_trtllm_and_llamacpp_caps():
    t = ["trtllm-serve", "m", "--kv_cache_free_gpu_memory_fraction", "0.8"]
    ws = group_workloads([p(1, t, 2.0, 60.0), p(2, ["llama-server", "-m", "x.gguf", "-ngl", "99"], 1.0, 9.0)])
    assert [(w.kind, w.capped, w.cap) for w in ws] == [
        ("trtllm", False, "--kv_cache_free_gpu_memory_fraction 0.8"),
        ("llamacpp", False, None),
    ]


def test_a_script_not_yet_on_the_gpu_is_not_a_workload():
    assert group_workloads([p(1, ["python3", "train.py"], 2.0)]) == ()


def test_one_grouper_regroups_when_the_layout_changes_and_sums_memory_afresh_each_sample():
    from spark_watchd.sample.groups import Grouper

    g = Grouper()
    tp2 = _vllm_tp2()
    (w,) = g.group(tp2)
    assert w.members == (100, 101, 102, 103)
    # Same layout, new memory: the grouping stands, the footprint is this sample's.
    grown = [*tp2[:3], p(103, ["VLLM::Worker_TP1_DP0"], 1.0, 30.0, ct=1006.1, ppid=101)]
    (w,) = g.group(grown)
    assert w.members == (100, 101, 102, 103)
    assert w.footprint_bytes == int(1.5 * GIB) + int(1.0 * GIB) + int(20.0 * GIB) + int(30.0 * GIB)
    # A trainer arrives: a second workload. A worker exits: it leaves its group.
    trainer = p(200, ["python", "train.py"], 30.0, 30.0, ct=2000.0, ppid=1)
    assert [x.members for x in g.group([*grown[:3], trainer])] == [(100, 101, 102), (200,)]
    # The launcher is replaced by another server under the same pid and start (a test of renames): recapped.
    relaunched = [p(100, [*VLLM[:-1], "0.9"], 1.5, ct=1000.0, ppid=1), *grown[1:]]
    (w,) = g.group(relaunched)
    assert w.cap_value == 0.9 and w.capped is False
    # Everyone gone (a reboot): no workloads left.
    assert g.group([]) == ()


def test_a_grouper_reuses_the_table_while_nothing_moved_and_each_row_whose_memory_held():
    from spark_watchd.sample.groups import Grouper

    g = Grouper()
    trainer = p(200, ["python", "train.py"], 30.0, 30.0, ct=2000.0, ppid=1)
    table = g.group([*_vllm_tp2(), trainer])
    assert g.group([*_vllm_tp2(), trainer]) is table  # a sample read afresh, the same figures
    grown = p(200, ["python", "train.py"], 31.0, 30.0, ct=2000.0, ppid=1)
    vllm, moved = g.group([*_vllm_tp2(), grown])
    assert vllm is table[0] and moved.footprint_bytes == int(31.0 * GIB)  # only the trainer's row is new
    renamed = ProcessInfo(
        200, 2000.0, "pt_main_thread", grown.cmdline, grown.rss_bytes, grown.gpu_mem_bytes, True, 1
    )
    assert g.group([*_vllm_tp2(), renamed])[1].name == "pt_main_thread"


# ---- issue 18 §6: Ray, containers, notebooks ------------------------------------------------------------
RAY_VLLM = [
    "vllm",
    "serve",
    "Qwen/Qwen3-14B",
    "--distributed-executor-backend=ray",
    "--gpu-memory-utilization=0.35",
]
QLORA = ["python3", "train_qlora.py", "--bits", "4"]


def _ray_vllm(raylet_ppid=100):
    """vLLM on the Ray executor: the launcher started the Ray runtime; raylet's workers hold the weights."""
    return [
        p(100, RAY_VLLM, 2.0, ct=1000.0, ppid=1),
        p(110, ["/opt/ray/core/src/ray/gcs/gcs_server", "--gcs_server_port=6379"], 0.3, ct=1005.0, ppid=100),
        p(
            111,
            ["/opt/ray/core/src/ray/raylet/raylet", "--node_manager_port=0"],
            0.2,
            ct=1005.5,
            ppid=raylet_ppid,
        ),
        p(120, ["ray::IDLE"], 0.3, ct=1010.0, ppid=111),
        p(121, ["ray::RayWorkerWrapper"], 1.5, 41.0, ct=1011.0, ppid=111),
        p(200, QLORA, 2.5, 6.0, ct=1100.0, ppid=1),
    ]


@pytest.mark.parametrize("with_ppid", [True, False])
def test_a_ray_executor_vllm_is_one_workload_with_its_launchers_cap(with_ppid):
    # Issue 18: "other (43 GiB, large) beside trainer" for hours: the Ray workers' memory is the vLLM's.
    procs = _ray_vllm() if with_ppid else _drop_ppid(_ray_vllm())
    ws = group_workloads(procs)
    assert [(w.kind, w.pid) for w in ws] == [("vllm", 100), ("trainer", 200)]
    v = ws[0]
    assert set(v.members) == {100, 110, 111, 120, 121} and v.capped is True and v.cap_value == 0.35
    assert v.gpu_mem_bytes == int(41.0 * GIB)


def test_ray_runtime_started_apart_still_joins_the_launcher_that_uses_it():
    # `ray start` exited: raylet was reparented to init; its workers still belong to the Ray launcher.
    ws = group_workloads(_ray_vllm(raylet_ppid=1))
    assert [(w.kind, w.pid) for w in ws] == [("vllm", 100), ("trainer", 200)]
    assert {111, 120, 121} <= set(ws[0].members) and ws[0].capped is True


def test_an_uncapped_ray_vllm_is_uncapped_not_other():
    procs = [q if q.pid != 100 else p(100, RAY_VLLM[:-1], 2.0, ct=1000.0, ppid=1) for q in _ray_vllm()]
    v = group_workloads(procs)[0]
    assert (v.kind, v.capped) == ("vllm", False)


@pytest.mark.parametrize("with_shim", [True, False])
def test_a_trainer_in_a_container_stays_a_trainer(with_shim):
    shim = p(
        50, ["/usr/bin/containerd-shim-runc-v2", "-namespace", "moby", "-id", "ab12"], 0.02, ct=900.0, ppid=1
    )
    trainer = p(60, ["python", "train.py"], 3.0, 30.0, ct=950.0, ppid=50)
    ws = group_workloads([shim, trainer] if with_shim else [trainer])
    assert [(w.kind, w.pid if not with_shim else w.kind) for w in ws] == [
        ("trainer", 60 if not with_shim else "trainer")
    ]
    assert ws[0].gpu_mem_bytes == int(30 * GIB)


def test_an_ipykernel_holding_gpu_memory_is_a_notebook_workload():
    kernel = [
        "/usr/bin/python3",
        "-m",
        "ipykernel_launcher",
        "-f",
        "/root/.local/share/jupyter/runtime/kernel-1.json",
    ]
    (w,) = group_workloads([p(70, kernel, 2.0, 24.0, ct=1000.0, ppid=1)])
    assert (w.kind, w.capped, w.footprint_bytes) == ("notebook", None, int(24.0 * GIB))
    assert (
        group_workloads([p(71, kernel, 0.3, ct=1000.0, ppid=1, resident=False)]) == ()
    )  # no GPU memory: none


TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


@pytest.mark.parametrize(
    "trace",
    ["layouts/torchrun_two_workers_30s", "layouts/sglang_beside_trainer_noppid_45s", "public/eviction"],
)
def test_a_grouper_fed_a_trace_tells_each_sample_what_grouping_it_afresh_would(trace):
    from spark_watchd.sample.groups import Grouper, Workload

    assert Workload._fields[6:9] == ("footprint_bytes", "gpu_mem_bytes", "rss_bytes")  # what _resummed sums
    g = Grouper()
    samples = list(read_trace(TRACES / f"{trace}.jsonl"))
    assert any(len(w.members) > 1 for s in samples for w in group_workloads(s.processes)) or "public" in trace
    for s in samples:
        assert g.group(s.processes) == group_workloads(s.processes), s.ts
