"""trace-v1 field checks beyond a declared scalar's type and range: counter objects and psi_memory's two
lines (the board's, serving's and the kill reports' live with their records).

Each raises FieldError naming the field; the declared records' checks (sample/schema.py) call them.
"""

from __future__ import annotations

from array import array
from typing import Any

MAX = 1e300  # finite: a chained `lo <= v <= hi` then refuses NaN and +-inf as well
U64 = 2**64 - 1  # /proc and NVML counters are at most unsigned 64-bit
I64 = 2**63


class FieldError(ValueError):
    """A trace field with the wrong type or an impossible value; `field` is its path, e.g. gpus[0].power_w."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"field '{field}': {reason}")
        self.field = field
        self.reason = reason


def show(v: Any) -> str:
    text = repr(v) if not isinstance(v, (dict, list)) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


_INT_ONLY, _STR_ONLY = {int}, {str}
_Q_IS_U64 = array("Q").itemsize == 8  # unsigned long long: 64 bits everywhere this runs


def counters_ok(d: Any, lo: int, hi: int, nullable: bool = False) -> bool:
    """An object of integer counters in [lo, hi], by C-level set, min and max over its values; False only
    says "not this": check_counters names what is wrong."""
    if type(d) is not dict:
        return False
    if not d:
        return True
    vals = [v for v in d.values() if v is not None] if nullable else d.values()
    if not vals or not set(map(type, vals)) <= _INT_ONLY:
        return not vals
    if lo == 0 and hi == U64 and _Q_IS_U64:  # array("Q") holds exactly [0, 2**64 - 1]: one C pass
        try:
            array("Q", vals)
        except OverflowError:
            return False
        return True
    return lo <= min(vals) and max(vals) <= hi


def check_counters(d: Any, where: str, lo: int, hi: int, nullable: bool = False) -> None:
    if counters_ok(d, lo, hi, nullable):
        return
    if type(d) is not dict:
        raise FieldError(where, f"must be an object, got {type(d).__name__}")
    for k, v in d.items():
        if v is None and nullable:
            continue
        if type(v) is not int:
            raise FieldError(f"{where}.{k}", f"must be an integer, got {type(v).__name__} {show(v)}")
        if not lo <= v <= hi:
            raise FieldError(f"{where}.{k}", f"out of range [{lo}, {hi}]: {show(v)}")


_N = (int, float)
_PSI_FIELDS = ("avg10", "avg60", "avg300", "total")
_PSI_KINDS = {"some", "full"}


def _psi_line_ok(d: Any) -> bool:
    if type(d) is not dict:
        return False
    for key in _PSI_FIELDS:
        x = d.get(key)
        # avg* are percentages of time stalled; total is a microsecond counter.
        if x is not None and (type(x) not in _N or not 0 <= x <= (U64 if key == "total" else 100.0)):
            return False
    return True


def psi_ok(v: Any) -> bool:
    """psi_memory as the checks accept it (False: check_psi names what is wrong)."""
    return type(v) is dict and v.keys() <= _PSI_KINDS and all(map(_psi_line_ok, v.values()))


def check_psi(v: Any, where: str) -> None:
    if psi_ok(v):
        return
    if type(v) is not dict:
        raise FieldError(where, f"must be an object or null, got {type(v).__name__}")
    for kind, fields in v.items():
        at = f"{where}.{kind}"
        if kind not in ("some", "full"):
            raise FieldError(at, "unknown pressure kind (expected 'some' or 'full')")
        if type(fields) is not dict:
            raise FieldError(at, f"must be an object, got {type(fields).__name__}")
        for key in _PSI_FIELDS:
            x = fields.get(key)
            if x is None:
                continue
            hi = U64 if key == "total" else 100.0
            if type(x) not in _N or not 0 <= x <= hi:
                raise FieldError(f"{at}.{key}", f"must be a number in [0, {hi:g}], got {show(x)}")
