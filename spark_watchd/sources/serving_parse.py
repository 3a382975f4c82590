"""What each inference server's telemetry says: pure text-to-data, Prometheus text through prometheus_client's parser.

Names are the servers' own, read from their source for the releases owners run (tests/fixtures/serving/
has one captured-shape exposition per server, with its provenance):

- vLLM (`vllm/v1/metrics/loggers.py`, V1 engine): `vllm:num_requests_running`, `vllm:num_requests_waiting`,
  `vllm:kv_cache_usage_perc` (0.9 and older: `vllm:gpu_cache_usage_perc`), counters `vllm:num_preemptions`,
  `vllm:prompt_tokens`, `vllm:generation_tokens`, `vllm:prefix_cache_queries`/`_hits`; histograms
  `vllm:time_to_first_token_seconds`, `vllm:inter_token_latency_seconds` (0.10 and older:
  `vllm:time_per_output_token_seconds`); `vllm:cache_config_info{num_gpu_blocks, block_size}`.
  Labels `model_name`, `engine` (one series per data-parallel engine: summed here).
- SGLang `--enable-metrics` (`python/sglang/srt/metrics/collector.py`): `sglang:num_running_reqs`,
  `sglang:num_queue_reqs`, `sglang:token_usage`, `sglang:gen_throughput`, `sglang:cache_hit_rate`,
  `sglang:max_total_num_tokens`, counters `sglang:prompt_tokens`, `sglang:generation_tokens`,
  `sglang:num_retracted_requests` (retractions are SGLang's preemptions); histograms
  `sglang:time_to_first_token_seconds`, `sglang:inter_token_latency_seconds`.
- llama.cpp `llama-server --metrics` (`tools/server/README.md`, `/metrics`): counters
  `llamacpp:prompt_tokens`, `llamacpp:tokens_predicted`; gauges `llamacpp:requests_processing`,
  `llamacpp:requests_deferred`, `llamacpp:kv_cache_usage_ratio` (dropped by later builds: optional).
- TensorRT-LLM `trtllm-serve` (`tensorrt_llm/metrics/collector.py`, served on `/prometheus/metrics`; its
  `/metrics` is JSON iteration stats): `trtllm_num_requests_running`, `trtllm_num_requests_waiting`,
  `trtllm_kv_cache_utilization`, `trtllm_kv_cache_max_blocks`, `trtllm_kv_cache_tokens_per_block`, counters
  `trtllm_prompt_tokens`, `trtllm_generation_tokens`; histograms `trtllm_time_to_first_token_seconds`,
  `trtllm_time_per_output_token_seconds`.
- Ollama (`docs/api.md`): `/api/ps` `{"models": [{"name", "size", "size_vram", "expires_at"}]}` and
  `/api/version` `{"version"}`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from spark_watchd.sample.serving import OllamaModel

# Per kind: each figure, the family names that carry it (first present wins; older names after newer).
_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "preemptions": ("vllm:num_preemptions",),
        "prompt_tokens": ("vllm:prompt_tokens",),
        "generation_tokens": ("vllm:generation_tokens",),
        "ttft": ("vllm:time_to_first_token_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    },
    "sglang": {
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_usage": ("sglang:token_usage",),
        "kv_capacity": ("sglang:max_total_num_tokens",),
        "preemptions": ("sglang:num_retracted_requests",),
        "prompt_tokens": ("sglang:prompt_tokens",),
        "generation_tokens": ("sglang:generation_tokens",),
        "gen_throughput": ("sglang:gen_throughput",),
        "ttft": ("sglang:time_to_first_token_seconds",),
        "itl": ("sglang:inter_token_latency_seconds",),
    },
    "llamacpp": {
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_usage": ("llamacpp:kv_cache_usage_ratio",),
        "prompt_tokens": ("llamacpp:prompt_tokens",),
        "generation_tokens": ("llamacpp:tokens_predicted",),
    },
    "trtllm": {
        "running": ("trtllm_num_requests_running",),
        "waiting": ("trtllm_num_requests_waiting",),
        "kv_usage": ("trtllm_kv_cache_utilization",),
        "prompt_tokens": ("trtllm_prompt_tokens",),
        "generation_tokens": ("trtllm_generation_tokens",),
        "ttft": ("trtllm_time_to_first_token_seconds",),
        "itl": ("trtllm_time_per_output_token_seconds",),
    },
}
# Where each kind serves its Prometheus text.
METRICS_PATH = {
    "vllm": "/metrics",
    "sglang": "/metrics",
    "llamacpp": "/metrics",
    "trtllm": "/prometheus/metrics",
}
_MAX_AVG = ("kv_usage",)  # per-engine shares: the fullest engine is the one that preempts


class ExpositionError(ValueError):
    """The answer is not the telemetry this kind of server serves (named in the message)."""


def parse_metrics(kind: str, text: str, max_series: int = 5_000) -> dict[str, Any]:
    """The figures a Prometheus-text server gives: gauges, cumulative counters, cumulative buckets, model.

    Series of one family (engines, ranks, models) are summed, KV use is the highest; a sum that is not a
    finite, non-negative number is dropped. Figures the server does not export are absent. Raises
    ExpositionError on text that does not parse, carries none of them, or has more than max_series sample
    lines (counted before parsing: only the lines of the families read here are parsed at all).
    """
    lines = text.count("\n") + (not text.endswith("\n"))
    series = lines - text.count("\n#") - text.startswith("#") - text.count("\n\n")
    if series > max_series:
        raise ExpositionError(f"{series} series, over the bound of {max_series} (max_series): not parsed")
    text = _wanted_lines(kind, text)
    names = _NAMES[kind]
    wanted = {n: fig for fig, ns in names.items() for n in ns}
    found: dict[str, Any] = {}
    rank: dict[str, int] = {}  # which of a figure's names supplied it (lower is newer)
    model: str | None = None
    info: dict[str, str] | None = None
    try:
        for fam in text_string_to_metric_families(text):
            if kind == "vllm" and fam.name == "vllm:cache_config_info" and fam.samples:
                info = dict(fam.samples[0].labels)
            fig = wanted.get(fam.name)
            if fig is None:
                continue
            r = names[fig].index(fam.name)
            if fig in rank and rank[fig] <= r:
                continue
            value = _family_value(fam, fig)
            if value is None:
                continue
            found[fig], rank[fig] = value, r
            if model is None:
                model = next(
                    (s.labels.get("model_name") for s in fam.samples if s.labels.get("model_name")), None
                )
    except ExpositionError:
        raise
    except Exception as exc:  # the parser raises ValueError/IndexError/KeyError on malformed lines
        raise ExpositionError(f"not Prometheus text: {exc}") from None
    if not found:
        raise ExpositionError(f"no {kind} metrics in the answer (is its metrics endpoint enabled?)")
    if info is not None:
        cap = _blocks_tokens(info.get("num_gpu_blocks"), info.get("block_size"))
        if cap is not None:
            found["kv_capacity"] = cap
    if model is not None:
        found["model"] = model
    return found


def _wanted_lines(kind: str, text: str) -> str:
    """Only the lines of the families read for `kind` (samples, HELP, TYPE): the rest is never parsed."""
    names = tuple(n for ns in _NAMES[kind].values() for n in ns)
    if kind == "vllm":
        names += ("vllm:cache_config_info",)
    keep = (*names, *(f"# HELP {n}" for n in names), *(f"# TYPE {n}" for n in names))
    return "\n".join(line for line in text.split("\n") if line.startswith(keep)) + "\n"


def _ok(v: float) -> bool:
    return math.isfinite(v) and v >= 0


def _family_value(fam: Any, fig: str) -> Any:
    if fam.type == "histogram":
        by_le: dict[float, float] = {}
        for s in fam.samples:
            if s.name.endswith("_bucket"):
                le = float(s.labels["le"])
                by_le[le] = by_le.get(le, 0.0) + float(s.value)
        # Counts that sum past float range, or a bound that is not a number, leave no histogram to read.
        if any(not _ok(c) or math.isnan(le) for le, c in by_le.items()):
            return None
        return tuple(sorted(by_le.items())) or None
    vals = [
        float(s.value)
        for s in fam.samples
        if not s.name.endswith("_created") and math.isfinite(float(s.value))  # llama.cpp can export nan
    ]
    if not vals:
        return None
    v = max(vals) if fig in _MAX_AVG else sum(vals)
    return v if _ok(v) else None  # 1e308 on two engines sums to inf; nothing served is negative


def _blocks_tokens(blocks: str | None, per_block: str | None) -> float | None:
    try:
        n = float(blocks) * float(per_block)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return n if math.isfinite(n) and n > 0 else None


def parse_ollama(ps_text: str, version_text: str | None = None) -> dict[str, Any]:
    """Ollama's loaded models (/api/ps) and version (/api/version); ExpositionError on anything else."""
    try:
        ps = json.loads(ps_text)
    except ValueError as exc:
        raise ExpositionError(f"/api/ps is not JSON: {exc}") from None
    except RecursionError:  # `[[[[...` 200,000 deep
        raise ExpositionError("/api/ps is not JSON: nested too deep") from None
    if not isinstance(ps, Mapping) or not isinstance(ps.get("models"), list):
        raise ExpositionError("/api/ps has no 'models' list")
    models = []
    for m in ps["models"][:64]:  # a bounded answer: nobody holds 64 models in 128 GB
        if not isinstance(m, Mapping):
            continue
        models.append(
            OllamaModel(
                name=str(m.get("name") or m.get("model") or "?")[:200],
                size_bytes=_int(m.get("size")),
                size_vram_bytes=_int(m.get("size_vram")),
                expires_at=parse_expiry(m.get("expires_at")),
            )
        )
    out: dict[str, Any] = {"models": tuple(models)}
    if version_text:
        try:
            v = json.loads(version_text)
            if isinstance(v, Mapping) and isinstance(v.get("version"), str):
                out["version"] = v["version"][:40]
        except (ValueError, RecursionError):
            pass  # the version is a nicety: its absence is not the server being down
    if models:
        out["model"] = models[0].name
    return out


