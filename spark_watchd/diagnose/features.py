"""Per-sample derived readings (rates between consecutive samples), computed once and shared by classifiers.

Each sample's raw counters are read once and kept on its Features, so the next sample's rates are a
subtraction against the previous Features rather than a second walk through the previous sample.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_watchd.diagnose.collateral import collateral_names
from spark_watchd.sample.findings import Finding
from spark_watchd.sample.model import Sample

KIB = 1024
# Thermal reasons (model.REASON_BITS): HW slowdown 0x08, SW thermal 0x20, HW thermal 0x40.
# The SW power cap (0x04) is GB10's normal state and is deliberately left out.
THERMAL_MASK = 0x08 | 0x20 | 0x40
# SW/HW thermal are thermal by definition; HW slowdown (0x08) can also be the power brake, so it needs
# the temperature or the clocks to agree before it counts as a thermal throttle.
PURE_THERMAL_MASK = 0x20 | 0x40


def near_slowdown(temp_c: float | None, slowdown_c: float, th) -> bool:
    """Within slowdown_margin_c of the slowdown threshold: where GB10's thermal counters start moving."""
    return temp_c is not None and temp_c >= slowdown_c - th.slowdown_margin_c


def well_under_slowdown(temp_c: float | None, slowdown_c: float, th) -> bool:
    """Cooler than the slowdown threshold by more than cool_margin_c: heat is not behind what is seen."""
    return temp_c is not None and temp_c < slowdown_c - th.cool_margin_c


class Features:
    """Readings of one sample plus rates against the previous one (None where not computable)."""

    # Derived readings and rates, then the sample's raw cumulative values kept for the next sample's rates
    # (c_pure: sw_thermal + hw_thermal us, c_slow: hw_slowdown us). Slots and plain stores: this object
    # is built once per sample on the replay hot path.
    _DERIVED = (
        "ts",
        "dt",
        "temp_c",
        "power_w",
        "sm_clock_mhz",
        "app_clock_mhz",
        "util_pct",
        "slowdown_c",
        "shutdown_c",
        "thermal_bits",
        "pure_thermal_bits",
        "thermal_rate",
        "pure_thermal_rate",
        "mem_total_b",
        "avail_b",
        "avail_min_b",
        "cma_free_b",
        "cma_total_b",
        "cached_b",
        "anon_b",
        "psi_some_pct",
        "psi_full_pct",
        "psi_some_now",
        "psi_full_now",
        "swapout_per_s",
        "majfault_per_s",
        "oom_delta",
        "oom_memcg",
        "oom_collateral",
    )
    _RAW = (
        "boot_id",
        "uptime_s",
        "c_pure",
        "c_slow",
        "psi_some_total",
        "psi_full_total",
        "pswpout",
        "pgmajfault",
        "oom_kill",
    )
    __slots__ = ("reboot", "has_gpu", *_DERIVED, *_RAW)

    def __init__(self):
        self.reboot = False
        self.has_gpu = False
        self.ts = None
        self.dt = None
        self.temp_c = None
        self.power_w = None
        self.sm_clock_mhz = None
        self.app_clock_mhz = None
        self.util_pct = None
        self.slowdown_c = None
        self.shutdown_c = None
        self.thermal_bits = None
        self.pure_thermal_bits = None
        self.thermal_rate = None
        self.pure_thermal_rate = None
        self.mem_total_b = None
        self.avail_b = None
        self.avail_min_b = None
        self.cma_free_b = None  # CmaFree: counted in MemAvailable, unusable by the GPU driver's pinned pages
        self.cma_total_b = None  # CmaTotal: 0 on a kernel without a CMA region (diagnose/usable.basis)
        self.cached_b = None
        self.anon_b = None
        self.psi_some_pct = None
        self.psi_full_pct = None
        # The stall share over the last interval alone (the total counter's rate; avg60 without one):
        # avg60 trails a minute behind, so it tells a stall that is over from one that goes on.
        self.psi_some_now = None
        self.psi_full_now = None
        self.swapout_per_s = None
        self.majfault_per_s = None
        self.oom_delta = None
        self.oom_memcg = False  # every kernel kill report of this sample was at a cgroup's own limit
        self.oom_collateral = ()  # system services the kernel killed under global pressure (diagnose/collateral)
        self.boot_id = None
        self.uptime_s = None
        self.c_pure = None
        self.c_slow = None
        self.psi_some_total = None
        self.psi_full_total = None
        self.pswpout = None
        self.pgmajfault = None
        self.oom_kill = None


