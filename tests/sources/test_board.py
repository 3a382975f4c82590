"""Board source: the spbm hwmon tree laid out as spbm.c lays it out, energy deltas, absent or broken driver."""

from __future__ import annotations

import shutil

import pytest

from spark_watchd.sample.board import BoardReading
from spark_watchd.sample.model import Sample, Sensor
from spark_watchd.sources.board import BoardSource, energy_delta_uj
from spark_watchd.sources.collect import Collector
from spark_watchd.sources.sensors import SensorsSource
from tests.conftest import FIXTURES

SPBM_SYS = FIXTURES / "hosts" / "gb10-spbm" / "sys"


class Clock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


def test_reads_every_channel_by_label_in_si_units():
    b = BoardSource(str(SPBM_SYS)).collect({})["board"]
    assert b["chip"] == "spbm"
    assert b["power_w"]["sys_total"] == 128.41 and b["power_w"]["dc_input"] == 135.62
    assert b["power_w"]["ewma_syspl1"] == 129.87
    assert "dla" not in b["power_w"]  # power10_* hidden: the firmware offset was not resolved
    assert b["power_cap_w"] == {"pl1": 140.0, "pl2": 142.0, "syspl1": 231.0, "syspl2": 244.0}
    assert b["energy_j"]["pkg"] == 123456.789
    assert b["temps_c"]["tj_max"] == 72.5 and b["temps_c"]["tj_max_c"] == 13.5 and len(b["temps_c"]) == 9
    assert b["prochot"] == 0 and b["pl_level"] == 0
    assert b["energy_power_w"] == {}  # one read: no interval yet


def test_sensors_leave_the_spbm_chip_to_the_board_source():
    assert SensorsSource(str(SPBM_SYS)).collect({})["sensors"] == (Sensor("nvme", "Composite", 44.85, None),)


def test_energy_deltas_give_the_average_power_over_the_interval(tmp_path):
    sys_root = tmp_path / "sys"
    shutil.copytree(SPBM_SYS, sys_root)
    chip = sys_root / "class" / "hwmon" / "hwmon4"
    clock = Clock()
    src = BoardSource(str(sys_root), clock=clock)
    src.collect({})
    clock.t += 30.0
    # 2850 J (2,850,000 mJ) on the package in 30 s: 95 W, whatever the instant channel swings to.
    (chip / "energy1_input").write_text(f"{(123456789 + 2_850_000) * 1000}\n")
    (chip / "energy4_input").write_text(f"{(87654321 + 2_340_000) * 1000}\n")
    (chip / "power2_input").write_text("143000000\n")
    board = BoardReading.from_dict(src.collect({})["board"])
    assert board.energy_power_w == {"pkg": 95.0, "cpu_e": 0.0, "cpu_p": 0.0, "gpu": 78.0}
    assert board.avg_power_w("soc_pkg") == 95.0 and board.power_w["soc_pkg"] == 143.0
    assert board.avg_power_w("dc_input") == 135.62  # no accumulator: the instant reading


def test_energy_counter_wrap_is_undone_and_a_reset_gives_no_average():
    wrap = (1 << 32) * 1000
    assert energy_delta_uj(5_000_000, wrap - 1_000_000) == 6_000_000
    assert energy_delta_uj(1_000, 900_000_000) is None  # driver reload: counter restarted


def test_absent_driver_is_empty_and_up(tmp_path):
    assert BoardSource(str(tmp_path)).collect({}) == {}
    assert BoardSource(str(FIXTURES / "hosts" / "gb10-eviction" / "sys")).collect({}) == {}


def test_driver_loaded_later_and_chip_with_nothing_readable(tmp_path):
    src = BoardSource(str(tmp_path))
    assert src.collect({}) == {}
    chip = tmp_path / "class" / "hwmon" / "hwmon9"
    chip.mkdir(parents=True)
    (chip / "name").write_text("spbm\n")
    (chip / "power1_label").write_text("sys_total\n")
    (chip / "power1_input").mkdir()  # unreadable
    with pytest.raises(Exception, match="no readable channel"):
        src.collect({})
    shutil.rmtree(chip / "power1_input")
    (chip / "power1_input").write_text("garbage\n")
    (chip / "prochot").write_text("1\n")
    assert src.collect({})["board"]["prochot"] == 1


def test_collector_marks_a_broken_chip_down_and_the_others_go_on(tmp_path):
    chip = tmp_path / "class" / "hwmon" / "hwmon0"
    chip.mkdir(parents=True)
    (chip / "name").write_text("spbm\n")
    sample, status = Collector([BoardSource(str(tmp_path)), SensorsSource(str(SPBM_SYS))]).collect()
    assert not status["board"].up and status["sensors"].up and sample.board is None


def test_board_round_trips_through_trace_v1_and_is_absent_without_the_driver():
    sample, status = Collector([BoardSource(str(SPBM_SYS))], clock=lambda: 5.0).collect()
    assert status["board"].up and sample.board is not None
    d = sample.to_dict()
    assert d["board"]["power_w"]["gpu"] == 78.3
    assert Sample.from_dict(d) == sample
    assert "board" not in Sample(ts=1.0).to_dict()
    assert Sample.from_dict({"v": 1, "ts": 1.0}).board is None


def test_bad_board_shapes_name_the_key():
    with pytest.raises(TypeError, match="'board' must be an object"):
        Sample.from_dict({"v": 1, "ts": 1.0, "board": [1]})
    with pytest.raises(TypeError, match="'board.power_w' must be an object"):
        Sample.from_dict({"v": 1, "ts": 1.0, "board": {"power_w": 3}})
    with pytest.raises(TypeError, match="'board.prochot' must be a number"):
        Sample.from_dict({"v": 1, "ts": 1.0, "board": {"prochot": "yes"}})
    # Channels a later driver adds are dropped: metric labels stay bounded.
    b = Sample.from_dict({"v": 1, "ts": 1.0, "board": {"power_w": {"gpu": 5, "new_rail": 9}}}).board
    assert b.power_w == {"gpu": 5.0}
