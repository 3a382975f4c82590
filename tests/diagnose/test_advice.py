"""Advice agrees with the card it sits on: each remedy once, a capped server never told to cap itself."""

from __future__ import annotations

import re

import pytest

from tests.support.findings import ALL_TRACES as ALL
from tests.support.findings import TRACES
from tests.support.findings import findings_of as _findings

# The commands advice hands out: each may appear once per finding, in one wording.
COMMANDS = (r"nvidia-smi -lgc", r"drop_caches", r"systemctl stop ollama", r"OLLAMA_KEEP_ALIVE")


def test_every_trace_set_is_covered():
    assert len(ALL) >= 60 and any("public" in str(p) for p in ALL)


@pytest.mark.parametrize("trace", ALL, ids=lambda p: str(p.relative_to(TRACES)))
def test_no_remedy_is_given_twice_in_one_finding(trace):
    for gotcha, sev, summary, _, advice in _findings(trace):
        assert len(set(advice)) == len(advice), (gotcha, advice)
        for cmd in COMMANDS:
            hits = [a for a in advice if re.search(cmd, a)]
            assert len(hits) <= 1, f"{gotcha} {sev} ({summary}) gives {cmd} {len(hits)} times: {hits}"
        assert not any("cap clocks" in a for a in advice)  # one wording: the -lgc command itself


@pytest.mark.parametrize("trace", ALL, ids=lambda p: str(p.relative_to(TRACES)))
def test_g6_advice_names_what_the_card_shows(trace):
    for gotcha, _, _, evidence, advice in _findings(trace):
        if gotcha != "G6":
            continue
        text = " ".join(advice)
        assert "stop or cap the server" not in text
        for w in evidence.get("workloads", ()):
            if w["capped"] is True:
                # Capped on the card: the advice says how the cap falls short, never "cap it".
                assert f"{w['kind']} is capped" in text, advice
                assert f"{w['kind']} is uncapped" not in text
            if w["capped"] is False and w["kind"] in ("vllm", "sglang", "trtllm"):
                assert f"{w['kind']} is uncapped" in text, advice
        if not any(w["kind"] == "ollama" for w in evidence.get("workloads", ())):
            assert "Ollama" not in text  # no advice about a server that is not there


def test_a_kv_capped_vllm_holding_past_its_budget_is_told_the_weights_sit_on_top():
    # The public eviction trace: vLLM under --kv-cache-memory-bytes 40GiB grows to 64 GiB and evicts a trainer.
    crit = [f for f in _findings(TRACES / "public" / "eviction.jsonl") if f[0] == "G6" and f[1] == "critical"]
    assert crit
    last = crit[-1][4]
    assert last[0].startswith("One workload is pushing another's memory out of the shared pool")
    assert re.search(
        r"vllm is capped by --kv-cache-memory-bytes 40GiB and holds 6\d GiB: that budget bounds only the KV "
        r"cache, the weights sit on top of it; lower the budget",
        last[1],
    ), last


def test_g3_names_no_cap_flag_that_g6_could_contradict():
    """Issue 34: G3 said "cap the vLLM with --gpu-memory-utilization 0.5" beside G6 saying that vLLM is capped
    by --kv-cache-memory-bytes; G3's tenant line now points at G6's card, which reads the real launch flags."""
    from spark_watchd.diagnose import g3_rules

    tenant = g3_rules.ADVICE_TENANT  # the line G3 gives about the other tenants, beside G6's card
    assert tenant and not [a for a in tenant if "--gpu-memory-utilization" in a or "--kv-cache" in a]
    assert any("G6 card" in a for a in tenant)
