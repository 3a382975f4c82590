"""G4 with GB10 board telemetry (spbm): heat NVML misses, the platform cap, a starved input, a firmware limit."""

from __future__ import annotations

from spark_watchd.diagnose import g4
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.board import BoardReading
from tests.diagnose.diag_builders import Host


def board(
    *,
    prochot=0,
    tj=72.0,
    headroom=14.0,
    dc_input=135.0,
    ewma_syspl1=130.0,
    syspl1=231.0,
    ewma_pl1=96.0,
    pl1=140.0,
):
    return BoardReading(
        power_w={
            "dc_input": dc_input,
            "gpu": 78.0,
            "pl1": pl1,
            "syspl1": syspl1,
            "ewma_pl1": ewma_pl1,
            "ewma_syspl1": ewma_syspl1,
        },
        power_cap_w={"pl1": pl1, "syspl1": syspl1},
        temps_c={"tj_max": tj, "tj_max_c": headroom},
        prochot=prochot,
        pl_level=0,
    )


def test_prochot_is_a_throttle_even_with_nvml_mask_zero():
    host, th = Host(), Thresholds()
    win = host.run(4, temp=78.0) + host.run(2, temp=78.0, clk=1900, board=board(prochot=1, tj=84.0))
    f = g4.classify(win, th)
    assert f.severity == "warning"
    assert "PROCHOT" in f.summary and "mask clear" in f.summary
    assert f.evidence["board_prochot"] is True
    # The same window without the board: NVML alone sees nothing.
    plain = Host()
    assert g4.classify(plain.run(4, temp=78.0) + plain.run(2, temp=78.0, clk=1900), th).severity == "ok"


def test_zero_tj_headroom_on_a_hot_loaded_package_is_heat():
    host, th = Host(), Thresholds()
    win = host.run(4, temp=80.0) + host.run(2, temp=80.0, board=board(tj=95.5, headroom=0.4))
    f = g4.classify(win, th)
    assert f.severity == "warning" and "Tj headroom 0.4 C" in f.summary


def test_zero_tj_headroom_at_idle_is_not_heat():
    # The driver README lists tj_max_c ~0 C at idle: a zero on a cool, idle package is no throttle.
    host, th = Host(), Thresholds()
    win = host.run(6, temp=35.0, power=5.0, util=0.0, clk=600, board=board(tj=31.0, headroom=0.0))
    assert g4.classify(win, th).severity == "ok"
    hot_idle = Host()
    win = hot_idle.run(6, temp=40.0, util=3.0, power=8.0, board=board(tj=40.0, headroom=0.0))
    assert g4.classify(win, th).severity == "ok"


def test_low_dc_input_confirms_the_power_delivery_fault():
    host, th = Host(), Thresholds()
    low = board(dc_input=th.board_dc_input_low_w - 4, tj=52.0)
    win = host.run(4) + host.run(6, temp=50.0, power=30.0, clk=700, util=99.0, board=low)
    f = g4.classify(win, th)
    assert f.anomaly == "power_delivery" and f.severity == "ok"
    assert "confirmed by board DC input 61 W" in f.summary
    healthy_input = Host()
    win = healthy_input.run(4) + healthy_input.run(
        6, temp=50.0, power=30.0, clk=700, util=99.0, board=board()
    )
    f = g4.classify(win, th)
    assert f.anomaly == "power_delivery" and "confirmed" not in f.summary


def test_ewma_at_syspl1_is_the_platform_cap_not_heat():
    host, th = Host(), Thresholds()
    capped = board(ewma_syspl1=229.0)
    f = g4.classify(host.run(6, temp=79.0, power=95.0, mask=0x04, board=capped), th)
    assert f.severity == "ok" and f.anomaly is None
    assert "platform power limit (syspl1 EWMA 229 of 231 W)" in f.summary and "not heat" in f.summary
    assert f.evidence["board_power_limit"] == "syspl1"
    under = Host()
    f = g4.classify(under.run(6, temp=79.0, board=board(ewma_syspl1=200.0)), th)
    assert "platform" not in f.summary and f.evidence["board_power_limit"] is None


def test_step_time_change_is_attributed_to_a_firmware_pl1_limit():
    # Owners: decode flips between 63 and 94 ms/step with nothing in nvidia-smi. The board shows pl1 held.
    host, th = Host(), Thresholds()
    win = host.run(30, temp=74.0, step=0.063, board=board())
    win += host.run(8, temp=74.0, clk=2050, step=0.094, board=board(pl1=100.0, ewma_pl1=99.0))
    f = g4.classify(win, th)
    assert f.severity == "ok" and f.anomaly == "power_limit"
    assert "x1.49" in f.summary and "pl1 power limit" in f.summary and "not heat" in f.summary
    assert any("power11_cap" in a for a in f.advice)
    # Without the board the same slow steps stay unexplained (no G4 verdict).
    plain = Host()
    win = plain.run(30, temp=74.0, step=0.063) + plain.run(8, temp=74.0, clk=2050, step=0.094)
    assert g4.classify(win, th).anomaly is None


def test_prochot_at_a_cool_temperature_is_a_board_power_limit_not_a_throttle():
    # Issue 18: PROCHOT asserted at 61-68 C under an 86 C slowdown was called "Thermal throttle: 68.0 C".
    host, th = Host(), Thresholds()
    win = host.run(30, temp=64.0, step=0.063, board=board(tj=66.0))
    cool = board(prochot=1, tj=68.0)
    win += host.run(10, temp=61.0, clk=1900, step=0.094, board=cool)
    for n in range(31, len(win) + 1):
        f = g4.classify(win[:n], th)
        assert f.severity == "ok", (n, f.summary)
    assert f.anomaly == "power_limit" and "Thermal throttle" not in f.summary
    assert "board PROCHOT asserted at 61 C" in f.summary and "board power or current limit" in f.summary
    assert f.evidence["board_prochot"] is True and f.evidence["board_prochot_cause"] == "power limit"
    assert any("power brick" in a for a in f.advice)


def test_prochot_near_the_slowdown_line_stays_heat():
    host, th = Host(), Thresholds()
    f = g4.classify(host.run(4, temp=80.0) + host.run(2, temp=82.0, board=board(prochot=1, tj=84.5)), th)
    assert f.severity == "warning" and "PROCHOT" in f.summary
    assert f.evidence["board_prochot_cause"] == "heat"
