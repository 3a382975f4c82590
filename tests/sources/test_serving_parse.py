"""The servers' telemetry, parsed with prometheus_client's parser from the text each release really serves.

The expositions come from tests/support/serving_fakes.py: prometheus_client metrics of each server's own
names, labels and buckets (provenance there, per server).
"""

import json

import pytest

from spark_watchd.sources.serving_parse import ExpositionError, parse_expiry, parse_metrics, parse_ollama
from tests.support.serving_fakes import FakeEngine


def _text(engine: FakeEngine, seconds: float = 10.0) -> str:
    engine.step(seconds)
    path = "/prometheus/metrics" if engine.kind == "trtllm" else "/metrics"
    status, _, body = engine.body(path)
    assert status == 200
    return body.decode()


@pytest.mark.parametrize("kind", ["vllm", "sglang", "llamacpp", "trtllm"])
def test_each_server_gives_running_waiting_kv_and_token_counters(kind):
    e = FakeEngine(kind)
    e.running, e.waiting, e.kv, e.tps = 5, 2, 0.61, 100.0
    got = parse_metrics(kind, _text(e, 10.0))
    assert got["running"] == 5 and got["waiting"] == 2
    assert got["kv_usage"] == pytest.approx(0.61)
    assert got["generation_tokens"] == pytest.approx(1000.0)
    assert got["prompt_tokens"] == pytest.approx(3000.0)


@pytest.mark.parametrize("kind", ["vllm", "sglang", "trtllm"])
def test_latency_histograms_come_back_as_cumulative_buckets(kind):
    got = parse_metrics(kind, _text(FakeEngine(kind), 10.0))
    for fig in ("ttft", "itl"):
        buckets = got[fig]
        assert buckets[-1][0] == float("inf") and buckets[-1][1] == 10
        assert [c for _, c in buckets] == sorted(c for _, c in buckets)


def test_vllm_reads_its_model_kv_budget_and_preemptions():
    e = FakeEngine("vllm")
    e.preempt_per_s = 0.5
    got = parse_metrics("vllm", _text(e, 10.0))
    assert got["model"] == "Qwen/Qwen3-8B"
    assert got["preemptions"] == pytest.approx(5.0)
    assert got["kv_capacity"] == 2874 * 16  # cache_config_info num_gpu_blocks x block_size


def test_vllm_0_9_names_are_read_when_the_new_ones_are_absent():
    got = parse_metrics("vllm", _text(FakeEngine("vllm", legacy=True)))
    assert got["kv_usage"] == pytest.approx(0.42)  # vllm:gpu_cache_usage_perc
    assert got["itl"][-1][1] == 10  # vllm:time_per_output_token_seconds


def test_sglang_retractions_are_its_preemptions_and_its_kv_budget_is_max_total_num_tokens():
    e = FakeEngine("sglang")
    e.preempt_per_s = 1.0
    got = parse_metrics("sglang", _text(e, 4.0))
    assert got["preemptions"] == pytest.approx(4.0)
    assert got["kv_capacity"] == 412000


def test_series_of_several_vllm_engines_are_summed_and_kv_is_the_fullest():
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 4.0\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.9\n'
    )
    got = parse_metrics("vllm", text)
    assert got["running"] == 7 and got["kv_usage"] == 0.9


def test_llamacpp_nan_kv_is_treated_as_not_exported():
    got = parse_metrics("llamacpp", "# TYPE llamacpp:kv_cache_usage_ratio gauge\nllamacpp:kv_cache_usage_ratio nan\n"
                        "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n")  # fmt: skip
    assert "kv_usage" not in got and got["running"] == 1


@pytest.mark.parametrize(
    "text, why",
    [
        ("<html>hello</html>", "not Prometheus text|no vllm"),
        ("# TYPE node_load1 gauge\nnode_load1 0.5\n", "no vllm metrics"),
        ('vllm:num_requests_running{engine="0" 3\n', "not Prometheus text"),
    ],
)
def test_an_answer_that_is_not_the_servers_telemetry_says_so(text, why):
    with pytest.raises(ExpositionError, match=why):
        parse_metrics("vllm", text)


def test_ollama_ps_gives_each_model_with_its_keep_alive_expiry():
    e = FakeEngine("ollama")
    _, _, ps = e.body("/api/ps")
    _, _, ver = e.body("/api/version")
    got = parse_ollama(ps.decode(), ver.decode())
    (m,) = got["models"]
    assert m.name == "qwen3:8b" and m.size_bytes == m.size_vram_bytes == 6_200_000_000
    assert got["version"] == "0.12.6" and got["model"] == "qwen3:8b"
    assert m.expires_at is not None


