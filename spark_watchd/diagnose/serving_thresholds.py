"""The serving judgements' thresholds (`serving_*` in `[thresholds]`), each with why it has its value.

Judged on the scenario traces in tests/fixtures/traces/serving/ (an inference-only throttle, a bursty idle
server, a preemption storm, an Ollama keep-alive unload) and the public field reports they model.
"""

from pydantic import BaseModel, ConfigDict, Field

from spark_watchd.sample.quantities import Count, Delay, Positive, Seconds, Share


class ServingThresholds(BaseModel):
    """Mixed into Thresholds (flat keys of [thresholds]); alone, the defaults for tests and tools."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # "Well below its own baseline": the decode rate per running request down by a third is damage; it stays
    # damage until back within 1.25 (hysteresis, as a training job's step time has).
    serving_damage_ratio: float = Field(
        1.5, gt=1, description="Baseline over recent tokens/s per request that is damage."
    )
    serving_recover_ratio: float = Field(1.25, gt=1, description="Ratio under which serving damage ends.")
    # Comparable load: a batch of 8 decodes each request slower than a batch of 2; only intervals within
    # 35 % of the running requests of now form the baseline.
    serving_load_tolerance: Share = Field(
        0.35, description="Running requests counted as the same load, share of now."
    )
    serving_baseline_min_points: Count = Field(
        6, description="Intervals at comparable load a baseline needs."
    )
    serving_baseline_max_points: Count = Field(
        120, description="Latest intervals outside a throttle kept for the baseline."
    )
    # A server idle between bursts (its rate per request is how much of the interval a burst covered, not
    # how fast it decodes) has no baseline; nor has one whose rate varies this much at the same load.
    serving_baseline_max_idle_share: Share = Field(
        0.2, description="Idle share of the baseline intervals that is bursty."
    )
    serving_baseline_max_cv: Positive = Field(
        0.25, description="Coefficient of variation past which there is no baseline."
    )
    serving_recent_points: Count = Field(
        2, description="Consecutive throttled intervals before a cut counts."
    )
    serving_min_tokens_per_s: Positive = Field(
        1.0, description="Tokens/s under which a server counts as idle."
    )
    serving_history_s: Seconds = Field(
        1800.0, description="Points kept per server for the contention signals, seconds."
    )
    # vLLM preempts a handful of requests in a normal busy hour; ten in five minutes is its cache failing.
    serving_storm_preemptions: Positive = Field(
        10.0, description="Preemptions within storm_window_s that are a storm."
    )
    serving_storm_window_s: Seconds = Field(300.0, description="Window of the preemption storm, seconds.")
    serving_kv_collapse_share: Share = Field(
        0.5, description="KV use falling to this share of its level while busy."
    )
    serving_kv_collapse_from: Share = Field(
        0.3, description="KV level (share in use) from which a collapse counts."
    )
    # Ollama unloads at expires_at; one scrape interval of 30-60 s plus its own timer's slack.
    serving_keepalive_slack_s: Delay = Field(
        90.0, description="A model gone this close to its expires_at: keep-alive."
    )
    serving_kv_shrink_share: Share = Field(
        0.8, description="A KV budget under this share of the server's earlier one."
    )