def compute(prev: Features | None, cur: Sample, th) -> Features:
    """Derive the features of `cur`, rates measured against `prev` (the previous sample's Features)."""
    f = Features()
    ts = f.ts = cur.ts
    f.boot_id = cur.boot_id
    f.uptime_s = cur.uptime_s
    dt = None
    if prev is not None:
        if cur.boot_id and prev.boot_id:
            f.reboot = cur.boot_id != prev.boot_id
        elif cur.uptime_s is not None and prev.uptime_s is not None:
            f.reboot = cur.uptime_s + 1.0 < prev.uptime_s
        d = ts - prev.ts
        if 0 < d <= th.max_gap_s and not f.reboot:
            dt = f.dt = d

    if cur.gpus:
        g = cur.gpus[0]
        temp = f.temp_c = g.temp_c
        power = f.power_w = g.power_w
        sm = f.sm_clock_mhz = g.sm_clock_mhz
        f.util_pct = g.util_pct
        f.has_gpu = temp is not None or power is not None or sm is not None
        f.app_clock_mhz = g.applications_clock_mhz or th.default_applications_clock_mhz
        s = g.slowdown_temp_c
        f.slowdown_c = s if s is not None else th.default_slowdown_temp_c
        s = g.shutdown_temp_c
        f.shutdown_c = s if s is not None else th.default_shutdown_temp_c
        mask = g.clocks_event_reasons
        if mask is not None:
            f.thermal_bits = (mask & THERMAL_MASK) != 0
            f.pure_thermal_bits = (mask & PURE_THERMAL_MASK) != 0
        ctr = g.clocks_event_counters_us
        if ctr is not None:
            sw, hw, sl = ctr.get("sw_thermal"), ctr.get("hw_thermal"), ctr.get("hw_slowdown")
            pure = None
            if sw is not None or hw is not None:
                pure = f.c_pure = (sw or 0) + (hw or 0)
            f.c_slow = sl
            if dt is not None:
                # Inlined deltas (hot path): None when missing or reset (driver reload, reboot).
                b = prev.c_pure
                dp = pure - b if pure is not None and b is not None and pure >= b else None
                b = prev.c_slow
                ds = sl - b if sl is not None and b is not None and sl >= b else None
                if dp is not None or ds is not None:
                    # A share of the real elapsed time (0..1): reasons overlap (SW thermal and HW
                    # slowdown together) and a counter read lags the sample stamp, so a sum can pass 1.
                    r = (dp or 0) / 1e6 / dt
                    f.pure_thermal_rate = r if r < 1.0 else 1.0
                    r = ((dp or 0) + (ds or 0)) / 1e6 / dt
                    f.thermal_rate = r if r < 1.0 else 1.0

    mi = cur.meminfo
    f.mem_total_b = _bytes(mi.get("MemTotal"))
    avail = mi.get("MemAvailable")
    if avail is not None:
        f.avail_b = avail * KIB
        mn = cur.mem_available_min_kb
        f.avail_min_b = (mn if mn is not None and mn < avail else avail) * KIB
        f.cma_free_b = _bytes(mi.get("CmaFree"))
        f.cma_total_b = _bytes(mi.get("CmaTotal"))
    f.cached_b = _bytes(mi.get("Cached"))
    a = mi.get("AnonPages")
    f.anon_b = _bytes(a if a is not None else mi.get("Active(anon)"))

    psi = cur.psi_memory
    if psi:
        some = psi.get("some")
        if some:
            tot = f.psi_some_total = some.get("total")
            f.psi_some_pct, f.psi_some_now = _psi(
                some.get("avg60"), tot, prev.psi_some_total if dt else None, dt
            )
        full = psi.get("full")
        if full:
            tot = f.psi_full_total = full.get("total")
            f.psi_full_pct, f.psi_full_now = _psi(
                full.get("avg60"), tot, prev.psi_full_total if dt else None, dt
            )
    vm = cur.vmstat
    swo = f.pswpout = vm.get("pswpout")
    maj = f.pgmajfault = vm.get("pgmajfault")
    oom = f.oom_kill = vm.get("oom_kill")
    # Inlined deltas (hot path); a counter that went backwards was reset, so no rate.
    if dt is not None:
        b = prev.pswpout
        if swo is not None and b is not None and swo >= b:
            f.swapout_per_s = (swo - b) / dt
        b = prev.pgmajfault
        if maj is not None and b is not None and maj >= b:
            f.majfault_per_s = (maj - b) / dt
    if cur.oom_kills:
        kernel = [k for k in cur.oom_kills if k.killer in ("kernel", "memcg")]
        f.oom_memcg = bool(kernel) and all(k.scope == "memcg" for k in kernel)
        f.oom_collateral = collateral_names(kernel)
    if prev is not None and not f.reboot:
        b = prev.oom_kill
        if oom is not None and b is not None and oom > b:
            f.oom_delta = oom - b
    return f


def _bytes(kib: int | None) -> int | None:
    """A /proc/meminfo reading (kB) in bytes; None when the kernel does not report the key."""
    return None if kib is None else kib * KIB


def _psi(avg60, total, prev_total, dt):
    """(stall share in %: the larger of avg60 and the measured rate of the cumulative total, the rate alone)."""
    if dt is not None and total is not None and prev_total is not None and total >= prev_total:
        r = (total - prev_total) / 1e4 / dt  # us per s -> %
        if avg60 is None or r > avg60:
            return r, r
        return avg60, r
    return avg60, avg60


def fold(tracker, window: Sequence[Sample], th) -> Finding:
    """Feed a window (oldest first) through a classifier's tracker; the finding for its newest sample.

    This is each classifier's pure form (`g3.classify` ...): the engine feeds the same trackers one
    sample at a time instead, so nothing is recomputed over the window.
    """
    prev = None
    finding = Finding(tracker.gotcha, "unknown", "No samples")
    for s in window:
        f = compute(prev, s, th)
        if f.reboot:
            tracker.reboot(s.ts, s.boot_id, None)
        finding = tracker.observe(s, f).finding
        prev = f
    return finding
