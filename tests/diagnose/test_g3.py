"""G3 unified-memory classifier on hand-built windows at its thresholds."""

from __future__ import annotations

from spark_watchd.diagnose import g3
from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.thresholds import Thresholds
from tests.diagnose.diag_builders import Host

GIB = 1024**3


def test_vllm_at_094_with_quiet_psi_is_warning_never_critical():
    host = Host()
    th = Thresholds()
    # field: a vLLM at 0.94 runs for weeks at 1.5-1.9 GiB available
    win = host.run(10, avail_gib=1.7, avail_min_gib=1.5, psi_some=0.1)
    f = g3.classify(win, th)
    assert f.severity == "warning"
    assert f.evidence["budget_bytes"] < 0


def test_budget_threshold_boundary():
    host = Host()
    th = Thresholds()
    edge = (th.os_reserve_bytes + th.budget_warn_bytes) / GIB
    assert g3.classify(host.run(3, avail_gib=edge + 0.1), th).severity == "ok"
    h2 = Host()
    assert g3.classify(h2.run(3, avail_gib=edge - 0.1), th).severity == "warning"


def test_psi_some_avg60_boundary():
    host = Host()
    th = Thresholds()
    assert g3.classify(host.run(3, psi_some=th.psi_some_warn_pct - 0.1), th).severity == "ok"
    h2 = Host()
    assert g3.classify(h2.run(3, psi_some=th.psi_some_warn_pct + 0.1), th).severity == "warning"


def test_stale_swap_is_not_pressure_swapping_out_is():
    host = Host()
    th = Thresholds()
    # SwapFree < SwapTotal in every sample: swap merely in use
    assert g3.classify(host.run(3, swapout=th.swapout_warn_pages_s - 2), th).severity == "ok"
    h2 = Host()
    assert g3.classify(h2.run(3, swapout=th.swapout_warn_pages_s + 2), th).severity == "warning"


def test_window_minimum_near_exhaustion_with_stalls_is_critical():
    host = Host()
    th = Thresholds()
    edge = (th.os_reserve_bytes + th.budget_critical_bytes) / GIB
    # MemAvailable recovered to 20 GiB by sample time, but dipped under the edge in between
    crit = host.run(3, avail_gib=20.0, avail_min_gib=edge - 0.1, psi_some=8.0)
    assert g3.classify(crit, th).severity == "critical"
    h2 = Host()
    warn = h2.run(3, avail_gib=20.0, avail_min_gib=edge + 0.1, psi_some=8.0)
    assert g3.classify(warn, th).severity == "warning"


def test_sustained_full_stalls_are_critical():
    host = Host()
    th = Thresholds()
    one = host.run(3, psi_some=20.0) + [host.sample(psi_some=20.0, psi_full=th.psi_full_critical_pct + 1)]
    assert g3.classify(one, th).severity == "warning"
    h2 = Host()
    two = h2.run(3, psi_some=20.0) + h2.run(2, psi_some=20.0, psi_full=th.psi_full_critical_pct + 1)
    assert g3.classify(two, th).severity == "critical"


def test_oom_kill_is_an_event_and_critical():
    host = Host()
    th = Thresholds()
    d = Diagnoser(th)
    for s in host.run(3, avail_gib=6.0):
        d.observe(s)
    out = d.observe(host.sample(oom=1, avail_gib=30.0, avail_min_gib=1.0))
    assert [e.kind for e in out.events] == ["oom_kill"]
    assert out.findings["G3"].severity == "critical"


def test_an_oom_kill_with_the_pool_roomy_before_and_through_it_is_a_warning_naming_a_cgroups_limit():
    """Owners' traces: a container's 64 MiB process killed at its own limit with 22 GiB free read as five
    minutes of G3 critical with whole-pool advice (the kernel's report a tick late)."""
    host = Host()
    d = Diagnoser(Thresholds())
    for s in host.run(3, avail_gib=26.0):
        d.observe(s)
    g3 = d.observe(host.sample(oom=1, avail_gib=26.0)).findings["G3"]
    assert g3.severity == "warning" and "pool roomy" in g3.summary
    assert any("memory limit" in a for a in g3.advice)


