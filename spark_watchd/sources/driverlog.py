"""Pure parsers of kernel log text into driver events: `journalctl -o json` output and single messages."""

from __future__ import annotations

import json
from collections.abc import Iterable

from spark_watchd.sample.driver import DriverEvent, kernel_line_kind

# A long previous boot can hold thousands of Xid lines (a looping fault): keep the latest of them.
MAX_EVENTS_PER_READ = 200
# journald caps a kernel message near 8 KiB (LINE_MAX); a JSON entry with its fields stays well under this.
MAX_LINE_CHARS = 64 * 1024


def message_text(value: object) -> str | None:
    """journald's MESSAGE: a string, or a list of byte values when the line was not valid UTF-8."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def event_from_message(ts: float, text: str, source: str = "journal") -> DriverEvent | None:
    """A DriverEvent when the kernel message is an Xid, NV_ERR_NO_MEMORY or PCIe AER fatal line, else None."""
    kind = kernel_line_kind(text)
    if kind is None:
        return None
    return DriverEvent(ts=ts, gpu=None, xid=kind[1], source=source, text=text.strip()[:500])


def parse_journal_json(lines: Iterable[str], limit: int = MAX_EVENTS_PER_READ) -> list[DriverEvent]:
    """Driver events in `journalctl -k -o json` output (one object per line); other and bad lines skipped."""
    out: list[DriverEvent] = []
    for line in lines:
        line = line.strip()
        # Cheap test first: a week's boot is mostly lines that name neither (a byte-list MESSAGE has "[").
        if not line.startswith("{") or ("NVRM" not in line and "Fatal" not in line and "[" not in line):
            continue
        try:
            obj = json.loads(line)
            ts = int(obj["__REALTIME_TIMESTAMP"]) / 1e6
        except (ValueError, KeyError, TypeError):
            continue
        text = message_text(obj.get("MESSAGE"))
        if text is None:
            continue
        ev = event_from_message(ts, text)
        if ev is not None:
            out.append(ev)
    return out[-limit:]


def last_entry_ts(lines: list[str]) -> float | None:
    """The `__REALTIME_TIMESTAMP` of the last well-formed entry among the last few lines, in seconds."""
    for line in reversed(lines[-8:]):
        try:
            obj = json.loads(line[:MAX_LINE_CHARS])
            us = obj["__REALTIME_TIMESTAMP"]
            if isinstance(us, str) and us.isdigit() and len(us) <= 20:
                return int(us) / 1e6
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
    return None


def journal_problem(returncode: int, stderr: str, events_seen: bool) -> str | None:
    """Why the previous boot's kernel log could not be read (None when it was), from journalctl's answer."""
    first = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "")
    if returncode != 0:
        return f"journalctl exited {returncode}: {first or 'no message'}"
    if not events_seen and "not seeing messages from other users and the system" in stderr:
        # Exit 0 with a hint: the user lacks the systemd-journal (or adm) group.
        return "kernel messages not readable: the service user needs group systemd-journal"
    return None
