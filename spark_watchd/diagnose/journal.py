"""Append-only event journal (JSON Lines, fsync per event) and the atomic state file."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.files import open_regular
from spark_watchd.sample.findings import Event


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_state_atomic(path: str | os.PathLike, state: Mapping[str, Any]) -> None:
    """Write JSON to path so a power loss leaves either the old or the new file: tmp, fsync, rename, fsync dir."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    data = dumps_strict(state, sort_keys=True, separators=(",", ":")).encode()
    try:  # a link or FIFO planted as the tmp file is removed, never written through
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = open_regular(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, p)
    _fsync_dir(p.parent)


def read_state(path: str | os.PathLike) -> dict[str, Any] | None:
    """The saved state, or None when missing or unreadable (a fresh start); StateFileError for a link or
    anything but a regular file (a FIFO hung the start)."""
    try:
        fd = open_regular(path)
        if fd is None:
            return None
        with open(fd, encoding="utf-8") as fh:
            obj = json.load(fh)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def read_events(path: str | os.PathLike) -> tuple[list[Event], int]:
    """Events in the journal and how many lines were skipped (a torn last line after a crash)."""
    events: list[Event] = []
    bad = 0
    fd = open_regular(path)
    if fd is None:
        return events, 0
    with open(fd, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                events.append(Event.from_dict(obj))
            except (ValueError, KeyError, TypeError):
                bad += 1
    return events, bad


class EventJournal:
    """Appends one event per line and fsyncs it, so an event reported is an event kept."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self._fh = open(fd, "ab")  # noqa: SIM115
        # A crash mid-write leaves a torn last line: start ours on a fresh line (readers skip the fragment).
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            self._fh.write(b"\n")

    def append(self, event: Event) -> None:
        """Write and fsync one event."""
        if self._fh is None:
            raise ValueError("journal is closed")
        self._fh.write(dumps_strict(event.to_dict(), separators=(",", ":"), default=str).encode() + b"\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
