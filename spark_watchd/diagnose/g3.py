"""G3 unified-memory pressure from /proc/meminfo, PSI and vmstat (never NVML memory: Not Supported on GB10).

Three stages per sample: `signals(f, th)` reads the sample's features into a `G3Signals` record (pure);
`G3Tracker.advance` is the only place the windows, latches and holds change and events are emitted; the
rules in `g3_rules.RULES` then rule on the record and the state in priority order.
`classify(window, th)` is the pure function of a window; `G3Tracker.observe` is its incremental form
(a `diagnose.tracker.Tracker`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose.g3_rules import _BLIND, GIB, G3Now, ruling, words
from spark_watchd.diagnose.runway import BudgetRunway
from spark_watchd.diagnose.serving import ServingWatch
from spark_watchd.diagnose.stall import Stall, StallWatch
from spark_watchd.diagnose.steady import Dwell, Latch
from spark_watchd.diagnose.tracker import Ruling, Unpersisted, Verdict
from spark_watchd.diagnose.usable import ThinSpell, basis
from spark_watchd.diagnose.verdicts import G3State
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.model import Sample


def _gib(b) -> float | None:
    return None if b is None else round(b / GIB, 2)


class G3Signals(NamedTuple):
    """What one sample says about the pool, read once (no state): the rules' and advance()'s input."""

    ts: float
    dt: float | None
    avail_b: int | None  # MemAvailable (None: G3 cannot judge)
    avail_min_b: int | None  # its lowest since the previous sample (the fast watch)
    budget: int | None  # MemAvailable minus CmaFree (when subtracted) minus os_reserve_bytes
    budget_min: int | None
    cma_free_b: int | None  # CmaFree as read
    cma: int  # the CmaFree taken off the budget (0 unless budget_subtracts_cma_free)
    some: float  # PSI some (avg60, or the counter's rate when higher), %
    full: float
    psi_some_now: float | None  # PSI over the last interval alone
    psi_full_now: float | None
    swo: float  # swap-out pages/s (0 when not measurable)
    swapout_per_s: float | None
    majfault_per_s: float | None
    psi_some_pct: float | None
    psi_full_pct: float | None
    cached_b: int | None
    anon_b: int | None
    oom_delta: int | None  # OOM kills since the previous sample
    oom_memcg: bool  # every kill the kernel reported this sample was at a cgroup's own limit
    usable: int | None  # MemAvailable minus CmaFree (when subtracted): what an allocation can still get
    usable_low: int | None  # the same from the 1 s minimum
    cma_total_b: int | None  # CmaTotal: what usable memory is on this boot's kernel (usable.basis)
    oom_collateral: tuple  # system services this sample's global kills took (diagnose/collateral.py)


# tuple.__new__ builds the record without NamedTuple's Python-level __new__ (once per sample per record).
_new = tuple.__new__


def signals(f: feat.Features, th) -> G3Signals:
    """Read one sample's features into what G3 judges; pure."""
    # CmaFree sits inside MemAvailable but no pinned GPU allocation can use it (docs/diagnosis.md).
    cma = (f.cma_free_b or 0) if th.budget_subtracts_cma_free else 0
    off = th.os_reserve_bytes + cma
    avail = f.avail_b
    return _new(
        G3Signals,
        (
            f.ts,
            f.dt,
            avail,
            f.avail_min_b,
            None if avail is None else avail - off,
            None if avail is None else f.avail_min_b - off,
            f.cma_free_b,
            cma,
            f.psi_some_pct or 0.0,
            f.psi_full_pct or 0.0,
            f.psi_some_now,
            f.psi_full_now,
            f.swapout_per_s or 0.0,
            f.swapout_per_s,
            f.majfault_per_s,
            f.psi_some_pct,
            f.psi_full_pct,
            f.cached_b,
            f.anon_b,
            f.oom_delta,
            f.oom_memcg,
            None if avail is None else avail - cma,
            None if avail is None else f.avail_min_b - cma,
            f.cma_total_b,
            f.oom_collateral,
        ),
    )


