"""The interface every incremental classifier (G3, G4, G6) offers the engine: its state stays behind it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from spark_watchd.diagnose.features import Features
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.model import Sample


class Ruling(NamedTuple):
    """What one rule concluded: the severity and words of a finding (its evidence and typed state come from
    the tracker's advance(), which built the record the rule read)."""

    severity: str
    # The words, or (G4) a function of the rule's (s, now, th) that writes them when the finding is read.
    summary: str | Callable[..., str]
    advice: tuple[str, ...] = ()
    anomaly: str | None = None  # a non-thermal G4 anomaly ("power_delivery" ...), never a throttle


def judge(rules: tuple[Callable[..., Ruling | None], ...], s: Any, now: Any, th: Any) -> Ruling:
    """The first rule's ruling that does not pass (None): RULES are in priority order, the last never passes."""
    for rule in rules:
        r = rule(s, now, th)
        if r is not None:
            return r
    raise AssertionError(f"no rule ruled (the last of {rules!r} must)")


class Verdict(NamedTuple):
    """What a tracker concluded from one sample."""

    finding: Finding
    events: list[Event]
    # The workload table the tracker grouped this sample (G6 only; the others leave it empty): the engine
    # publishes it on the Diagnosis so nothing downstream groups processes again.
    workloads: tuple[Any, ...] = ()


class Tracker(Protocol):
    """One gotcha's incremental classifier: feed samples oldest first, one call per sample."""

    gotcha: str  # "G3", "G4", "G6": the key of its finding

    def observe(self, sample: Sample, f: Features) -> Verdict:
        """Judge the newest sample (after any reboot() or time_jump() for it)."""
        ...

    def reboot(self, ts: float, boot_id: str | None, cause: str | None) -> list[Event]:
        """A new boot starts at ts (cause: the driver fault that ended the last one); the events it implies."""
        ...

    def time_jump(self, ts: float) -> None:
        """The clock stepped back to ts: restart windows keyed on time, keep episodes and counters."""
        ...

    def state(self) -> dict[str, Any]:
        """What must survive a restart, as flat JSON keys of the engine's state (none for most trackers)."""
        ...

    def restore(self, state: Mapping[str, Any]) -> None:
        """Resume from the engine's persisted state (the keys state() wrote; others are ignored)."""
        ...

    def set_thresholds(self, th: Thresholds) -> None:
        """Judge with new thresholds from the next sample on (SIGHUP reload)."""
        ...


class Unpersisted:
    """For a tracker whose windows and latches rebuild from the next samples: nothing survives a restart."""

    def state(self) -> dict[str, Any]:
        """Nothing: windows and latches start afresh after a restart."""
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Nothing persisted (see state())."""
