"""G6 contention classifier and eviction detection on hand-built windows."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from spark_watchd.diagnose import g6
from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.trace import read_trace
from tests.diagnose.diag_builders import Host, proc

VLLM_CAPPED = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--gpu-memory-utilization", "0.5"]
VLLM_KV = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--kv-cache-memory-bytes", "40G"]
VLLM_DEFAULT = ["vllm", "serve", "Qwen/Qwen3-32B"]
OLLAMA = ["/usr/local/bin/ollama", "serve"]
TRAINER = ["python3", "train.py", "--config", "qlora.yaml"]


def test_capped_vllm_beside_small_lora_is_ok():
    host = Host()
    th = Thresholds()
    procs = [proc(1, VLLM_CAPPED, 3.0, 60.0), proc(2, TRAINER, 2.5, 3.5)]
    assert g6.classify(host.run(3, processes=procs), th).severity == "ok"


def test_uncapped_tenants_beside_a_large_trainer_warn():
    th = Thresholds()
    for server in (VLLM_KV, VLLM_DEFAULT, OLLAMA, ["vllm", "serve", "m", "--gpu-memory-utilization=0.6"]):
        h = Host()
        procs = [proc(1, server, 3.0, 30.0), proc(2, TRAINER, 14.0, 38.0)]
        f = g6.classify(h.run(3, processes=procs), th)
        assert f.severity == "warning", server


def test_capped_at_half_is_the_boundary():
    host = Host()
    th = Thresholds()
    small = [proc(2, TRAINER, 5.0, 6.0)]  # heavy but not large
    at = [proc(1, ["vllm", "serve", "m", "--gpu-memory-utilization", "0.5"], 3.0, 60.0)] + small
    over = [proc(1, ["vllm", "serve", "m", "--gpu-memory-utilization", "0.51"], 3.0, 60.0)] + small
    assert g6.classify(host.run(2, processes=at), th).severity == "ok"
    assert g6.classify(Host().run(2, processes=over), th).severity == "warning"


def test_single_heavy_workload_is_ok():
    host = Host()
    th = Thresholds()
    assert g6.classify(host.run(3, processes=[proc(1, VLLM_DEFAULT, 3.0, 100.0)]), th).severity == "ok"


def _evict(host, proc, th, after_rss, gpu_after=38.0, psi=20.0, create_time=1000.0):
    d = Diagnoser(th)
    server = proc(1, VLLM_KV, 3.0, 40.0)
    for s in host.run(4, processes=[server, proc(2, TRAINER, 14.0, 38.0)]):
        d.observe(s)
    victim = proc(2, TRAINER, after_rss, gpu_after, create_time=create_time)
    return d.observe(host.sample(processes=[server, victim], psi_some=psi, swapout=3000))


def test_eviction_over_threshold_is_an_event_and_critical():
    host = Host()
    th = Thresholds()
    out = _evict(host, proc, th, after_rss=14.0 * (1 - th.eviction_loss_ratio) - 0.1)
    assert [e.kind for e in out.events] == ["eviction"]
    assert out.findings["G6"].severity == "critical"


def test_loss_under_ratio_is_not_eviction():
    host = Host()
    th = Thresholds()
    out = _evict(host, proc, th, after_rss=14.0 * (1 - th.eviction_loss_ratio) + 0.1)
    assert out.events == ()


def test_loss_without_pressure_is_not_eviction():
    host = Host()
    th = Thresholds()
    d = Diagnoser(th)
    srv = proc(1, VLLM_KV, 3.0, 40.0)
    for s in host.run(3, processes=[srv, proc(2, TRAINER, 14.0, 38.0)]):
        d.observe(s)
    assert d.observe(host.sample(processes=[srv, proc(2, TRAINER, 7.0, 38.0)])).events == ()


def test_weights_moved_to_gpu_is_not_eviction():
    host = Host()
    th = Thresholds()
    out = _evict(host, proc, th, after_rss=3.0, gpu_after=38.0 + 11.0)
    assert out.events == ()


def test_pid_reuse_is_a_new_process_not_an_eviction():
    host = Host()
    th = Thresholds()
    out = _evict(host, proc, th, after_rss=3.0, create_time=5000.0)
    assert out.events == ()


def test_major_fault_storm_with_stalls_while_sharing_is_critical():
    host = Host()
    th = Thresholds()
    procs = [proc(1, VLLM_KV, 3.0, 40.0), proc(2, TRAINER, 14.0, 38.0)]
    storm = host.run(3, processes=procs, majfault=th.majfault_storm_per_s + 50, psi_some=10.0)
    assert g6.classify(storm, th).severity == "critical"


def test_one_vllm_with_a_front_end_process_is_not_two_tenants():
    th = Thresholds()
    h = Host()
    front = proc(1, ["vllm", "serve", "Qwen/Qwen3-32B"], 2.0, 0.4)  # API server: a CUDA context only
    engine = proc(2, ["VLLM::EngineCore"], 3.0, 100.0)  # holds the weights and KV cache
    assert g6.classify(h.run(3, processes=[front, engine]), th).severity == "ok"
    trainer = proc(3, TRAINER, 14.0, 38.0)
    assert g6.classify(Host().run(3, processes=[front, engine, trainer]), th).severity == "warning"


def test_without_gpu_memory_a_load_then_shrink_is_not_eviction_but_a_settled_victim_is():
    th = Thresholds()
    h = Host()
    d = Diagnoser(th)
    srv = proc(1, VLLM_KV, 3.0, 40.0)

    def p(pid, rss):  # NVML reports no per-process memory (gpu_mem_bytes None)
        return replace(proc(pid, TRAINER, rss), gpu_mem_bytes=None)

    # process 2 loads (0.5 -> 20 GiB) then hands its weights to the GPU (-> 3 GiB) under pressure
    for rss in (0.5, 7.0, 14.0, 20.0):
        d.observe(h.sample(processes=[srv, p(2, rss), p(3, 14.0)]))
    out = d.observe(h.sample(processes=[srv, p(2, 3.0), p(3, 14.0)], psi_some=20.0, swapout=3000))
    assert out.events == ()
    # process 3 sat at 14 GiB and loses half of it under pressure: an eviction
    out = d.observe(h.sample(processes=[srv, p(2, 3.0), p(3, 7.0)], psi_some=20.0, swapout=3000))
    assert [(e.kind, e.details["pid"]) for e in out.events] == [("eviction", 3)]


def _spike(samples_at_peak):
    """A trainer at 10 GiB rises to 22 GiB for `samples_at_peak` 30 s samples, then sits at 10 GiB under pressure."""
    th = Thresholds()
    h = Host()
    d = Diagnoser(th)
    srv = proc(1, VLLM_KV, 3.0, 40.0)
    for rss in [10.0] * 5 + [22.0] * samples_at_peak:
        d.observe(h.sample(processes=[srv, proc(2, TRAINER, rss, 30.0)], psi_some=4.0))
    out = d.observe(h.sample(processes=[srv, proc(2, TRAINER, 10.0, 30.0)], psi_some=4.0))
    return [e.kind for e in out.events]


def test_a_short_spike_is_not_a_level_but_a_level_held_for_the_hold_time_is():
    th = Thresholds()
    assert th.eviction_level_hold_s == 90.0  # 30 s samples: 4 samples span the hold time
    assert _spike(1) == []  # checkpoint save: 10 -> 22 -> 10 GiB
    assert _spike(3) == []  # 60 s at 22 GiB: still under the hold time
    assert _spike(4) == ["eviction"]  # 90 s at 22 GiB, then back to 10 under pressure: 55 % lost


def _squeeze(losses, interval=60.0, quiet_after=None):
    """A 16 GiB trainer losing `losses[i]` GiB at sample i, all under pressure (PSI 15 %, swap-out)."""
    th = Thresholds()
    h = Host(interval=interval)
    d = Diagnoser(th)
    srv = proc(1, VLLM_DEFAULT, 2.0, 60.0)
    rss = 16.0
    for _ in range(5):
        d.observe(h.sample(processes=[srv, proc(2, TRAINER, rss, 36.0)]))
    kinds = []
    for i, loss in enumerate(losses):
        rss -= loss
        quiet = quiet_after is not None and quiet_after[0] <= i < quiet_after[1]
        kw = {} if quiet else {"psi_some": 15.0, "swapout": 900.0}
        out = d.observe(h.sample(processes=[srv, proc(2, TRAINER, rss, 36.0)], **kw))
        kinds += [e.kind for e in out.events]
    return kinds


def test_a_slow_squeeze_is_measured_from_the_start_of_the_pressure_episode():
    # 0.4 GiB a minute (2.5 %/min of 16 GiB): never 30 % within the 600 s window
    assert _squeeze([0.4] * 11) == []  # 4.4 GiB = 27.5 % lost: under the bar
    assert _squeeze([0.4] * 12 + [0.1]) == ["eviction"]  # 4.9 GiB = 30.6 %
    # one event per episode: the squeeze going on to 7 GiB does not report again
    assert _squeeze([0.4] * 22) == ["eviction"]


def test_a_quiet_spell_ends_the_pressure_episode():
    th = Thresholds()
    # 16 -> 12 GiB under pressure, 6 quiet minutes (> eviction_episode_gap_s), then 12 -> 10 GiB under pressure:
    # the new episode measures from 12 GiB (17 %), not from 16 GiB (37 %)
    assert th.eviction_episode_gap_s < 6 * 60
    assert _squeeze([0.4] * 10 + [0.0] * 6 + [0.4] * 5, quiet_after=(10, 16)) == []
    # the same losses with pressure throughout are one squeeze from 16 GiB
    assert _squeeze([0.4] * 10 + [0.0] * 6 + [0.4] * 5) == ["eviction"]


def test_the_summary_names_the_uncapped_or_large_workload():
    th = Thresholds()
    capped = proc(1, ["vllm", "serve", "m", "--gpu-memory-utilization", "0.5"], 3.0, 60.0)
    big = g6.classify(Host().run(2, processes=[capped, proc(2, TRAINER, 14.0, 30.0)]), th)
    assert big.severity == "warning"
    assert big.summary.endswith(": trainer (30 GiB, large) beside vllm (capped 0.5)")
    over = ["vllm", "serve", "m", "--gpu-memory-utilization", "0.9"]
    f = g6.classify(Host().run(2, processes=[proc(1, over, 3.0, 60.0), proc(2, TRAINER, 5.0, 6.0)]), th)
    assert f.summary.endswith(": vllm (cap 0.9, above 0.5) beside trainer (6 GiB)")
    f = g6.classify(Host().run(2, processes=[proc(1, OLLAMA, 3.0, 30.0), proc(2, TRAINER, 14.0, 38.0)]), th)
    assert f.summary.endswith(": ollama (uncapped) and trainer (38 GiB, large)")


def _g6_of(d: Diagnoser) -> g6.G6Tracker:
    return next(t for t in d.trackers if t.gotcha == "G6")


def test_at_one_second_sampling_a_process_keeps_a_bounded_history_and_evictions_still_show():
    th = Thresholds()
    h = Host(interval=1.0)
    d = Diagnoser(th)
    srv = proc(1, VLLM_KV, 3.0, 40.0)
    for _ in range(900):  # 15 minutes at --interval 1, longer than the 600 s window
        d.observe(h.sample(processes=[srv, proc(2, TRAINER, 14.0, 38.0)]))
    levels = _g6_of(d).rss
    # at most a level per 10 s of the window (601 a process unbounded)
    assert len(levels) == 2 and max(map(len, levels.values())) <= 61
    out = d.observe(h.sample(processes=[srv, proc(2, TRAINER, 7.0, 38.0)], psi_some=20.0, swapout=3000))
    assert [e.kind for e in out.events] == ["eviction"]


def test_at_one_second_sampling_a_spike_under_the_hold_time_is_still_no_level():
    def spike(seconds_at_peak):
        h = Host(interval=1.0)
        d = Diagnoser(Thresholds())
        srv = proc(1, VLLM_KV, 3.0, 40.0)
        for rss in [10.0] * 300 + [22.0] * seconds_at_peak:
            d.observe(h.sample(processes=[srv, proc(2, TRAINER, rss, 30.0)], psi_some=4.0))
        out = d.observe(h.sample(processes=[srv, proc(2, TRAINER, 10.0, 30.0)], psi_some=4.0))
        return [e.kind for e in out.events]

    assert spike(45) == []  # a checkpoint save: 45 s at 22 GiB
    assert spike(150) == ["eviction"]  # held well past eviction_level_hold_s (90 s), then lost


def test_the_quiet_shortcut_rules_as_walking_every_rule_would():
    from spark_watchd.diagnose.g6_rules import RULES, ruling
    from spark_watchd.diagnose.tracker import judge

    seen = []
    d = Diagnoser(Thresholds())
    t = _g6_of(d)
    now_of = t._now

    def now(s):
        n = now_of(s)
        seen.append((s, n))
        return n

    t._now = now
    root = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
    for trace in ("public/eviction", "public/benign", "layouts/heavy_line_wander_45s"):
        for s in read_trace(root / f"{trace}.jsonl"):
            d.observe(s)
    rulings = {(ruling(s, n, t.th), judge(RULES, s, n, t.th)) for s, n in seen}
    assert all(a == b for a, b in rulings) and {a.severity for a, _ in rulings} == {
        "ok",
        "warning",
        "critical",
    }


def test_a_threshold_reload_judges_the_next_sample_against_the_new_lines():
    th = Thresholds()
    d = Diagnoser(th)
    srv = proc(1, ["vllm", "serve", "m", "--gpu-memory-utilization", "0.6"], 3.0, 60.0)
    procs = [srv, proc(2, TRAINER, 5.0, 6.0)]
    h = Host()
    for s in h.run(2, processes=procs):
        assert d.observe(s).findings["G6"].severity == "warning"  # 0.6 is over the 0.5 cap line
    d.set_thresholds(Thresholds(capped_utilization_max=0.7, heavy_workload_bytes=int(7 * 1024**3)))
    out = d.observe(h.sample(processes=procs))
    assert out.findings["G6"].severity == "ok" and out.findings["G6"].state.heavy == 1  # 6 GiB: not heavy
    d.set_thresholds(Thresholds(capped_utilization_max=0.7))
    out = d.observe(h.sample(processes=procs))
    assert out.findings["G6"].summary.endswith("all capped: vllm (capped 0.6) and trainer (6 GiB)")
