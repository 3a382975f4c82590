"""Serving rules: the inference servers' own telemetry (sparkwatchd_serving_*), lined up with the findings.

A server's generated tokens/s only means something per running request: fewer tokens because fewer users
is not damage. The throttle alert compares each server's rate per running request with that server's own
rate an hour before (the PromQL form of the G4 serving damage rule, docs/serving.md), and only while G4
sees the throttle signature.
"""

from __future__ import annotations

# "Well below its own baseline": a third lower (the classifier's damage_ratio 1.5).
CUT_SHARE = 0.67
BASELINE_S = 3600  # the server's own rate over the hour before ...
BASELINE_OFFSET_S = 900  # ... ending 15 min ago, so the cut itself is not in the baseline
STORM_PREEMPTIONS = 10  # preemptions (SGLang: retractions) within STORM_S
STORM_S = 600


def recording_rules(c) -> list[tuple[str, str]]:
    """Tokens per running request per server (absent while it runs nothing: idle is not slow, and absent
    where the rate is not live: a llama-server without /slots adds a request's tokens only when it ends, so
    its rate reads 0 for most of a long request and would look like a cut)."""
    sel = c.sel()
    return [
        (
            "sparkwatchd:serving_tokens_per_request:ratio",
            f"sparkwatchd_serving_generation_tokens_per_second{sel}\n"
            f"/ on (job, instance, kind, server) (sparkwatchd_serving_requests_running{sel} >= 1)\n"
            f"unless on (job, instance, kind, server) sparkwatchd_serving_generation_rate_live{sel} == 0",
        ),
    ]


def alerts(c) -> list[tuple]:
    """(name, severity, gotcha, for, expr, summary, description) for each serving alert."""
    g4 = c.sel('gotcha="G4"')
    base = (
        f"avg_over_time(sparkwatchd:serving_tokens_per_request:ratio[{c.win(BASELINE_S)}] "
        f"offset {c.win(BASELINE_OFFSET_S)})"
    )
    return [
        (
            "SparkWatchdThrottleCuttingServing",
            "critical",
            "G4",
            c.dur(300),
            f"sparkwatchd:serving_tokens_per_request:ratio < {CUT_SHARE} * {base}\n"
            f"and on (job, instance) max by (job, instance) (sparkwatchd_finding_level{g4}) >= 1",
            "A thermal throttle is cutting {{ $labels.server }}'s generation on {{ $labels.instance }}",
            "The server's tokens/s per running request fell below two thirds of its own rate an hour before "
            "while the GPU shows the throttle signature: users of that server get slower answers because "
            "of heat.",
        ),
        (
            "SparkWatchdPreemptionStorm",
            "warning",
            "G6",
            c.dur(300),
            f"increase(sparkwatchd_serving_preemptions_total{c.sel()}[{c.win(STORM_S)}]) >= {STORM_PREEMPTIONS}\n"
            f"and on (job, instance) sum by (job, instance) (sparkwatchd_workloads{c.sel()}) >= 2",
            "{{ $labels.server }} is preempting requests beside a co-tenant on {{ $labels.instance }}",
            "The server keeps preempting (recomputing) requests because its KV cache runs out while another "
            "workload shares the unified memory: contention, seen from inside the server.",
        ),
        (
            "SparkWatchdServingDown",
            "warning",
            None,
            c.dur(300),
            f"sparkwatchd_serving_up{c.sel()} == 0\n"
            f"and on (job, instance, kind, server) max_over_time(sparkwatchd_serving_up{c.sel()}[{c.win(21600)}]) == 1\n"
            f"unless on (job, instance, kind, server) sparkwatchd_serving_loading{c.sel()} == 1",
            "Inference server {{ $labels.server }} stopped answering on {{ $labels.instance }}",
            "A server spark-watchd scraped before no longer gives its telemetry (down, hung, or its metrics "
            "endpoint was turned off); a server restarted and still loading its model is not down.",
        ),
    ]


