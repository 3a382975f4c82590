"""NVIDIA's fleet envelope for one look at the Spark (`once --format envelope`).

NVIDIA's answer for many Sparks is agentless: an orchestrator (Landscape, Ansible, Tanium) runs a tool over
SSH and ingests the one JSON document it prints. Every tool of NVIDIA's DGX Spark Enterprise Manageability
scripts prints the same envelope (their `common/output.py`, as documented in anakronox/spark-dash
`docs/fleet-updates.md`, section 5.4):

    {"ok": bool, "data": {...} | null,
     "errors": [{"code", "message", "detail", "hint", "severity": "error" | "warning"}],
     "meta": {"tool", "version", "collected_at_utc"}}

`ok: false` sets `data: null`; `errors[]` on a successful envelope carries the non-fatal warnings; exit 0 ok,
1 failed (see errors), 2 invalid arguments, 3 permission denied. Here a critical finding is a failed check
(its evidence in `detail`, its first advice as `hint`), a warning finding or a source that is down a warning.
Pure: the verb hands in what one tick produced.
"""

from __future__ import annotations

import time
from typing import Any

from spark_watchd import __version__

TOOL = "spark_watchd"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PERMISSION = 0, 1, 2, 3


def utc_stamp(ts: float) -> str:
    """'2026-09-05T07:33:15Z', as the envelope's collected_at_utc."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def error(code: str, message: str, *, severity: str = "error", detail: str = "", hint: str = "") -> dict:
    """One entry of `errors[]`."""
    return {"code": code, "message": message, "detail": detail, "hint": hint, "severity": severity}


def envelope(data: dict[str, Any] | None, errors: list[dict], collected_at: float) -> tuple[dict, int]:
    """(document, exit code): ok while no entry is an error; a failed envelope carries no data."""
    ok = not any(e["severity"] == "error" for e in errors)
    doc = {
        "ok": ok,
        "data": data if ok else None,
        "errors": errors,
        "meta": {"tool": TOOL, "version": __version__, "collected_at_utc": utc_stamp(collected_at)},
    }
    return doc, EXIT_OK if ok else EXIT_FAILED


def failure(
    code: str, message: str, exit_code: int, hint: str = "", now: float | None = None
) -> tuple[dict, int]:
    """The envelope of a run that could not look at all (bad config: 2, permission denied: 3)."""
    doc, _ = envelope(None, [error(code, message, hint=hint)], time.time() if now is None else now)
    return doc, exit_code


def from_tick(sample, memory, diagnosis, statuses) -> tuple[dict, int]:
    """The envelope of one tick: the sample's headline figures as data, findings and down sources as errors."""
    errors = []
    for gotcha, f in sorted(diagnosis.findings.items()):
        if f.severity not in ("warning", "critical"):
            continue
        evidence = "; ".join(f"{k}={v}" for k, v in f.evidence.items())
        errors.append(
            error(
                f"{gotcha}_{f.severity.upper()}",
                f"{gotcha}: {f.summary}",
                severity="error" if f.severity == "critical" else "warning",
                detail=evidence,
                hint=f.advice[0] if f.advice else "",
            )
        )
    for name, st in sorted(statuses.items()):
        if not st.up:
            errors.append(
                error(
                    "SOURCE_DOWN",
                    f"source {name} down",
                    severity="warning",
                    detail=st.error or "",
                    hint="see `spark-watchd preflight`; the other sources are read all the same",
                )
            )
    data = {
        "host": sample.host,
        "boot_id": sample.boot_id,
        "uptime_s": sample.uptime_s,
        "worst": diagnosis.worst(),
        "memory": None
        if memory is None
        else {
            "total_bytes": memory.total_bytes,
            "available_bytes": memory.available_bytes,
            "budget_bytes": memory.budget_bytes,
        },
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "temp_c": g.temp_c,
                "power_w": g.power_w,
                "util_pct": g.util_pct,
            }
            for g in sample.gpus
        ],
        "findings": {
            g: {"severity": f.severity, "summary": f.summary, "advice": list(f.advice)}
            for g, f in sorted(diagnosis.findings.items())
        },
        "events": [e.to_dict() for e in diagnosis.events],
        "sources": {n: {"up": s.up, "error": s.error} for n, s in sorted(statuses.items())},
    }
    return envelope(data, errors, sample.ts)
