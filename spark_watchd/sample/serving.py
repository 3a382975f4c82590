"""trace-v1 `serving[]`: what one inference server said about itself at one scrape, and the interval figures.

The source scrapes each server's own telemetry (vLLM, SGLang, llama.cpp and TensorRT-LLM Prometheus text,
Ollama's /api/ps); a reading keeps the cumulative counters as the server gave them and the figures over the
interval since the previous scrape of the same server (tokens/s, preemptions/s, TTFT and inter-token latency
quantiles from the histograms' bucket deltas, joules per generated token), so `replay` judges from exactly
what the daemon saw. Pure functions only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spark_watchd.sample.validate import FieldError

SERVING_KINDS = ("vllm", "sglang", "llamacpp", "trtllm", "ollama")
# Cumulative histogram buckets as the exposition gives them: ((le, count), ...), le ascending, +Inf last.
Buckets = tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class OllamaModel:
    """One model Ollama holds in memory (/api/ps): `expires_at` is when keep-alive unloads it (Unix s)."""

    name: str
    size_bytes: int | None = None
    size_vram_bytes: int | None = None
    expires_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "size_bytes": self.size_bytes,
            "size_vram_bytes": self.size_vram_bytes,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OllamaModel:
        return cls(
            name=str(d.get("name") or ""),
            size_bytes=_int_or_none(d, "size_bytes"),
            size_vram_bytes=_int_or_none(d, "size_vram_bytes"),
            expires_at=_num_or_none(d, "expires_at"),
        )


@dataclass(frozen=True, slots=True)
class ServingReading:
    """One server at its latest scrape; None where the server does not say (or on the first scrape, for rates).

    `server` is the bounded name the metrics carry ("vllm:8000"); `pid` ties the reading to its workload
    and is never a label. `up` False keeps the last error; figures are then None.
    """

    server: str
    kind: str
    up: bool
    ts: float | None = None
    pid: int | None = None
    endpoint: str | None = None
    error: str | None = None
    model: str | None = None
    version: str | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_usage: float | None = None  # 0..1 share of the KV cache in use
    kv_capacity_tokens: float | None = None  # the KV budget the server allocated, in tokens
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    # llama.cpp only (its /slots): tokens generated so far by the requests still running, which its counter
    # adds only when each ends; None where the server does not say (every other kind: their counters are live).
    generation_tokens_in_flight: float | None = None
    preemptions_total: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    preemptions_per_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    joules_per_token: float | None = None
    models: tuple[OllamaModel, ...] = ()
    # Not up because it is still loading its model (its young process not listening yet, or it says so):
    # not down. Written to traces only when true.
    loading: bool = False

    @property
    def live_rate(self) -> bool:
        """Whether generation_tokens_per_s follows tokens as they are generated. llama.cpp adds a request's
        tokens to its counter only when the request ends: its rate is live only with its slots' progress."""
        return self.kind != "llamacpp" or self.generation_tokens_in_flight is not None

    @property
    def busy(self) -> bool:
        """Serving requests right now (running > 0, or tokens flowing over the interval)."""
        return bool(self.up and ((self.requests_running or 0) > 0 or (self.generation_tokens_per_s or 0) > 0))

    def to_dict(self) -> dict[str, Any]:
        d = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("models", "loading")
        }
        if self.models:
            d["models"] = [m.to_dict() for m in self.models]
        if self.loading:
            d["loading"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ServingReading:
        """Build from a trace object; raises ValueError naming the key that is wrong."""
        if not isinstance(d, Mapping):
            raise ValueError(f"serving: each entry must be an object, got {type(d).__name__}")
        server, kind = d.get("server"), d.get("kind")
        if not isinstance(server, str) or not server:
            raise ValueError(f"serving: 'server' must be a non-empty string, got {server!r}")
        if kind not in SERVING_KINDS:
            raise ValueError(f"serving: 'kind' must be one of {', '.join(SERVING_KINDS)}, got {kind!r}")
        up = d.get("up", True)
        if not isinstance(up, bool):
            raise ValueError(f"serving: 'up' must be true or false, got {up!r}")
        loading = d.get("loading", False)
        if not isinstance(loading, bool):
            raise ValueError(f"serving: 'loading' must be true or false, got {loading!r}")
        models = d.get("models") or ()
        if not isinstance(models, (list, tuple)):
            raise ValueError(f"serving: 'models' must be a list, got {type(models).__name__}")
        return cls(
            server=server,
            kind=kind,
            up=up,
            ts=_num_or_none(d, "ts"),
            pid=_int_or_none(d, "pid"),
            **{k: _str_or_none(d, k) for k in _TEXTS},
            **{k: _num_or_none(d, k) for k in _NUMBERS},
            models=tuple(OllamaModel.from_dict(m) for m in models),
            loading=loading,
        )


_TEXTS = ("endpoint", "error", "model", "version")
# The figures: every `float | None` field but the scrape time.
_NUMBERS = tuple(
    f.name for f in dataclasses.fields(ServingReading) if f.type == "float | None" and f.name != "ts"
)


def check_serving(item: Any, where: str) -> None:
    """One serving[] entry as trace readers accept it: what from_dict refuses, as a FieldError."""
    try:
        ServingReading.from_dict(item)
    except (TypeError, ValueError) as exc:
        raise FieldError(where, str(exc).removeprefix("serving: ")) from None


def shift_serving(r: ServingReading, offset: float) -> ServingReading:
    """The reading moved `offset` seconds in time (replay loops): its scrape time and Ollama's expiries."""
    if not offset:
        return r
    models = tuple(
        dataclasses.replace(m, expires_at=m.expires_at + offset if m.expires_at is not None else None)
        for m in r.models
    )
    return dataclasses.replace(r, ts=r.ts + offset if r.ts is not None else None, models=models)


def _finite(v: int | float) -> bool:
    """math.isfinite, also for an integer past a float (400 digits: isfinite raises OverflowError)."""
    return -(2**64) <= v <= 2**64 if isinstance(v, int) else math.isfinite(v)


def _num_or_none(d: Mapping[str, Any], key: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v):
        raise ValueError(f"serving: '{key}' must be a finite number or null, got {str(v)[:40]}")
    return v


def _int_or_none(d: Mapping[str, Any], key: str) -> int | None:
    v = _num_or_none(d, key)
    return None if v is None else int(v)


def _str_or_none(d: Mapping[str, Any], key: str) -> str | None:
    v = d.get(key)
    return None if v is None else str(v)


# The interval figures: pure functions of two consecutive scrapes of one server.


def counter_rate(prev: float | None, cur: float | None, dt: float) -> float | None:
    """Per-second increase of a cumulative counter; None without both values, or across a reset."""
    if prev is None or cur is None or dt <= 0 or cur < prev:
        return None  # a counter going down is a restarted server: no rate, not a negative one
    return (cur - prev) / dt


def bucket_deltas(prev: Buckets | None, cur: Buckets | None) -> Buckets | None:
    """The cumulative buckets observed between two scrapes (cur - prev per `le`); None across a reset."""
    if not cur:
        return None
    if not prev:
        return None  # the first scrape: everything since the server started is not "this interval"
    before = dict(prev)
    out = []
    for le, count in cur:
        d = count - before.get(le, 0.0)
        if d < 0:
            return None
        out.append((le, d))
    return tuple(out)


def bucket_quantile(q: float, buckets: Buckets | None) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets: linear within the bucket; None when empty.

    Like PromQL, a quantile in the +Inf bucket answers the highest finite bound.
    """
    if not buckets:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lower_le, lower_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return lower_le
            if count == lower_count:
                return le
            return lower_le + (le - lower_le) * (rank - lower_count) / (count - lower_count)
        lower_le, lower_count = le, count
    return lower_le


def quantiles(prev: Buckets | None, cur: Buckets | None) -> tuple[float | None, float | None]:
    """(p50, p95) of what a histogram observed between two scrapes."""
    d = bucket_deltas(prev, cur)
    return bucket_quantile(0.5, d), bucket_quantile(0.95, d)


def joules_per_token(energy_j: float | None, tokens: float | None) -> float | None:
    """Energy over an interval divided by the tokens generated in it; None when either is missing or zero."""
    if energy_j is None or tokens is None or tokens <= 0 or energy_j < 0:
        return None
    return energy_j / tokens


def by_pid(readings: Sequence[ServingReading]) -> dict[int, ServingReading]:
    """The readings keyed by their workload's launcher pid (readings without one are left out)."""
    return {r.pid: r for r in readings if r.pid is not None}