def _int(v: Any) -> int | None:
    # Bounded: not inf (int() raises OverflowError), NaN or a 400-digit integer.
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 2**63
    return int(v) if ok else None


def parse_expiry(text: Any) -> float | None:
    """Ollama's RFC 3339 `expires_at` (nanosecond fractions, any offset) as Unix seconds; None if unparseable.

    Ollama reports year 2318 for `keep_alive: -1` (never expires): kept as it is, it is simply far away.
    """
    if not isinstance(text, str) or len(text) > 64:
        return None
    s = text.strip().replace("Z", "+00:00")
    # Python before 3.11 takes at most 6 fraction digits: Go writes up to 9.
    head, dot, rest = s.partition(".")
    if dot:
        n = len(rest) - len(rest.lstrip("0123456789"))
        digits, tz = rest[:n], rest[n:]
        s = f"{head}.{digits[:6]}{tz}"
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None
    if dt.tzinfo is None:
        return None
    return dt.timestamp()


def parse_slots(text: str) -> float:
    """llama-server's /slots: tokens generated so far by the requests its slots are processing (each slot's
    `next_token` `n_decoded`; a list of one object in recent builds, an object before). ExpositionError on
    anything else."""
    try:
        slots = json.loads(text)
    except ValueError as exc:
        raise ExpositionError(f"/slots is not JSON: {exc}") from None
    if not isinstance(slots, list):
        raise ExpositionError("/slots is not a list of slots")
    total = 0.0
    for slot in slots[:4096]:
        if not isinstance(slot, Mapping) or slot.get("is_processing") is not True:
            continue
        nxt = slot.get("next_token")
        nxt = nxt[0] if isinstance(nxt, list) and nxt else nxt
        n = nxt.get("n_decoded") if isinstance(nxt, Mapping) else None
        if isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) and n > 0:
            total += n
    return total
