"""G4 thermal classifier on hand-built windows at its thresholds."""

from __future__ import annotations

from spark_watchd.diagnose import g4
from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.thresholds import Thresholds
from tests.diagnose.diag_builders import Host


def _warm(host, n=4, **kw):
    return host.run(n, **kw)


def test_flat_draw_at_cap_with_power_cap_bit_is_ok():
    host = Host()
    th = Thresholds()
    win = host.run(10, temp=79.0, power=95.0, mask=0x04, powercap_share=0.9)
    f = g4.classify(win, th)
    assert f.severity == "ok"
    assert f.anomaly is None


def test_counters_moving_just_above_rate_at_slowdown_is_warning():
    host = Host()
    th = Thresholds()
    win = _warm(host) + host.run(2, temp=86.5, thermal_share=th.thermal_counter_rate_min + 0.002)
    assert g4.classify(win, th).severity == "warning"


def test_counters_moving_just_below_rate_is_ok():
    host = Host()
    th = Thresholds()
    win = _warm(host) + host.run(2, temp=86.5, thermal_share=th.thermal_counter_rate_min - 0.002)
    assert g4.classify(win, th).severity == "ok"


def test_hw_slowdown_alone_needs_the_temperature_margin():
    th = Thresholds()
    edge = 86.0 - th.slowdown_margin_c
    h1 = Host()
    above = _warm(h1) + h1.run(2, temp=edge + 0.1, hw_slowdown_share=0.3)
    h2 = Host()
    below = _warm(h2) + h2.run(2, temp=edge - 0.1, hw_slowdown_share=0.3)
    assert g4.classify(above, th).severity == "warning"
    assert g4.classify(below, th).severity == "ok"


def test_sw_thermal_counters_are_heat_even_under_the_margin():
    th = Thresholds()
    h = Host()
    win = _warm(h) + h.run(2, temp=80.0, thermal_share=0.3)
    assert g4.classify(win, th).severity == "warning"


def test_slowdown_threshold_is_read_from_the_sample():
    th = Thresholds()
    h1 = Host()
    low = _warm(h1, slowdown=80.0) + h1.run(2, temp=78.5, slowdown=80.0, hw_slowdown_share=0.3)
    h2 = Host()
    high = _warm(h2, slowdown=92.0) + h2.run(2, temp=78.5, slowdown=92.0, hw_slowdown_share=0.3)
    assert g4.classify(low, th).severity == "warning"
    assert g4.classify(high, th).severity == "ok"


def test_instant_thermal_bit_without_counters():
    host = Host()
    th = Thresholds()
    win = _warm(host, counters=False) + host.run(2, temp=86.5, mask=0x20, counters=False)
    assert g4.classify(win, th).severity == "warning"


def test_counter_only_throttle_with_mask_zero():
    host = Host()
    th = Thresholds()
    win = _warm(host) + host.run(3, temp=87.0, mask=0, thermal_share=0.5, clk=2100)
    f = g4.classify(win, th)
    assert f.severity == "warning"
    assert f.evidence["thermal_counter_share"] >= 0.49


def _step_window(host, ratio, th):
    # 15 min of baseline at 1.0 s/step, then a throttle with steps at `ratio`
    win = host.run(30, temp=80.0, step=1.0)
    win += host.run(8, temp=87.0, thermal_share=0.6, clk=2050, step=ratio)
    return win


def test_step_time_above_ratio_is_critical():
    host = Host()
    th = Thresholds()
    f = g4.classify(_step_window(host, th.step_slowdown_ratio + 0.02, th), th)
    assert f.severity == "critical"
    assert f.evidence["step_time_ratio"] >= th.step_slowdown_ratio


def test_step_time_below_ratio_stays_warning():
    host = Host()
    th = Thresholds()
    assert g4.classify(_step_window(host, th.step_slowdown_ratio - 0.02, th), th).severity == "warning"


def test_slow_steps_without_thermal_signature_are_not_g4():
    host = Host()
    th = Thresholds()
    win = host.run(30, temp=72.0, step=1.0) + host.run(8, temp=72.0, step=3.0)
    assert g4.classify(win, th).severity == "ok"


def test_shutdown_threshold_is_critical():
    host = Host()
    th = Thresholds()
    win = _warm(host) + host.run(2, temp=90.2, thermal_share=0.8)
    assert g4.classify(win, th).severity == "critical"


def test_no_gpu_readings_is_unknown():
    host = Host()
    th = Thresholds()
    assert g4.classify(host.run(3, gpu=False), th).severity == "unknown"


def test_power_delivery_fault_is_not_thermal():
    host = Host()
    th = Thresholds()
    win = _warm(host) + host.run(6, temp=50.0, power=30.0, clk=700, util=99.0)
    f = g4.classify(win, th)
    assert f.severity == "ok"
    assert f.anomaly == "power_delivery"
    assert any("AC power cycle" in a for a in f.advice)
    assert "throttle" not in f.summary.lower()


