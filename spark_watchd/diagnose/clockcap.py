"""The SM clock cap owners set against G4 (`nvidia-smi -lgc 0,2100`): seen, lost at a reboot, and its cost.

A cap is the SM clock held at a ceiling under load while the GPU runs cool, with no thermal reason bits:
not a throttle (nothing is hot), not a power-delivery fault (the clock is far above the pinned 500-900 MHz
and power is normal). The driver forgets a cap at every boot, so a boot whose loaded clock runs above
the cap the owner keeps (`[thresholds] expected_clock_cap_mhz`, or the cap this daemon saw in the
previous boot) has lost it: a G4 warning with the command that restores it. The cost of the cap is
measured like with like: settled stretches of the same load (the same jobs, loaded for SETTLE_S, not
throttling), the mean temperature and tokens/s (or step time) with the cap against without it, never a
cooler warm-up against a plateau.

Pure: samples and their features in, a CapStatus out; no I/O, no clock. G4Tracker moves it in advance();
the rules g4_rules.clock_cap_lost (a warning, after the thermal and reboot rules) and g4_rules.clock_capped
(ok, before the plain `cool`) rule on it.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from statistics import median
from typing import Any

from spark_watchd.diagnose.features import near_slowdown, well_under_slowdown
from spark_watchd.sample.model import Sample

WINDOW_S = 1800.0  # loaded, cool, clean clocks kept to find a ceiling
MIN_SAMPLES = 10  # and at least this many of them ...
MIN_SPAN_S = 600.0  # ... over at least ten minutes
# The band a cap holds the clock in and the margin over it are [thresholds] clock_cap_band_mhz / _above_mhz.
BELOW_APP_MHZ = 150  # a ceiling this far under the applications clock (2418 on GB10) is no boost wobble
LOST_SAMPLES = 3  # loaded samples above the cap before the cap counts as lost
COST_MIN = 5  # samples on each side before a cost is quoted
# Like with like: a sample counts toward the cost only once the load has run this long without a break (a
# cold GB10 takes 5-10 minutes to reach its plateau under load: a warm-up after a reboot read 14 C cooler and
# gave "+3 C" for a cap), and only against samples of the same load (the same training jobs, else the same
# GPU-resident process names).
SETTLE_S = 600.0
_LOADS = 8  # load signatures kept for the cost
_STALE = object()  # the ceiling needs finding again (see ClockCapWatch._found_for)

ADVICE_LOST = (
    "Re-apply the cap now: sudo nvidia-smi -lgc 0,{cap}",
    "Make it stick across reboots: sudo spark-watchd install-service --clock-cap {cap} "
    "(a oneshot unit that applies it after the driver loads, before the daemon starts).",
)


@dataclasses.dataclass
class _Side:
    n: int = 0
    temp: float = 0.0
    tps_n: int = 0
    tps: float = 0.0
    step_n: int = 0
    step: float = 0.0

    def add(self, temp: float | None, tps: float | None, step: float | None) -> None:
        if temp is not None:
            self.n += 1
            self.temp += temp
        if tps:
            self.tps_n += 1
            self.tps += tps
        if step:
            self.step_n += 1
            self.step += step


@dataclasses.dataclass(frozen=True, slots=True)
class CapStatus:
    """What the cap watch says at one sample."""

    cap_mhz: int | None  # the ceiling seen this boot
    expected_mhz: int | None  # the cap the owner keeps (configured, or seen the boot before)
    lost: bool
    clock_mhz: float | None  # the loaded clock that ran above the expected cap
    cost: dict[str, Any] | None  # temp_delta_c, tokens_delta_pct / step_delta_pct, samples

    def sentence(self) -> str | None:
        cap = self.cap_mhz or self.expected_mhz
        if cap is None:
            return None
        if self.lost:
            head = f"clock cap lost at reboot: SM clock {self.clock_mhz:.0f} MHz under load, above the {cap} MHz cap"
        else:
            head = f"SM clock capped at {cap} MHz (a cap, not a throttle)"
        c = self.cost
        if not c:
            return head
        parts = [f"{c['temp_delta_c']:+.0f} C"]
        if c.get("tokens_delta_pct") is not None:
            parts.append(f"{c['tokens_delta_pct']:+.0f}% tokens/s")
        elif c.get("step_delta_pct") is not None:
            parts.append(f"{c['step_delta_pct']:+.0f}% step time")
        return f"{head}; cap {cap} MHz: {', '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "cap_mhz": self.cap_mhz,
            "expected_mhz": self.expected_mhz,
            "lost": self.lost,
            "clock_mhz": self.clock_mhz,
            "cost": self.cost,
            "summary": self.sentence(),
        }


def _tps(sample: Sample) -> tuple[float | None, float | None]:
    tps = [t.tokens_per_second for t in sample.throughput if t.tokens_per_second]
    steps = [t.step_seconds for t in sample.throughput if t.step_seconds]
    return (sum(tps) if tps else None), (sum(steps) / len(steps) if steps else None)


def _load(sample: Sample) -> tuple:
    """What load a sample carries, for comparing like with like: its training jobs, else its GPU processes."""
    jobs = tuple(sorted({t.job for t in sample.throughput}))
    return jobs or tuple(sorted({p.name for p in sample.processes if p.gpu_resident}))


class ClockCapWatch:
    """Finds the cap of this boot, remembers it across a reboot, and says when a boot runs without it."""

    def __init__(self, th):
        self.th = th
        self._clean: deque[tuple[float, float]] = deque()
        self.cap: int | None = None
        self.prev_cap: int | None = None  # the cap of the previous boot (persisted)
        self._after_reboot = False
        self._ran_free = False  # this boot ran loaded above any ceiling (no cap held)
        self._above = 0
        self.lost = False
        self._lost_clock: float | None = None
        self._sides: dict[tuple, dict[str, _Side]] = {}  # load signature -> capped and uncapped sides
        self._loaded_since: float | None = None
        self.status: CapStatus | None = None
        # Work done only when its inputs changed (most samples change none of them): the ceiling is found
        # again when the clean window moved, the applications clock or the thresholds changed (_found_for:
        # the clock it was found for, _STALE after a change); the cost when a side took a sample; the
        # status record when one of its fields changed (_status_key: the fields it was built from).
        self._found_for: Any = _STALE
        self._cost_now: dict[str, Any] | None = None
        self._status_key: tuple | None = None

    def set_thresholds(self, th) -> None:
        self.th = th
        self._found_for = _STALE

    def reboot(self) -> None:
        """A new boot: the driver has forgotten any cap; the one kept is what this boot must show."""
        if self.cap is not None:
            self.prev_cap = self.cap
        elif self._ran_free and not self.lost:
            self.prev_cap = None  # a boot that ran uncapped with nothing expected: no cap is kept
        # (a boot that never ran loaded, or a daemon just restarted, keeps the cap it knew)
        self.cap = None
        self._ran_free = False
        self._clean.clear()
        self._loaded_since = None
        self._found_for = _STALE
        self._after_reboot = True
        self._above = 0
        self.lost = False

    def time_jump(self) -> None:
        self._clean.clear()
        self._loaded_since = None
        self._found_for = _STALE

    def state(self) -> dict[str, Any]:
        """`clock_cap_mhz`, the cap a next boot must show; absent when none (older state files keep their shape)."""
        cap = self.cap if self.cap is not None else self.prev_cap
        return {"clock_cap_mhz": cap} if cap is not None else {}

    def restore(self, state: dict[str, Any]) -> None:
        cap = state.get("clock_cap_mhz")
        self.prev_cap = int(cap) if isinstance(cap, int | float) and cap > 0 else None

    def observe(self, sample: Sample, f) -> CapStatus:
        """Judge one sample (its features `f` from diagnose/features.py)."""
        th = self.th
        clk, temp, util = f.sm_clock_mhz, f.temp_c, f.util_pct
        loaded = clk is not None and util is not None and util >= th.load_util_pct
        cool = well_under_slowdown(temp, f.slowdown_c, th)
        clean = self._clean
        if loaded and cool and not f.thermal_bits and clk > th.pinned_clock_max_mhz:
            clean.append((f.ts, float(clk)))
            self._found_for = _STALE
            if clk > (f.app_clock_mhz or 2418) - BELOW_APP_MHZ:
                self._ran_free = True
        while clean and f.ts - clean[0][0] > WINDOW_S:
            clean.popleft()
            self._found_for = _STALE
        if self._found_for != f.app_clock_mhz:  # _STALE equals no clock
            self._find_cap(f.app_clock_mhz)
            self._found_for = f.app_clock_mhz
        # The cap the owner keeps: configured (0: none), else after a reboot the one the previous boot held.
        e = th.expected_clock_cap_mhz
        expected = (int(e) or None) if e is not None else self.prev_cap if self._after_reboot else None
        ceiling = self.cap or expected
        if loaded and expected is not None:
            if clk > expected + th.clock_cap_above_mhz:
                self._above += 1
                if self._above >= LOST_SAMPLES and not self.lost:
                    self.lost = True
                self._lost_clock = float(clk)
            elif self.cap is not None:  # held again: restored by hand
                self._above = 0
                self.lost = False
        if not loaded:
            self._loaded_since = None
        elif self._loaded_since is None:
            self._loaded_since = f.ts
        if loaded and ceiling is not None and f.ts - self._loaded_since >= SETTLE_S:
            hot = f.thermal_bits or near_slowdown(temp, f.slowdown_c, th)
            if not hot:
                side = "capped" if clk <= ceiling + th.clock_cap_above_mhz else "uncapped"
                sides = self._sides.get(sig := _load(sample))
                if sides is None:
                    if len(self._sides) >= _LOADS:
                        self._sides.pop(next(iter(self._sides)))
                    sides = self._sides[sig] = {"capped": _Side(), "uncapped": _Side()}
                sides[side].add(temp, *_tps(sample))
                self._cost_now = self._cost()
        key = (self.cap, expected, self.lost, self._lost_clock, self._cost_now)
        if key != self._status_key:
            self.status = CapStatus(*key)
            self._status_key = key
        return self.status

    def _find_cap(self, app_clock: float | None) -> None:
        clean = self._clean
        if len(clean) < MIN_SAMPLES or clean[-1][0] - clean[0][0] < MIN_SPAN_S:
            return
        app = app_clock or 2418
        if self.cap is None and clean[-1][1] > app - BELOW_APP_MHZ:
            return  # the newest clean clock runs free, so the window's top does: no ceiling, none to drop
        clocks = [c for _, c in clean]
        top = max(clocks)
        band = self.th.clock_cap_band_mhz
        if top - min(clocks) <= band and top <= app - BELOW_APP_MHZ:
            mid = median(clocks)
            e = self.th.expected_clock_cap_mhz
            self.cap = int(e) if e and abs(mid - e) <= band else int(round(mid / 25.0) * 25)
        elif (
            top > app - BELOW_APP_MHZ
            and self.cap is not None
            and top > self.cap + self.th.clock_cap_above_mhz
        ):
            self.cap = None  # the clocks run free again

    def _cost(self) -> dict[str, Any] | None:
        """The cost on the load seen most on both sides (the same load capped and uncapped), or None."""
        both = [x for x in self._sides.values() if min(x["capped"].n, x["uncapped"].n) >= COST_MIN]
        if not both:
            return None
        best = max(both, key=lambda x: x["capped"].n + x["uncapped"].n)
        c, u = best["capped"], best["uncapped"]
        out: dict[str, Any] = {"temp_delta_c": round(c.temp / c.n - u.temp / u.n, 1), "samples": [c.n, u.n]}
        if c.tps_n >= COST_MIN and u.tps_n >= COST_MIN:
            out["tokens_delta_pct"] = round(100 * ((c.tps / c.tps_n) / (u.tps / u.tps_n) - 1), 1)
        elif c.step_n >= COST_MIN and u.step_n >= COST_MIN:
            out["step_delta_pct"] = round(100 * ((c.step / c.step_n) / (u.step / u.step_n) - 1), 1)
        return out
