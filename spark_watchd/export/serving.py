"""sparkwatchd_serving_*: the inference servers' own telemetry, rendered from the published sample.

Labels are `kind` and `server` (KIND:PORT or the configured name: one per server the host runs, bounded by
the source's server limit); never a pid, never a model name.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric

from spark_watchd.export.families import counter, gauge
from spark_watchd.snapshot import Snapshot

_LABELS = ["kind", "server"]
# (reading attribute, metric name, help) for the plain per-server gauges.
_GAUGES = (
    ("requests_running", "serving_requests_running", "Requests in the server's running batch."),
    ("requests_waiting", "serving_requests_waiting", "Requests queued by the server."),
    ("kv_usage", "serving_kv_cache_usage_ratio", "Share of the server's KV cache in use, 0 to 1."),
    ("kv_capacity_tokens", "serving_kv_cache_capacity_tokens", "KV cache the server allocated, in tokens."),
    (
        "generation_tokens_per_s",
        "serving_generation_tokens_per_second",
        "Tokens generated per second over the latest scrape interval, from the server's generation token"
        " counter; llama.cpp: that counter plus its slots' in-flight tokens (/slots n_decoded), since its counter"
        " moves only when a request ends (without /slots, counter alone: not a live rate).",
    ),
    (
        "generation_tokens_in_flight",
        "serving_generation_tokens_in_flight",
        "Tokens generated so far by the requests still running, not yet in the server's counter"
        " (llama.cpp: next_token.n_decoded summed over its /slots that are processing).",
    ),
    (
        "prompt_tokens_per_s",
        "serving_prompt_tokens_per_second",
        "Prompt tokens processed per second over the latest scrape interval.",
    ),
    (
        "preemptions_per_s",
        "serving_preemptions_per_second",
        "Requests preempted (SGLang: retracted) per second over the latest scrape interval.",
    ),
    (
        "joules_per_token",
        "serving_joules_per_token",
        "GPU energy per generated token over the latest interval (only when this server worked alone).",
    ),
)
_COUNTERS = (
    (
        "generation_tokens_total",
        "serving_generation_tokens",
        "Tokens the server has generated (its counter).",
    ),
    ("preemptions_total", "serving_preemptions", "Requests the server has preempted (its counter)."),
)
# promtool: a "quantile" label belongs to summaries only, so each quantile is a gauge of its own.
_QUANTILES = tuple(
    (
        f"{fig}_p{q}_s",
        f"serving_{name}_p{q}_seconds",
        f"{what} of requests in the latest interval, {q}th percentile.",
    )
    for fig, name, what in (
        ("ttft", "time_to_first_token", "Time to first token"),
        ("itl", "inter_token_latency", "Inter-token latency"),
    )
    for q in ("50", "95")
)


def families(snapshot: Snapshot) -> Iterable[Metric]:
    """Every serving family, described always; a series per server where it gives the figure."""
    readings = snapshot.sample.serving if snapshot.sample is not None else ()
    up = gauge("serving_up", "1 if the inference server gave its telemetry at its latest scrape.", _LABELS)
    loading = gauge(
        "serving_loading",
        "1 while the server is loading its model (not listening yet, or it says so): not up, not down.",
        _LABELS,
    )
    plain = [(attr, gauge(name, doc, _LABELS)) for attr, name, doc in _GAUGES + _QUANTILES]
    counters = [(attr, counter(name, doc, _LABELS)) for attr, name, doc in _COUNTERS]
    live = gauge(
        "serving_generation_rate_live",
        "1 if serving_generation_tokens_per_second follows tokens as they are generated; 0 where it moves only"
        " when a request ends (llama.cpp without /slots): alerts on the rate leave such a server out.",
        _LABELS,
    )
    models = gauge("serving_models_loaded", "Models the server holds in memory (Ollama /api/ps).", _LABELS)
    model_bytes = gauge("serving_model_memory_bytes", "Memory of the models it holds (Ollama size).", _LABELS)
    expiry = gauge(
        "serving_model_expiry_seconds",
        "Seconds until keep-alive unloads the next of its models (Ollama expires_at).",
        _LABELS,
    )
    ts = snapshot.sample.ts if snapshot.sample is not None else 0.0
    for r in readings:
        lab = [r.kind, r.server]
        up.add_metric(lab, 1 if r.up else 0)
        loading.add_metric(lab, 1 if r.loading else 0)
        for attr, fam in plain + counters:
            v = getattr(r, attr)
            if v is not None:
                fam.add_metric(lab, float(v))
        if r.generation_tokens_per_s is not None:
            live.add_metric(lab, 1 if r.live_rate else 0)
        if r.kind == "ollama" and r.up:
            models.add_metric(lab, len(r.models))
            model_bytes.add_metric(lab, float(sum(m.size_bytes or 0 for m in r.models)))
            left = [m.expires_at - ts for m in r.models if m.expires_at is not None]
            if left:
                expiry.add_metric(lab, max(0.0, min(left)))
    return [
        up,
        loading,
        *(f for _, f in plain),
        *(f for _, f in counters),
        live,
        models,
        model_bytes,
        expiry,
    ]
