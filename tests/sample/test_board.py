"""BoardReading: the trace-v1 `board` object both ways, unknown channels dropped, energy-averaged draw."""

from __future__ import annotations

import pytest

from spark_watchd.sample.board import (
    ENERGY_CHANNELS,
    ENERGY_OF_POWER,
    LIMIT_CHANNELS,
    POWER_CHANNELS,
    TEMP_CHANNELS,
    BoardReading,
)

FULL = {
    "chip": "spbm",
    "power_w": {"sys_total": 120.0, "soc_pkg": 90.5, "dc_input": 130.0, "gpu": 60.0},
    "power_cap_w": {"pl1": 140.0, "syspl1": 240.0},
    "energy_j": {"pkg": 1000.0, "gpu": 500.0},
    "energy_power_w": {"pkg": 88.0, "gpu": 58.0},
    "temps_c": {"gpu": 71.0, "soc": 65.0, "tj_max_c": 30.0},
    "prochot": 0,
    "pl_level": 1,
}


def test_a_full_object_round_trips():
    assert BoardReading.from_dict(FULL).to_dict() == FULL


def test_an_empty_object_is_an_spbm_reading_with_nothing_in_it():
    b = BoardReading.from_dict({})
    assert b.chip == "spbm" and b.power_w == {} and b.temps_c == {}
    assert b.prochot is None and b.pl_level is None


def test_unknown_channels_are_dropped_so_label_sets_stay_bounded():
    b = BoardReading.from_dict(
        {
            "power_w": {"gpu": 1.0, "power99": 5.0},
            "power_cap_w": {"pl1": 100.0, "gpu": 60.0},  # only limits have caps
            "energy_j": {"pkg": 1.0, "soc_pkg": 2.0},
            "temps_c": {"soc": 50.0, "nvme": 40.0},
        }
    )
    assert dict(b.power_w) == {"gpu": 1.0}
    assert dict(b.power_cap_w) == {"pl1": 100.0}
    assert dict(b.energy_j) == {"pkg": 1.0}
    assert dict(b.temps_c) == {"soc": 50.0}


def test_null_channel_values_are_absent_not_zero():
    b = BoardReading.from_dict({"power_w": {"gpu": None, "soc_pkg": 3}, "temps_c": None})
    assert dict(b.power_w) == {"soc_pkg": 3.0} and isinstance(b.power_w["soc_pkg"], float)
    assert b.temps_c == {}


def test_numeric_strings_are_accepted_as_floats():
    assert BoardReading.from_dict({"power_w": {"gpu": "12.5"}}).power_w["gpu"] == 12.5


def test_prochot_and_pl_level_become_ints():
    b = BoardReading.from_dict({"prochot": 1.0, "pl_level": 3})
    assert (b.prochot, b.pl_level) == (1, 3) and isinstance(b.prochot, int)


@pytest.mark.parametrize("key", ["prochot", "pl_level"])
@pytest.mark.parametrize("bad", [True, "1", [1]])
def test_a_non_number_level_names_its_key(key, bad):
    with pytest.raises(TypeError, match=f"'board.{key}' must be a number"):
        BoardReading.from_dict({key: bad})


@pytest.mark.parametrize("key", ["power_w", "power_cap_w", "energy_j", "energy_power_w", "temps_c"])
def test_a_channel_map_that_is_not_an_object_names_its_key(key):
    with pytest.raises(TypeError, match=rf"'board\.{key}' must be an object, got list"):
        BoardReading.from_dict({key: [1, 2]})


def test_a_board_that_is_not_an_object_is_refused():
    with pytest.raises(TypeError, match="'board' must be an object, got str"):
        BoardReading.from_dict("spbm")


def test_a_bad_channel_value_raises():
    with pytest.raises(ValueError):
        BoardReading.from_dict({"power_w": {"gpu": "hot"}})


def test_a_missing_chip_name_defaults_to_spbm():
    assert BoardReading.from_dict({"chip": None}).chip == "spbm"
    assert BoardReading.from_dict({"chip": "spbm2"}).chip == "spbm2"


def test_avg_power_prefers_the_energy_average_of_the_channel_accumulator():
    b = BoardReading.from_dict(FULL)
    assert b.avg_power_w("soc_pkg") == 88.0  # the pkg accumulator covers the soc_pkg rail
    assert b.avg_power_w("gpu") == 58.0


def test_avg_power_falls_back_to_the_instant_reading():
    b = BoardReading.from_dict(FULL)
    assert b.avg_power_w("dc_input") == 130.0  # no accumulator
    no_avg = BoardReading.from_dict({"power_w": {"gpu": 61.0}, "energy_power_w": {"pkg": 80.0}})
    assert no_avg.avg_power_w("gpu") == 61.0  # accumulator exists but has no average yet


def test_avg_power_of_an_absent_channel_is_none():
    assert BoardReading().avg_power_w("gpu") is None
    assert BoardReading.from_dict(FULL).avg_power_w("cpu_e") is None


def test_channel_tables_match_the_driver():
    assert len(POWER_CHANNELS) == 22 and len(set(POWER_CHANNELS)) == 22
    assert len(TEMP_CHANNELS) == 9 and len(ENERGY_CHANNELS) == 4
    assert set(LIMIT_CHANNELS) <= set(POWER_CHANNELS)
    assert set(ENERGY_OF_POWER) <= set(POWER_CHANNELS)
    assert set(ENERGY_OF_POWER.values()) == set(ENERGY_CHANNELS)
