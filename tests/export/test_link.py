"""sparkwatchd_link_*: the ConnectX-7 fixture rendered with device/port labels only, promtool-clean."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

from prometheus_client import generate_latest

from spark_watchd.diagnose.link import LinkWatch
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.export.prometheus import build_registry
from spark_watchd.sample.model import Sample
from spark_watchd.snapshot import Snapshot
from spark_watchd.sources.collect import Collector
from spark_watchd.sources.link import LinkSource
from tests.conftest import FIXTURES, require_binary
from tests.daemon_helpers import samples, value


def _text(sample: Sample, extras=None) -> str:
    snap = Snapshot(sample=sample, diagnosis=None, extras=extras or {})
    return generate_latest(
        build_registry(SimpleNamespace(snapshot=lambda: snap, settings=None, overruns=0))
    ).decode()


def _fixture() -> Sample:
    return Collector([LinkSource(str(FIXTURES / "hosts" / "gb10-cx7" / "sys"))]).collect()[0]


def test_fixture_ports_render_state_rate_verdict_and_counters():
    sample = _fixture()
    status = LinkWatch(Thresholds()).observe(sample).to_dict()
    m = samples(_text(sample, {"link": status}))
    assert value(m, "sparkwatchd_link_up", device="rocep1s0f0", port="1") == 1
    assert value(m, "sparkwatchd_link_up", device="rocep1s0f1", port="1") == 0
    assert value(m, "sparkwatchd_link_rate_bytes_per_second", device="rocep1s0f0", port="1") == 25e9
    assert value(m, "sparkwatchd_link_rate_bytes_per_second", device="rocep1s0f1", port="1") is None  # down
    assert value(m, "sparkwatchd_link_problem", device="rocep1s0f0", port="1") == 0
    assert (
        value(m, "sparkwatchd_link_retransmits_total", device="rocep1s0f0", port="1") == 22
    )  # 17 + 3 + 2 + 0
    assert value(m, "sparkwatchd_link_transmit_bytes_total", device="rocep1s0f0", port="1") == 4 * 41234567890
    assert value(m, "sparkwatchd_link_carrier_changes_total", device="rocep1s0f0", port="1") == 2
    assert value(m, "sparkwatchd_link_netdev_drops_total", device="rocep1s0f0", port="1") == 41
    labels = {tuple(sorted(dict(k[1]))) for k in m if k[0].startswith("sparkwatchd_link_")}
    assert labels == {("device", "port")}


def test_without_link_readings_the_families_are_there_without_series():
    text = _text(Sample(ts=1.0))
    assert "# TYPE sparkwatchd_link_up gauge" in text and "sparkwatchd_link_up{" not in text


def test_promtool_finds_nothing_wrong_with_the_link_families():
    promtool = require_binary("promtool")
    text = _text(_fixture())
    lines = "\n".join(ln for ln in text.splitlines() if "sparkwatchd_link_" in ln) + "\n"
    out = subprocess.run([promtool, "check", "metrics"], input=lines, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
