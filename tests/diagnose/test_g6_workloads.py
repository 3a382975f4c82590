"""G6 on workloads (process groups): heavy means heavy, unload is no eviction, caps are a server notion,
and findings that hold steady at a threshold."""

from __future__ import annotations

from spark_watchd.diagnose import g6
from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.thresholds import Thresholds
from tests.diagnose.diag_builders import Host, proc

TRAINER = ["python3", "train.py", "--config", "qlora.yaml"]
OLLAMA = ["/usr/local/bin/ollama", "serve"]
RUNNER = ["/usr/local/bin/ollama", "runner", "--model", "/m/blobs/sha256-1", "--port", "41000"]
VLLM_LAUNCHER = ["vllm", "serve", "m", "--gpu-memory-utilization", "0.35"]


def test_an_ollama_with_no_model_loaded_is_not_a_heavy_co_tenant():
    th = Thresholds()
    procs = [proc(1, OLLAMA, 0.5, 0.5), proc(2, TRAINER, 14.0, 38.0)]
    f = g6.classify(Host().run(3, processes=procs), th)
    assert f.severity == "ok" and f.evidence["heavy_workloads"] == 1


def test_an_ollama_runner_holding_a_model_makes_ollama_heavy_and_uncapped():
    th = Thresholds()
    procs = [
        proc(1, OLLAMA, 0.5, 0.0, ppid=1),
        proc(3, RUNNER, 1.0, 20.0, ppid=1),
        proc(2, TRAINER, 14.0, 38.0),
    ]
    procs[1] = proc(3, RUNNER, 1.0, 20.0, create_time=2000.0, ppid=1)
    f = g6.classify(Host().run(3, processes=procs), th)
    assert f.severity == "warning" and "ollama (uncapped)" in f.summary
    (row,) = [w for w in f.evidence["workloads"] if w["kind"] == "ollama"]
    assert row["members"] == [1, 3]


def test_a_lone_trainer_is_never_an_uncapped_workload():
    th = Thresholds()
    f = g6.classify(Host().run(3, processes=[proc(2, TRAINER, 14.0, 60.0)]), th)
    assert f.severity == "ok" and f.evidence["uncapped_workloads"] == 0


def test_vllm_v1_engine_and_launcher_are_one_capped_tenant_beside_a_trainer():
    th = Thresholds()
    procs = [
        proc(10, VLLM_LAUNCHER, 1.5, 0.0, resident=False, ppid=1),
        proc(11, ["VLLM::EngineCore"], 1.0, 40.0, create_time=1001.0, ppid=10),
        proc(2, TRAINER, 6.0, 8.0),
    ]
    f = g6.classify(Host().run(3, processes=procs), th)
    assert f.severity == "ok" and f.evidence["heavy_workloads"] == 2
    assert "vllm (capped 0.35)" in f.summary


def test_a_kv_byte_budget_is_capped_until_the_server_holds_over_its_share_of_the_pool():
    th = Thresholds()
    kv = ["vllm", "serve", "m", "--kv-cache-memory-bytes", "20G"]
    small = g6.classify(Host().run(2, processes=[proc(1, kv, 2.0, 40.0), proc(2, TRAINER, 5.0, 6.0)]), th)
    assert small.severity == "ok" and "capped --kv-cache-memory-bytes 20GiB" in small.summary
    big = g6.classify(Host().run(2, processes=[proc(1, kv, 2.0, 70.0), proc(2, TRAINER, 5.0, 6.0)]), th)
    assert big.severity == "warning" and "holding 70 GiB" in big.summary


def test_a_server_unloading_its_model_while_memory_returns_is_not_an_eviction():
    """vLLM sleep mode / a restart: the server's memory drops while MemAvailable rises by as much."""
    th = Thresholds()
    host = Host()
    d = Diagnoser(th)
    server = ["vllm", "serve", "m"]
    for s in host.run(
        5, processes=[proc(1, server, 30.0, 0.0), proc(2, TRAINER, 14.0, 38.0)], avail_gib=20.0
    ):
        d.observe(s)
    # Some unrelated stall is going on (PSI 3 %), but the 25 GiB came back to the pool.
    out = d.observe(
        host.sample(
            processes=[proc(1, server, 5.0, 0.0), proc(2, TRAINER, 14.0, 38.0)], avail_gib=45.0, psi_some=3.0
        )
    )
    assert out.events == ()


def test_a_footprint_wandering_at_the_heavy_line_does_not_toggle_the_finding():
    th = Thresholds()
    d = Diagnoser(th)
    host = Host()
    sev = []
    for i in range(20):
        gib = 4.2 if i % 2 == 0 else 3.6  # a small model plus a KV cache filling and draining
        procs = [proc(1, ["llama-server", "-m", "x.gguf"], 0.5, gib), proc(2, TRAINER, 14.0, 38.0)]
        sev.append(d.observe(host.sample(processes=procs)).findings["G6"].severity)
    assert sev[0] == "warning" and set(sev) == {"warning"}
    procs = [proc(1, ["llama-server", "-m", "x.gguf"], 0.5, 1.0), proc(2, TRAINER, 14.0, 38.0)]
    assert [d.observe(host.sample(processes=procs)).findings["G6"].severity for _ in range(3)][-1] == "ok"


def test_a_fault_storm_hovering_at_the_line_is_one_critical_not_a_toggle():
    th = Thresholds()
    d = Diagnoser(th)
    host = Host()
    procs = [proc(1, ["vllm", "serve", "m"], 3.0, 60.0), proc(2, TRAINER, 14.0, 38.0)]
    sev = []
    for i in range(20):
        rate = 250.0 if i % 2 == 0 else 160.0
        sev.append(
            d.observe(host.sample(processes=procs, majfault=rate, psi_some=10.0)).findings["G6"].severity
        )
    # The first sample has no rate yet and the second is under the entering line: critical from the third on.
    assert sev[:2] == ["warning", "warning"] and set(sev[2:]) == {"critical"}
    after = [
        d.observe(host.sample(processes=procs, majfault=3.0, psi_some=0.2)).findings["G6"] for _ in range(3)
    ]
    assert after[-1].severity == "warning"