class G3Tracker(Unpersisted):
    """Incremental G3 classifier: feed samples oldest first."""

    gotcha = "G3"

    def __init__(self, th):
        self.th = th
        self.hist = deque()  # (ts, avail_b, cached_b, anon_b) over the transient window
        self.avail = deque(maxlen=3)  # (ts, avail_b) of the last three samples, for the fall rate
        self.oom_hold_until = None
        self.collateral: tuple = ()  # the collateral victims of the kills held (shown while the OOM hold lasts)
        self.oom_roomy = False  # the kills held came with usable memory to spare before and through them
        self.usable_prev: int | None = None  # usable memory at the previous sample
        self.full_since = None
        self.oom_total = 0
        # Hysteresis per threshold: each condition enters at one level and leaves past another.
        self.stalls, self.swapping, self.full = Latch(), Latch(), Latch()
        self.thin, self.exhausted = Latch(), Latch()
        self.runway = BudgetRunway(th)  # the budget's 20-minute trend and the runway warning's latch
        self.dwell = Dwell()
        self.serving = ServingWatch(th)
        self.spell = ThinSpell()  # usable memory's thin spells (diagnose/usable.py)
        self.engines = StallWatch(th)  # serving engines stalled with requests running (diagnose/stall.py)
        self._stalled: tuple = ()  # this sample's stalls, and those newly stalled (for their events)
        self._new_stalls: tuple = ()

    def reboot(self, ts: float, boot_id: str | None, cause: str | None) -> list[Event]:
        """Forget windowed memory state across a reboot (a fresh boot is not still OOM-critical); no events."""
        self._forget()
        return []

    def _forget(self) -> None:
        self.hist.clear()
        self.avail.clear()
        self.full_since = None
        self.oom_hold_until = None
        self.usable_prev = None
        self.runway.forget()
        self.dwell.reset()
        self.serving.forget()
        self.spell.forget()
        self.engines.forget()

    def set_thresholds(self, th) -> None:
        """Thresholds were reloaded: judge the next sample afresh against them (no level or dwell held)."""
        self.th = th
        self.serving.th = th
        self.engines.th = th
        self.stalls, self.swapping, self.full = Latch(), Latch(), Latch()
        self.thin, self.exhausted = Latch(), Latch()
        self.runway.set_thresholds(th)
        self.dwell.reset()

    def time_jump(self, ts: float) -> None:
        """The clock stepped back: restart the windows; an OOM hold still lasts at most its length from now."""
        hold = self.oom_hold_until
        self._forget()
        if hold is not None:
            self.oom_hold_until = min(hold, ts + self.th.oom_critical_hold_s)

    def _transient(self, f: feat.Features, budget: int):
        """Seconds until the budget is gone if a model-load transient is under way, else None."""
        th = self.th
        hist = self.hist
        ts = f.ts
        if f.cached_b is None or f.anon_b is None:
            return None
        hist.append((ts, f.avail_b, f.cached_b, f.anon_b))
        while len(hist) > 1 and ts - hist[0][0] > th.transient_window_s:
            hist.popleft()
        if len(hist) < 2:
            return None
        t0, a0, c0, n0 = hist[0]
        tp, ap = hist[-2][0], hist[-2][1]
        if ts <= tp:
            return None
        fall = ap - f.avail_b  # still falling now, not just earlier in the window
        if (
            fall <= 0
            or a0 - f.avail_b <= 0
            or f.cached_b - c0 < th.transient_min_growth_bytes
            or f.anon_b - n0 < th.transient_min_growth_bytes
        ):
            return None
        tte = max(0.0, budget) / (fall / (ts - tp))
        return tte if tte <= th.transient_horizon_s else None

    def _falling(self, f: feat.Features, budget: int):
        """Seconds until the budget is gone at the current MemAvailable fall rate, when MemAvailable fell by at
        least avail_fall_min_bytes in each of the last two intervals and that is within the horizon (in sampling
        intervals: before the next sample), else None.

        GB10: cudaMalloc'd memory (a load's device copy) shows in neither Cached nor AnonPages, only as
        MemAvailable falling, so the model-load transient test alone sees it late.
        """
        th = self.th
        av = self.avail
        ts = f.ts
        if av and (ts <= av[-1][0] or ts - av[-1][0] > th.max_gap_s):
            av.clear()
        av.append((ts, f.avail_b))
        if len(av) < 3:
            return None
        (_, a0), (t1, a1), (t2, a2) = av
        step = th.avail_fall_min_bytes
        if a0 - a1 < step or a1 - a2 < step:
            return None
        dt = t2 - t1
        tte = max(0, budget) / ((a1 - a2) / dt)
        return tte if tte <= th.avail_fall_horizon_intervals * dt else None

    def observe(self, sample: Sample, f: feat.Features) -> Verdict:
        """Judge the newest sample (held at a severity for min_dwell_s before it may fall)."""
        if sample.serving:  # (no readings leave the watch as it is: G3 reads only its KV high-water marks)
            self.serving.observe(sample.serving, f.ts, False)
        if sample.serving or sample.serving_progress or self.engines.last:
            # The 1 s reads since the previous sample first (the armed fast ring's), then the sample's own.
            _, early = self.engines.follow(sample.serving_progress)
            stalled, new = self.engines.observe(
                sample.serving, f.ts, (r.server for r in sample.serving_progress)
            )
            self._stalled, self._new_stalls = tuple(stalled), tuple(early + new)
        return self.advance(f, signals(f, self.th))

    def advance(self, f: feat.Features, s: G3Signals) -> Verdict:
        """The one place G3's state moves (windows, latches, holds, dwell) and its events are made."""
        th = self.th
        ts = s.ts
        events: list[Event] = []
        if s.avail_b is None:
            self.hist.clear()
            now = _BLIND
        else:
            if s.oom_memcg and self.oom_roomy:  # the report of a kill held as 'pool roomy' came: its limit
                self.oom_hold_until = None
            if s.oom_delta:
                self._kill(s)
                events.append(
                    Event(
                        "oom_kill",
                        "G3",
                        ts,
                        f"The kernel OOM killer ran ({s.oom_delta} kill{'s' if s.oom_delta > 1 else ''}) "
                        f"with {s.avail_b / GIB:.1f} GiB available",
                        details={"oom_kills": s.oom_delta, "scope": "memcg" if s.oom_memcg else "global"},
                    )
                )
            now = self._now(f, s)
            self.usable_prev = s.usable
            if self._new_stalls:
                events.extend(stall_event(st, s, now) for st in self._new_stalls)
        self._new_stalls = ()
        r = ruling(s, now, th)
        rw = now.runway
        # A server restarted into a smaller KV cache (read now: the watch moves on; none without a KV reading).
        kv = self.serving.kv_budget() if s.avail_b is not None and self.serving.kv_high else None
        state = _new(
            G3State,
            (
                s.budget,
                s.swapout_per_s,
                s.majfault_per_s,
                s.psi_some_pct,
                s.psi_full_pct,
                now.tte,
                rw is not None and rw.known,
                rw.seconds if rw is not None else None,
            ),
        )
        # The words are built on first read (most findings never are), from this sample's records alone.
        found = Finding.deferred("G3", r.severity, partial(_words, r, s, now, th, kv), r.advice, state=state)
        out = self.dwell.apply(found, ts, th.min_dwell_s)
        # A leaving level only holds a finding where it is: once it has fallen below a condition's
        # level, that condition must reach its entering level again.
        if out.severity != "critical":
            self.exhausted.on = self.full.on = False
            if out.severity != "warning":
                self.stalls.on = self.swapping.on = self.thin.on = False
        return _new(Verdict, (out, events, ()))

    def _kill(self, s: G3Signals) -> None:
        """An OOM kill: held critical for oom_critical_hold_s, unless a cgroup's own limit (no hold) or the pool
        was roomy before and through it (held as a warning: not the pool running out)."""
        th, ts = self.th, s.ts
        self.oom_total += s.oom_delta
        self.runway.forget()  # a kill frees memory: the trend before it is not the one after
        if s.oom_memcg:  # a container at its own memory limit is not the pool running out: the event alone
            return
        line = th.budget_warn_bytes + th.os_reserve_bytes
        roomy = self.usable_prev is not None and self.usable_prev > line and s.usable_low > line
        held = self.oom_hold_until is not None and ts < self.oom_hold_until
        if not held:
            self.collateral, self.oom_roomy = (), roomy
        self.oom_roomy = self.oom_roomy and roomy
        self.oom_hold_until = ts + th.oom_critical_hold_s
        self.collateral += tuple(n for n in s.oom_collateral if n not in self.collateral)

    def _now(self, f: feat.Features, s: G3Signals) -> G3Now:
        """Move the latches, windows and holds on this sample; what the rules read besides the signals."""
        th = self.th
        ts = s.ts
        some, swo, budget, budget_min = s.some, s.swo, s.budget, s.budget_min
        stalls = self.stalls.above(some, th.psi_some_warn_pct, th.psi_some_leave_pct, s.psi_some_now)
        swapping = self.swapping.above(swo, th.swapout_warn_pages_s, th.swapout_leave_pages_s)
        thin = self.thin.below(budget, th.budget_warn_bytes, th.budget_warn_leave_bytes)
        exhausted = self.exhausted.below(budget_min, th.budget_critical_bytes, th.budget_critical_leave_bytes)
        if self.full.above(s.full, th.psi_full_critical_pct, th.psi_full_leave_pct, s.psi_full_now):
            if self.full_since is None:
                self.full_since = ts - (s.dt or 0.0)
        else:
            self.full_since = None
        full_sustained = self.full_since is not None and ts - self.full_since >= th.psi_full_sustain_s
        tte = self._transient(f, budget)
        fall_tte = self._falling(f, budget) if tte is None else None
        oom_hold = self.oom_hold_until is not None and ts < self.oom_hold_until
        collateral = self.collateral if oom_hold else ()
        roomy_kill = oom_hold and self.oom_roomy
        rw = self.runway.update(ts, budget)
        rw_warn = self.runway.warn(ts, rw) if rw.known else False
        gone = self.spell.step(ts, s.usable, s.usable_low, th)
        w_stalls, w_swapping, w_thin = stalls, swapping, thin or exhausted
        held = self.dwell.current
        if held is not None and held.severity == "critical":
            # Falling from critical, a warning is entered afresh rather than held by its leaving level:
            # PSI avg60 takes a minute to decay after the stalls end, which is the end of the episode,
            # not reclaim beginning.
            w_stalls = (some if s.psi_some_now is None else s.psi_some_now) >= th.psi_some_warn_pct
            w_swapping = swo >= th.swapout_warn_pages_s
            w_thin = budget <= th.budget_warn_bytes or budget_min <= th.budget_critical_bytes
        return _new(
            G3Now,
            (
                stalls,
                swapping,
                thin,
                exhausted,
                full_sustained,
                oom_hold,
                tte if tte is not None else fall_tte,
                tte is None and fall_tte is not None,
                w_stalls,
                w_swapping,
                w_thin,
                rw,
                rw_warn,
                gone,
                self._stalled,
                collateral,
                roomy_kill,
            ),
        )