def test_a_reboot_clears_the_oom_hold():
    th = Thresholds()
    host = Host()
    d = Diagnoser(th)
    for s in host.run(3, avail_gib=6.0):
        d.observe(s)
    d.observe(host.sample(oom=1, avail_gib=30.0, avail_min_gib=1.0))  # the pool ran out: a thin 1 s minimum
    # without a reboot the host is still OOM-critical within the hold...
    assert d.observe(host.sample()).findings["G3"].severity == "critical"
    # ...but a fresh boot 2 minutes later (well inside oom_critical_hold_s) at 112 GiB available is not
    host.reboot(gap=120.0)
    assert th.oom_critical_hold_s > 120.0
    out = d.observe(host.sample(avail_gib=112.0))
    assert [e.kind for e in out.events] == ["reboot"]
    assert out.findings["G3"].severity == "ok"


def test_a_clock_step_back_keeps_the_oom_hold():
    th = Thresholds()
    host = Host()
    d = Diagnoser(th)
    for s in host.run(3, avail_gib=6.0):
        d.observe(s)
    d.observe(host.sample(oom=1, avail_gib=30.0, avail_min_gib=1.0))  # the pool ran out: a thin 1 s minimum
    host.ts -= 3600.0  # NTP steps the clock back an hour: still the same boot, still right after the kill
    assert d.observe(host.sample()).findings["G3"].severity == "critical"


def test_model_load_transient_warns_before_the_limit():
    host = Host()
    th = Thresholds()
    win = host.run(2, avail_gib=110.0, cached_gib=3.0, anon_gib=4.0)
    avail, cached, anon = 110.0, 3.0, 4.0
    for _ in range(3):
        avail, cached, anon = avail - 17.0, cached + 8.0, anon + 8.0
        win.append(host.sample(avail_gib=avail, cached_gib=cached, anon_gib=anon))
    f = g3.classify(win, th)
    assert f.severity == "warning"
    assert "transient" in f.summary


def test_page_cache_alone_filling_is_not_a_transient():
    host = Host()
    th = Thresholds()
    win = host.run(2, avail_gib=110.0, cached_gib=3.0)
    avail, cached = 110.0, 3.0
    for _ in range(3):
        avail, cached = avail - 17.0, cached + 10.0
        win.append(host.sample(avail_gib=avail, cached_gib=cached, anon_gib=6.0))
    assert g3.classify(win, th).severity == "ok"


def test_no_meminfo_is_unknown():
    host = Host()
    th = Thresholds()
    assert g3.classify(host.run(2, meminfo=False), th).severity == "unknown"


def _falls(*avail_gib):
    """G3 after MemAvailable takes these values in consecutive 30 s samples, Cached and anon flat."""
    th = Thresholds()
    host = Host()
    d = Diagnoser(th)
    for s in host.run(3, avail_gib=avail_gib[0]):
        d.observe(s)
    for a in avail_gib:
        out = d.observe(host.sample(avail_gib=a))
    return out.findings["G3"]


def test_memavailable_falling_fast_warns_when_the_budget_would_be_gone_before_the_next_sample():
    th = Thresholds()
    assert th.avail_fall_horizon_intervals == 1.0 and th.os_reserve_bytes == 4 * GIB
    # 15 GiB per 30 s: a 16 GiB budget lasts 32 s (ok), a 15 GiB budget 30 s (warning)
    assert _falls(60.0, 50.0, 35.0, 20.0).severity == "ok"
    f = _falls(60.0, 49.0, 34.0, 19.0)
    assert f.severity == "warning" and "falling fast" in f.summary
    assert f.evidence["budget_exhausted_in_s"] == 30.0


def test_falling_fast_needs_two_falls_of_at_least_the_step():
    assert Thresholds().avail_fall_min_bytes == 2 * GIB
    assert _falls(60.0, 35.0, 33.1, 18.1).severity == "ok"  # first fall 1.9 GiB
    assert _falls(60.0, 35.1, 33.1, 18.1).severity == "warning"  # first fall 2.0 GiB
    assert _falls(60.0, 60.0, 60.0, 18.1).severity == "ok"  # one fall only, however steep
