"""G4 thermal throttling: the throttle signature, its damage, reboots, and the non-thermal look-alikes.

Three stages per sample: `signals(sample, f, th)` reads the sample into a `G4Signals` record (pure);
`G4Tracker.advance` is the only place the episode, counters, jobs and holds change and events are
emitted; the rules in `g4_rules.RULES` then rule on the record and the state in priority order.
`classify(window, th)` is the pure function of a window; `G4Tracker.observe` is its incremental form
(a `diagnose.tracker.Tracker`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose.anomaly import AnomalyWatch
from spark_watchd.diagnose.board import BoardEvidence
from spark_watchd.diagnose.board import evidence as board_evidence
from spark_watchd.diagnose.clockcap import ClockCapWatch
from spark_watchd.diagnose.g4_rules import G4Now, ruling
from spark_watchd.diagnose.serving import ServingWatch
from spark_watchd.diagnose.steady import Dwell
from spark_watchd.diagnose.steps import Job, step_ratio
from spark_watchd.diagnose.tracker import Ruling, Verdict, words
from spark_watchd.diagnose.verdicts import G4State
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.model import Sample


class G4Signals(NamedTuple):
    """What one sample says about heat, read once (no state): the rules' and advance()'s input."""

    ts: float
    dt: float | None  # seconds since the previous sample (None across a gap or reboot)
    has_gpu: bool
    temp_c: float | None
    util_pct: float | None
    power_w: float | None
    sm_clock_mhz: int | None
    app_clock_mhz: int | None
    slowdown_c: float | None
    shutdown_c: float | None
    thermal_bits: bool | None  # a thermal reason bit is set (None: no reason mask)
    counter_share: float | None  # thermal counters' share of the interval (0..1)
    loaded: bool  # utilisation (or, without it, power) says the GPU is working
    near: bool  # within slowdown_margin_c of the slowdown threshold
    at_shutdown: bool
    moving: bool  # the thermal counters ran at least thermal_counter_rate_min
    thermal_now: bool  # heat is signalled at this sample (mask, counters, board)
    signature: bool  # the throttle signature: heat signalled and confirmed (starts or extends an episode)
    reason: str | None  # G4State.reason
    board: BoardEvidence | None


_BLIND = dict.fromkeys(G4Signals._fields)
# tuple.__new__ builds the record without NamedTuple's Python-level __new__ (once per sample per record).
_new = tuple.__new__


def signals(sample: Sample, f: feat.Features, th) -> G4Signals:
    """Read one sample and its features into the signature G4 judges; pure."""
    if not f.has_gpu:
        return G4Signals(
            **{
                **_BLIND,
                "ts": f.ts,
                "dt": f.dt,
                "has_gpu": False,
                "loaded": False,
                "near": False,
                "at_shutdown": False,
                "moving": False,
                "thermal_now": False,
                "signature": False,
            }
        )
    temp = f.temp_c
    util = f.util_pct
    power = f.power_w
    clk = f.sm_clock_mhz
    slowdown = f.slowdown_c
    loaded = util >= th.load_util_pct if util is not None else (power or 0) >= 0.5 * th.sustained_power_w
    near = feat.near_slowdown(temp, slowdown, th)
    at_shutdown = temp is not None and temp >= f.shutdown_c
    clock_low = loaded and clk is not None and clk < f.app_clock_mhz * th.clock_drop_ratio
    rate = f.thermal_rate
    bits = f.thermal_bits
    moving = rate is not None and rate >= th.thermal_counter_rate_min
    thermal_now = True if bits else moving
    reason = "reasons" if bits else "counters" if moving else None
    if bits is None and rate is None and f.dt is not None:
        # No reason mask nor counters: fall back to temperature at the threshold with clocks sagging.
        signature = temp is not None and temp >= slowdown and clock_low
        thermal_now = signature
        reason = "temperature" if signature else None
    else:
        pr = f.pure_thermal_rate
        pure = True if f.pure_thermal_bits else pr is not None and pr >= th.thermal_counter_rate_min
        # SW/HW thermal is heat by definition (the GPU sensor may read a few C under the hotspot);
        # HW slowdown alone needs the temperature or the clocks to agree.
        signature = (pure and loaded) or (thermal_now and (near or clock_low))
    if at_shutdown and not signature:
        signature, reason = True, "shutdown"
    b = board_evidence(sample.board, th, slowdown, loaded, temp) if sample.board is not None else None
    if b is not None and b.thermal and loaded:
        # PROCHOT or the package at Tj max is heat even when NVML's mask reads 0 (firmware clamps first).
        if not thermal_now:
            reason = "board"
        signature = thermal_now = True
    return _new(
        G4Signals,
        (
            f.ts,
            f.dt,
            True,
            temp,
            util,
            power,
            clk,
            f.app_clock_mhz,
            slowdown,
            f.shutdown_c,
            bits,
            rate,
            loaded,
            near,
            at_shutdown,
            moving,
            thermal_now,
            signature,
            reason,
            b,
        ),
    )


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
        self.serving = ServingWatch(th)
        self.cap = ClockCapWatch(th)  # the owner's SM clock cap: seen, lost at a reboot, its cost

    def state(self) -> dict:
        """What must survive a power loss to recognise a reboot after a throttle (see restore())."""
        return {
            "last_ts": self.last_ts,
            "throttle_active": self.episode,
            "throttle_start_ts": self.episode_start,
            "last_thermal_ts": self.last_thermal_ts,
            "throttle_seconds_total": round(self.throttle_s, 3),
            "reboot_hold_until": self.reboot_hold_until,
            **self.cap.state(),
        }

    def restore(self, state: dict) -> None:
        """Resume the episode, counters and reboot hold a previous run persisted with state()."""
        self.episode = bool(state.get("throttle_active"))
        self.episode_start = state.get("throttle_start_ts")
        self.last_thermal_ts = state.get("last_thermal_ts")
        self.last_ts = state.get("last_ts")
        self.throttle_s = float(state.get("throttle_seconds_total") or 0.0)
        self.reboot_hold_until = state.get("reboot_hold_until")
        self.cap.restore(state)

    def set_thresholds(self, th) -> None:
        """Judge with new thresholds from the next sample on (the anomaly watch included)."""
        self.th = self.anomalies.th = th
        self.serving.th = th
        self.cap.set_thresholds(th)

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
        self.serving.forget()
        self.cap.reboot()
        if after:
            self.reboot_hold_until = ts + th.reboot_critical_hold_s
        return events

    def time_jump(self, ts: float) -> None:
        """The clock stepped back to ts: restart time windows, keep the episode."""
        self.anomalies.reset()
        self.serving.forget()
        self.cap.time_jump()
        self.dwell.reset()
        for j in self.jobs.values():
            j.forget_recent()
        if self.last_thermal_ts is not None and self.last_thermal_ts > ts:
            self.last_thermal_ts = ts
        if self.episode_start is not None and self.episode_start > ts:
            self.episode_start = ts
        self.reboot_hold_until = None

    def observe(self, sample: Sample, f: feat.Features) -> Verdict:
        """Judge the newest sample (after any reboot() call for it), held min_dwell_s before it may fall."""
        return self.advance(sample, f, signals(sample, f, self.th))

    def advance(self, sample: Sample, f: feat.Features, s: G4Signals) -> Verdict:
        """The one place G4's state moves: episode, counters, jobs, holds; the events; then the rules rule."""
        th = self.th
        ts = s.ts
        events: list[Event] = []
        until = self.reboot_hold_until
        hold = until is not None and ts < until
        if until is not None and not hold:
            self.reboot_hold_until = None
        self.last_ts = ts
        if not s.has_gpu:
            now = _new(G4Now, (self.episode, hold, False, None, None, None, (), None, None))
            return self._publish(ruling(s, now, th), s, now, events)
        if self.episode or s.signature:
            self._episode(s, events)
        episode = self.episode
        hot = episode or s.thermal_now
        # No training job reporting: no step ratio (and no job's window to move).
        worst = step_ratio(self.jobs, sample, ts, episode, s.thermal_now, th) if sample.throughput else None
        # The servers' own decode rates: the damage of a throttle on a Spark that serves (no training job).
        self.serving.observe(sample.serving, ts, hot)
        cut = tuple(self.serving.damage()) if episode else ()
        anomaly = None if hot else self.anomalies.update(f, s.loaded)
        duration = None
        damaged = False
        if episode:
            ratio = worst.ratio if worst is not None else 0.0
            damaged = (
                s.at_shutdown
                or ratio >= th.step_slowdown_ratio
                or (self.critical and ratio >= th.step_recover_ratio)
            )
            self.critical = damaged
            duration = ts - self.episode_start
        cap = self.cap.observe(sample, f)
        stall = self.anomalies.recurring(ts) if anomaly == "power_delivery" else None
        now = _new(G4Now, (episode, hold, damaged, worst, anomaly, duration, cut, cap, stall))
        return self._publish(ruling(s, now, th), s, now, events)

    def _episode(self, s: G4Signals, events: list[Event]) -> None:
        """advance()'s episode step (in an episode or at a signature): started by the signature, kept by heat,
        ended after throttle_end_quiet_s without it; the throttled seconds counted."""
        ts = s.ts
        if s.signature:
            self.last_thermal_ts = ts
            if not self.episode:
                self.episode = True
                self.episode_start = ts
                self.critical = False
                temp = s.temp_c
                events.append(
                    Event(
                        "throttle_start",
                        "G4",
                        ts,
                        f"Thermal throttle started at {temp:.1f} C (slowdown {s.slowdown_c:.0f} C)"
                        if temp is not None
                        else "Thermal throttle started",
                        details={
                            "temp_c": temp,
                            "slowdown_temp_c": s.slowdown_c,
                            "sm_clock_mhz": s.sm_clock_mhz,
                        },
                    )
                )
        elif s.thermal_now:  # (in an episode: no signature brought us here)
            self.last_thermal_ts = ts
        if self.last_thermal_ts is not None and ts - self.last_thermal_ts >= self.th.throttle_end_quiet_s:
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
        if self.episode and s.dt is not None:
            self.throttle_s += s.dt

    def _publish(self, r: Ruling, s: G4Signals, now: G4Now, events: list[Event]) -> Verdict:
        """The finding of this sample, its words deferred (written on first read, from its records only)."""
        th = self.th
        state = _new(
            G4State, (now.throttling, s.reason, s.counter_share, now.step, self.throttle_s, now.duration_s)
        )
        # The words, written on first read from this sample's records (never from self: throttle_s moves on).
        build = partial(_words, r, s, now, state.throttled_seconds_total, th)
        finding = Finding.deferred("G4", r.severity, build, r.advice, r.anomaly, state)
        return _new(Verdict, (self.dwell.apply(finding, s.ts, th.min_dwell_s), events, ()))