def stall_event(st: Stall, s: G3Signals, now: G3Now) -> Event:
    """The engine_stall event: the stall, with the memory state beside it (thin: the last sign before a wedge)."""
    thin = bool(now.w_thin or now.gone)
    summary = f"Serving engine stalled: {st.words()}; usable memory {s.usable / GIB:.1f} GiB"
    if s.cma >= GIB // 4:
        summary += f" (MemAvailable {s.avail_b / GIB:.1f} GiB, CmaFree {s.cma / GIB:.1f} GiB)"
    summary += f", PSI some {s.some:.1f}% / full {s.full:.1f}%"
    if thin:
        summary += ": with memory this thin, the last sign before a wedge"
    details = {
        "server": st.server,
        "stalled_since": st.since,
        "requests_running": st.running,
        "kv_usage": st.kv_usage,
        "usable_bytes": s.usable,
        "mem_available_bytes": s.avail_b,
        "cma_free_bytes": s.cma_free_b,
        "budget_bytes": s.budget,
        "psi_some_avg60_pct": s.some,
        "psi_full_avg60_pct": s.full,
        "thin": thin,
    }
    return Event("engine_stall", "G3", s.ts, summary, details=details)


def _words(r: Ruling, s: G3Signals, now: G3Now, th, kv: list | None) -> tuple[str, dict]:
    """The finding's summary and evidence (Finding.deferred's build): only immutable records of one sample."""
    summary = words(r.summary, s, now)
    rw = now.runway
    # A short runway beside another warning or critical is said too (the runway rule ruled otherwise).
    said = r.severity in ("warning", "critical") and not r.summary.startswith("Memory runway")
    if said and rw is not None and rw.seconds is not None and rw.seconds <= th.runway_leave_s:
        summary = f"{summary}; {rw.sentence()}"
    ev = _evidence(s, now, th) if s.avail_b is not None else {}
    if ev and kv:
        ev["serving_kv_budget"] = kv
    return summary, ev


def _evidence(s: G3Signals, now: G3Now, th) -> dict:
    """The readings behind the finding, for people (code reads Finding.state)."""
    ev = {
        "mem_available_bytes": s.avail_b,
        "mem_available_min_bytes": s.avail_min_b,
        "budget_bytes": s.budget,
        "usable_bytes": s.usable,
        "usable_min_bytes": s.usable_low,
        "usable_basis": basis(s.cma_total_b),
        "os_reserve_bytes": th.os_reserve_bytes,
        "psi_some_avg60_pct": s.some,
        "psi_full_avg60_pct": s.full,
        "swap_out_pages_per_s": s.swo,
        "major_faults_per_s": s.majfault_per_s,
        "cached_bytes": s.cached_b,
        "anon_bytes": s.anon_b,
    }
    if s.cma_free_b is not None:
        ev["cma_free_bytes"] = s.cma_free_b
    if now.tte is not None:
        ev["budget_exhausted_in_s"] = round(now.tte, 1)
    if now.runway is not None and now.runway.known:
        ev.update(now.runway.evidence())
    return ev


def classify(window: Sequence[Sample], th) -> Finding:
    """G3 finding for the newest sample of a window (oldest first); pure."""
    return feat.fold(G3Tracker(th), window, th)
