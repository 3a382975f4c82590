"""A peer's status document, decoded strictly and reduced to what the pair view reads, or refused with why.

A peer is another machine on the desk's network: whatever it answers must not reach this daemon's
pages, history or log as it came. Refused, with the reason naming the bad field, so that only that
peer shows down: non-finite numbers (NaN, Infinity, 1e999: not JSON, and they would leave through our
own JSON), nesting deeper than MAX_DEPTH (200,000 `[` would be a RecursionError in any recursive
reader), a field of the wrong type, a number out of its physical range, a severity outside SEVERITIES.
What is kept is a fresh document of bounded numbers, enumerated or clipped strings and bounded lists:
its size does not depend on what the peer sent (kept 720 times in the pair view's history).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from spark_watchd.sample.model import SEVERITIES

# A status document nests 5 deep (extras.link.ports[].x); 64 leaves room and refuses the bracket bombs.
MAX_DEPTH = 64
MAX_GPUS = 64
MAX_ROWS = 256  # throughput rows read (one per training job)
MAX_FINDINGS = 32
MAX_TEXT = 300  # a finding's or the link's sentence as shown; the page and `status` print no more
MAX_NAME = 64

# Physical bounds: a value outside is a broken or hostile peer, not a reading.
_RANGES = {
    "ts": (0.0, 1e11),
    "util_pct": (0.0, 100.0),
    "temp_c": (-100.0, 300.0),
    "sm_clock_mhz": (0.0, 100_000.0),
    "budget_bytes": (-(2.0**63), 2.0**63),
    "tokens_per_second": (0.0, 1e12),
}
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string (unrolled: linear on a 4 MB one)
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_OPENERS = bytes.maketrans(b"{}", b"[]")


class PeerError(Exception):
    """A peer read failed: refused, timed out, TLS, auth, too big, not a status document."""


def nesting_depth(body: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not count)."""
    brackets = _STRING.sub(b"", body).translate(_OPENERS, _NOT_BRACKETS)
    return max(accumulate(1 if c == 0x5B else -1 for c in brackets), default=0)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):  # 1e999 decodes to inf
        raise ValueError(f"non-finite number {text[:20]}")
    return v


def decode(body: bytes) -> Any:
    """The JSON value of a peer's answer; PeerError when it is not strict, bounded JSON."""
    if nesting_depth(body) > MAX_DEPTH:
        raise PeerError(f"not a spark-watchd status document: JSON nested deeper than {MAX_DEPTH}")
    try:
        return json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:  # cannot happen past the depth check; kept so that nothing escapes
        raise PeerError(f"not a spark-watchd status document: JSON nested deeper than {MAX_DEPTH}") from None
    except ValueError as exc:
        why = str(exc)
        raise PeerError(why[:120] if why.startswith("non-finite") else "not JSON") from None


class _Bad(Exception):
    """One field of the document is wrong; the message names it."""


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _number(v: Any, key: str, where: str) -> float | int | None:
    if v is None:
        return None
    if type(v) not in (int, float):  # bool is not a number here
        raise _Bad(f"{where}: expected a number, got {_kind(v)}")
    lo, hi = _RANGES[key]
    if not lo <= v <= hi:
        raise _Bad(f"{where}: {str(v)[:24]} out of range {lo:g}..{hi:g}")
    return v


def _text(v: Any, where: str, limit: int = MAX_TEXT) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise _Bad(f"{where}: expected a string, got {_kind(v)}")
    return v if len(v) <= limit else v[: limit - 1] + "…"


def _severity(v: Any, where: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or v not in SEVERITIES:
        shown = repr(v[:20]) + ("…" if len(v) > 20 else "") if isinstance(v, str) else _kind(v)
        raise _Bad(f"{where}: {shown} is not one of {', '.join(SEVERITIES)}")
    return v


def _object(v: Any, where: str) -> Mapping[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _Bad(f"{where}: expected an object, got {_kind(v)}")
    return v


def _rows(v: Any, where: str, limit: int) -> list[Mapping[str, Any]]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise _Bad(f"{where}: expected a list, got {_kind(v)}")
    if len(v) > limit:
        raise _Bad(f"{where}: {len(v)} entries, at most {limit}")
    return [_object(x, f"{where}[{i}]") for i, x in enumerate(v)]


def _reduce(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise _Bad(f"expected an object, got {_kind(doc)}")
    gpus = [
        {k: _number(g.get(k), k, f"gpus[{i}].{k}") for k in ("util_pct", "temp_c", "sm_clock_mhz")}
        for i, g in enumerate(_rows(doc.get("gpus"), "gpus", MAX_GPUS))
    ]
    throughput = [
        {
            "tokens_per_second": _number(
                t.get("tokens_per_second"), "tokens_per_second", f"throughput[{i}].tokens_per_second"
            )
        }
        for i, t in enumerate(_rows(doc.get("throughput"), "throughput", MAX_ROWS))
    ]
    findings_in = _object(doc.get("findings"), "findings")
    if len(findings_in) > MAX_FINDINGS:
        raise _Bad(f"findings: {len(findings_in)} entries, at most {MAX_FINDINGS}")
    findings = {}
    for g, f in findings_in.items():
        if len(g) > 16:
            raise _Bad(f"findings: key {g[:20]!r}… longer than 16 characters")
        f = _object(f, f"findings.{g}")
        findings[g] = {
            "severity": _severity(f.get("severity"), f"findings.{g}.severity"),
            "summary": _text(f.get("summary"), f"findings.{g}.summary"),
        }
    link = _object(_object(doc.get("extras"), "extras").get("link"), "extras.link")
    fresh = doc.get("fresh")
    if fresh is not None and not isinstance(fresh, bool):
        raise _Bad(f"fresh: expected true or false, got {_kind(fresh)}")
    budget = _object(doc.get("memory"), "memory").get("budget_bytes")
    return {
        "ts": _number(doc.get("ts"), "ts", "ts"),
        "host": _text(doc.get("host"), "host", MAX_NAME),
        "fresh": fresh,
        "worst": _severity(doc.get("worst"), "worst"),
        "gpus": gpus,
        "memory": {"budget_bytes": _number(budget, "budget_bytes", "memory.budget_bytes")},
        "throughput": throughput,
        "findings": findings,
        "extras": {
            "link": {
                "problem": _text(link.get("problem"), "extras.link.problem", 16),
                "summary": _text(link.get("summary"), "extras.link.summary"),
            }
        }
        if link
        else {},
    }


def reduce_status(doc: Any) -> dict[str, Any]:
    """The pair view's part of a status document (ours or a peer's), bounded; PeerError naming a bad field."""
    try:
        return _reduce(doc)
    except _Bad as exc:
        raise PeerError(f"not a spark-watchd status document: {exc}") from None


def peer_status(body: bytes) -> dict[str, Any]:
    """decode() then reduce_status(): what the pair view keeps of one peer's answer."""
    return reduce_status(decode(body))