def test_ollama_docs_example_expiry_with_an_offset_parses_to_unix_seconds():
    # docs/api.md's own example answer.
    assert parse_expiry("2024-06-04T14:38:31.83753-07:00") == pytest.approx(1717537111.83753)
    assert parse_expiry("2025-10-29T09:12:01.123456789Z") == pytest.approx(1761729121.123456)
    assert parse_expiry("tomorrow") is None


def test_ollama_answer_without_models_is_refused():
    with pytest.raises(ExpositionError, match="models"):
        parse_ollama(json.dumps({"error": "unauthorized"}))
    with pytest.raises(ExpositionError, match="not JSON"):
        parse_ollama("<html>")


def test_ollama_answers_nested_200000_deep_are_refused_not_a_recursion_error():
    """Found by bench/fuzz.py: /api/ps (or /api/version) of `[[[[...` raised RecursionError out of the parser."""
    with pytest.raises(ExpositionError, match="nested too deep"):
        parse_ollama("[" * 200_000 + "]" * 200_000)
    ps = json.dumps({"models": [{"name": "qwen3:8b", "size": 1, "size_vram": 1}]})
    assert "version" not in parse_ollama(ps, "[" * 2048 + "]" * 2048)
    (m,) = parse_ollama('{"models": [{"name": "m", "size": Infinity, "size_vram": 1%s}]}' % ("0" * 400))[
        "models"
    ]
    assert m.size_bytes is None and m.size_vram_bytes is None  # int(inf) raised OverflowError


def _slot(i: int, processing: bool, n_decoded: int, as_list: bool = True) -> dict:
    """One slot of llama-server's /slots as tools/server/server-context.cpp writes it (params trimmed)."""
    nxt = {
        "has_next_token": processing,
        "has_new_line": False,
        "n_remain": 600 - n_decoded,
        "n_decoded": n_decoded,
    }
    return {
        "id": i, "n_ctx": 1024, "speculative": False, "is_processing": processing, "id_task": 40 + i,
        "n_prompt_tokens": 12, "n_prompt_tokens_processed": 12, "n_prompt_tokens_cache": 0,
        "params": {"n_predict": 600, "stream": False}, "next_token": [nxt] if as_list else nxt,
    }  # fmt: skip


def test_llamacpp_slots_give_the_tokens_of_the_requests_still_running():
    from spark_watchd.sources.serving_parse import parse_slots

    text = json.dumps([_slot(0, True, 250), _slot(1, False, 600), _slot(2, True, 30, as_list=False)])
    assert parse_slots(text) == 280  # the idle slot's last request is in the counter already
    assert parse_slots("[]") == 0
    for bad in ("<html>", '{"error": 1}'):
        with pytest.raises(ExpositionError):
            parse_slots(bad)


def test_a_llamacpp_rate_follows_tokens_as_they_are_generated_not_as_requests_end():
    """llama-server adds a request's tokens to tokens_predicted_total only when it ends: during 600-token
    requests its counter reads 0, 0, 600 while 150 tokens/s flow. With its slots' progress the rate is live."""
    from spark_watchd.sources.serving_endpoints import Endpoint
    from spark_watchd.sources.serving_reading import reading

    ep = Endpoint("llamacpp:8080", "llamacpp", "http://127.0.0.1:8080", 7)
    # (time, counter, in flight): one request at 150 tokens/s, ending at t=4 (600 tokens), the next begun.
    scrapes = [(0.0, 0.0, 0.0), (2.0, 0.0, 300.0), (4.0, 600.0, 0.0), (6.0, 600.0, 300.0), (8.0, 1200.0, 0.0)]
    rates, counter_only = [], []
    for (t0, c0, f0), (t1, c1, f1) in zip(scrapes, scrapes[1:], strict=False):
        live = reading(
            ep, t1, {"generation_tokens": c1, "in_flight": f1}, {"generation_tokens": c0, "in_flight": f0}, t0
        )
        rates.append(live.generation_tokens_per_s)
        assert live.generation_tokens_in_flight == f1 and live.live_rate
        old = reading(ep, t1, {"generation_tokens": c1}, {"generation_tokens": c0}, t0)
        counter_only.append(old.generation_tokens_per_s)
        assert not old.live_rate
    assert rates == [150.0, 150.0, 150.0, 150.0]
    assert counter_only == [0.0, 300.0, 0.0, 300.0]
    # A request ending between the two reads of one scrape dips the sum: 0 for that interval, never negative.
    dip = reading(
        ep,
        2.0,
        {"generation_tokens": 600.0, "in_flight": 0.0},
        {"generation_tokens": 0.0, "in_flight": 650.0},
        0.0,
    )
    assert dip.generation_tokens_per_s == 0.0
