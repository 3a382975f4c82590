"""The interface every incremental classifier (G3, G4, G6) offers the engine: its state stays behind it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from functools import partial
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


def fires_when(*conditions: str) -> Callable[[Callable], Callable]:
    """Declare when a rule can rule: Python expressions over the rule's `s` and `now`, one of which holds
    whenever it returns a ruling (it may still pass when one holds). `Shortcut` skips a declared rule while
    all of its conditions fail; a rule declaring none is always run."""

    def declare(rule: Callable) -> Callable:
        rule.fires_when = conditions
        return rule

    return declare


class Shortcut:
    """`judge` over a rules module's RULES that skips the rules whose declared conditions (`fires_when`) all fail.

    Most samples are quiet: every declared condition fails, so only the undeclared rules and the last one
    are walked. The quiet test is made from the declarations, never written by hand, so a new rule is
    either declared (and skipped only when its conditions say it cannot rule) or always run. RULES is
    read at each call and the test derived again whenever it is another tuple (tests insert rules).
    A rules module ends with `ruling = Shortcut(__name__).judge`.
    """

    __slots__ = ("module", "rules", "decide")

    def __init__(self, module: str) -> None:
        self.module = sys.modules[module]  # (a module being executed is already there)
        self.rules: tuple | None = None
        self.decide: Callable[..., Ruling] = judge

    def judge(self, s: Any, now: Any, th: Any) -> Ruling:
        """The first of the module's RULES that rules, as `judge(RULES, s, now, th)` gives."""
        rules = self.module.RULES
        if rules is not self.rules:
            self.decide, self.rules = shortcut(rules), rules
        return self.decide(s, now, th)


def words(r: Ruling, s: Any, now: Any, th: Any) -> str:
    """A ruling's summary for this sample (written when the finding is read): a string, or its words function's."""
    w = r.summary
    return w if isinstance(w, str) else w(s, now, th)


def shortcut(rules: tuple[Callable[..., Ruling | None], ...]) -> Callable[..., Ruling]:
    """decide(s, now, th) for `rules`: when every condition rules[:-1] declare fails, only the undeclared
    rules and the last are walked; otherwise all of them, in order.

    The conditions are joined into one compiled expression, so a quiet sample costs the comparisons
    themselves and one call of the last rule (a call per rule would cost G4 about 1 us a sample)."""
    conditions = list(dict.fromkeys(c for r in rules[:-1] for c in getattr(r, "fires_when", ())))
    rest = tuple(r for r in rules[:-1] if not hasattr(r, "fires_when")) + tuple(rules[-1:])
    if not conditions:
        return partial(judge, rules)
    scope = {"__builtins__": {"len": len}, "judge": judge, "rules": rules, "rest": rest, "last": rules[-1]}
    quiet = "last(s, now, th)" if len(rest) == 1 else "judge(rest, s, now, th)"
    source = f"lambda s, now, th: judge(rules, s, now, th) if {' or '.join(f'({c})' for c in conditions)} else {quiet}"
    return eval(source, scope)  # noqa: S307 (the rules' own declarations)


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
