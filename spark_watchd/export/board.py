"""sparkwatchd_board_*: GB10 board telemetry from the spbm hwmon driver; families without series when absent."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from spark_watchd.export.families import counter, gauge
from spark_watchd.sample.board import ENERGY_CHANNELS, LIMIT_CHANNELS, POWER_CHANNELS, TEMP_CHANNELS
from spark_watchd.snapshot import Snapshot

# Budgets are allocations, like the pl/syspl limits: neither is a draw, so they go with the limits.
_LIMITS = tuple(c for c in POWER_CHANNELS if c in LIMIT_CHANNELS or c.startswith("budget_"))
_DRAWS = tuple(c for c in POWER_CHANNELS if c not in _LIMITS)
_TEMPS = tuple(c for c in TEMP_CHANNELS if c != "tj_max_c")


def families(snapshot: Snapshot) -> Iterator[Metric]:
    """Board power per channel (energy-averaged where an accumulator exists), limits, energy, temps, PROCHOT."""
    board = snapshot.sample.board if snapshot.sample is not None else None
    power = gauge(
        "board_power_watts",
        "GB10 board power per spbm channel: energy-averaged over the sample interval where an accumulator "
        "exists (soc_pkg, cpu_p, cpu_e, gpu), else the firmware's instant or EWMA reading.",
        ["channel"],
    )
    limit = gauge(
        "board_power_limit_watts",
        "GB10 firmware power limits (pl1, pl2, syspl1, syspl2: effective caps) and budgets (budget_*).",
        ["channel"],
    )
    energy = counter(
        "board_energy_joules",
        "GB10 board energy accumulators (pkg, cpu_e, cpu_p, gpu) since the firmware started counting.",
        ["channel"],
    )
    temp = gauge(
        "board_temperature_celsius",
        "GB10 board temperatures (tj_max is the package hotspot).",
        ["sensor"],
    )
    headroom = gauge("board_tj_headroom_celsius", "GB10 package headroom to its Tj limit (spbm tj_max_c).")
    prochot = gauge("board_prochot", "1 while the board asserts PROCHOT (thermal clamp).")
    level = gauge(
        "board_power_limit_level",
        "The board firmware's active power-limit level (spbm pl_level).",
    )
    if board is not None:
        for ch in _DRAWS:
            if (v := board.avg_power_w(ch)) is not None:
                power.add_metric([ch], v)
        for ch in _LIMITS:
            v = board.power_cap_w.get(ch) if ch in LIMIT_CHANNELS else None
            if (v := v if v is not None else board.power_w.get(ch)) is not None:
                limit.add_metric([ch], v)
        for ch in ENERGY_CHANNELS:
            if (v := board.energy_j.get(ch)) is not None:
                energy.add_metric([ch], v)
        for ch in _TEMPS:
            if (v := board.temps_c.get(ch)) is not None:
                temp.add_metric([ch], v)
        if (v := board.temps_c.get("tj_max_c")) is not None:
            headroom.add_metric([], v)
        if board.prochot is not None:
            prochot.add_metric([], 1.0 if board.prochot else 0.0)
        if board.pl_level is not None:
            level.add_metric([], float(board.pl_level))
    yield from (power, limit, energy, temp, headroom, prochot, level)
