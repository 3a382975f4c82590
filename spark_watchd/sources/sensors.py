"""Temperature sensors outside NVML: thermal zones (acpitz...) and hwmon chips (nvme, mlx5...).

Thermal zones come first, labelled temp1..N per zone type in zone order (what
`sensors` prints for acpitz). An hwmon chip whose name is also a zone type is
the same sensor exported twice (each ACPI zone registers an `acpitz` hwmon),
so it is skipped. Nothing here is an error: a machine without /sys/class/hwmon
simply has no sensors; a file that vanishes or reads garbage is skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from spark_watchd.sample.model import Sensor

_ZONE = re.compile(r"^thermal_zone(\d+)$")
_HWMON = re.compile(r"^hwmon(\d+)$")
_TEMP_INPUT = re.compile(r"^temp(\d+)_input$")
# Above this a "critical" threshold is a placeholder: many NVMe drives report 65261.85 C for "not set".
_CRIT_SANE_MAX_C = 200.0
# A temperature outside this range (millidegrees) is a placeholder, not a reading.
_TEMP_SANE_MIN_MC, _TEMP_SANE_MAX_MC = -100_000, 400_000


def _read(path: str) -> str | None:
    try:  # a sysfs attribute is one page at most; a link cycle (ELOOP) reads as absent
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(4096).strip()
    except OSError:
        return None


def read_int(path: str) -> int | None:
    """The integer a sysfs attribute holds; None when it is absent, unreadable or not a number.

    A number past 64 bits (a 400-digit reading) is no reading a driver makes: ValueError naming the file,
    so the source is down with that reason (logged once) instead of failing deeper on every tick.
    """
    text = _read(path)
    if text is None:
        return None
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    if len(digits) > 20 or not -(2**63) <= (value := int(text)) < 2**64:
        raise ValueError(
            f"{path}: impossible value {text[:24]}... ({len(digits)} digits), not a 64-bit number"
        )
    return value


def _millideg(path: str) -> float | None:
    value = read_int(path)
    if value is None or not _TEMP_SANE_MIN_MC <= value <= _TEMP_SANE_MAX_MC:
        return None  # absent, or a sensor's "not implemented" placeholder (NVMe: 65261.85 C): skipped
    return value / 1000.0


def _crit(value: float | None) -> float | None:
    return value if value is not None and value < _CRIT_SANE_MAX_C else None


def _numbered(directory: str, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = [(int(m.group(1)), n) for n in names if (m := pattern.match(n))]
    return sorted(found)


def read_thermal_zones(sys_root: str) -> list[Sensor]:
    """One Sensor per /sys/class/thermal/thermal_zone*, with its critical trip point."""
    base = os.path.join(sys_root, "class", "thermal")
    out: list[Sensor] = []
    per_type: dict[str, int] = {}
    for _, zone in _numbered(base, _ZONE):
        d = os.path.join(base, zone)
        ztype = _read(os.path.join(d, "type"))
        temp = _millideg(os.path.join(d, "temp"))
        if not ztype or temp is None:
            continue
        crit = None
        for _, trip in _numbered(d, re.compile(r"^trip_point_(\d+)_type$")):
            if _read(os.path.join(d, trip)) == "critical":
                crit = _crit(_millideg(os.path.join(d, trip.replace("_type", "_temp"))))
                break
        per_type[ztype] = per_type.get(ztype, 0) + 1
        out.append(Sensor(chip=ztype, label=f"temp{per_type[ztype]}", temp_c=temp, crit_c=crit))
    return out


def read_hwmon(sys_root: str, skip_chips: frozenset[str] = frozenset()) -> list[Sensor]:
    """One Sensor per hwmon temp*_input, labelled by temp*_label when the driver gives one."""
    base = os.path.join(sys_root, "class", "hwmon")
    out: list[Sensor] = []
    for _, hw in _numbered(base, _HWMON):
        d = os.path.join(base, hw)
        chip = _read(os.path.join(d, "name"))
        if not chip or chip in skip_chips:
            continue
        for n, inp in _numbered(d, _TEMP_INPUT):
            temp = _millideg(os.path.join(d, inp))
            if temp is None:
                continue
            label = _read(os.path.join(d, f"temp{n}_label")) or f"temp{n}"
            crit = _crit(_millideg(os.path.join(d, f"temp{n}_crit")))
            out.append(Sensor(chip=chip, label=label, temp_c=temp, crit_c=crit))
    return out


class SensorsSource:
    """`sensors`: thermal zones, then hwmon chips not already covered by a zone (nor by the board source)."""

    name = "sensors"

    def __init__(self, sys_root: str = "/sys"):
        self.sys_root = sys_root

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        zones = read_thermal_zones(self.sys_root)
        # The spbm chip (GB10 board telemetry) belongs to the `board` source: its tj_max_c is a headroom.
        hwmon = read_hwmon(self.sys_root, frozenset(s.chip for s in zones) | {"spbm"})
        return {"sensors": tuple(zones + hwmon)}

    def close(self) -> None:
        pass