def _words(r: Ruling, s: G4Signals, now: G4Now, throttled_s: float, th) -> tuple[str, dict]:
    """A G4 finding's (summary, evidence) at one sample."""
    return words(r, s, now, th), evidence(s, now, throttled_s, th) if s.has_gpu else {}


def evidence(s: G4Signals, now: G4Now, throttled_s: float, th) -> dict:
    """The readings behind the finding, for people (code reads Finding.state)."""
    ev = {
        "temp_c": s.temp_c,
        "slowdown_temp_c": s.slowdown_c,
        "shutdown_temp_c": s.shutdown_c,
        "power_w": s.power_w,
        "power_rating_w": th.power_rating_w,
        "sm_clock_mhz": s.sm_clock_mhz,
        "applications_clock_mhz": s.app_clock_mhz,
        "util_pct": s.util_pct,
        "thermal_reasons_active": s.thermal_bits,
        "thermal_counter_share": s.counter_share,
        # cumulative, for sparkwatchd_throttled_seconds_total (the runtime restores it after restarts)
        "throttled_seconds_total": throttled_s,
    }
    if s.board is not None:
        ev.update(s.board.details())
    w = now.step
    if w is not None:
        ev["step_seconds_recent"] = w.recent_s
        ev["step_seconds_baseline"] = w.baseline_s
        ev["step_time_ratio"] = w.ratio
    if now.duration_s is not None:
        ev["throttle_duration_s"] = now.duration_s
    if now.serving_cut:
        ev["serving_damage"] = list(now.serving_cut)
    c = now.cap
    if c is not None and (c.cap_mhz or c.expected_mhz):
        ev.update((f"clock_cap_{k}", v) for k, v in c.to_dict().items() if k != "summary")
    return ev


def classify(window: Sequence[Sample], th) -> Finding:
    """G4 finding for the newest sample of a window (oldest first); pure."""
    return feat.fold(G4Tracker(th), window, th)
