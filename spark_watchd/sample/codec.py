"""JSON through orjson when it is installed (the `fast` extra), else the standard library: same values either way.

Replay spends most of its time decoding trace lines; orjson decodes a 2.4 kB GB10 sample ~2.5x faster.
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # optional: everything works without it, only slower
    orjson = None

_compact = json.JSONEncoder(separators=(",", ":"), default=str).encode


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
    """One-line JSON with `,` and `:` separators, str() for unknown types."""
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
