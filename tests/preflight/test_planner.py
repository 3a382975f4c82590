"""The UMA worksheet (`spark_watchd.preflight.planner`) and `spark-watchd plan`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_watchd.preflight import planner
from tests.conftest import FIXTURES

GB10_BARE = FIXTURES / "hosts" / "gb10-operator-bare"
GB = 1e9 / 2**30  # the worksheet's decimal GB in the GiB the plan prints


def test_70b_qlora_reproduces_the_worksheet_35_gb_of_weights():
    plan = planner.worksheet(planner.Job(params=planner.parse_params("70B"), method="qlora"))
    assert plan.job["dtype"] == "nf4"
    assert plan.lines["weights"] == pytest.approx(35.0 * GB, abs=1e-3)  # 32.6 GiB
    # Before activations: weights plus the adapter's own weights, gradients and AdamW states.
    before_activations = sum(v for k, v in plan.lines.items() if k not in ("activations", "logits"))
    assert 35.0 * GB < before_activations < 40.0 * GB
    # ... and the whole job lands near the community's 70B QLoRA anchor of about 40 GB.
    assert plan.anchor["reported_gib"] == pytest.approx(40.0 * GB)
    assert abs(plan.steady_gib - 40.0 * GB) / (40.0 * GB) < 0.15


@pytest.mark.parametrize(
    ("dtype", "per_param"), [("fp32", 4.0), ("bf16", 2.0), ("fp16", 2.0), ("int8", 1.0), ("nf4", 0.5)]
)
def test_weights_follow_bytes_per_parameter(dtype, per_param):
    plan = planner.worksheet(planner.Job(params=10e9, method="lora", dtype=dtype))
    assert plan.lines["weights"] == pytest.approx(10 * per_param * GB, abs=1e-3)


def test_full_fine_tune_with_adamw_costs_gradients_and_eight_bytes_of_state_per_param():
    plan = planner.worksheet(planner.Job(params=9e9, method="full"))
    assert plan.lines["gradients"] == pytest.approx(18.0 * GB, abs=1e-3)
    assert plan.lines["optimizer states"] == pytest.approx(72.0 * GB, abs=1e-3)
    eight_bit = planner.worksheet(planner.Job(params=9e9, method="full", optimizer="adamw8bit"))
    assert eight_bit.lines["optimizer states"] == pytest.approx(18.0 * GB, abs=1e-3)


def test_lora_adapter_grows_linearly_with_rank_and_matches_llama_70b():
    # Llama-3 70B, rank 16 on all seven linears: about 207 M adapter parameters.
    assert planner.lora_params(70e9, 16) == pytest.approx(207e6, rel=0.1)
    assert planner.lora_params(70e9, 64) == pytest.approx(4 * planner.lora_params(70e9, 16))


def test_architecture_heuristic_lands_near_known_models():
    assert planner.architecture(70e9) == pytest.approx((8192, 80), rel=0.06)
    assert planner.architecture(8e9) == pytest.approx((4096, 32), rel=0.2)


def test_gradient_checkpointing_and_packing_move_activations():
    base = planner.Job(params=27e9, method="lora", seq_len=4096)
    on = planner.worksheet(base).lines["activations"]
    off = planner.worksheet(planner.Job(**{**base.__dict__, "gradient_checkpointing": False})).lines[
        "activations"
    ]
    packed = planner.worksheet(planner.Job(**{**base.__dict__, "packing": 1024})).lines["activations"]
    assert off > 5 * on
    assert packed == pytest.approx(on / 4, rel=1e-2)


def test_load_transient_is_about_twice_the_checkpoint():
    plan = planner.worksheet(planner.Job(params=30e9, method="lora"))
    assert plan.load_peak_gib == pytest.approx(2 * 60 * GB + planner.RUNTIME_OVERHEAD_GIB, abs=2e-3)


@pytest.mark.parametrize(
    ("budget", "verdict"), [(200.0, "fits"), (48.0, "tight"), (30.0, "does not fit"), (None, "unknown")]
)
def test_verdict_against_budget(budget, verdict):
    plan = planner.worksheet(planner.Job(params=70e9, method="qlora"), budget)
    assert plan.verdict == verdict
    assert bool(plan.advice) == (verdict in ("tight", "does not fit"))


def test_oom_ladder_starts_with_dropping_caches_and_prefers_bf16_lora_before_qlora():
    full = planner.worksheet(planner.Job(params=9e9, method="full"), 60.0)
    assert full.verdict == "does not fit"
    assert "drop_caches" in full.advice[0]
    assert any("bf16 LoRA" in step for step in full.advice)
    lora = planner.worksheet(planner.Job(params=70e9, method="lora"), 100.0)
    assert any("QLoRA" in step for step in lora.advice)
    # Rungs the job already stands on are left out.
    assert not any(
        "8-bit AdamW" in s
        for s in planner.worksheet(planner.Job(params=9e9, method="full", optimizer="adamw8bit"), 30.0).advice
    )


@pytest.mark.parametrize(
    ("params", "method", "anchor"),
    [
        (65e9, "qlora", "70B QLoRA"),
        (110e9, "lora", "120B MoE"),
        (30e9, "lora", "27B LoRA"),
        (8e9, "full", "9B full"),
        (8e9, "qlora", "70B QLoRA"),  # the method first: not the 9B full fine-tune at 111 GB (issue 14.9)
        (8e9, "lora", "27B LoRA"),
    ],
)
def test_nearest_anchor(params, method, anchor):
    assert planner.nearest_anchor(params, method).name.startswith(anchor)


@pytest.mark.parametrize("text", ["70", "seventy", "70 GB", "-7B", "0", ""])
def test_bad_parameter_counts_name_the_input(text):
    with pytest.raises(ValueError, match="parameter count"):
        planner.parse_params(text)


@pytest.mark.parametrize(("text", "value"), [("70B", 70e9), ("7.5b", 7.5e9), ("500M", 500e6), ("70e9", 70e9)])
def test_parameter_counts(text, value):
    assert planner.parse_params(text) == value


@settings(max_examples=60, deadline=None)
@given(
    params=st.floats(1e8, 1e12),
    method=st.sampled_from(planner.METHODS),
    dtype=st.sampled_from(sorted(planner.BYTES_PER_PARAM)),
    optimizer=st.sampled_from(sorted(planner.OPTIMIZER_BYTES)),
    rank=st.integers(1, 512),
    seq=st.integers(1, 65536),
    batch=st.integers(1, 64),
    budget=st.floats(0, 1000),
)
def test_worksheet_is_consistent_for_any_job(params, method, dtype, optimizer, rank, seq, batch, budget):
    job = planner.Job(
        params=params,
        method=method,
        dtype=dtype,
        optimizer=optimizer,
        lora_rank=rank,
        seq_len=seq,
        batch=batch,
    )
    plan = planner.worksheet(job, budget)
    assert all(v >= 0 for v in plan.lines.values())
    assert plan.steady_gib == pytest.approx(sum(plan.lines.values()), abs=0.01)
    assert plan.peak_gib == max(plan.steady_gib, plan.load_peak_gib)
    if plan.steady_gib > budget + 0.001:
        assert plan.verdict == "does not fit"
    if plan.verdict == "fits":
        assert plan.peak_gib <= budget + 0.001
    # A bigger model of the same shape never needs less.
    bigger = planner.worksheet(planner.Job(**{**job.__dict__, "params": params * 2}), budget)
    assert bigger.steady_gib >= plan.steady_gib
