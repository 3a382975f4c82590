"""sparkwatchd_board_*: the spbm fixture rendered, energy-averaged power, bounded labels, promtool-clean."""

from __future__ import annotations

import re
import subprocess
from types import SimpleNamespace

from prometheus_client import generate_latest

from spark_watchd.export.prometheus import build_registry
from spark_watchd.sample.board import POWER_CHANNELS, BoardReading
from spark_watchd.sample.model import Sample
from spark_watchd.snapshot import Snapshot
from spark_watchd.sources.board import BoardSource
from spark_watchd.sources.collect import Collector
from tests.conftest import FIXTURES, require_binary
from tests.daemon_helpers import samples, value


def _text(sample: Sample) -> str:
    snap = Snapshot(sample=sample, diagnosis=None)
    return generate_latest(
        build_registry(SimpleNamespace(snapshot=lambda: snap, settings=None, overruns=0))
    ).decode()


def test_fixture_board_renders_per_channel_power_limits_energy_temps_prochot():
    sample, _ = Collector([BoardSource(str(FIXTURES / "hosts" / "gb10-spbm" / "sys"))]).collect()
    m = samples(_text(sample))
    assert value(m, "sparkwatchd_board_power_watts", channel="dc_input") == 135.62
    assert value(m, "sparkwatchd_board_power_watts", channel="ewma_syspl1") == 129.87
    assert value(m, "sparkwatchd_board_power_watts", channel="pl1") is None  # a limit, not a draw
    assert value(m, "sparkwatchd_board_power_limit_watts", channel="syspl1") == 231.0
    assert value(m, "sparkwatchd_board_power_limit_watts", channel="budget_gpu") == 170.0
    assert value(m, "sparkwatchd_board_energy_joules_total", channel="gpu") == 87654.321
    assert value(m, "sparkwatchd_board_temperature_celsius", sensor="tj_max") == 72.5
    assert (
        value(m, "sparkwatchd_board_temperature_celsius", sensor="tj_max_c") is None
    )  # headroom, own family
    assert value(m, "sparkwatchd_board_tj_headroom_celsius") == 13.5
    assert value(m, "sparkwatchd_board_prochot") == 0
    assert value(m, "sparkwatchd_board_power_limit_level") == 0
    channels = {dict(k[1])["channel"] for k in m if k[0] == "sparkwatchd_board_power_watts"}
    assert channels <= set(POWER_CHANNELS) and len(channels) == 13  # 22 less 8 limits/budgets less hidden dla


def test_accumulator_average_wins_over_the_swinging_instant_reading():
    b = BoardReading(power_w={"soc_pkg": 143.0, "gpu": 60.0}, energy_power_w={"pkg": 95.0}, prochot=1)
    m = samples(_text(Sample(ts=1.0, board=b)))
    assert value(m, "sparkwatchd_board_power_watts", channel="soc_pkg") == 95.0
    assert value(m, "sparkwatchd_board_power_watts", channel="gpu") == 60.0
    assert value(m, "sparkwatchd_board_prochot") == 1


def test_without_the_driver_families_are_described_with_no_series():
    text = _text(Sample(ts=1.0))
    assert "# HELP sparkwatchd_board_power_watts " in text
    assert not re.search(r"^sparkwatchd_board_", text, re.M)


def test_board_exposition_passes_promtool():
    promtool = require_binary("promtool")
    sample, _ = Collector([BoardSource(str(FIXTURES / "hosts" / "gb10-spbm" / "sys"))]).collect()
    res = subprocess.run([promtool, "check", "metrics"], input=_text(sample), capture_output=True, text=True)
    assert [ln for ln in (res.stdout + res.stderr).splitlines() if "sparkwatchd_board" in ln] == []


def test_status_document_carries_the_board_reading_or_null():
    from spark_watchd.web.api import status_dict
    from tests.web.standin import FakeDaemon

    daemon = FakeDaemon()
    daemon.is_fresh = lambda: True
    daemon.expected_period = lambda: 1.0
    sample, _ = Collector([BoardSource(str(FIXTURES / "hosts" / "gb10-spbm" / "sys"))]).collect()
    daemon.publish(Snapshot(sample=sample, diagnosis=None))
    assert status_dict(daemon)["board"]["power_w"]["dc_input"] == 135.62
    daemon.publish(Snapshot(sample=Sample(ts=1.0), diagnosis=None))
    assert status_dict(daemon)["board"] is None
