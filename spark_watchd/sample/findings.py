"""What the classifiers say about a sample: findings per gotcha, events, the diagnosis of one tick."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from spark_watchd.sample.model import SEVERITY_LEVEL

_NO_EVIDENCE: Mapping[str, Any] = MappingProxyType({})


class Finding:
    """The verdict on one gotcha at one sample.

    Treated as immutable. The words (summary, evidence) may be deferred (`Finding.deferred`): built once, on
    first read, from a snapshot the classifier took at this sample. Most findings of a live tick or a
    classification run are never read as text, so their formatting is never paid for.
    """

    __slots__ = ("gotcha", "severity", "advice", "anomaly", "state", "_summary", "_evidence", "_build")

    def __init__(
        self,
        gotcha: str,
        severity: str,  # one of SEVERITIES
        summary: str,
        evidence: Mapping[str, Any] = _NO_EVIDENCE,
        advice: tuple[str, ...] = (),
        # Non-thermal anomaly reported under G4 but never called a throttle:
        # "power_delivery" or "hung_engine"; None otherwise.
        anomaly: str | None = None,
        # The classifier's typed state at this sample (diagnose/verdicts.py: G3State, G4State, G6State):
        # what the exporter, page, API and CLI read instead of evidence keys. Not in to_dict() or equality.
        state: Any = None,
    ) -> None:
        self.gotcha = gotcha
        self.severity = severity
        self._summary = summary
        self._evidence = evidence
        self.advice = advice
        self.anomaly = anomaly
        self.state = state
        self._build = None

    @classmethod
    def deferred(
        cls,
        gotcha: str,
        severity: str,
        build: Callable[[], tuple[str, Mapping[str, Any]]],
        advice: tuple[str, ...] = (),
        anomaly: str | None = None,
        state: Any = None,
    ) -> Finding:
        """A finding whose (summary, evidence) `build()` makes on first read. build must close over values
        of this sample only (records, numbers), never over state that a later sample changes."""
        f = cls.__new__(cls)
        f.gotcha = gotcha
        f.severity = severity
        f._summary = f._evidence = None
        f.advice = advice
        f.anomaly = anomaly
        f.state = state
        f._build = build
        return f

    def _words(self) -> None:
        # Read once: another thread (the tick, an HTTP worker) may have built the words and cleared _build
        # since this one saw it set. Building twice is harmless (a build is pure); calling None is not.
        build = self._build
        if build is not None:
            self._summary, self._evidence = build()
            self._build = None

    @property
    def summary(self) -> str:
        if self._build is not None:
            self._words()
        return self._summary

    @property
    def evidence(self) -> Mapping[str, Any]:
        if self._build is not None:
            self._words()
        return self._evidence

    def replace(self, **changes: Any) -> Finding:
        """A copy with some fields changed (dataclasses.replace's contract; deferred words stay deferred
        unless summary or evidence is among the changes)."""
        f = Finding.__new__(Finding)
        for k in ("gotcha", "severity", "advice", "anomaly", "state"):
            setattr(f, k, changes.pop(k, getattr(self, k)))
        if "summary" in changes or "evidence" in changes:
            f._summary = changes.pop("summary") if "summary" in changes else self.summary
            f._evidence = changes.pop("evidence") if "evidence" in changes else self.evidence
            f._build = None
        else:
            # _build read first: words another thread builds meanwhile are stored before it clears _build
            build = self._build
            f._summary, f._evidence, f._build = self._summary, self._evidence, build
        if changes:
            raise TypeError(f"Finding has no field {next(iter(changes))!r}")
        return f

    def reworded(
        self, words: Callable[[str, Mapping[str, Any]], tuple[str, Mapping[str, Any]]], **changes: Any
    ) -> Finding:
        """A copy whose (summary, evidence) are `words(summary, evidence)` of this finding's, built on first
        read (this finding's own deferred words with them): an annotation that keeps a deferred finding
        deferred. words must close over values of this sample only, as a deferred build. changes: other
        fields, as replace() takes them."""
        if "summary" in changes or "evidence" in changes:
            raise TypeError("reworded() builds the summary and evidence: change them in words")
        f = self.replace(**changes)
        f._summary = f._evidence = None
        f._build = lambda: words(self.summary, self.evidence)
        return f

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Finding):
            return NotImplemented
        return (self.gotcha, self.severity, self.summary, self.evidence, self.advice, self.anomaly) == (
            other.gotcha,
            other.severity,
            other.summary,
            other.evidence,
            other.advice,
            other.anomaly,
        )

    __hash__ = None  # type: ignore[assignment]  # evidence is a dict: findings were never hashable

    def __repr__(self) -> str:
        return (
            f"Finding(gotcha={self.gotcha!r}, severity={self.severity!r}, summary={self.summary!r}, "
            f"evidence={self.evidence!r}, advice={self.advice!r}, anomaly={self.anomaly!r})"
        )

    @property
    def level(self) -> int:
        return SEVERITY_LEVEL[self.severity]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "severity": self.severity,
            "summary": self.summary,
            "evidence": dict(self.evidence),
            "advice": list(self.advice),
        }
        if self.anomaly:
            d["anomaly"] = self.anomaly
        return d


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened at one sample: eviction, oom_kill, reboot, throttle_start/end."""

    kind: str
    gotcha: str
    ts: float
    summary: str
    after_throttle: bool | None = None  # reboot only
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "gotcha": self.gotcha, "ts": self.ts, "summary": self.summary}
        if self.after_throttle is not None:
            d["after_throttle"] = self.after_throttle
        if self.details:
            d["details"] = dict(self.details)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Event:
        return cls(
            kind=str(d["kind"]),
            gotcha=str(d.get("gotcha", "")),
            ts=float(d["ts"]),
            summary=str(d.get("summary", "")),
            after_throttle=d.get("after_throttle"),
            details=d.get("details") or {},
        )


@dataclass(slots=True)
class Diagnosis:
    """Findings for every gotcha plus the events seen at one sample.

    Treated as immutable, as Finding is, but not a frozen dataclass: one is built per sample, and a frozen
    dataclass's __init__ (an object.__setattr__ call per field) costs about four times a plain one's.
    """

    ts: float
    findings: Mapping[str, Finding]
    events: tuple[Event, ...] = ()
    # The workload table G6 judged (sample.groups.Workload rows): published once per tick for the
    # exporter, page, API and CLI to format. Not part of the replay output.
    workloads: tuple[Any, ...] = ()

    def to_replay_dict(self) -> dict[str, Any]:
        """The trace-v1 replay output object."""
        return {
            "ts": self.ts,
            "findings": {g: f.to_dict() for g, f in self.findings.items()},
            "events": [e.to_dict() for e in self.events],
        }

    def worst(self) -> str:
        """Worst severity across findings (unknown ranks below ok)."""
        return max(
            (f.severity for f in self.findings.values()), key=SEVERITY_LEVEL.__getitem__, default="unknown"
        )
