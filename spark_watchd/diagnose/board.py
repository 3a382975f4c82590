"""What GB10 board telemetry (the spbm hwmon chip) says about G4: heat NVML misses, the platform cap, a starved input.

Pure: one BoardReading and the thresholds in, a BoardEvidence out. G4 uses it when the sample has a board.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from spark_watchd.diagnose.features import near_slowdown
from spark_watchd.sample.board import BoardReading

ADVICE_PROCHOT_COOL = (
    "PROCHOT asserted at a cool temperature is the board's power or current protection, not heat: check "
    "the power brick and the DC input, and any power limit written to the spbm chip.",
)
# The firmware power limits whose EWMA controller can hold the package below where NVML shows a reason:
# pl1 (package, sustained) and syspl1 (whole system, sustained) first, then their short-term pl2 pair.
_LIMITS = ("syspl1", "pl1", "syspl2", "pl2")


class BoardEvidence(NamedTuple):
    """The board's verdicts for one sample; readings kept for the finding's evidence (a named tuple: one is
    built for every sample of a host with the spbm driver)."""

    prochot: bool
    prochot_hot: bool  # the GPU or the package near the slowdown line while PROCHOT is asserted
    tj_max_c: float | None  # package hotspot
    tj_headroom_c: float | None
    tj_at_limit: bool
    limit: str | None  # the firmware limit whose EWMA is at its cap (platform cap), else None
    limit_ewma_w: float | None
    limit_w: float | None
    dc_input_w: float | None
    dc_input_low: bool
    pl_level: int | None

    @property
    def thermal(self) -> bool:
        """PROCHOT with the die hot, or the package at its Tj limit: heat, whatever NVML's reason mask says."""
        return (self.prochot and self.prochot_hot) or self.tj_at_limit

    @property
    def prochot_cool(self) -> bool:
        """PROCHOT asserted well under the slowdown line: the board's power or current limit, not heat."""
        return self.prochot and not self.prochot_hot

    def why_thermal(self) -> str:
        """Short phrase for a finding summary."""
        if self.prochot:
            return "board PROCHOT asserted"
        return f"board Tj headroom {self.tj_headroom_c:.1f} C"

    def limit_phrase(self) -> str:
        """`syspl1 EWMA 229 of 231 W`."""
        return f"{self.limit} EWMA {self.limit_ewma_w:.0f} of {self.limit_w:.0f} W"

    def details(self) -> dict[str, Any]:
        """Evidence keys for the G4 finding (`board_*`)."""
        return {
            "board_prochot": self.prochot,
            "board_prochot_cause": ("heat" if self.prochot_hot else "power limit") if self.prochot else None,
            "board_tj_max_c": self.tj_max_c,
            "board_tj_headroom_c": self.tj_headroom_c,
            "board_power_limit": self.limit,
            "board_power_limit_ewma_w": self.limit_ewma_w,
            "board_power_limit_w": self.limit_w,
            "board_dc_input_w": self.dc_input_w,
            "board_pl_level": self.pl_level,
        }


def evidence(
    board: BoardReading | None, th, slowdown_c: float, loaded: bool, temp_c: float | None = None
) -> BoardEvidence | None:
    """Judge one board reading; None without the spbm driver.

    PROCHOT is heat only with the GPU (temp_c) or the package hotspot at or near the slowdown line (within
    slowdown_margin_c, as G4's own signature); asserted cooler than that (61-68 C under an 86 C slowdown)
    it is a board power or current limit.
    """
    if board is None:
        return None
    temps = board.temps_c
    tj, headroom = temps.get("tj_max"), temps.get("tj_max_c")
    # A zero headroom alone is not heat: the driver reports ~0 at idle. It needs the package hot and a load.
    tj_limit = (
        loaded
        and headroom is not None
        and headroom <= th.board_tj_headroom_c
        and tj is not None
        and tj >= slowdown_c - th.cool_margin_c
    )
    limit = ewma = cap = None
    for name in _LIMITS:
        lim = board.power_cap_w.get(name) or board.power_w.get(name)
        avg = board.power_w.get(f"ewma_{name}")
        if lim and avg is not None and avg >= lim * th.board_limit_ratio:
            limit, ewma, cap = name, avg, lim
            break
    dc = board.power_w.get("dc_input")
    hot = near_slowdown(temp_c, slowdown_c, th) or near_slowdown(tj, slowdown_c, th)
    return BoardEvidence(
        prochot=bool(board.prochot),
        prochot_hot=hot,
        tj_max_c=tj,
        tj_headroom_c=headroom,
        tj_at_limit=tj_limit,
        limit=limit,
        limit_ewma_w=ewma,
        limit_w=cap,
        dc_input_w=dc,
        dc_input_low=loaded and dc is not None and dc <= th.board_dc_input_low_w,
        pl_level=board.pl_level,
    )
