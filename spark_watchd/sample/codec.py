"""JSON through orjson when it is installed (the `fast` extra), else the standard library: same values either way.

Replay spends most of its time decoding trace lines; orjson decodes a 2.4 kB GB10 sample ~2.5x faster.
Everything the daemon writes is strict JSON (RFC 8259 has no NaN or Infinity): a non-finite float is
written as null, as orjson does (`dumps_strict`, and the standard-library paths of the dumps below).
"""

from __future__ import annotations

import json
import math
from typing import Any

try:
    import orjson
except ImportError:  # optional: everything works without it, only slower
    orjson = None

_NOT_COMPLIANT = "not JSON compliant"  # json's message for NaN or +-inf with allow_nan=False


def finite(obj: Any) -> Any:
    """obj with every NaN or +-inf float replaced by None; lists, tuples and dicts copied, the rest as is."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps_strict(obj: Any, **kw: Any) -> str:
    """json.dumps(obj, **kw) that never writes NaN, Infinity or -Infinity: null in their place.

    The common document has none and is encoded once at the C encoder's speed; only one that has is
    walked and encoded again."""
    kw["allow_nan"] = False
    try:
        return json.dumps(obj, **kw)
    except ValueError as exc:
        if _NOT_COMPLIANT not in str(exc):
            raise
    return json.dumps(finite(obj), **kw)


def _compact(obj: Any) -> str:
    return dumps_strict(obj, separators=(",", ":"), default=str)


def loads(text: str) -> Any:
    """json.loads; anything orjson refuses (NaN, integers past 64 bits, bad input) goes to the standard library,
    so what is accepted and the error message for what is not stay those of `json`."""
    if orjson is not None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def dumps_compact(obj: Any) -> str:
    """One-line strict JSON with `,` and `:` separators, str() for unknown types (NaN, +-inf: null)."""
    if orjson is not None:
        try:
            return orjson.dumps(obj, default=str).decode()
        except TypeError:  # integers past 64 bits, non-str keys: the standard library takes them
            pass
    return _compact(obj)


def dumps_line(obj: Any) -> bytes:
    """dumps_compact(obj) and a newline, UTF-8 encoded: a jsonl line for a binary stream, the same bytes as
    the text written to a UTF-8 text stream."""
    if orjson is not None:
        try:
            return orjson.dumps(obj, default=str, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # as in dumps_compact
            pass
    return (_compact(obj) + "\n").encode()
