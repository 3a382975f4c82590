"""Findings that do not flap: hysteresis on each threshold and a minimum dwell on each severity.

A reading hovering at a line (MemAvailable wandering around the thin-budget line, a fault rate at the
storm line) would otherwise toggle its finding every sample. `Latch` gives a condition an entering and a
leaving level; `Dwell` keeps a finding at a severity it entered for `min_dwell_s` before it may fall.
Rising is never delayed, so an episode is caught at the same sample as without either. Pure state
machines fed sample time: no clock.
"""

from __future__ import annotations

from functools import partial

from spark_watchd.sample.findings import Finding
from spark_watchd.sample.model import SEVERITY_LEVEL


class Latch:
    """A condition that turns on at an entering level and off only past a leaving level."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False

    def above(self, value: float | None, enter: float, leave: float, now: float | None = None) -> bool:
        """On at value >= enter; stays on while `now` (value when None) >= leave (leave <= enter).

        `now` is the reading without lag where the entering one trails (PSI avg60 decays for a minute
        after the stalls stop: the counter's rate over the last interval says they have): a trailing value
        whose `now` is under the leaving level neither enters nor holds. No reading: off.
        """
        if value is None or (now is not None and now < leave):
            self.on = False  # over: what is left is a trailing average decaying
        elif self.on:
            self.on = now is not None or value >= leave
        else:
            self.on = value >= enter
        return self.on

    def below(self, value: float | None, enter: float, leave: float) -> bool:
        """On at value <= enter; stays on while value <= leave (leave >= enter). No reading: off."""
        if value is None:
            self.on = False
        else:
            self.on = value <= (leave if self.on else enter)
        return self.on


class Dwell:
    """Holds a finding at the severity it entered for at least dwell_s of sample time before it may fall."""

    __slots__ = ("current", "since")

    def __init__(self) -> None:
        self.current: Finding | None = None
        self.since: float | None = None

    def reset(self) -> None:
        """Forget the held severity (a reboot, a clock step back)."""
        self.current = None
        self.since = None

    def apply(self, f: Finding, ts: float, dwell_s: float) -> Finding:
        """The finding to publish at ts: f, or f's evidence and state under the held severity while the dwell lasts."""
        cur = self.current
        if cur is None or self.since is None or ts < self.since:
            self.current, self.since = f, ts
            return f
        if f.severity == cur.severity:
            self.current = f
            return f
        rising = SEVERITY_LEVEL[f.severity] > SEVERITY_LEVEL[cur.severity]
        if rising or "unknown" in (f.severity, cur.severity) or ts - self.since >= dwell_s:
            self.current, self.since = f, ts
            return f
        left = dwell_s - (ts - self.since)
        # Held: cur's severity and words over f's evidence and state, deferred as f may be (both findings are
        # never changed once made), so neither's words are written unless someone reads them.
        return Finding.deferred(
            cur.gotcha,
            cur.severity,
            partial(_held_words, cur, f, left),
            cur.advice,
            cur.anomaly,
            f.state,  # the readings are this sample's: only the severity and its words are held
        )


def _held_words(cur: Finding, f: Finding, left: float) -> tuple[str, dict]:
    """The held finding's (summary, evidence): cur's words, f's evidence with the time the hold has left."""
    evidence = dict(f.evidence)
    evidence["held_severity_s"] = round(left, 1)
    summary = (
        f"{cur.summary} (easing to {f.severity}; held {left:.0f} s more so a reading at a "
        f"threshold does not flap)"
    )
    return summary, evidence
