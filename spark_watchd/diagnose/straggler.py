"""The straggler of a DDP pair: one Spark whose heat slows the job its peers wait on. ONE definition.

Two Sparks running DDP/FSDP together over ConnectX-7 wait for the slowest rank at every all-reduce:
one hot Spark slows both, and from inside either box it looks like a slow job. The thresholds below
are the only copy: `deploy/prometheus/fleet_rules.py` imports them to write SparkWatchdStraggler, and
the daemon's own pair view (`web/fleet.py`) judges with `judge()` below, so the alert and the page
cannot disagree on the same data.

Each member is compared with the mean of the others (itself excluded), so the rule means the same
for a pair and for eight Sparks. Pure: member documents in, a verdict out; no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A peer is "under load" from this utilisation (the classifiers' load_util_pct, 50 %).
LOAD_RATIO = 0.5
# Healthy GB10 clocks wander 2300-2480 MHz; a throttled one sinks to 1900-2100: >10 % under its peers.
CLOCK_SHORTFALL = 0.9
# Sparks side by side in one room run within a few degrees of each other; 5 C more is its own heat.
TEMP_EXCESS_C = 5
# Peers of a straggler wait in the collective: their utilisation drops 10 points or more below its own.
UTIL_GAP = 0.1
STRAGGLER_FOR_S = 900  # "for 15 min": the same hold as the alert's `for:`

_WARNING = ("warning", "critical")


@dataclass(frozen=True, slots=True)
class Member:
    """What the rule reads of one Spark: the /api/v1/status document reduced to the alert's series."""

    name: str
    up: bool
    ts: float | None = None
    clock_loaded_mhz: float | None = None  # max SM clock over GPUs at or above LOAD_RATIO utilisation
    temp_loaded_c: float | None = None
    util: float | None = None  # max utilisation over GPUs, 0..1
    g4_warning: bool = False  # the G4 finding at warning or worse (the throttle signature)
    error: str | None = None  # why a peer is down


def member(name: str, doc: Mapping[str, Any] | None, error: str | None = None) -> Member:
    """A Member from a status document (ours or a peer's); a missing document is a member that is down."""
    if doc is None:
        return Member(name, False, error=error or "no answer")
    clocks, temps, utils = [], [], []
    for g in doc.get("gpus") or ():
        u = g.get("util_pct")
        if u is None:
            continue
        utils.append(u / 100.0)
        if u / 100.0 >= LOAD_RATIO:
            if g.get("sm_clock_mhz") is not None:
                clocks.append(float(g["sm_clock_mhz"]))
            if g.get("temp_c") is not None:
                temps.append(float(g["temp_c"]))
    g4 = ((doc.get("findings") or {}).get("G4") or {}).get("severity")
    return Member(
        name,
        True,
        doc.get("ts"),
        max(clocks) if clocks else None,
        max(temps) if temps else None,
        max(utils) if utils else None,
        g4 in _WARNING,
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True, slots=True)
class Judgement:
    """Whether one member drags its peers, right now (before the 15-minute hold), and why."""

    name: str
    reasons: tuple[str, ...]  # "clock", "temperature", "waiting" (throttling while peers wait)
    clock_mhz: float | None = None
    peers_clock_mhz: float | None = None
    temp_c: float | None = None
    peers_temp_c: float | None = None
    util: float | None = None
    peers_util: float | None = None

    @property
    def straggling(self) -> bool:
        return bool(self.reasons)


def judge(m: Member, others: Sequence[Member]) -> Judgement:
    """SparkWatchdStraggler's expression for one member against the mean of the others that are up."""
    peers = [o for o in others if o.up]
    pc = _mean([o.clock_loaded_mhz for o in peers if o.clock_loaded_mhz is not None])
    pt = _mean([o.temp_loaded_c for o in peers if o.temp_loaded_c is not None])
    pu = _mean([o.util for o in peers if o.util is not None])
    reasons = []
    if (
        m.up
        and m.clock_loaded_mhz is not None
        and pc is not None
        and m.clock_loaded_mhz < CLOCK_SHORTFALL * pc
    ):
        reasons.append("clock")
    if m.up and m.temp_loaded_c is not None and pt is not None and m.temp_loaded_c > pt + TEMP_EXCESS_C:
        reasons.append("temperature")
    if m.up and m.g4_warning and m.util is not None and pu is not None and m.util > pu + UTIL_GAP:
        reasons.append("waiting")
    return Judgement(m.name, tuple(reasons), m.clock_loaded_mhz, pc, m.temp_loaded_c, pt, m.util, pu)


def sentence(j: Judgement, self_name: str, peer_names: Sequence[str]) -> str:
    """The verdict as the owner reads it on this Spark: about itself, or about the peer it waits on."""
    me = j.name == self_name
    peers = ", ".join(n for n in peer_names if n != j.name) or "its peers"
    if "waiting" in j.reasons:
        u, pu = f"{j.peers_util * 100:.0f}%", f"{j.util * 100:.0f}%"
        if me:
            return f"this Spark is throttling and its DDP peer {peers} waits (utilisation {u} vs {pu})"
        return f"DDP peer {j.name} is throttling and this Spark waits on it (utilisation {u} vs {pu})"
    who = "this Spark" if me else f"DDP peer {j.name}"
    if "clock" in j.reasons:
        return (
            f"{who} is the straggler: SM clock {j.clock_mhz:.0f} MHz under load vs {j.peers_clock_mhz:.0f} MHz"
            f" on {'its peers' if me else 'this Spark'}"
        )
    return (
        f"{who} is the straggler: {j.temp_c:.0f} C under load vs {j.peers_temp_c:.0f} C"
        f" on {'its peers' if me else 'this Spark'}"
    )


class StragglerHold:
    """The alert's `for: 15m`: a member is the straggler once its judgement held that long (member time)."""

    def __init__(self, for_s: float = STRAGGLER_FOR_S):
        self.for_s = for_s
        self._since: dict[str, float] = {}

    def update(self, j: Judgement, ts: float) -> tuple[str | None, float]:
        """("straggler" | "pending" | None, seconds the judgement has held)."""
        if not j.straggling:
            self._since.pop(j.name, None)
            return None, 0.0
        since = self._since.setdefault(j.name, ts)
        if ts < since:  # the clock stepped back: start again
            since = self._since[j.name] = ts
        held = ts - since
        return ("straggler" if held >= self.for_s else "pending"), held
