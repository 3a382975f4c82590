"""What the inference servers' own telemetry says for G3, G4 and G6: pure state fed one sample at a time.

- G4 damage: a throttle that cuts a server's decode rate per running request well below that server's own
  baseline at comparable load (running requests within a tolerance of now). A server that is idle, or so
  bursty that its rate per request has no stable baseline, never makes damage out of nothing.
- G6 contention evidence: preemptions (SGLang: retractions) rising, or KV use collapsing while the server
  stays busy. Ollama's `expires_at` explains a model leaving `/api/ps` (keep-alive unload): never an eviction.
- G3: a server's KV budget (the cache it allocated) smaller than the same server allocated before.

No I/O, no clock: the sample's own timestamps only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, NamedTuple

from spark_watchd.diagnose.serving_thresholds import ServingThresholds
from spark_watchd.sample.serving import ServingReading


class Point(NamedTuple):
    """One interval of one server (`point()` builds it)."""

    ts: float
    tps: float | None
    running: float | None
    kv: float | None
    preempt: float | None  # cumulative
    throttled: bool
    # Decode tokens/s per running request (None: idle or unknown), worked out once: every baseline reads it.
    per_request: float | None


# tuple.__new__ builds the record without NamedTuple's Python-level __new__ (a point per server per scrape).
_new = tuple.__new__


def point(ts: float, tps, running, kv, preempt, throttled: bool) -> Point:
    """The interval of one scrape."""
    per = None if tps is None or not running or running < 1 else tps / running
    return _new(Point, (ts, tps, running, kv, preempt, throttled, per))


def _median(vals: Sequence[float]) -> float:
    v = sorted(vals)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _last(points: deque[Point], n: int) -> list[Point]:
    """The latest n points (all of them when fewer), oldest first."""
    return [points[i] for i in range(-min(n, len(points)), 0)]


def _cv(vals: Sequence[float]) -> float:
    m = sum(vals) / len(vals)
    if m <= 0:
        return float("inf")
    var = sum((x - m) ** 2 for x in vals) / len(vals)
    return var**0.5 / m


def _busy(p: Point, min_tokens_per_s: float) -> bool:
    return p.per_request is not None and p.tps >= min_tokens_per_s


def baseline_rate(
    baseline: Sequence[Point], running: float, th: ServingThresholds
) -> tuple[float, int] | None:
    """A server's decode rate per request outside a throttle at a load like `running` (running requests within
    serving_load_tolerance of it): (median, intervals). None for a server idle between bursts (its rate per
    request is then how much of the interval a burst covered: no baseline), or with too few or too variable
    intervals at that load. `baseline` holds its intervals outside a throttle, idle ones too."""
    if len(baseline) < th.serving_baseline_min_points:
        return None
    low = th.serving_min_tokens_per_s
    lo, hi = running * (1 - th.serving_load_tolerance), running * (1 + th.serving_load_tolerance)
    idle, base = 0, []
    for p in baseline:
        per = p.per_request
        if per is None or not p.tps >= low:  # not _busy(p, low), inline: a baseline holds up to 120
            idle += 1
        elif lo <= p.running <= hi:
            base.append(per)
    if idle > th.serving_baseline_max_idle_share * len(baseline):
        return None
    if len(base) < th.serving_baseline_min_points or _cv(base) > th.serving_baseline_max_cv:
        return None
    return _median(base), len(base)


class Baseline(deque):
    """A server's latest intervals outside a throttle (bounded), with its rate at each load asked kept
    (`baseline_rate`) while its newest interval and the thresholds stay the same: during a throttle, when
    damage is judged every sample, no interval joins it, and the load (the median of a few running counts)
    repeats."""

    def __init__(self, points=(), maxlen: int | None = None):
        super().__init__(points, maxlen)
        self._for: tuple = (None, None)  # (newest point, thresholds) the kept rates are for
        self._rates: dict[float, tuple[float, int] | None] = {}  # running requests -> baseline_rate

    def rate_at(self, running: float, th: ServingThresholds) -> tuple[float, int] | None:
        newest = self[-1] if self else None
        if newest is not self._for[0] or th is not self._for[1] or len(self._rates) >= 32:
            self._for = (newest, th)  # (bounded: a load that never repeats)
            self._rates.clear()
        if running not in self._rates:
            self._rates[running] = baseline_rate(self, running, th)
        return self._rates[running]


def decode_damage(
    recent: Sequence[Point], baseline: Baseline, th: ServingThresholds, ratio_needed: float
) -> dict[str, Any] | None:
    """Evidence that the latest throttled intervals cut the decode rate below the baseline at comparable load.

    `recent` holds the server's latest intervals; `baseline` its intervals outside a throttle.
    """
    n = th.serving_recent_points
    if len(recent) < n:
        return None
    recent = recent[-n:]
    low = th.serving_min_tokens_per_s
    if not all(p.throttled and _busy(p, low) for p in recent):
        return None
    running = _median([p.running for p in recent])
    at = baseline.rate_at(running, th)
    if at is None:
        return None
    b, points = at
    now = [p.per_request for p in recent]
    if _cv(now) > th.serving_baseline_max_cv:
        return None
    c = _median(now)
    if c <= 0 or b / c < ratio_needed:
        return None
    return {
        "tokens_per_s": round(_median([p.tps for p in recent]), 1),
        "baseline_tokens_per_s": round(b * running, 1),
        "running_requests": running,
        "decode_ratio": round(b / c, 2),
        "baseline_points": points,
    }


def preemption_storm(
    points: Sequence[Point], th: ServingThresholds, going: bool = False
) -> dict[str, Any] | None:
    """Preemptions rising: storm_preemptions within the latest window, after a calmer window before it;
    once `going`, it lasts while the window still holds half as many (a storm that settles is still one)."""
    if not points or points[-1].preempt is None:
        return None
    now = points[-1]
    start = next(
        (p for p in points if p.preempt is not None and now.ts - p.ts <= th.serving_storm_window_s), None
    )
    if start is None or start is now or now.preempt < start.preempt:
        return None
    recent = now.preempt - start.preempt
    first = next(  # the oldest point of the window before start's
        (
            p
            for p in points
            if p.preempt is not None and start.ts - p.ts <= th.serving_storm_window_s and p.ts <= start.ts
        ),
        None,
    )
    earlier = start.preempt - first.preempt if first is not None else 0.0
    rising = recent >= th.serving_storm_preemptions and recent > 2 * max(earlier, 0.0)
    if rising or (going and recent >= th.serving_storm_preemptions / 2):
        return {
            "preemptions": round(recent, 1),
            "over_s": round(now.ts - start.ts),
            "preemptions_before": earlier,
        }
    return None


def kv_collapse(points: Sequence[Point], th: ServingThresholds) -> dict[str, Any] | None:
    """KV use collapsing while the server stays busy: the cache was taken from it, not emptied by idling."""
    if len(points) < 4:
        return None
    now = points[-1]
    if now.kv is None or not now.running or now.running < 1:
        return None
    prior = [p.kv for p in points[-6:-1] if p.kv is not None and p.running]
    if len(prior) < 3:
        return None
    level = _median(prior)
    if level >= th.serving_kv_collapse_from and now.kv <= th.serving_kv_collapse_share * level:
        return {
            "kv_usage_share": round(now.kv, 3),
            "kv_usage_before_share": round(level, 3),
            "running_requests": now.running,
        }
    return None


def keepalive_unloads(prev: ServingReading, cur: ServingReading, ts: float, th: ServingThresholds):
    """(explained, unexplained): Ollama models gone since the previous reading, by whether keep-alive expired."""
    if prev.kind != "ollama" or not (prev.up and cur.up):
        return [], []
    held = {m.name for m in cur.models}
    explained, unexplained = [], []
    for m in prev.models:
        if m.name in held:
            continue
        if m.expires_at is not None and m.expires_at <= ts + th.serving_keepalive_slack_s:
            explained.append(m)
        else:
            unexplained.append(m)
    return explained, unexplained


class ServingWatch:
    """Per server: its recent points, damage latch, KV budget high-water mark and last reading."""

    def __init__(self, th: ServingThresholds | None = None):
        self.th = th or ServingThresholds()
        self.points: dict[str, deque[Point]] = {}
        self.base: dict[str, Baseline] = {}  # per server, its latest intervals outside a throttle
        self.damaged: set[str] = set()
        self.storming: set[str] = set()
        self.kv_high: dict[tuple[str, int | None], float] = {}
        self.last: dict[str, ServingReading] = {}
        self.unloads: list[tuple[str, Any]] = []  # this sample's keep-alive unloads (server, model)
        self.lost_models: list[tuple[str, Any]] = []  # models gone before their expiry
        # Per server, the sample time it was last in the readings: a server gone from them (its process
        # exited) for serving_history_s, when every point it had would have expired, is forgotten whole, so
        # servers that come and go (named by kind and port) leave no state behind.
        self.seen: dict[str, float] = {}

    def forget(self) -> None:
        self.points.clear()
        self.base.clear()
        self.storming.clear()
        self.damaged.clear()
        self.last.clear()
        self.seen.clear()

    def _retire(self, ts: float) -> None:
        """Forget every server not in the readings for serving_history_s."""
        cutoff = ts - self.th.serving_history_s
        for server in [k for k, seen in self.seen.items() if seen < cutoff]:
            del self.seen[server]
            self.points.pop(server, None)
            self.base.pop(server, None)
            self.last.pop(server, None)
            self.damaged.discard(server)
            self.storming.discard(server)
            for key in [k for k in self.kv_high if k[0] == server]:
                del self.kv_high[key]

    def observe(self, readings: Sequence[ServingReading], ts: float, throttled: bool) -> None:
        """Take one sample's readings (one point per server per scrape: a repeated scrape is not a new point)."""
        if self.seen:
            self._retire(ts)
        if not readings:  # a host serving nothing (most samples): only the last sample's unloads to clear
            if self.unloads or self.lost_models:
                self.unloads, self.lost_models = [], []
            return
        th = self.th
        self.unloads, self.lost_models = [], []
        seen = self.seen
        for r in readings:
            seen[r.server] = ts
            prev = self.last.get(r.server)
            if prev is not None and prev.models:  # (no model held before: none can have gone)
                explained, unexplained = keepalive_unloads(prev, r, ts, th)
                self.unloads += [(r.server, m) for m in explained]
                self.lost_models += [(r.server, m) for m in unexplained]
            self.last[r.server] = r
            if not r.up:
                continue
            if r.kv_capacity_tokens:
                key = (r.server, r.pid)
                self.kv_high[key] = max(self.kv_high.get(key, 0.0), r.kv_capacity_tokens)
                if len(self.kv_high) > 64:  # bounded: a server restarted a hundred times keeps its latest
                    self.kv_high.pop(next(iter(self.kv_high)))
            pts = self.points.get(r.server)
            if pts is None:
                pts = self.points[r.server] = deque()
            sts = r.ts if r.ts is not None else ts
            if pts and pts[-1].ts >= sts:
                continue
            # A rate that moves only when requests end (llama.cpp without its slots' progress) says nothing
            # about decode speed in an interval: 0, 0, 600 while tokens flow steadily. Never judged.
            tps = r.generation_tokens_per_s if r.live_rate else None
            pt = point(sts, tps, r.requests_running, r.kv_usage, r.preemptions_total, throttled)
            pts.append(pt)
            if prev is not None and prev.pid != r.pid:
                self.base.pop(r.server, None)  # a restarted server (another model, other flags) starts over
            if not throttled:
                base = self.base.get(r.server)
                if base is None:
                    base = self.base[r.server] = Baseline(maxlen=th.serving_baseline_max_points)
                base.append(pt)
            while pts and sts - pts[0].ts > th.serving_history_s:
                pts.popleft()

    def damage(self) -> list[dict[str, Any]]:
        """Per server whose decode rate a throttle cut: its evidence (latched until it recovers)."""
        out = []
        th = self.th
        n = th.serving_recent_points
        for server, pts in self.points.items():
            need = th.serving_recover_ratio if server in self.damaged else th.serving_damage_ratio
            base = self.base.get(server)
            # the latest n points without copying the whole history
            ev = decode_damage(_last(pts, n), base, th, need) if base is not None else None
            if ev is None:
                self.damaged.discard(server)
                continue
            self.damaged.add(server)
            out.append({"server": server, "kind": self.last[server].kind, **ev})
        return out

    def contention(self) -> list[dict[str, Any]]:
        """Per busy server: preemption storm or KV collapse evidence (the classifier adds the co-tenant)."""
        out = []
        for server, pts in self.points.items():
            p = list(pts)
            storm = preemption_storm(p, self.th, server in self.storming)
            if storm is None:
                self.storming.discard(server)
            else:
                self.storming.add(server)
            for what, ev in (("preemption_storm", storm), ("kv_collapse", kv_collapse(p, self.th))):
                if ev is not None:
                    out.append({"server": server, "kind": self.last[server].kind, "signal": what, **ev})
        return out

    def kv_budget(self) -> list[dict[str, Any]]:
        """Servers whose KV budget is under kv_shrink_share of the largest they (any pid of that label) allocated."""
        out = []
        best: dict[str, float] = {}
        for (server, _pid), cap in self.kv_high.items():
            best[server] = max(best.get(server, 0.0), cap)
        for server, r in self.last.items():
            cap = r.kv_capacity_tokens
            if r.up and cap and server in best and cap < self.th.serving_kv_shrink_share * best[server]:
                out.append(
                    {"server": server, "kv_capacity_tokens": cap, "kv_capacity_tokens_before": best[server]}
                )
        return out
