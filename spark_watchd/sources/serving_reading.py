"""One scrape's figures as a ServingReading: the interval figures against the previous scrape, and only
finite, non-negative figures. Pure functions of the parsed answers."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from spark_watchd.sample.serving import ServingReading, counter_rate, quantiles
from spark_watchd.sources.serving_endpoints import Endpoint


def generated(figures: dict[str, Any]) -> float | None:
    """Tokens generated so far: the counter, plus (llama.cpp) what its running requests have generated,
    which its counter adds only when each request ends."""
    total = figures.get("generation_tokens")
    if total is None or figures.get("in_flight") is None:
        return total
    return total + figures["in_flight"]


def reading(ep: Endpoint, ts: float, cur: dict[str, Any], prev: dict[str, Any] | None, prev_ts: float | None):
    """The ServingReading of a scrape, with the figures over the interval since the previous one."""
    dt = ts - prev_ts if prev_ts is not None else 0.0
    p = prev or {}
    gen_rate = counter_rate(p.get("generation_tokens"), cur.get("generation_tokens"), dt)
    if gen_rate is not None and p.get("in_flight") is not None and cur.get("in_flight") is not None:
        # llama.cpp with its slots' progress: tokens as they are generated, not as requests end. The two
        # answers are read a moment apart, so a request ending between them can make the sum dip: 0 then.
        step = generated(cur) - generated(p)
        gen_rate = max(0.0, step) / dt if math.isfinite(step) else None
    if gen_rate is None and "gen_throughput" in cur and "generation_tokens" not in cur:
        gen_rate = cur["gen_throughput"]  # SGLang's own gauge when its token counters are absent
    ttft = quantiles(p.get("ttft"), cur.get("ttft"))
    itl = quantiles(p.get("itl"), cur.get("itl"))
    return ServingReading(
        server=ep.server,
        kind=ep.kind,
        up=True,
        ts=ts,
        pid=ep.pid,
        endpoint=ep.base_url,
        model=cur.get("model"),
        version=cur.get("version"),
        requests_running=cur.get("running"),
        requests_waiting=cur.get("waiting"),
        kv_usage=cur.get("kv_usage"),
        kv_capacity_tokens=cur.get("kv_capacity"),
        prompt_tokens_total=cur.get("prompt_tokens"),
        generation_tokens_total=cur.get("generation_tokens"),
        generation_tokens_in_flight=cur.get("in_flight"),
        preemptions_total=cur.get("preemptions"),
        prompt_tokens_per_s=counter_rate(p.get("prompt_tokens"), cur.get("prompt_tokens"), dt),
        generation_tokens_per_s=gen_rate,
        preemptions_per_s=counter_rate(p.get("preemptions"), cur.get("preemptions"), dt),
        ttft_p50_s=ttft[0],
        ttft_p95_s=ttft[1],
        itl_p50_s=itl[0],
        itl_p95_s=itl[1],
        models=tuple(cur.get("models", ())),
    )


def finite(r: ServingReading) -> ServingReading:
    """The reading with every figure that is not a finite, non-negative number dropped (None).

    A server's exposition is anyone's text: 1e308 on two engines sums to infinity, a rate over a short
    interval can overflow, and NaN or Infinity is not JSON; every serving figure is a count, a share, a rate
    or a duration, none negative.
    """
    bad = {
        f.name: None
        for f in dataclasses.fields(r)
        if f.name not in _OWN
        and isinstance(v := getattr(r, f.name), (int, float))
        and not isinstance(v, bool)
        and not (math.isfinite(v) and v >= 0)
    }
    return dataclasses.replace(r, **bad) if bad else r


_OWN = ("ts", "pid", "up")  # the daemon's own, not the server's
