"""Acknowledged findings: an owner's "I know, and I accept it" for one episode, for a while.

A known, accepted finding (a vLLM kept running beside a trainer on purpose) would otherwise stay red on the
page, in `status` (exit 1) and in every scripted check forever. An acknowledgement covers the finding as it
was when acknowledged: the same gotcha, at most the same severity, about the same thing (G6: the same
workloads by kind and name; G3/G4: the same anomaly kind), until it expires. Anything else is new: a worse
severity, another workload, or a new episode after the finding went back to ok (three ok samples in a row:
a restart's first, not yet judged samples do not end it) ends the acknowledgement, and the finding counts
again. An acknowledged finding is shown as acknowledged, never hidden.

The acknowledgements live in `STATE_DIR/acks.json` (atomic writes; kept across restarts). The daemon's tick
publishes the list (`extras["acks"]`); `acknowledged(snapshot)` matches it against the snapshot's own
findings, so the API, `/metrics`, `status` and the page agree on one snapshot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from spark_watchd.logs import get_logger

GOTCHAS = ("G3", "G4", "G6")
RANK = {"unknown": -1, "ok": 0, "warning": 1, "critical": 2}
MAX_FOR_S = 30 * 86400.0  # an acknowledgement is a reminder deferred, not a silence for good
MAX_NOTE = 200
OK_SAMPLES_TO_END = 3  # an episode is over after this many ok samples in a row (not one flicker)


class AckError(ValueError):
    """A request to acknowledge that cannot be honoured; the message says why."""


@dataclass(frozen=True, slots=True)
class Ack:
    """One acknowledgement as stored."""

    gotcha: str
    severity: str  # the severity acknowledged: a worse one is not covered
    subject: str  # what the finding was about when acknowledged
    at: float
    until: float
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ack:
        ack = cls(
            str(d["gotcha"]),
            str(d["severity"]),
            str(d["subject"]),
            float(d["at"]),
            float(d["until"]),
            str(d.get("note") or "")[:MAX_NOTE],
        )
        if ack.gotcha not in GOTCHAS or ack.severity not in ("warning", "critical"):
            raise ValueError(f"not an acknowledgement: {ack.gotcha} {ack.severity}")
        return ack


def subject(finding: Any) -> str:
    """What a finding is about, stable across samples and restarts (no pids)."""
    if finding.gotcha == "G6":
        rows = (finding.evidence or {}).get("workloads") or ()
        names = sorted(
            {f"{r.get('kind') or '?'}:{r.get('name') or '?'}" for r in rows if isinstance(r, Mapping)}
        )
        return "workloads " + ", ".join(names) if names else "workloads ?"
    return f"anomaly {finding.anomaly}" if finding.anomaly else finding.gotcha


def covers(ack: Ack, finding: Any, now: float) -> bool:
    """Whether this acknowledgement covers this finding now."""
    return (
        finding is not None
        and now < ack.until
        and finding.gotcha == ack.gotcha
        and finding.severity in ("warning", "critical")
        and RANK[finding.severity] <= RANK[ack.severity]
        and subject(finding) == ack.subject
    )


def acknowledged(snapshot: Any) -> dict[str, Ack]:
    """{gotcha: the acknowledgement covering its finding} for one published snapshot."""
    diag = getattr(snapshot, "diagnosis", None)
    listed = (getattr(snapshot, "extras", None) or {}).get("acks") or ()
    if diag is None or not listed:
        return {}
    now = getattr(snapshot, "published_at", 0.0) or time.time()
    out = {}
    for ack in listed:
        if isinstance(ack, Ack) and covers(ack, diag.findings.get(ack.gotcha), now):
            out[ack.gotcha] = ack
    return out


def worst_unacknowledged(snapshot: Any) -> str:
    """The worst severity among findings no acknowledgement covers ("ok" when all are covered)."""
    diag = getattr(snapshot, "diagnosis", None)
    if diag is None:
        return "unknown"
    acked = acknowledged(snapshot)
    levels = [f.severity for g, f in diag.findings.items() if g not in acked and f.severity in RANK]
    return max(levels, key=RANK.__getitem__) if levels else "ok"


class Acks:
    """The acknowledgements of one daemon: added and cleared over the API, ended by the findings themselves."""

    def __init__(self, state_dir: str | None, clock: Callable[[], float] = time.time):
        self.path = Path(state_dir) / "acks.json" if state_dir is not None else None
        self.clock = clock
        self.log = get_logger("acks")
        self._lock = threading.Lock()
        self._acks: dict[str, Ack] = {}
        self._findings: Mapping[str, Any] = {}  # the last published diagnosis's findings
        self._ok_run: dict[str, int] = {}  # ok samples in a row per acknowledged gotcha
        self._load()

    def active(self) -> tuple[Ack, ...]:
        """The unexpired acknowledgements (the tick publishes them as extras["acks"])."""
        now = self.clock()
        with self._lock:
            return tuple(a for a in self._acks.values() if now < a.until)

    def add(self, gotcha: str, for_s: float, note: str = "") -> Ack:
        """Acknowledge the gotcha's current finding for for_s seconds; AckError when there is nothing to cover."""
        if gotcha not in GOTCHAS:
            raise AckError(f"gotcha must be one of {', '.join(GOTCHAS)}, not {gotcha!r}")
        if not (0 < for_s <= MAX_FOR_S):
            raise AckError(f"for_s must be more than 0 and at most {MAX_FOR_S:.0f} (30 days), not {for_s!r}")
        if len(note) > MAX_NOTE or any(ord(c) < 32 for c in note):
            raise AckError(f"note must be one line of at most {MAX_NOTE} characters")
        with self._lock:
            finding = self._findings.get(gotcha)
            if finding is None or finding.severity not in ("warning", "critical"):
                now_sev = finding.severity if finding is not None else "not judged yet"
                raise AckError(
                    f"{gotcha} is {now_sev}: only a warning or critical finding can be acknowledged"
                )
            now = self.clock()
            ack = Ack(gotcha, finding.severity, subject(finding), now, now + for_s, note)
            self._acks[gotcha] = ack
            self._ok_run[gotcha] = 0
            self._save()
        self.log.info(
            "finding acknowledged", gotcha=gotcha, severity=ack.severity, until=ack.until, note=note
        )
        return ack

    def clear(self, gotcha: str) -> bool:
        """Withdraw the gotcha's acknowledgement; False when there was none."""
        with self._lock:
            gone = self._acks.pop(gotcha, None)
            if gone is not None:
                self._save()
        if gone is not None:
            self.log.info("acknowledgement withdrawn", gotcha=gotcha)
        return gone is not None

    def observe(self, snapshot: Any) -> None:
        """Subscriber: remember the findings; end acknowledgements that expired or no longer cover theirs."""
        diag = getattr(snapshot, "diagnosis", None)
        if diag is None:
            return
        now = self.clock()
        ended = []
        with self._lock:
            self._findings = dict(diag.findings)
            for g, ack in list(self._acks.items()):
                f = diag.findings.get(g)
                sev = f.severity if f is not None else "unknown"
                if now < ack.until and sev in ("ok", "unknown"):
                    # Not judged, or ok: a restart's first samples are both before the episode shows again,
                    # so only OK_SAMPLES_TO_END ok samples in a row say the episode is over.
                    self._ok_run[g] = self._ok_run.get(g, 0) + (sev == "ok")
                    if self._ok_run[g] < OK_SAMPLES_TO_END:
                        continue
                elif covers(ack, f, now):
                    self._ok_run[g] = 0
                    continue
                del self._acks[g]
                self._ok_run.pop(g, None)
                ended.append((g, "expired" if now >= ack.until else f"now {sev}"))
            if ended:
                self._save()
        for g, why in ended:
            self.log.info("acknowledgement ended", gotcha=g, why=why)

    def _load(self) -> None:
        if self.path is None:
            return
        from spark_watchd.diagnose.journal import read_state

        doc = read_state(self.path) or {}
        for d in doc.get("acks") or ():
            try:
                ack = Ack.from_dict(d)
            except (KeyError, TypeError, ValueError) as exc:
                self.log.warning("acknowledgement skipped", path=str(self.path), error=str(exc))
                continue
            self._acks[ack.gotcha] = ack

    def _save(self) -> None:
        if self.path is None:
            return
        from spark_watchd.diagnose.journal import write_state_atomic

        try:
            write_state_atomic(self.path, {"acks": [a.to_dict() for a in self._acks.values()]})
        except OSError as exc:  # kept in memory: the daemon goes on
            self.log.warning("acknowledgements not saved", path=str(self.path), error=str(exc))
