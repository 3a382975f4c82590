"""One tick's collection: every source guarded and timed, the parts merged into one frozen Sample."""

from __future__ import annotations

import dataclasses
import re
import socket
import time
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.sample.model import Sample
from spark_watchd.snapshot import SourceStatus


def _field_parsers() -> dict[str, tuple[str, Any]]:
    """How each Sample field is built from a source's output, read off the Sample's own declaration.

    A tuple of readings ("items") parses each dict with its class's from_dict; a reading ("one")
    parses a dict; anything else is taken as it is. A field added to `Sample` reaches it from the
    source that returns its key with no list to update here.
    """
    hints = typing.get_type_hints(Sample)
    out: dict[str, tuple[str, Any]] = {}
    for f in dataclasses.fields(Sample):
        if f.name == "ts":
            continue
        tp = hints[f.name]
        args = typing.get_args(tp)
        if typing.get_origin(tp) is tuple and args and hasattr(args[0], "from_dict"):
            out[f.name] = ("items", args[0])
            continue
        cls = next((a for a in args if hasattr(a, "from_dict")), None)
        out[f.name] = ("one", cls) if cls is not None else ("plain", None)
    return out


FIELDS = _field_parsers()


def build_sample(ts: float, parts: Mapping[str, Any]) -> Sample:
    """Assemble a frozen Sample from the merged source outputs (dicts or model objects).

    Keys starting with `_` are for the sources after this one (`partial`), never for the Sample.
    """
    kw: dict[str, Any] = {}
    for key, (how, cls) in FIELDS.items():
        if key not in parts or parts[key] is None and how == "items":
            continue
        val = parts[key]
        if how == "items":
            val = tuple(cls.from_dict(v) if isinstance(v, Mapping) else v for v in val)
        elif how == "one" and isinstance(val, Mapping):
            val = cls.from_dict(val)
        kw[key] = val
    kw.setdefault("host", socket.gethostname())
    return Sample(ts=ts, **kw)


def stray_keys(out: Mapping[str, Any]) -> list[str]:
    """Keys of a source's output that no Sample field takes and that are not private (`_name`)."""
    return sorted(k for k in out if k not in FIELDS and not k.startswith("_"))


class Collector:
    """Collects a tuple of sources; a source that raises is marked down and the others go on."""

    def __init__(
        self,
        sources: Iterable[Any],
        clock: Callable[[], float] = time.time,
        log=None,
        expected_down: Iterable[str] = (),
    ):
        self.sources = tuple(sources)
        self.clock = clock
        self.log = log or get_logger("collector")
        self._errors: dict[str, int] = {}
        self._state: dict[str, str | None] = {}  # name -> last error (None when up); absent before first tick
        # Sources already reported missing at start-up: their first "down" is not news.
        self.expected_down: set[str] = set(expected_down)

    def collect(self) -> tuple[Sample, dict[str, SourceStatus]]:
        """Sample every source once; returns the Sample and each source's status."""
        ts = self.clock()
        parts, statuses = self.gather()
        return build_sample(ts, parts), statuses

    def gather(self, seed: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, SourceStatus]]:
        """Every source's output merged over `seed` (what each sees as `partial`), and each one's status."""
        parts: dict[str, Any] = dict(seed or {})
        statuses: dict[str, SourceStatus] = {}
        for src in self.sources:
            name = getattr(src, "name", type(src).__name__)
            t0 = time.perf_counter()
            error: str | None = None
            try:
                out = src.collect(parts)
                if out:
                    parts.update(out)
                    stray = stray_keys(out)
                    if stray:  # a field that would never reach the Sample: say so instead of reporting up
                        raise LookupError(
                            f"returned {', '.join(stray)}, which no Sample field takes "
                            "(add the field to sample/model.py, or name a private key with a leading _)"
                        )
            except Exception as exc:  # any failure is this source's alone
                error = str(exc) or type(exc).__name__
                self._errors[name] = self._errors.get(name, 0) + 1
            duration = time.perf_counter() - t0
            self._log_transition(name, error)
            statuses[name] = SourceStatus(name, error is None, duration, self._errors.get(name, 0), error)
        return parts, statuses

    def _log_transition(self, name: str, error: str | None) -> None:
        """Log once per state change: down (with why), recovered; never every tick."""
        first = name not in self._state
        prev = self._state.get(name)
        self._state[name] = error
        if error is not None and first and name in self.expected_down:
            self.log.debug(f"{name} down: {error}", source=name, error=error)
        elif error is not None and (first or prev is None):
            self.log.warning(f"{name} down: {error}", source=name, error=error)
        elif error is None and not first and prev is not None:
            self.log.info(f"{name} recovered", source=name)
        elif error is not None and prev is not None and _kind(prev) != _kind(error):
            self.log.warning(f"{name} still down: {error}", source=name, error=error)

    def close(self) -> None:
        """Close every source (stops their threads), never raising."""
        for src in self.sources:
            try:
                src.close()
            except Exception as exc:
                self.log.warning("source close failed", source=getattr(src, "name", "?"), error=str(exc))


def _kind(error: str) -> str:
    # Errors that differ only in numbers or asides ("(next retry in 9 s)", pids) are the same state.
    return re.sub(r"\([^)]*\)|\d+", "", error).strip()[:80]
