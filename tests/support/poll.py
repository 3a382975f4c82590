"""Waiting without fixed sleeps: poll a condition until it holds or a deadline passes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.01, what: str = "condition"
) -> T:
    """Return the first truthy value of predicate(); fail naming `what` once `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last value {value!r})")
        time.sleep(interval)