# promtool unit cases (unit_cases.py adds them to CASES).
def cases(s, INST) -> list:
    fires = [{**INST, "kind": "vllm", "server": "vllm:8000"}]
    quiet: list = []
    srv = 'kind="vllm", server="vllm:8000"'
    llama = 'kind="llamacpp", server="llamacpp:8080"'
    g4 = s("sparkwatchd_finding_level", 'gotcha="G4"')
    return [
        (
            "serving_throttle_cut",
            # 8 requests at 240 tokens/s for 90 min, then a throttle (G4 warning) cuts it to 130 tokens/s.
            {
                s("sparkwatchd_serving_generation_tokens_per_second", srv): "240x89 130x30",
                s("sparkwatchd_serving_requests_running", srv): "8x119",
                g4: "0x89 1x30",
            },
            [
                (85, "SparkWatchdThrottleCuttingServing", quiet),
                (100, "SparkWatchdThrottleCuttingServing", fires),
            ],
        ),
        (
            "serving_rate_not_live",
            # A llama-server without /slots under the same throttle: its counter moves only when one of its
            # 10-minute requests (16,000 tokens at ~27/s) ends, so its rate reads 0, then a burst. Not a
            # live rate: no cut is judged (on the rate alone this fired at minute 97).
            {
                s("sparkwatchd_serving_generation_tokens_per_second", llama): _bursts(120),
                s("sparkwatchd_serving_requests_running", llama): "2x119",
                s("sparkwatchd_serving_generation_rate_live", llama): "0x119",
                g4: "0x89 1x30",
            },
            [
                (97, "SparkWatchdThrottleCuttingServing", quiet),
                (117, "SparkWatchdThrottleCuttingServing", quiet),
            ],
        ),
        (
            "serving_fewer_requests",
            # The same throttle, but tokens/s fell because requests fell: per request it is unchanged.
            {
                s("sparkwatchd_serving_generation_tokens_per_second", srv): "240x89 60x30",
                s("sparkwatchd_serving_requests_running", srv): "8x89 2x30",
                g4: "0x89 1x30",
            },
            [(100, "SparkWatchdThrottleCuttingServing", quiet)],
        ),
        (
            "serving_cut_without_throttle",
            # A slower rate with a cool GPU (a longer context, a bigger batch): not the throttle's.
            {
                s("sparkwatchd_serving_generation_tokens_per_second", srv): "240x89 130x30",
                s("sparkwatchd_serving_requests_running", srv): "8x119",
                g4: "0x119",
            },
            [(100, "SparkWatchdThrottleCuttingServing", quiet)],
        ),
        (
            "serving_preemption_storm",
            # Two workloads; preemptions calm, then 3 a minute from minute 20.
            {
                s("sparkwatchd_serving_preemptions_total", srv): "0x19 3+3x30",
                s("sparkwatchd_workloads", 'kind="vllm", capped="false"'): "1x50",
                s("sparkwatchd_workloads", 'kind="trainer", capped="false"'): "1x50",
            },
            [(15, "SparkWatchdPreemptionStorm", quiet), (35, "SparkWatchdPreemptionStorm", fires)],
        ),
        (
            "serving_preemptions_alone",
            # The same preemptions with the server alone on the Spark: its own load, not contention.
            {
                s("sparkwatchd_serving_preemptions_total", srv): "0x19 3+3x30",
                s("sparkwatchd_workloads", 'kind="vllm", capped="false"'): "1x50",
                s("sparkwatchd_workloads", 'kind="trainer", capped="false"'): "0x50",
            },
            [(35, "SparkWatchdPreemptionStorm", quiet)],
        ),
        (
            "serving_down",
            {s("sparkwatchd_serving_up", srv): "1x20 0x20", s("sparkwatchd_serving_loading", srv): "0x40"},
            [(18, "SparkWatchdServingDown", quiet), (30, "SparkWatchdServingDown", fires)],
        ),
        (
            "serving_restarted_loading",  # restarted into a model that takes minutes to load: not down
            {
                s("sparkwatchd_serving_up", srv): "1x20 0x20",
                s("sparkwatchd_serving_loading", srv): "0x20 1x20",
            },
            [(30, "SparkWatchdServingDown", quiet), (39, "SparkWatchdServingDown", quiet)],
        ),
    ]


def _bursts(minutes: int) -> str:
    """A counter-only rate at 1 m steps: 0 while two 10-minute requests run, a burst when they end."""
    return " ".join("0" if m % 10 else "54" for m in range(minutes))
