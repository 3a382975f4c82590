"""The Serving row: each inference server's own telemetry (sparkwatchd_serving_*), under the same annotations."""

from __future__ import annotations

from panels import Layout, m, panel, refs


def serving_panels(L: Layout) -> None:
    """Per server (kind and server labels): throughput, queue, KV use, latency, preemptions, J/token."""
    L.row("Serving (inference servers' own telemetry)")
    L.add(
        panel(
            "timeseries",
            "Generated tokens/s",
            "Tokens each server generated per second, and per running request (dashed): a throttle cutting "
            "decode shows as the per-request rate falling under the G4 annotations; fewer users does not.",
            refs(
                (m("sparkwatchd_serving_generation_tokens_per_second"), "{{server}}"),
                (m("sparkwatchd:serving_tokens_per_request:ratio"), "{{server}} per request"),
            ),
            "suffix: tok/s",
            min=0,
        ),
        w=8,
    )
    L.add(
        panel(
            "timeseries",
            "Requests running and queued",
            "The server's running batch and its waiting queue (llama.cpp: processing and deferred).",
            refs(
                (m("sparkwatchd_serving_requests_running"), "{{server}} running"),
                (m("sparkwatchd_serving_requests_waiting"), "{{server}} queued"),
            ),
            "short",
            min=0,
        ),
        w=8,
    )
    L.add(
        panel(
            "timeseries",
            "KV cache use",
            "Share of each server's KV cache in use: near 100 % with preemptions is a cache too small for the "
            "load; a collapse while requests keep running is memory taken by a co-tenant (G6).",
            refs((m("sparkwatchd_serving_kv_cache_usage_ratio"), "{{server}}")),
            "percentunit",
            min=0,
            max=1,
        ),
        w=8,
    )
    L.add(
        panel(
            "timeseries",
            "Time to first token and inter-token latency (p95)",
            "95th percentiles of the requests each server saw in the latest interval (its histogram deltas).",
            refs(
                (m("sparkwatchd_serving_time_to_first_token_p95_seconds"), "{{server}} TTFT"),
                (m("sparkwatchd_serving_inter_token_latency_p95_seconds"), "{{server}} ITL"),
            ),
            "s",
            min=0,
        ),
        w=8,
    )
    L.add(
        panel(
            "timeseries",
            "Preemptions per second",
            "Requests each server preempted (SGLang: retracted) and will recompute: contention seen from "
            "inside the server.",
            refs((m("sparkwatchd_serving_preemptions_per_second"), "{{server}}")),
            "short",
            min=0,
        ),
        w=8,
    )
    L.add(
        panel(
            "timeseries",
            "Energy per generated token",
            "GPU joules per generated token over each interval the server worked alone on the GPU.",
            refs((m("sparkwatchd_serving_joules_per_token"), "{{server}}")),
            "suffix: J/token",
            min=0,
        ),
        w=8,
    )
