"""Every path into a decoded JSON document, for the trace fuzzers (tests and bench/fuzz.py) to mutate."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def json_paths(obj: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """The document's own path (), then each key or index path below it, depth first."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from json_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from json_paths(v, (*prefix, i))
