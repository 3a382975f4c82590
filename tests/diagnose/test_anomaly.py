"""Non-thermal anomalies: a power-delivery fault and a hung engine, named only once they persisted."""

from __future__ import annotations

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose.anomaly import AnomalyWatch
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.model import GpuReading, Sample

TH = Thresholds()
STEP = 30.0


def _run(readings, loaded=True, th=TH, start=0.0):
    """Feed (temp, power, clock, util, reasons) per sample; the watch's answer after each."""
    watch, prev, out = AnomalyWatch(th), None, []
    for i, (temp, power, clk, util, reasons) in enumerate(readings):
        gpu = GpuReading(0, "NVIDIA GB10", "GPU-1", power_w=power, temp_c=temp, sm_clock_mhz=clk,
                         util_pct=util, clocks_event_reasons=reasons)  # fmt: skip
        f = feat.compute(prev, Sample(ts=start + i * STEP, gpus=(gpu,)), th)
        out.append(watch.update(f, loaded))
        prev = f
    return out


def _samples_for(seconds: float) -> int:
    return int(seconds // STEP) + 2


def test_clocks_pinned_low_while_cool_and_loaded_is_a_power_delivery_fault_after_the_minimum():
    n = _samples_for(TH.anomaly_min_s)
    got = _run([(50.0, 30.0, 700, 99.0, 0)] * n)
    first = got.index("power_delivery")
    assert all(g is None for g in got[:first])
    assert first * STEP >= TH.anomaly_min_s - STEP  # not before the pattern persisted (its first dt counts)
    assert got[-1] == "power_delivery"


def test_the_same_clocks_with_a_thermal_reason_idle_or_hot_are_not_power_delivery():
    n = _samples_for(TH.anomaly_min_s)
    assert set(_run([(50.0, 30.0, 700, 99.0, 0x20)] * n)) == {None}  # the GPU says it is thermal
    assert set(_run([(50.0, 30.0, 700, 0.0, 0)] * n, loaded=False)) == {None}  # nothing to run
    assert set(_run([(80.0, 30.0, 700, 99.0, 0)] * n)) == {None}  # within cool_margin_c of slowdown


def test_a_break_in_the_pattern_restarts_the_clock():
    n = _samples_for(TH.anomaly_min_s)
    pinned = (50.0, 30.0, 700, 99.0, 0)
    got = _run([pinned] * (n - 2) + [(50.0, 90.0, 2400, 99.0, 0)] + [pinned] * (n - 2))
    assert "power_delivery" not in got[: n - 1]
    assert got[n - 1 : n + 1] == [None, None]  # the break and the sample after it: counting again from zero
    assert got[-1] == "power_delivery"  # once it persisted the minimum again


def test_full_utilisation_at_idle_power_while_cooling_is_a_hung_engine():
    hot = [(80.0, 95.0, 2400, 99.0, 0)] * 3
    cooling = [
        (80.0 - TH.hung_temp_drop_c - 1 - i * 0.1, 12.0, 2400, 99.0, 0)
        for i in range(_samples_for(TH.anomaly_min_s))
    ]
    got = _run(hot + cooling)
    assert got[-1] == "hung_engine" and "power_delivery" not in got
    # The same idle power without the temperature falling from a hot start is just an idle GPU.
    assert set(_run([(40.0, 12.0, 2400, 99.0, 0)] * len(got))) == {None}


def test_reset_forgets_the_pattern():
    watch = AnomalyWatch(TH)
    watch.pd_since = watch.hung_since = 1.0
    watch.temps.append((1.0, 80.0))
    watch.reset()
    assert (watch.pd_since, watch.hung_since, len(watch.temps)) == (None, None, 0)
