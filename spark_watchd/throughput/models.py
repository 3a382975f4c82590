"""The progress report a trainer posts to `POST /api/v1/progress`, validated strictly."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# The job name becomes a Prometheus label value and a ledger key: bounded and plain.
JOB_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@+/-]*$"
JOB_MAX_LEN = 128
_JOB_RX = re.compile(JOB_PATTERN)
_BAD_JOB_CHARS = re.compile(r"[^A-Za-z0-9_.:@+/-]+")
MAX_COUNT = (1 << 63) - 1
# Unix seconds between 2000-01-01 and 2100-01-01: catches milliseconds and "seconds since start".
TS_MIN = 946684800.0
TS_MAX = 4102444800.0


class ProgressReport(BaseModel):
    """Cumulative totals of one job at one instant."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    job: str = Field(min_length=1, max_length=JOB_MAX_LEN, pattern=JOB_PATTERN)
    step: int = Field(ge=0, le=MAX_COUNT)
    tokens: int | None = Field(None, ge=0, le=MAX_COUNT)
    samples: int | None = Field(None, ge=0, le=MAX_COUNT)
    ts: float | None = Field(None, allow_inf_nan=False)
    event: Literal["start", "end"] | None = None

    @field_validator("ts")
    @classmethod
    def _ts_is_unix_seconds(cls, v: float | None) -> float | None:
        if v is None:
            return v
        if v > TS_MAX:
            raise ValueError("ts must be Unix seconds; this looks like milliseconds or later than 2100")
        if v < TS_MIN:
            raise ValueError("ts must be Unix seconds since 1970 (got a value before 2000)")
        return float(v)


def is_valid_job(name: str) -> bool:
    """True if `name` is accepted as a job name."""
    return 0 < len(name) <= JOB_MAX_LEN and _JOB_RX.match(name) is not None


def sanitize_job(name: str) -> str:
    """Turn any string into an accepted job name (runs of odd characters become '-')."""
    cleaned = _BAD_JOB_CHARS.sub("-", str(name)).strip("-_.:@+/")[:JOB_MAX_LEN]
    return cleaned if cleaned and _JOB_RX.match(cleaned) else "job"


def describe_errors(err: ValidationError) -> list[dict[str, str]]:
    """Pydantic errors as [{"field", "reason"}], the input echoed only when short."""
    out = []
    for e in err.errors(include_url=False):
        field = ".".join(str(p) for p in e.get("loc", ())) or "(body)"
        reason = e.get("msg", "invalid")
        if e.get("type") == "extra_forbidden":
            reason = "unknown field (accepted: job, step, tokens, samples, ts, event)"
        inp = e.get("input")
        if e.get("type") != "missing" and isinstance(inp, (str, int, float, bool)) and len(repr(inp)) <= 40:
            reason = f"{reason} (got {inp!r})"
        out.append({"field": field, "reason": reason})
    return out
