"""GB10 board telemetry from the community `spbm` hwmon driver (antheas/spark_hwmon): the trace-v1 `board` field.

The driver reads the firmware's System Power Budget Manager: 22 power channels, 4 energy accumulators,
9 temperatures, PROCHOT and the active power-limit level. Channel names are the driver's labels; only the
ones listed here are kept, so every metric label set stays bounded whatever a later driver adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from spark_watchd.sample.validate import MAX, U64, FieldError, show

# spbm.c pwr_chans, in the driver's order (power1 .. power22).
POWER_CHANNELS = (
    "sys_total",
    "soc_pkg",
    "cpu_gpu",
    "cpu_p",
    "cpu_e",
    "vcore",
    "dc_input",
    "gpu",
    "prereg",
    "dla",
    "pl1",
    "pl2",
    "syspl1",
    "syspl2",
    "budget_cpu",
    "budget_gpu",
    "budget_cpu_e",
    "budget_cpu_p",
    "ewma_pl1",
    "ewma_pl2",
    "ewma_syspl1",
    "ewma_syspl2",
)
# Channels that are limits (with a writable power_cap) rather than measured draw.
LIMIT_CHANNELS = ("pl1", "pl2", "syspl1", "syspl2")
# spbm.c nrg_chans (energy1 .. energy4).
ENERGY_CHANNELS = ("pkg", "cpu_e", "cpu_p", "gpu")
# The power channel each energy accumulator integrates (the package accumulator is the soc_pkg rail).
ENERGY_OF_POWER = {"soc_pkg": "pkg", "cpu_e": "cpu_e", "cpu_p": "cpu_p", "gpu": "gpu"}
# spbm.c temp_chans (temp1 .. temp9); tj_max_c is a headroom to the limit, not a temperature.
TEMP_CHANNELS = (
    "tj_max",
    "tj_max_c",
    "cpu_e_clu0",
    "cpu_p_clu0",
    "cpu_e_clu1",
    "cpu_p_clu1",
    "gpu",
    "soc",
    "dla",
)


# The channel maps of a reading: the channels each keeps, and a plausible range (100 kW is no board).
_CHANNEL_MAPS = {
    "power_w": (POWER_CHANNELS, 0, 1e5),
    "power_cap_w": (LIMIT_CHANNELS, 0, 1e5),
    "energy_j": (ENERGY_CHANNELS, 0, MAX),
    "energy_power_w": (ENERGY_CHANNELS, 0, 1e5),
    "temps_c": (TEMP_CHANNELS, -273.15, 1000),
}
_N = (int, float)


def check_board(v: Any, where: str) -> None:
    """The trace-v1 `board` object as trace readers accept it; FieldError naming what is wrong."""
    if type(v) is not dict:
        raise FieldError(where, f"must be an object or null, got {type(v).__name__}")
    for key, (_, lo, hi) in _CHANNEL_MAPS.items():
        m = v.get(key)
        if m is None:
            continue
        if type(m) is not dict:
            raise FieldError(f"{where}.{key}", f"must be an object, got {type(m).__name__}")
        for ch, x in m.items():
            if type(x) not in _N or not lo <= x <= hi:
                raise FieldError(
                    f"{where}.{key}.{ch}", f"must be a number in [{lo:g}, {hi:g}], got {show(x)}"
                )
    for key in ("prochot", "pl_level"):
        x = v.get(key)
        if x is not None and (type(x) is not int or not 0 <= x <= U64):
            raise FieldError(f"{where}.{key}", f"must be a non-negative integer, got {show(x)}")


def _floats(d: Any, key: str, allowed: tuple[str, ...]) -> dict[str, float]:
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise TypeError(f"'board.{key}' must be an object, got {type(d).__name__}")
    return {k: float(v) for k, v in d.items() if k in allowed and v is not None}


def _int(v: Any, key: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"'board.{key}' must be a number, got {type(v).__name__}")
    return int(v)


@dataclass(frozen=True, slots=True)
class BoardReading:
    """One read of the spbm chip: watts, joules, degrees C; a channel the firmware hides is absent."""

    chip: str = "spbm"
    power_w: Mapping[str, float] = field(default_factory=dict)  # instant (the firmware PID makes these swing)
    power_cap_w: Mapping[str, float] = field(default_factory=dict)  # effective pl1/pl2/syspl1/syspl2 caps
    energy_j: Mapping[str, float] = field(default_factory=dict)  # cumulative accumulators
    energy_power_w: Mapping[str, float] = field(default_factory=dict)  # average since the previous read
    temps_c: Mapping[str, float] = field(default_factory=dict)
    prochot: int | None = None  # 0 = normal
    pl_level: int | None = None  # the firmware's active power-limit level

    def avg_power_w(self, channel: str) -> float | None:
        """A power channel's draw: energy-averaged where an accumulator covers it, else the instant reading."""
        acc = ENERGY_OF_POWER.get(channel)
        v = self.energy_power_w.get(acc) if acc is not None else None
        return v if v is not None else self.power_w.get(channel)

    def to_dict(self) -> dict[str, Any]:
        """The trace-v1 `board` object."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        return d | {k: dict(d[k]) for k in _CHANNEL_MAPS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BoardReading:
        """Build from a trace-v1 `board` object; unknown channels are dropped, a wrong shape names its key."""
        if not isinstance(d, Mapping):
            raise TypeError(f"'board' must be an object, got {type(d).__name__}")
        return cls(
            chip=str(d.get("chip") or "spbm"),
            **{k: _floats(d.get(k), k, channels) for k, (channels, _, _) in _CHANNEL_MAPS.items()},
            prochot=_int(d.get("prochot"), "prochot"),
            pl_level=_int(d.get("pl_level"), "pl_level"),
        )
