"""Per-sample features: rates against the previous sample, reboots, gaps and counter resets, defaults."""

from __future__ import annotations

import pytest

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose.board import evidence
from spark_watchd.diagnose.features import near_slowdown, well_under_slowdown
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.board import BoardReading
from spark_watchd.sample.model import GpuReading, Sample
from tests.diagnose.diag_builders import Host

TH = Thresholds()
KIB = 1024


def _gpu(**kw) -> GpuReading:
    return GpuReading(index=0, name="NVIDIA GB10", uuid="GPU-1", **kw)


def _pair(a: Sample, b: Sample, th: Thresholds = TH) -> feat.Features:
    return feat.compute(feat.compute(None, a, th), b, th)


def test_a_new_boot_id_is_a_reboot_and_no_rate_spans_it():
    a = Sample(ts=0.0, boot_id="b1", vmstat={"pswpout": 100})
    b = Sample(ts=30.0, boot_id="b2", vmstat={"pswpout": 10})
    f = _pair(a, b)
    assert f.reboot and f.dt is None and f.swapout_per_s is None


def test_without_boot_ids_an_uptime_that_went_back_is_a_reboot():
    assert _pair(Sample(ts=0.0, uptime_s=5000.0), Sample(ts=30.0, uptime_s=20.0)).reboot
    assert not _pair(Sample(ts=0.0, uptime_s=5000.0), Sample(ts=30.0, uptime_s=5030.0)).reboot


@pytest.mark.parametrize(("gap", "has_rate"), [(30.0, True), (600.0, True), (601.0, False), (0.0, False)])
def test_rates_need_a_gap_within_max_gap(gap, has_rate):
    a = Sample(ts=0.0, vmstat={"pgmajfault": 0})
    b = Sample(ts=gap, vmstat={"pgmajfault": 600})
    f = _pair(a, b)
    assert (f.majfault_per_s is not None) is has_rate
    if has_rate:
        assert f.majfault_per_s == pytest.approx(600 / gap)


def test_thermal_counter_rates_are_shares_of_wall_time_and_a_reset_gives_none():
    ctr = {"sw_thermal": 0, "hw_thermal": 0, "hw_slowdown": 0}
    a = Sample(ts=0.0, gpus=(_gpu(clocks_event_counters_us=ctr),))
    moved = {"sw_thermal": 3_000_000, "hw_thermal": 0, "hw_slowdown": 6_000_000}  # 3 s + 6 s in 30 s
    f = _pair(a, Sample(ts=30.0, gpus=(_gpu(clocks_event_counters_us=moved),)))
    assert f.pure_thermal_rate == pytest.approx(0.1) and f.thermal_rate == pytest.approx(0.3)
    reset = _pair(
        Sample(ts=0.0, gpus=(_gpu(clocks_event_counters_us=moved),)),
        Sample(ts=30.0, gpus=(_gpu(clocks_event_counters_us=ctr),)),
    )
    assert reset.thermal_rate is None  # driver reload: counters back at 0, no negative rate


def test_reason_bits_split_thermal_from_pure_thermal():
    slowdown_only = feat.compute(None, Sample(ts=0.0, gpus=(_gpu(clocks_event_reasons=0x08),)), TH)
    assert slowdown_only.thermal_bits and not slowdown_only.pure_thermal_bits
    sw_thermal = feat.compute(None, Sample(ts=0.0, gpus=(_gpu(clocks_event_reasons=0x20),)), TH)
    assert sw_thermal.thermal_bits and sw_thermal.pure_thermal_bits
    power_cap = feat.compute(None, Sample(ts=0.0, gpus=(_gpu(clocks_event_reasons=0x04),)), TH)
    assert not power_cap.thermal_bits


def test_thresholds_and_clocks_default_when_nvml_does_not_say():
    f = feat.compute(None, Sample(ts=0.0, gpus=(_gpu(temp_c=50.0),)), TH)
    assert (
        f.has_gpu
        and f.slowdown_c == TH.default_slowdown_temp_c
        and f.shutdown_c == TH.default_shutdown_temp_c
    )
    assert f.app_clock_mhz == TH.default_applications_clock_mhz
    told = feat.compute(
        None, Sample(ts=0.0, gpus=(_gpu(slowdown_temp_c=84.0, applications_clock_mhz=2000),)), TH
    )
    assert told.slowdown_c == 84.0 and told.app_clock_mhz == 2000
    assert not feat.compute(None, Sample(ts=0.0, gpus=(_gpu(),)), TH).has_gpu  # a GPU that answers nothing


