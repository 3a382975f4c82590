"""Launch checks in the community's fixed line format: `G<n> <STATUS>: <message>`.

`checks` judges (pure), `gather` reads the host and runs the probe, `probe` runs inside the
interpreter under test. The report (`env-report.json`) and its verdict are built here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spark_watchd.sample.text import printable

STATUSES = ("PASS", "FAIL", "WARN", "SKIP", "INFO")
LINE_RE = re.compile(r"^G\d+ (PASS|FAIL|WARN|SKIP|INFO): \S.*$")
VERDICTS = ("ready", "ready-with-warnings", "blocked")


@dataclass(frozen=True)
class Check:
    """One line of preflight output."""

    gotcha: str
    status: str
    message: str
    # A SKIP of a check readiness needs (no torch for G1/G7, no GPU readings for G4): the line says SKIP,
    # as the community's contract has it, and the verdict still counts it as a warning.
    gap: bool = False

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check status {self.status!r}: expected one of {', '.join(STATUSES)}")

    @property
    def text(self) -> str:
        """The message folded onto one line (the format is one check per line), every control character
        shown as an escape: probe errors and argv come from other programs and users."""
        return printable(" ".join(str(self.message).split())) or "(no detail)"

    def line(self) -> str:
        """The fixed-format line."""
        return f"{self.gotcha} {self.status}: {self.text}"


def verdict(checks: Iterable[Check]) -> str:
    """blocked on any FAIL, ready-with-warnings on any WARN or any check readiness needs that could not
    run (a `gap`: no torch, no GPU readings), else ready. The verdict is separate from the lines."""
    checks = list(checks)
    statuses = {c.status for c in checks}
    if "FAIL" in statuses:
        return "blocked"
    if "WARN" in statuses or any(c.gap for c in checks):
        return "ready-with-warnings"
    return "ready"


def unchecked(checks: Iterable[Check]) -> list[str]:
    """The gotchas readiness needs that could not be checked here (their SKIP lines are gaps)."""
    return sorted({c.gotcha for c in checks if c.gap}, key=_gnum)


def _gnum(gotcha: str) -> int:
    return int(gotcha[1:]) if gotcha[1:].isdigit() else 999


def build_report(
    checks: list[Check], host: str, generated_at: str, extra: dict[str, Any] | None = None
) -> dict:
    """env-report.json: checks grouped per G-number (in order), verdict, host, generated_at."""
    grouped: dict[str, list[dict[str, str]]] = {}
    for c in sorted(checks, key=lambda c: _gnum(c.gotcha)):
        grouped.setdefault(c.gotcha, []).append({"status": c.status, "message": c.text})
    report = {"checks": grouped, "verdict": verdict(checks), "host": host, "generated_at": generated_at}
    report["unchecked"] = unchecked(checks)
    report.update(extra or {})
    return report
