"""The serving judgements: damage only at comparable load against the server's own baseline, never from idle
or bursty servers; preemption storms and KV collapse while busy; Ollama keep-alive unloads are explained."""

import random

from spark_watchd.diagnose.serving import ServingThresholds, ServingWatch
from spark_watchd.sample.serving import OllamaModel, ServingReading

TH = ServingThresholds()


def _r(ts, tps, running, kv=0.5, preempt=0.0, server="vllm:8000", **kw):
    return ServingReading(server, "vllm", True, ts, pid=1, generation_tokens_per_s=tps, requests_running=running,
                          kv_usage=kv, preemptions_total=preempt, **kw)  # fmt: skip


def _feed(w, rows):
    """rows: (tps, running, throttled); 30 s apart."""
    for i, (tps, running, thr) in enumerate(rows):
        w.observe([_r(1000.0 + 30 * i, tps, running)], 1000.0 + 30 * i, thr)


def test_a_throttle_cutting_decode_at_the_same_load_is_damage_with_the_numbers():
    w = ServingWatch()
    _feed(w, [(240.0 + i, 8, False) for i in range(8)] + [(140.0, 8, True), (135.0, 8, True)])
    (d,) = w.damage()
    assert d["server"] == "vllm:8000" and d["decode_ratio"] >= 1.5
    assert d["tokens_per_s"] == 137.5 and d["baseline_tokens_per_s"] > 240


def test_fewer_tokens_because_fewer_requests_is_not_damage():
    w = ServingWatch()
    _feed(w, [(240.0, 8, False)] * 8 + [(60.0, 2, True), (62.0, 2, True)])  # same rate per request
    assert w.damage() == []


def test_no_baseline_at_this_load_means_no_damage():
    w = ServingWatch()
    _feed(w, [(60.0, 2, False)] * 8 + [(140.0, 8, True), (135.0, 8, True)])
    assert w.damage() == []


def test_a_bursty_idle_server_never_makes_damage():
    rnd = random.Random(7)
    rows = []
    for _ in range(40):
        running = rnd.choice([0, 0, 0, 1, 3, 6])
        rows.append((rnd.uniform(5, 90) * running if running else 0.0, running, False))
    rows += [(rnd.uniform(5, 40), rnd.choice([1, 3]), True) for _ in range(10)]
    w = ServingWatch()
    for i, (tps, running, thr) in enumerate(rows):
        w.observe([_r(1000.0 + 30 * i, tps, running)], 1000.0 + 30 * i, thr)
        assert w.damage() == []


def test_damage_holds_until_the_rate_is_back_within_the_recovery_ratio():
    w = ServingWatch()
    _feed(w, [(240.0, 8, False)] * 8 + [(140.0, 8, True)] * 2)
    assert w.damage()
    w.observe([_r(1300.0, 175.0, 8)], 1300.0, True)  # ratio 1.37: under 1.5, over 1.25
    w.observe([_r(1330.0, 175.0, 8)], 1330.0, True)
    assert w.damage()
    w.observe([_r(1360.0, 230.0, 8)], 1360.0, True)
    w.observe([_r(1390.0, 230.0, 8)], 1390.0, True)
    assert w.damage() == []


def test_a_preemption_storm_after_calm_is_contention_evidence():
    w = ServingWatch()
    for i in range(12):
        w.observe([_r(1000.0 + 30 * i, 200.0, 8, preempt=0.0)], 1000.0 + 30 * i, False)
    assert w.contention() == []
    for i in range(12, 20):
        w.observe([_r(1000.0 + 30 * i, 150.0, 8, preempt=3.0 * (i - 11))], 1000.0 + 30 * i, False)
    (ev,) = w.contention()
    assert ev["signal"] == "preemption_storm" and ev["preemptions"] >= 10


def test_kv_collapsing_while_busy_is_evidence_and_while_idle_is_not():
    w = ServingWatch()
    for i in range(6):
        w.observe([_r(1000.0 + 30 * i, 200.0, 8, kv=0.7)], 1000.0 + 30 * i, False)
    w.observe([_r(1200.0, 90.0, 8, kv=0.2)], 1200.0, False)
    assert [e["signal"] for e in w.contention()] == ["kv_collapse"]
    idle = ServingWatch()
    for i in range(6):
        idle.observe([_r(1000.0 + 30 * i, 200.0, 8, kv=0.7)], 1000.0 + 30 * i, False)
    idle.observe([_r(1200.0, 0.0, 0, kv=0.0)], 1200.0, False)
    assert idle.contention() == []


def _ollama(ts, models):
    return ServingReading("ollama:11434", "ollama", True, ts, pid=9, models=tuple(models))


def test_an_ollama_model_leaving_at_its_expires_at_is_a_keepalive_unload_not_a_loss():
    w = ServingWatch()
    w.observe([_ollama(1000.0, [OllamaModel("qwen3:8b", 6, 6, expires_at=1290.0)])], 1000.0, False)
    w.observe([_ollama(1300.0, [])], 1300.0, False)
    assert [m.name for _, m in w.unloads] == ["qwen3:8b"] and w.lost_models == []
    w.observe([_ollama(1330.0, [OllamaModel("big", 6, 6, expires_at=9999.0)])], 1330.0, False)
    w.observe([_ollama(1360.0, [])], 1360.0, False)
    assert [m.name for _, m in w.lost_models] == ["big"] and w.unloads == []


def test_a_server_restarted_with_a_smaller_kv_budget_is_reported():
    w = ServingWatch()
    w.observe([_r(1000.0, 100.0, 4, kv_capacity_tokens=46000)], 1000.0, False)
    w.observe(
        [ServingReading("vllm:8000", "vllm", True, 1030.0, pid=2, kv_capacity_tokens=20000)], 1030.0, False
    )
    (ev,) = w.kv_budget()
    assert ev["kv_capacity_tokens"] == 20000 and ev["kv_capacity_tokens_before"] == 46000


def test_servers_that_come_and_go_leave_no_state_behind_and_a_gone_one_is_no_longer_judged():
    w = ServingWatch()
    t = 1000.0
    for i in range(50):  # fifty short-lived servers, one after another, each scraped for ten minutes
        for _ in range(20):
            w.observe([_r(t, 240.0, 8, kv_capacity_tokens=20000, server=f"vllm:{9000 + i}")], t, False)
            t += 30.0
    # a server still reporting stays; one gone for less than serving_history_s is still remembered (its
    # points have not expired); the ones gone longer are forgotten whole
    assert len(w.points) == len(w.base) == len(w.last) == len(w.seen) <= TH.serving_history_s // 600 + 1
    assert set(w.last) >= {"vllm:9049"} and "vllm:9000" not in w.last
    assert all(server in w.last for server, _pid in w.kv_high)
    # a throttle after the last one left: nothing is judged on a server long gone
    gone = ServingWatch()
    _feed(gone, [(240.0 + i, 8, False) for i in range(8)])
    gone.observe([], 1000.0 + 30 * 8 + TH.serving_history_s + 1, True)
    assert gone.damage() == [] and gone.kv_budget() == [] and not gone.points
