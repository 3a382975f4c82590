"""What the classifiers say about a sample: findings per gotcha, events, the diagnosis of one tick."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_watchd.sample.model import SEVERITY_LEVEL


@dataclass(frozen=True, slots=True)
class Finding:
    """The verdict on one gotcha at one sample."""

    gotcha: str
    severity: str  # one of SEVERITIES
    summary: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    advice: tuple[str, ...] = ()
    # Non-thermal anomaly reported under G4 but never called a throttle:
    # "power_delivery" or "hung_engine"; None otherwise.
    anomaly: str | None = None
    # The classifier's typed state at this sample (diagnose/verdicts.py: G3State, G4State, G6State): what
    # the exporter, page, API and CLI read instead of evidence keys. Not in to_dict() or equality.
    state: Any = field(default=None, compare=False)

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


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Findings for every gotcha plus the events seen at one sample."""

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
