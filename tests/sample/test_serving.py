"""trace-v1 serving[]: the reading round-trips, bad input names its key, interval figures from two scrapes."""

import math

import pytest

from spark_watchd.sample.model import Sample, check_sample
from spark_watchd.sample.serving import (
    OllamaModel,
    ServingReading,
    bucket_deltas,
    bucket_quantile,
    counter_rate,
    joules_per_token,
    quantiles,
    shift_serving,
)
from spark_watchd.sample.validate import FieldError

INF = math.inf


def test_a_sample_with_serving_round_trips_and_one_without_keeps_its_old_line():
    r = ServingReading(
        "ollama:11434", "ollama", True, 10.0, pid=7, models=(OllamaModel("qwen3:8b", 6, 6, 99.5),)
    )
    s = Sample(ts=10.0, serving=(r,))
    assert Sample.from_dict(s.to_dict()) == s
    assert "serving" not in Sample(ts=10.0).to_dict()


@pytest.mark.parametrize(
    "entry, key",
    [
        ({"server": "", "kind": "vllm"}, "server"),
        ({"server": "x", "kind": "tgi"}, "kind"),
        ({"server": "x", "kind": "vllm", "up": "yes"}, "up"),
        ({"server": "x", "kind": "vllm", "kv_usage": "high"}, "kv_usage"),
        ({"server": "x", "kind": "vllm", "generation_tokens_per_s": float("nan")}, "generation_tokens_per_s"),
        # 400 digits: math.isfinite raised OverflowError out of the trace reader (found by bench/fuzz.py)
        ({"server": "x", "kind": "vllm", "requests_running": 10**400}, "requests_running"),
        ({"server": "x", "kind": "ollama", "models": [{"name": "m", "size_bytes": 10**400}]}, "size_bytes"),
    ],
)
def test_a_bad_serving_entry_is_refused_naming_its_key(entry, key):
    with pytest.raises(ValueError, match=key):
        Sample.from_dict({"v": 1, "ts": 1.0, "serving": [entry]})
    with pytest.raises(FieldError, match=r"serving\[0\]"):
        check_sample({"v": 1, "ts": 1.0, "serving": [entry]})


def test_counter_rate_is_none_across_a_restart_and_on_the_first_scrape():
    assert counter_rate(100.0, 400.0, 10.0) == 30.0
    assert counter_rate(None, 400.0, 10.0) is None
    assert counter_rate(400.0, 10.0, 10.0) is None  # the server restarted: no negative rate


def test_quantiles_come_from_the_bucket_deltas_of_the_interval_not_the_lifetime():
    # Lifetime: 1000 fast requests. This interval: 10 requests, all between 0.5 and 1 s.
    before = ((0.1, 1000.0), (0.5, 1000.0), (1.0, 1000.0), (INF, 1000.0))
    after = ((0.1, 1000.0), (0.5, 1000.0), (1.0, 1010.0), (INF, 1010.0))
    p50, p95 = quantiles(before, after)
    assert p50 == pytest.approx(0.75) and p95 == pytest.approx(0.975)
    assert bucket_deltas(None, after) is None  # first scrape: no interval yet
    assert quantiles(after, after) == (None, None)  # nothing observed in the interval


def test_a_quantile_in_the_inf_bucket_answers_the_highest_finite_bound_like_promql():
    assert bucket_quantile(0.99, ((0.1, 0.0), (1.0, 1.0), (INF, 10.0))) == 1.0


def test_joules_per_token_needs_tokens():
    assert joules_per_token(500.0, 1000.0) == 0.5
    assert joules_per_token(500.0, 0.0) is None
    assert joules_per_token(None, 10.0) is None


def test_a_replay_loop_moves_the_scrape_and_the_ollama_expiry_together():
    r = ServingReading("o", "ollama", True, 10.0, models=(OllamaModel("m", expires_at=310.0),))
    moved = shift_serving(r, 1000.0)
    assert moved.ts == 1010.0 and moved.models[0].expires_at == 1310.0
