"""Per-sample derived readings (rates between consecutive samples), computed once and shared by classifiers."""

from __future__ import annotations

from spark_watchd.model import Sample

KIB = 1024
# Thermal reasons (model.REASON_BITS): HW slowdown 0x08, SW thermal 0x20, HW thermal 0x40.
# The SW power cap (0x04) is GB10's normal state and is deliberately left out.
THERMAL_MASK = 0x08 | 0x20 | 0x40
THERMAL_COUNTERS = ("sw_thermal", "hw_thermal", "hw_slowdown")


class Features:
    """Readings of one sample plus rates against the previous one (None where not computable)."""

    # Class-level defaults: compute() sets only what the sample has (cheaper than filling every slot).
    ts = None
    dt = None
    reboot = None
    has_gpu = None
    temp_c = None
    power_w = None
    sm_clock_mhz = None
    app_clock_mhz = None
    util_pct = None
    slowdown_c = None
    shutdown_c = None
    thermal_bits = None
    thermal_rate = None
    mem_total_b = None
    avail_b = None
    avail_min_b = None
    cached_b = None
    anon_b = None
    psi_some_pct = None
    psi_full_pct = None
    swapout_per_s = None
    majfault_per_s = None
    oom_delta = None


def _gpu(sample: Sample):
    return sample.gpus[0] if sample.gpus else None


def _rate(cur, prev, key, dt):
    if prev is None or dt is None:
        return None
    a = cur.get(key)
    b = prev.get(key)
    if a is None or b is None or a < b:  # missing, or counters reset (reboot)
        return None
    return (a - b) / dt


def compute(prev: Sample | None, cur: Sample, th) -> Features:
    """Derive the features of `cur`, rates measured against `prev` (the previous sample or None)."""
    f = Features()
    f.ts = cur.ts
    dt = None
    reboot = False
    if prev is not None:
        if cur.boot_id and prev.boot_id:
            reboot = cur.boot_id != prev.boot_id
        elif cur.uptime_s is not None and prev.uptime_s is not None:
            reboot = cur.uptime_s + 1.0 < prev.uptime_s
        d = cur.ts - prev.ts
        if 0 < d <= th.max_gap_s and not reboot:
            dt = d
    f.dt = dt
    f.reboot = reboot
    pf = prev if dt is not None else None

    g = _gpu(cur)
    if g is not None:
        f.temp_c = g.temp_c
        f.power_w = g.power_w
        f.sm_clock_mhz = g.sm_clock_mhz
        f.util_pct = g.util_pct
        f.has_gpu = g.temp_c is not None or g.power_w is not None or g.sm_clock_mhz is not None
        f.app_clock_mhz = g.applications_clock_mhz or th.default_applications_clock_mhz
        f.slowdown_c = g.slowdown_temp_c if g.slowdown_temp_c is not None else th.default_slowdown_temp_c
        f.shutdown_c = g.shutdown_temp_c if g.shutdown_temp_c is not None else th.default_shutdown_temp_c
        mask = g.clocks_event_reasons
        f.thermal_bits = None if mask is None else bool(mask & THERMAL_MASK)
        ctr = g.clocks_event_counters_us
        if pf is not None and ctr is not None:
            pg = _gpu(pf)
            pctr = pg.clocks_event_counters_us if pg is not None else None
            if pctr is not None:
                tot = 0
                ok = False
                for k in THERMAL_COUNTERS:
                    a = ctr.get(k)
                    b = pctr.get(k)
                    if a is not None and b is not None:
                        if a < b:  # driver reload resets the counters
                            ok = False
                            break
                        tot += a - b
                        ok = True
                if ok:
                    f.thermal_rate = tot / 1e6 / dt
    else:
        f.has_gpu = False

    mi = cur.meminfo
    total = mi.get("MemTotal")
    f.mem_total_b = total * KIB if total is not None else None
    avail = mi.get("MemAvailable")
    if avail is not None:
        f.avail_b = avail * KIB
        mn = cur.mem_available_min_kb
        f.avail_min_b = min(avail, mn) * KIB if mn is not None else avail * KIB
    c = mi.get("Cached")
    f.cached_b = c * KIB if c is not None else None
    a = mi.get("AnonPages")
    if a is None:
        a = mi.get("Active(anon)")
    f.anon_b = a * KIB if a is not None else None

    psi = cur.psi_memory
    if psi:
        f.psi_some_pct = _psi(psi, pf, "some", dt)
        f.psi_full_pct = _psi(psi, pf, "full", dt)
    vm = cur.vmstat
    pvm = pf.vmstat if pf is not None else None
    f.swapout_per_s = _rate(vm, pvm, "pswpout", dt)
    f.majfault_per_s = _rate(vm, pvm, "pgmajfault", dt)
    if pvm is not None:
        o, po = vm.get("oom_kill"), pvm.get("oom_kill")
        if o is not None and po is not None and o > po:
            f.oom_delta = o - po
    return f


def _psi(psi, prev, kind, dt):
    """Stall share in %: the larger of avg60 and the measured rate of the cumulative total."""
    part = psi.get(kind)
    if not part:
        return None
    val = part.get("avg60")
    if prev is not None and prev.psi_memory:
        pp = prev.psi_memory.get(kind)
        if pp:
            t1, t0 = part.get("total"), pp.get("total")
            if t1 is not None and t0 is not None and t1 >= t0:
                r = (t1 - t0) / 1e4 / dt  # us per s -> %
                val = r if val is None or r > val else val
    return val
