"""`board`: GB10 board power, energy, temperatures and PROCHOT from the community `spbm` hwmon driver.

Only owners who installed the DKMS driver for the `NVDA8800` ACPI device (antheas/spark_hwmon) have
the chip; without it this source returns nothing and stays up ("not installed" is not an error).
Layout (spbm.c): /sys/class/hwmon/hwmonN/{name=spbm, powerN_{label,input,cap} in uW,
energyN_{label,input} in uJ, tempN_{label,input} in m°C, prochot, pl_level}. Channels are found by
their label, never by number: the driver hides channels whose firmware offset it cannot resolve.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_watchd.sample.board import ENERGY_CHANNELS, LIMIT_CHANNELS, POWER_CHANNELS, TEMP_CHANNELS
from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.sensors import _numbered, _read, read_int

CHIP = "spbm"
_HWMON = re.compile(r"^hwmon(\d+)$")
# The firmware counts energy in u32 millijoules (the driver multiplies by 1000): it wraps at 2^32 mJ.
_ENERGY_WRAP_UJ = (1 << 32) * 1000


def find_chip(sys_root: str) -> str | None:
    """The hwmon directory whose `name` is spbm, or None when the driver is not loaded."""
    base = os.path.join(sys_root, "class", "hwmon")
    for _, hw in _numbered(base, _HWMON):
        d = os.path.join(base, hw)
        if _read(os.path.join(d, "name")) == CHIP:
            return d
    return None


def _channels(d: str, kind: str, allowed: tuple[str, ...]) -> dict[str, int]:
    """label -> index of `{kind}N_label` files naming a known channel."""
    out: dict[str, int] = {}
    for n, _ in _numbered(d, re.compile(rf"^{kind}(\d+)_label$")):
        label = _read(os.path.join(d, f"{kind}{n}_label"))
        if label in allowed and label not in out:
            out[label] = n
    return out


def read_chip(d: str) -> dict[str, Any]:
    """Raw readings of one spbm chip directory in SI units; energy in uJ (kept exact for deltas)."""
    power: dict[str, float] = {}
    caps: dict[str, float] = {}
    for label, n in _channels(d, "power", POWER_CHANNELS).items():
        if (v := read_int(os.path.join(d, f"power{n}_input"))) is not None:
            power[label] = v / 1e6
        if label in LIMIT_CHANNELS and (v := read_int(os.path.join(d, f"power{n}_cap"))) is not None:
            caps[label] = v / 1e6
    energy_uj: dict[str, int] = {}
    for label, n in _channels(d, "energy", ENERGY_CHANNELS).items():
        if (v := read_int(os.path.join(d, f"energy{n}_input"))) is not None:
            energy_uj[label] = v
    temps: dict[str, float] = {}
    for label, n in _channels(d, "temp", TEMP_CHANNELS).items():
        if (v := read_int(os.path.join(d, f"temp{n}_input"))) is not None:
            temps[label] = v / 1000.0
    return {
        "power_w": power,
        "power_cap_w": caps,
        "energy_uj": energy_uj,
        "temps_c": temps,
        "prochot": read_int(os.path.join(d, "prochot")),  # ENODATA when the firmware has no such register
        "pl_level": read_int(os.path.join(d, "pl_level")),
    }


def energy_delta_uj(cur: int, prev: int) -> int | None:
    """Energy used between two accumulator reads; one u32-millijoule wrap is undone, anything else is a reset."""
    if cur >= prev:
        return cur - prev
    if prev - cur > _ENERGY_WRAP_UJ // 2 and prev < _ENERGY_WRAP_UJ:
        return cur + _ENERGY_WRAP_UJ - prev
    return None


class BoardSource:
    """`board`: the spbm chip, with each accumulator turned into the average power since the previous read.

    The instant power channels swing with the firmware's 100 ms PID loop; energy deltas over the sampling
    interval are the steady figure (the driver README recommends them for averages).
    """

    name = "board"

    def __init__(self, sys_root: str = "/sys", clock: Callable[[], float] = time.monotonic):
        self.sys_root = sys_root
        self.clock = clock
        self._dir: str | None = None
        self._prev: tuple[float, dict[str, int]] | None = None

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        d = self._dir
        if d is None or _read(os.path.join(d, "name")) != CHIP:
            d = self._dir = find_chip(self.sys_root)  # driver loaded late, or the hwmon number moved
        if d is None:
            self._prev = None
            return {}
        raw = read_chip(d)
        now = self.clock()
        energy = raw.pop("energy_uj")
        if not raw["power_w"] and not energy and not raw["temps_c"] and raw["prochot"] is None:
            self._prev = None
            raise SourceUnavailable(f"spbm hwmon chip at {d}: no readable channel")
        avg: dict[str, float] = {}
        prev = self._prev
        if prev is not None and now > prev[0]:
            for label, cur in energy.items():
                before = prev[1].get(label)
                delta = energy_delta_uj(cur, before) if before is not None else None
                if delta is not None:
                    avg[label] = round(delta / 1e6 / (now - prev[0]), 3)
        self._prev = (now, energy)
        return {
            "board": {
                "chip": CHIP,
                **raw,
                "energy_j": {k: v / 1e6 for k, v in energy.items()},
                "energy_power_w": avg,
            }
        }

    def close(self) -> None:
        pass