def test_hung_engine_is_not_thermal():
    host = Host()
    th = Thresholds()
    win = _warm(host, temp=80.0)
    for i in range(8):
        win.append(host.sample(temp=78.0 - 2 * i, power=15.0, util=100.0))
    f = g4.classify(win, th)
    assert f.severity == "ok"
    assert f.anomaly == "hung_engine"


def test_same_physics_same_verdict_at_30_and_60_s():
    th = Thresholds()
    verdicts = []
    for interval in (30.0, 60.0):
        h = Host(interval=interval)
        n = int(900 / interval)
        win = h.run(n, temp=80.0, step=1.0) + h.run(
            int(300 / interval), temp=87.0, thermal_share=0.6, step=1.3
        )
        verdicts.append(g4.classify(win, th).severity)
    assert verdicts == ["critical", "critical"]


def test_throttle_start_and_end_events_with_hysteresis():
    host = Host()
    th = Thresholds()
    d = Diagnoser(th)
    kinds = []
    for s in host.run(3, temp=80.0):
        kinds += [e.kind for e in d.observe(s).events]
    # oscillation: counters move every other sample; one episode, one start
    for i in range(10):
        s = host.sample(temp=86.5 if i % 2 == 0 else 85.0, thermal_share=0.3 if i % 2 == 0 else 0.0)
        kinds += [e.kind for e in d.observe(s).events]
    assert kinds == ["throttle_start"]
    quiet = int(th.throttle_end_quiet_s / host.interval) + 1
    for s in host.run(quiet, temp=75.0):
        kinds += [e.kind for e in d.observe(s).events]
    assert kinds == ["throttle_start", "throttle_end"]


def test_reboot_after_throttle():
    host = Host()
    th = Thresholds()
    d = Diagnoser(th)
    for s in host.run(3, temp=80.0) + host.run(4, temp=88.0, thermal_share=0.8):
        d.observe(s)
    host.reboot()
    out = d.observe(host.sample(temp=40.0, power=4.0, util=0.0))
    reboots = [e for e in out.events if e.kind == "reboot"]
    assert len(reboots) == 1 and reboots[0].after_throttle is True
    assert out.findings["G4"].severity == "critical"


def test_reboot_without_throttle():
    host = Host()
    th = Thresholds()
    d = Diagnoser(th)
    for s in host.run(5, temp=70.0):
        d.observe(s)
    host.reboot()
    out = d.observe(host.sample(temp=40.0, power=4.0, util=0.0))
    reboots = [e for e in out.events if e.kind == "reboot"]
    assert len(reboots) == 1 and reboots[0].after_throttle is False
    assert out.findings["G4"].severity == "ok"


def test_uptime_going_backwards_is_a_reboot_without_boot_id():
    host = Host()
    th = Thresholds()
    d = Diagnoser(th)
    for s in host.run(3, boot_id=False):
        d.observe(s)
    host.reboot()
    out = d.observe(host.sample(boot_id=False))
    assert [e.kind for e in out.events] == ["reboot"]


def test_clock_stepping_back_restarts_windows_without_events():
    th = Thresholds()
    host = Host()
    d = Diagnoser(th)
    for s in host.run(5, temp=88.0, thermal_share=0.8):
        d.observe(s)
    host.ts -= 3600  # NTP step back by an hour
    kinds = []
    for s in host.run(int(th.throttle_end_quiet_s / host.interval) + 2, temp=70.0):
        kinds += [e.kind for e in d.observe(s).events]
    assert kinds == ["throttle_end"]  # the episode still ends on its quiet time; no reboot invented
    g6 = d.trackers[2]
    assert len(g6.rss) == 0 or all(len(h) <= 20 for h in g6.rss.values())


def test_early_heat_uses_the_warm_up_baseline_and_tokens_per_second():
    th = Thresholds()
    h = Host(interval=60.0)
    # only 3 minutes of cool running (first report + warm-up), then a throttle slowing steps by 30 %
    win = h.run(3, temp=80.0, step=1.0) + h.run(5, temp=87.5, thermal_share=0.6, step=1.3)
    assert g4.classify(win, th).severity == "critical"


def test_tokens_per_second_stands_in_for_step_time():
    from dataclasses import replace

    th = Thresholds()
    h = Host()
    win = h.run(30, temp=80.0, step=1.0) + h.run(8, temp=87.0, thermal_share=0.6, step=1.3)
    # the trainer reports only tokens/s: 1000 tok/s cool, 770 tok/s throttled
    win = [
        replace(
            s,
            throughput=tuple(
                replace(t, step_seconds=None, tokens_per_second=1000.0 / t.step_seconds) for t in s.throughput
            ),
        )
        for s in win
    ]
    f = g4.classify(win, th)
    assert f.severity == "critical" and f.evidence["step_time_ratio"] > 1.25