def test_memory_in_bytes_with_the_fast_watch_minimum_and_anon_fallback():
    s = Sample(ts=0.0, meminfo={"MemTotal": 1000, "MemAvailable": 800, "Cached": 300, "Active(anon)": 50},
               mem_available_min_kb=200)  # fmt: skip
    f = feat.compute(None, s, TH)
    assert (f.mem_total_b, f.avail_b, f.avail_min_b, f.cached_b, f.anon_b) == (
        1000 * KIB, 800 * KIB, 200 * KIB, 300 * KIB, 50 * KIB,
    )  # fmt: skip
    # A watch minimum above the sample's own reading is stale: the reading wins.
    assert (
        feat.compute(
            None, Sample(ts=0.0, meminfo={"MemAvailable": 800}, mem_available_min_kb=900), TH
        ).avail_min_b
        == 800 * KIB
    )


def test_psi_takes_the_larger_of_avg60_and_the_measured_total_rate():
    def psi(avg60, total):
        return {"some": {"avg60": avg60, "total": total}, "full": {"avg60": 0.0, "total": 0}}

    a = Sample(ts=0.0, psi_memory=psi(1.0, 0))
    burst = _pair(a, Sample(ts=10.0, psi_memory=psi(1.0, 2_000_000)))  # 2 s stalled in 10 s: 20 %
    assert burst.psi_some_pct == pytest.approx(20.0)
    calm = _pair(a, Sample(ts=10.0, psi_memory=psi(5.0, 1000)))
    assert calm.psi_some_pct == 5.0
    assert feat.compute(None, Sample(ts=0.0, psi_memory=psi(7.5, 10)), TH).psi_some_pct == 7.5


def test_oom_kills_count_only_increases_within_one_boot():
    a = Sample(ts=0.0, boot_id="b", vmstat={"oom_kill": 3})
    assert _pair(a, Sample(ts=30.0, boot_id="b", vmstat={"oom_kill": 5})).oom_delta == 2
    assert _pair(a, Sample(ts=30.0, boot_id="b", vmstat={"oom_kill": 3})).oom_delta is None
    assert _pair(a, Sample(ts=30.0, boot_id="c", vmstat={"oom_kill": 9})).oom_delta is None


def test_thermal_counter_share_is_a_share_of_the_real_elapsed_time():
    """SW thermal and HW slowdown both active the whole interval: 100 % of the time, not 200 %; jitter counts."""
    th = Thresholds()
    host = Host()
    a = host.sample(thermal_share=1.0, hw_slowdown_share=1.0)
    b = host.sample(thermal_share=1.0, hw_slowdown_share=1.0)
    f = feat.compute(feat.compute(None, a, th), b, th)
    assert f.thermal_rate == 1.0 and f.pure_thermal_rate == 1.0
    half = host.sample(thermal_share=0.5)
    late = Sample(ts=half.ts + 10.0, gpus=half.gpus)  # stamped 10 s late: the same µs over a longer span
    g = feat.compute(feat.compute(None, b, th), late, th)
    assert g.pure_thermal_rate == pytest.approx(0.5 * host.interval / (host.interval + 10.0))


def test_near_the_slowdown_and_well_under_it_are_one_comparison_each_for_every_reader():
    th = Thresholds(slowdown_margin_c=3.0, cool_margin_c=15.0)
    assert [near_slowdown(t, 86.0, th) for t in (None, 82.9, 83.0, 90.0)] == [False, False, True, True]
    assert [well_under_slowdown(t, 86.0, th) for t in (None, 70.9, 71.0)] == [False, True, False]
    # The board's PROCHOT is heat exactly where G4 calls the GPU near the slowdown (the GPU or the package).
    prochot = BoardReading(prochot=1, temps_c={"tj_max": 60.0})
    assert evidence(prochot, th, 86.0, True, 83.0).prochot_hot is near_slowdown(83.0, 86.0, th) is True
    assert evidence(prochot, th, 86.0, True, 82.9).prochot_hot is near_slowdown(82.9, 86.0, th) is False
