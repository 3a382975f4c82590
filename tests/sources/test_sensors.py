"""Sensors: the GB10-like sys tree (7 acpitz zones, nvme, mlx5), this machine, broken files."""

from __future__ import annotations

import json

from spark_watchd.sample.model import Sensor
from spark_watchd.sources.sensors import SensorsSource
from tests.conftest import FIXTURES

GB10_SYS = FIXTURES / "hosts" / "gb10-eviction" / "sys"


def test_gb10_tree_gives_acpitz_zones_once_and_other_hwmon_chips():
    sensors = SensorsSource(str(GB10_SYS)).collect({})["sensors"]
    acpitz = [s for s in sensors if s.chip == "acpitz"]
    assert [s.label for s in acpitz] == [f"temp{i}" for i in range(1, 8)]  # not 14: hwmon copies skipped
    assert acpitz[0] == Sensor("acpitz", "temp1", 41.1, 104.8)
    assert all(s.crit_c == 104.8 for s in acpitz)
    nvme = [s for s in sensors if s.chip == "nvme"]
    # The 65261.85 C "no threshold" placeholder is not a critical temperature.
    assert nvme == [Sensor("nvme", "Composite", 44.85, 84.85), Sensor("nvme", "Sensor 1", 44.85, None)]
    assert Sensor("mlx5", "asic", 52.0, None) in sensors


def test_gb10_zones_match_the_trace_shape():
    # The same shape the GB10 traces record (`{"chip": "acpitz", "label": "temp1", ...}`).
    first = SensorsSource(str(GB10_SYS)).collect({})["sensors"][0]
    assert json.loads(json.dumps(first.to_dict())) == {
        "chip": "acpitz",
        "label": "temp1",
        "temp_c": 41.1,
        "crit_c": 104.8,
    }


def test_machine_without_sensors_is_empty_not_down(tmp_path):
    assert SensorsSource(str(tmp_path)).collect({}) == {"sensors": ()}
    SensorsSource("/sys").collect({})  # this machine, whatever it has


def test_garbage_and_vanishing_files_are_skipped(tmp_path):
    zone = tmp_path / "class" / "thermal" / "thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "type").write_text("acpitz\n")
    (zone / "temp").write_text("hot\n")
    hw = tmp_path / "class" / "hwmon" / "hwmon0"
    hw.mkdir(parents=True)
    (hw / "name").write_text("nvme\n")
    (hw / "temp1_input").mkdir()  # unreadable
    (hw / "temp2_input").write_text("30000\n")
    assert SensorsSource(str(tmp_path)).collect({})["sensors"] == (Sensor("nvme", "temp2", 30.0, None),)
