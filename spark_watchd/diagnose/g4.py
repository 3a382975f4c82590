"""G4 thermal throttling: the throttle signature, its damage, reboots, and the non-thermal look-alikes.

`classify(window, th)` is the pure function of a window; `G4Tracker.observe` is its incremental form
(a `diagnose.tracker.Tracker`: the engine feeds one sample at a time so nothing is recomputed over the
whole window).
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose.anomaly import ADVICE_HUNG, ADVICE_LIMIT, ADVICE_POWER, AnomalyWatch
from spark_watchd.diagnose.board import ADVICE_PROCHOT_COOL
from spark_watchd.diagnose.board import evidence as board_evidence
from spark_watchd.diagnose.steady import Dwell
from spark_watchd.diagnose.steps import Job, step_ratio
from spark_watchd.diagnose.tracker import Verdict
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.model import Sample

# Each remedy appears once per finding: a critical adds why it matters to the throttle advice, never a
# second wording of the clock cap.
CAP_CLOCKS = "sudo nvidia-smi -lgc 0,2100"
ADVICE_THROTTLE = (
    "Expect the ~100 W sustained cap on GB10: flat power under the 240 W rating is normal, heat is not.",
    "Improve cooling: clear the vents, give the unit space, lower the room temperature.",
    f"Or lower the clock ceiling so it stops hitting the slowdown threshold: {CAP_CLOCKS}",
)
ADVICE_DAMAGE = ("Training is measurably slower: fix the heat (below) before long runs.",)
ADVICE_REBOOT = (
    "The unit rebooted after a thermal throttle: check airflow before restarting the job, "
    f"and lower the clock ceiling for long runs: {CAP_CLOCKS}",
)


def _n(v, fmt: str = "") -> str:
    """Format a reading that may be missing."""
    return "?" if v is None else format(v, fmt)


class G4Tracker:
    """Incremental G4 classifier: feed samples oldest first, read the finding for the newest."""

    gotcha = "G4"

    def __init__(self, th):
        self.th = th
        self.episode = False
        self.episode_start = None
        self.last_thermal_ts = None  # last sample showing thermal activity
        self.last_ts = None
        self.critical = False
        self.reboot_hold_until = None
        self.throttle_s = 0.0
        self.jobs: dict[str, Job] = {}
        self.anomalies = AnomalyWatch(th)
        self.dwell = Dwell()

    def state(self) -> dict:
        """What must survive a power loss to recognise a reboot after a throttle (see restore())."""
        return {
            "last_ts": self.last_ts,
            "throttle_active": self.episode,
            "throttle_start_ts": self.episode_start,
            "last_thermal_ts": self.last_thermal_ts,
            "throttle_seconds_total": round(self.throttle_s, 3),
            "reboot_hold_until": self.reboot_hold_until,
        }

    def restore(self, state: dict) -> None:
        """Resume the episode, counters and reboot hold a previous run persisted with state()."""
        self.episode = bool(state.get("throttle_active"))
        self.episode_start = state.get("throttle_start_ts")
        self.last_thermal_ts = state.get("last_thermal_ts")
        self.last_ts = state.get("last_ts")
        self.throttle_s = float(state.get("throttle_seconds_total") or 0.0)
        self.reboot_hold_until = state.get("reboot_hold_until")

    def set_thresholds(self, th) -> None:
        """Judge with new thresholds from the next sample on (the anomaly watch included)."""
        self.th = self.anomalies.th = th

    def throttle_recent(self, at_ts: float) -> bool:
        """Whether a throttle was active, or ended within the reboot window, as of at_ts."""
        if self.episode:
            return True
        lt = self.last_thermal_ts
        return (
            lt is not None
            and at_ts - lt <= self.th.reboot_after_throttle_window_s + self.th.throttle_end_quiet_s
        )

    def reboot(self, ts: float, boot_id: str | None, cause: str | None) -> list[Event]:
        """A new boot was seen at ts: report it, whether it followed a throttle, and any driver fault that ended it."""
        th = self.th
        events = []
        ref = self.last_ts if self.last_ts is not None else ts
        after = self.throttle_recent(ref)
        if self.episode:
            events.append(
                Event(
                    "throttle_end",
                    "G4",
                    ts,
                    "Thermal throttle ended by a reboot",
                    details={"reason": "reboot"},
                )
            )
        gap = ts - self.last_ts if self.last_ts is not None else None
        summary = "Host rebooted" + (f" after a {gap / 60:.1f} min gap" if gap is not None else "")
        summary += " right after a thermal throttle" if after else " (no throttle before it)"
        details = {"boot_id": boot_id}
        if cause:
            summary += f"; {cause}"
            details["driver_cause"] = cause
        if gap is not None:
            details["gap_s"] = round(gap, 1)
        events.append(Event("reboot", "G4", ts, summary, after_throttle=after, details=details))
        self.episode = False
        self.critical = False
        self.episode_start = None
        self.jobs.clear()
        self.anomalies.reset()
        if after:
            self.reboot_hold_until = ts + th.reboot_critical_hold_s
        return events

    def time_jump(self, ts: float) -> None:
        """The clock stepped back to ts: restart time windows, keep the episode."""
        self.anomalies.reset()
        self.dwell.reset()
        for j in self.jobs.values():
            j.recent.clear()
            j.recent_sum = 0.0
            j.last_report = None
        if self.last_thermal_ts is not None and self.last_thermal_ts > ts:
            self.last_thermal_ts = ts
        if self.episode_start is not None and self.episode_start > ts:
            self.episode_start = ts
        self.reboot_hold_until = None

    def observe(self, sample: Sample, f: feat.Features) -> Verdict:
        """Judge the newest sample (after any reboot() call for it), held min_dwell_s before it may fall."""
        finding, events = self._judge(sample, f)
        return Verdict(self.dwell.apply(finding, f.ts, self.th.min_dwell_s), events)

    def _judge(self, sample: Sample, f: feat.Features) -> tuple[Finding, list[Event]]:
        th = self.th
        ts = f.ts
        events: list[Event] = []
        hold = self.reboot_hold_until is not None and ts < self.reboot_hold_until
        if not hold:
            self.reboot_hold_until = None
        if not f.has_gpu:
            self.last_ts = ts
            if hold:
                return self._reboot_finding(ts), events
            return Finding("G4", "unknown", "No GPU readings: thermal state cannot be judged"), events

        temp = f.temp_c
        util = f.util_pct
        power = f.power_w
        clk = f.sm_clock_mhz
        slowdown = f.slowdown_c
        loaded = util >= th.load_util_pct if util is not None else (power or 0) >= 0.5 * th.sustained_power_w
        near = temp is not None and temp >= slowdown - th.slowdown_margin_c
        at_shutdown = temp is not None and temp >= f.shutdown_c
        clock_low = loaded and clk is not None and clk < f.app_clock_mhz * th.clock_drop_ratio
        rate = f.thermal_rate
        moving = rate is not None and rate >= th.thermal_counter_rate_min
        thermal_now = bool(f.thermal_bits) or moving
        if f.thermal_bits is None and f.thermal_rate is None and f.dt is not None:
            # No reason mask nor counters: fall back to temperature at the threshold with clocks sagging.
            signature = temp is not None and temp >= slowdown and clock_low
            thermal_now = signature
        else:
            pr = f.pure_thermal_rate
            pure = bool(f.pure_thermal_bits) or (pr is not None and pr >= th.thermal_counter_rate_min)
            # SW/HW thermal is heat by definition (the GPU sensor may read a few C under the hotspot);
            # HW slowdown alone needs the temperature or the clocks to agree.
            signature = (pure and loaded) or (thermal_now and (near or clock_low))
        signature = signature or at_shutdown
        b = board_evidence(sample.board, th, slowdown, loaded, temp)
        if b is not None and b.thermal and loaded:
            # PROCHOT or the package at Tj max is heat even when NVML's mask reads 0 (firmware clamps first).
            signature = thermal_now = True

        if signature:
            self.last_thermal_ts = ts
            if not self.episode:
                self.episode = True
                self.episode_start = ts
                self.critical = False
                events.append(
                    Event(
                        "throttle_start",
                        "G4",
                        ts,
                        f"Thermal throttle started at {temp:.1f} C (slowdown {slowdown:.0f} C)"
                        if temp is not None
                        else "Thermal throttle started",
                        details={"temp_c": temp, "slowdown_temp_c": slowdown, "sm_clock_mhz": clk},
                    )
                )
        elif self.episode and thermal_now:
            self.last_thermal_ts = ts
        if (
            self.episode
            and self.last_thermal_ts is not None
            and ts - self.last_thermal_ts >= th.throttle_end_quiet_s
        ):
            dur = ts - self.episode_start
            self.episode = False
            self.critical = False
            events.append(
                Event(
                    "throttle_end",
                    "G4",
                    ts,
                    f"Thermal throttle ended after {dur / 60:.1f} min",
                    details={"duration_s": dur},
                )
            )
        if self.episode and f.dt is not None:
            self.throttle_s += f.dt

        worst = step_ratio(self.jobs, sample, ts, self.episode, thermal_now, th)
        self.last_ts = ts
        anomaly = None if (self.episode or thermal_now) else self.anomalies.update(f, loaded)

        ev = {
            "temp_c": temp,
            "slowdown_temp_c": slowdown,
            "shutdown_temp_c": f.shutdown_c,
            "power_w": power,
            "power_rating_w": th.power_rating_w,
            "sm_clock_mhz": clk,
            "applications_clock_mhz": f.app_clock_mhz,
            "util_pct": util,
            "thermal_reasons_active": f.thermal_bits,
            "thermal_counter_share": rate,
            # cumulative, for sparkwatchd_throttled_seconds_total (the runtime restores it after restarts)
            "throttled_seconds_total": self.throttle_s,
        }
        if b is not None:
            ev.update(b.details())
        if worst is not None:
            ev["step_seconds_recent"] = worst[2]
            ev["step_seconds_baseline"] = worst[3]
            ev["step_time_ratio"] = worst[0]
        if self.episode:
            ratio = worst[0] if worst is not None else 0.0
            damaged = (
                at_shutdown
                or ratio >= th.step_slowdown_ratio
                or (self.critical and ratio >= th.step_recover_ratio)
            )
            self.critical = damaged
            ev["throttle_duration_s"] = ts - self.episode_start
            if at_shutdown:
                return Finding(
                    "G4",
                    "critical",
                    f"GPU at its shutdown threshold: {temp:.1f} C (shutdown {f.shutdown_c:.0f} C)",
                    ev,
                    ADVICE_THROTTLE,
                ), events
            if damaged:
                return Finding(
                    "G4",
                    "critical",
                    f"Thermal throttle is slowing training: step time x{ratio:.2f} of its baseline "
                    f"({worst[1]}), {_n(temp, '.1f')} C, clocks {_n(clk)} MHz",
                    ev,
                    ADVICE_DAMAGE + ADVICE_THROTTLE,
                ), events
            if hold:
                return self._reboot_finding(ts, ev), events
            why = "active" if f.thermal_bits else "counters moving"
            if not f.thermal_bits and not moving and b is not None and b.thermal:
                why = f"mask clear but {b.why_thermal()}"
            return Finding(
                "G4",
                "warning",
                f"Thermal throttle: {_n(temp, '.1f')} C at the {slowdown:.0f} C slowdown, thermal reason "
                f"{why}, clocks {_n(clk)} of {f.app_clock_mhz} MHz, {_n(power, '.0f')} W",
                ev,
                ADVICE_THROTTLE,
            ), events
        if hold:
            return self._reboot_finding(ts, ev), events
        if anomaly == "power_delivery":
            return Finding(
                "G4",
                "ok",
                f"Not thermal: clocks pinned at {clk} MHz at {temp:.0f} C and {power:.0f} W with no clock-event "
                "reason bit (power-delivery fault"
                + (
                    f", confirmed by board DC input {b.dc_input_w:.0f} W)"
                    if b is not None and b.dc_input_low
                    else ")"
                ),
                ev,
                ADVICE_POWER,
                anomaly="power_delivery",
            ), events
        if anomaly == "hung_engine":
            return Finding(
                "G4",
                "ok",
                f"Not thermal: {util:.0f}% utilisation at {power:.0f} W with temperature falling (hung engine?)",
                ev,
                ADVICE_HUNG,
                anomaly="hung_engine",
            ), events
        if b is not None and b.prochot_cool and loaded:
            return Finding(
                "G4",
                "ok",
                f"Not thermal: board PROCHOT asserted at {_n(temp, '.0f')} C, well under the {slowdown:.0f} C "
                "slowdown: a board power or current limit, not a thermal throttle",
                ev,
                ADVICE_PROCHOT_COOL,
                anomaly="power_limit",
            ), events
        if b is not None and b.limit is not None:
            if worst is not None and worst[0] >= th.step_slowdown_ratio:
                return Finding(
                    "G4",
                    "ok",
                    f"Not thermal: step time x{worst[0]:.2f} of its baseline ({worst[1]}) while the firmware "
                    f"{b.limit} power limit holds the board ({b.limit_phrase()}), with no NVML reason: "
                    "the slowdown is that limit, not heat",
                    ev,
                    ADVICE_LIMIT,
                    anomaly="power_limit",
                ), events
            return Finding(
                "G4",
                "ok",
                f"No thermal throttle: {_n(temp, '.0f')} C at the platform power limit ({b.limit_phrase()}): "
                "the platform cap, not heat",
                ev,
            ), events
        if temp is None:
            return Finding("G4", "ok", "No throttle signature (temperature not reported)", ev), events
        summary = f"No thermal throttle: {temp:.0f} C"
        if power is not None:
            summary += f", {power:.0f} W"
        if near:
            summary += f" (near the {slowdown:.0f} C slowdown, no thermal reason yet)"
        return Finding("G4", "ok", summary, ev), events

    def _reboot_finding(self, ts, ev=None) -> Finding:
        return Finding(
            "G4",
            "critical",
            "Rebooted after a thermal throttle",
            ev or {},
            ADVICE_REBOOT,
        )


def classify(window: Sequence[Sample], th) -> Finding:
    """G4 finding for the newest sample of a window (oldest first); pure."""
    return feat.fold(G4Tracker(th), window, th)
