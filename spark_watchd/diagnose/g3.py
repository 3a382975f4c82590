"""G3 unified-memory pressure from /proc/meminfo, PSI and vmstat (never NVML memory: Not Supported on GB10).

`classify(window, th)` is the pure function of a window; `G3Tracker.observe` is its incremental form
(a `diagnose.tracker.Tracker`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose.steady import Dwell, Latch
from spark_watchd.diagnose.tracker import Unpersisted, Verdict
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.model import Sample

GIB = 1024**3

ADVICE_LADDER = (
    "Drop the page cache between runs: sync; echo 3 | sudo tee /proc/sys/vm/drop_caches",
    "Then shrink the job: smaller batch, sequence packing, gradient checkpointing.",
    "Then bf16 LoRA before QLoRA.",
)
ADVICE_TENANT = (
    "Stop or cap other GPU tenants (vLLM --gpu-memory-utilization 0.5, stop Ollama) while training.",
)
ADVICE_THIN = (
    "Little headroom left: fine for a capped server that is already loaded, risky before starting another job.",
)
ADVICE_LOAD = (
    "A model load is filling the pool (page cache and anonymous memory climbing together, the weights "
    "counted twice): let it finish before starting anything else, and drop caches before the next load.",
)


def _gib(b) -> float | None:
    return None if b is None else round(b / GIB, 2)


class G3Tracker(Unpersisted):
    """Incremental G3 classifier: feed samples oldest first."""

    gotcha = "G3"

    def __init__(self, th):
        self.th = th
        self.hist = deque()  # (ts, avail_b, cached_b, anon_b) over the transient window
        self.avail = deque(maxlen=3)  # (ts, avail_b) of the last three samples, for the fall rate
        self.oom_hold_until = None
        self.full_since = None
        self.oom_total = 0
        # Hysteresis per threshold: each condition enters at one level and leaves past another.
        self.stalls, self.swapping, self.full = Latch(), Latch(), Latch()
        self.thin, self.exhausted = Latch(), Latch()
        self.dwell = Dwell()

    def reboot(self, ts: float, boot_id: str | None, cause: str | None) -> list[Event]:
        """Forget windowed memory state across a reboot (a fresh boot is not still OOM-critical); no events."""
        self._forget()
        return []

    def _forget(self) -> None:
        self.hist.clear()
        self.avail.clear()
        self.full_since = None
        self.oom_hold_until = None
        self.dwell.reset()

    def set_thresholds(self, th) -> None:
        """Thresholds were reloaded: judge the next sample afresh against them (no level or dwell held)."""
        self.th = th
        self.stalls, self.swapping, self.full = Latch(), Latch(), Latch()
        self.thin, self.exhausted = Latch(), Latch()
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
        finding, events = self._judge(sample, f)
        out = self.dwell.apply(finding, f.ts, self.th.min_dwell_s)
        # A leaving level only holds a finding where it is: once it has fallen below a condition's
        # level, that condition must reach its entering level again.
        if out.severity != "critical":
            self.exhausted.on = self.full.on = False
            if out.severity != "warning":
                self.stalls.on = self.swapping.on = self.thin.on = False
        return Verdict(out, events)

    def _judge(self, sample: Sample, f: feat.Features) -> tuple[Finding, list[Event]]:
        th = self.th
        ts = f.ts
        events: list[Event] = []
        if f.avail_b is None:
            self.hist.clear()
            return Finding(
                "G3", "unknown", "MemAvailable not readable: memory pressure cannot be judged"
            ), events
        if f.oom_delta:
            self.oom_total += f.oom_delta
            self.oom_hold_until = ts + th.oom_critical_hold_s
            events.append(
                Event(
                    "oom_kill",
                    "G3",
                    ts,
                    f"The kernel OOM killer ran ({f.oom_delta} kill{'s' if f.oom_delta > 1 else ''}) "
                    f"with {f.avail_b / GIB:.1f} GiB available",
                    details={"oom_kills": f.oom_delta},
                )
            )
        reserve = th.os_reserve_bytes
        # CmaFree sits inside MemAvailable but no pinned GPU allocation can use it (docs/diagnosis.md).
        cma = (f.cma_free_b or 0) if th.budget_subtracts_cma_free else 0
        budget = f.avail_b - cma - reserve
        budget_min = f.avail_min_b - cma - reserve
        some = f.psi_some_pct or 0.0
        full = f.psi_full_pct or 0.0
        swo = f.swapout_per_s or 0.0
        stalls = self.stalls.above(some, th.psi_some_warn_pct, th.psi_some_leave_pct, f.psi_some_now)
        swapping = self.swapping.above(swo, th.swapout_warn_pages_s, th.swapout_leave_pages_s)
        thin = self.thin.below(budget, th.budget_warn_bytes, th.budget_warn_leave_bytes)
        exhausted = self.exhausted.below(budget_min, th.budget_critical_bytes, th.budget_critical_leave_bytes)
        if self.full.above(full, th.psi_full_critical_pct, th.psi_full_leave_pct, f.psi_full_now):
            if self.full_since is None:
                self.full_since = ts - (f.dt or 0.0)
        else:
            self.full_since = None
        full_sustained = self.full_since is not None and ts - self.full_since >= th.psi_full_sustain_s
        tte = self._transient(f, budget)
        fall_tte = self._falling(f, budget) if tte is None else None
        oom_hold = self.oom_hold_until is not None and ts < self.oom_hold_until
        w_stalls, w_swapping, w_thin = stalls, swapping, thin or exhausted
        held = self.dwell.current
        if held is not None and held.severity == "critical":
            # Falling from critical, a warning is entered afresh rather than held by its leaving level:
            # PSI avg60 takes a minute to decay after the stalls end, which is the end of the episode,
            # not reclaim beginning.
            w_stalls = (some if f.psi_some_now is None else f.psi_some_now) >= th.psi_some_warn_pct
            w_swapping = swo >= th.swapout_warn_pages_s
            w_thin = budget <= th.budget_warn_bytes or budget_min <= th.budget_critical_bytes

        ev = {
            "mem_available_bytes": f.avail_b,
            "mem_available_min_bytes": f.avail_min_b,
            "budget_bytes": budget,
            "os_reserve_bytes": reserve,
            "psi_some_avg60_pct": some,
            "psi_full_avg60_pct": full,
            "swap_out_pages_per_s": swo,
            "major_faults_per_s": f.majfault_per_s,
            "cached_bytes": f.cached_b,
            "anon_bytes": f.anon_b,
        }
        if f.cma_free_b is not None:
            ev["cma_free_bytes"] = f.cma_free_b
        if tte is not None:
            ev["budget_exhausted_in_s"] = round(tte, 1)
        elif fall_tte is not None:
            ev["budget_exhausted_in_s"] = round(fall_tte, 1)
        avail_txt = f"{f.avail_b / GIB:.1f} GiB available (min {f.avail_min_b / GIB:.1f}), budget {budget / GIB:.1f} GiB"
        if cma >= GIB // 4:
            avail_txt += f" ({cma / GIB:.1f} GiB CmaFree not counted)"
        if not (stalls or swapping or full_sustained):
            # the common, quiet case first: no stall text to format
            if oom_hold or tte is not None or fall_tte is not None or thin or exhausted:
                pass
            else:
                return Finding("G3", "ok", f"Memory OK: {avail_txt}, no reclaim stalls", ev), events
        stall_txt = f"PSI some {some:.1f}% / full {full:.1f}%, swap-out {swo:.0f} pages/s"

        if oom_hold:
            return Finding(
                "G3", "critical", f"The OOM killer ran: {avail_txt}", ev, ADVICE_LADDER + ADVICE_TENANT
            ), events
        if exhausted and (stalls or swapping):
            return Finding(
                "G3",
                "critical",
                f"Pool close to exhaustion while reclaim stalls: {avail_txt}; {stall_txt}",
                ev,
                ADVICE_LADDER + ADVICE_TENANT,
            ), events
        if full_sustained:
            return Finding(
                "G3",
                "critical",
                f"Sustained full memory stalls: {stall_txt}; {avail_txt}",
                ev,
                ADVICE_LADDER + ADVICE_TENANT,
            ), events
        if w_stalls or w_swapping:
            return Finding(
                "G3", "warning", f"Reclaim has begun: {stall_txt}; {avail_txt}", ev, ADVICE_LADDER
            ), events
        if tte is not None:
            return Finding(
                "G3",
                "warning",
                f"Model-load transient heading for the limit in {tte:.0f} s: {avail_txt}",
                ev,
                ADVICE_LOAD + ADVICE_LADDER[:1],
            ), events
        if fall_tte is not None:
            return Finding(
                "G3",
                "warning",
                f"MemAvailable falling fast, budget gone in ~{fall_tte:.0f} s at this rate: {avail_txt}",
                ev,
                ADVICE_LOAD + ADVICE_LADDER[:1],
            ), events
        if w_thin:
            return Finding(
                "G3",
                "warning",
                f"Memory budget is thin, no reclaim stalls: {avail_txt}",
                ev,
                ADVICE_THIN + ADVICE_LADDER[:1],
            ), events
        return Finding("G3", "ok", f"Memory OK: {avail_txt}, no reclaim stalls", ev), events


def classify(window: Sequence[Sample], th) -> Finding:
    """G3 finding for the newest sample of a window (oldest first); pure."""
    return feat.fold(G3Tracker(th), window, th)
