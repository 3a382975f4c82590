"""Link source: the ConnectX-7 sysfs tree of a GB10 (four RDMA devices, one cable), absent or broken driver."""

from __future__ import annotations

import shutil

import pytest

from spark_watchd.sample.link import LinkReading
from spark_watchd.sample.model import Sample
from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.collect import Collector
from spark_watchd.sources.link import LinkSource, parse_rate, parse_state
from tests.conftest import FIXTURES

CX7_SYS = FIXTURES / "hosts" / "gb10-cx7" / "sys"


def _ports(sys_root) -> dict:
    return {p["device"]: p for p in LinkSource(str(sys_root)).collect({})["link"]["ports"]}


def test_reads_the_four_rdma_devices_of_a_spark_with_their_netdevs():
    ports = _ports(CX7_SYS)
    assert sorted(ports) == ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"]
    up = ports["rocep1s0f0"]
    assert up["netdev"] == "enp1s0f0np0" and up["port"] == 1
    assert (up["state"], up["phys_state"], up["rate_gbps"], up["link_layer"]) == (
        "ACTIVE",
        "LinkUp",
        200.0,
        "Ethernet",
    )
    assert up["operstate"] == "up" and up["speed_mbps"] == 200000
    assert up["counters"]["port_xmit_data"] == 41234567890 and up["counters"]["out_of_sequence"] == 17
    assert up["counters"]["carrier_changes"] == 2 and up["counters"]["rx_dropped"] == 41
    assert (
        "lifespan" not in up["counters"] and "VL15_dropped" not in up["counters"]
    )  # only the listed counters
    idle = ports["rocep1s0f1"]  # no cable in the second QSFP port
    assert (idle["state"], idle["phys_state"], idle["operstate"], idle["speed_mbps"]) == (
        "DOWN", "Disabled", "down", None)  # fmt: skip


def test_sysfs_state_and_rate_texts_parse_as_the_kernel_prints_them():
    assert parse_state("4: ACTIVE") == "ACTIVE" and parse_state("5: LinkUp") == "LinkUp"
    assert parse_state("4: PortConfigurationTraining") == "PortConfigurationTraining"
    assert parse_state(None) is None and parse_state("ACTIVE") == "ACTIVE"
    assert parse_rate("200 Gb/sec (4X HDR)") == 200.0 and parse_rate("2.5 Gb/sec (1X SDR)") == 2.5
    assert (
        parse_rate("100 Gb/sec (2X HDR)") == 100.0
        and parse_rate("garbage") is None
        and parse_rate(None) is None
    )


def test_the_sample_carries_the_link_and_round_trips_through_trace_v1():
    sample, statuses = Collector([LinkSource(str(CX7_SYS))]).collect()
    assert statuses["link"].up and isinstance(sample.link, LinkReading) and len(sample.link.ports) == 4
    back = Sample.from_dict(sample.to_dict())
    assert back.link == sample.link
    assert [p.up for p in back.link.ports] == [True, False, True, False]


def test_no_rdma_driver_is_no_link_and_no_error(tmp_path):
    (tmp_path / "class").mkdir()
    sample, statuses = Collector([LinkSource(str(tmp_path))]).collect()
    assert statuses["link"].up and sample.link is None and "link" not in sample.to_dict()


def test_devices_without_any_readable_port_state_mark_the_source_down(tmp_path):
    sys_root = tmp_path / "sys"
    shutil.copytree(CX7_SYS, sys_root)
    for state in sys_root.glob("class/infiniband/*/ports/1/state"):
        state.unlink()
    with pytest.raises(SourceUnavailable, match="no port state readable"):
        LinkSource(str(sys_root)).collect({})
    _, statuses = Collector([LinkSource(str(sys_root))]).collect()
    assert not statuses["link"].up


def test_a_cable_pulled_reads_down_and_counts_the_carrier_change(tmp_path):
    sys_root = tmp_path / "sys"
    shutil.copytree(CX7_SYS, sys_root)
    port = sys_root / "class" / "infiniband" / "rocep1s0f0" / "ports" / "1"
    (port / "state").write_text("1: DOWN\n")
    (port / "phys_state").write_text("2: Polling\n")
    net = sys_root / "class" / "net" / "enp1s0f0np0"
    (net / "operstate").write_text("down\n")
    (net / "speed").write_text("-1\n")
    (net / "carrier_changes").write_text("3\n")
    p = _ports(sys_root)["rocep1s0f0"]
    assert (p["state"], p["phys_state"], p["operstate"], p["speed_mbps"]) == ("DOWN", "Polling", "down", None)
    assert p["counters"]["carrier_changes"] == 3


def test_wrong_shapes_in_a_trace_name_their_key():
    with pytest.raises(TypeError, match="'link.ports' must be a list"):
        LinkReading.from_dict({"ports": {}})
    with pytest.raises(TypeError, match=r"'link.ports\[\].rate_gbps' must be a number"):
        LinkReading.from_dict({"ports": [{"device": "x", "port": 1, "rate_gbps": "fast"}]})
    assert (
        LinkReading.from_dict({"ports": [{"device": "x", "port": 1, "counters": {"bogus": 3}}]})
        .ports[0]
        .counters
        == {}
    )
