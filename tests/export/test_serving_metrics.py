"""sparkwatchd_serving_*: per server, bounded labels, promtool-clean."""

import subprocess
from types import SimpleNamespace

from prometheus_client import generate_latest

from spark_watchd.export.prometheus import build_registry
from spark_watchd.sample.model import Sample
from spark_watchd.sample.serving import OllamaModel, ServingReading
from spark_watchd.snapshot import Snapshot
from tests.conftest import require_binary
from tests.daemon_helpers import samples, value

VLLM = ServingReading(
    "vllm:8000", "vllm", True, 100.0, pid=4242, requests_running=6, requests_waiting=1, kv_usage=0.55,
    kv_capacity_tokens=45984, generation_tokens_total=90000, preemptions_total=3, generation_tokens_per_s=210.5,
    prompt_tokens_per_s=800.0, preemptions_per_s=0.1, ttft_p50_s=0.12, ttft_p95_s=0.4, itl_p50_s=0.021,
    itl_p95_s=0.035, joules_per_token=0.42,
)  # fmt: skip
OLLAMA = ServingReading(
    "ollama:11434", "ollama", True, 100.0, pid=77, version="0.12.6",
    models=(OllamaModel("qwen3:8b", 6_200_000_000, 6_200_000_000, 340.0), OllamaModel("e5", 1_000, 1_000, 200.0)),
)  # fmt: skip
DOWN = ServingReading("sglang:30000", "sglang", False, 100.0, pid=9, error="ConnectionRefusedError")


def _text() -> str:
    snap = Snapshot(sample=Sample(ts=100.0, serving=(VLLM, OLLAMA, DOWN)), diagnosis=None)
    reg = build_registry(SimpleNamespace(snapshot=lambda: snap, settings=None, overruns=0))
    return generate_latest(reg).decode()


def test_each_servers_figures_are_series_labelled_by_kind_and_server_never_pid():
    text = _text()
    m = samples(text)
    lab = dict(kind="vllm", server="vllm:8000")
    assert value(m, "sparkwatchd_serving_up", **lab) == 1
    assert value(m, "sparkwatchd_serving_up", kind="sglang", server="sglang:30000") == 0
    assert value(m, "sparkwatchd_serving_generation_tokens_per_second", **lab) == 210.5
    assert value(m, "sparkwatchd_serving_kv_cache_usage_ratio", **lab) == 0.55
    assert value(m, "sparkwatchd_serving_preemptions_total", **lab) == 3
    assert value(m, "sparkwatchd_serving_time_to_first_token_p95_seconds", **lab) == 0.4
    assert value(m, "sparkwatchd_serving_inter_token_latency_p50_seconds", **lab) == 0.021
    assert value(m, "sparkwatchd_serving_joules_per_token", **lab) == 0.42
    ol = dict(kind="ollama", server="ollama:11434")
    assert value(m, "sparkwatchd_serving_models_loaded", **ol) == 2
    assert value(m, "sparkwatchd_serving_model_expiry_seconds", **ol) == 100.0
    assert "4242" not in text and "qwen3" not in text  # no pid, no model name as a label


def test_a_down_server_has_up_0_and_no_figures():
    m = samples(_text())
    assert value(m, "sparkwatchd_serving_requests_running", kind="sglang", server="sglang:30000") is None


def test_serving_families_pass_promtool():
    promtool = require_binary("promtool")
    res = subprocess.run([promtool, "check", "metrics"], input=_text(), capture_output=True, text=True)
    ours = [ln for ln in (res.stdout + res.stderr).splitlines() if "sparkwatchd_serving" in ln]
    assert ours == []


def test_the_rate_is_marked_live_or_not_so_the_throttle_alert_can_leave_a_counter_only_rate_out():
    """llama.cpp adds a request's tokens to its counter only when it ends: without /slots its rate is not live."""
    with_slots = ServingReading(
        "llamacpp:8080", "llamacpp", True, 100.0, requests_running=2, generation_tokens_per_s=54.0,
        generation_tokens_in_flight=900.0,
    )  # fmt: skip
    no_slots = ServingReading(
        "llamacpp:8081", "llamacpp", True, 100.0, requests_running=2, generation_tokens_per_s=0.0
    )
    no_rate = ServingReading("llamacpp:8082", "llamacpp", True, 100.0, requests_running=0)
    snap = Snapshot(sample=Sample(ts=100.0, serving=(VLLM, with_slots, no_slots, no_rate)), diagnosis=None)
    m = samples(
        generate_latest(
            build_registry(SimpleNamespace(snapshot=lambda: snap, settings=None, overruns=0))
        ).decode()
    )
    live = "sparkwatchd_serving_generation_rate_live"
    assert value(m, live, kind="vllm", server="vllm:8000") == 1
    assert value(m, live, kind="llamacpp", server="llamacpp:8080") == 1
    assert value(m, live, kind="llamacpp", server="llamacpp:8081") == 0
    assert value(m, live, kind="llamacpp", server="llamacpp:8082") is None  # no rate, nothing to qualify
