"""Joules per generated token: the GPU's energy counter over the same intervals as a server's token counter.

The energy is the board's GPU accumulator where the spbm driver is present, else NVML's total energy
(`gpus[].energy_j`). An interval's energy is one server's only when that server is the only workload that
worked in it (no other server generated tokens, no trainer is on the GPU); a shared interval is not split
by guesswork: its J/token is left unknown, and the running totals skip it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from spark_watchd.sample.serving import ServingReading, joules_per_token


def energy_j(partial: Mapping[str, Any]) -> float | None:
    """The GPU energy counter of this tick, joules (board GPU accumulator first, else NVML's sum)."""
    board = partial.get("board")
    e = getattr(board, "energy_j", None) if board is not None else None
    if isinstance(board, Mapping):
        e = board.get("energy_j")
    if isinstance(e, Mapping) and isinstance(e.get("gpu"), (int, float)):
        return float(e["gpu"])
    total, any_gpu = 0.0, False
    for g in partial.get("gpus") or ():
        v = g.get("energy_j") if isinstance(g, Mapping) else getattr(g, "energy_j", None)
        if isinstance(v, (int, float)):
            total, any_gpu = total + float(v), True
    return total if any_gpu else None


class EnergyAttribution:
    """Per server, the energy and tokens at the previous tick; J/token over each interval it worked alone."""

    def __init__(self) -> None:
        self._last_energy: float | None = None
        self._last_tokens: dict[str, float] = {}
        self.totals: dict[str, tuple[float, float]] = {}  # server -> (joules, tokens) attributed so far

    def attribute(
        self, readings: Iterable[ServingReading], partial: Mapping[str, Any], trainer_active: bool = False
    ) -> list[ServingReading]:
        readings = list(readings)
        e = energy_j(partial)
        de = e - self._last_energy if e is not None and self._last_energy is not None else None
        if de is not None and de < 0:
            de = None  # the counter restarted (driver reload)
        self._last_energy = e
        dtok: dict[str, float] = {}
        for r in readings:
            cur, before = r.generation_tokens_total, self._last_tokens.get(r.server)
            if r.up and cur is not None:
                if before is not None and cur >= before:
                    dtok[r.server] = cur - before
                self._last_tokens[r.server] = cur
        working = [s for s, d in dtok.items() if d > 0]
        alone = working[0] if len(working) == 1 and not trainer_active else None
        out = []
        for r in readings:
            if r.server == alone and de is not None:
                jpt = joules_per_token(de, dtok[alone])
                j, t = self.totals.get(alone, (0.0, 0.0))
                self.totals[alone] = (j + de, t + dtok[alone])
                r = dataclasses.replace(r, joules_per_token=jpt)
            out.append(r)
        return out
