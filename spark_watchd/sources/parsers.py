"""Pure parsers for /proc text (meminfo, pressure, vmstat, uptime, boot_id) and a reader under a root.

Parsers take the file's text and return plain data, or raise ValueError naming
the line that is wrong; they never touch the filesystem. `read_proc` is the one
place that does, under an injectable root (like node_exporter --path.procfs).
"""

from __future__ import annotations

import errno
import os
import re
import sys

from spark_watchd.sources.base import SourceUnavailable

_MEMINFO_LINE = re.compile(r"^([A-Za-z0-9_()]+):\s+(\d{1,20})(?:\s+kB)?\s*$")
_PSI_FIELD = re.compile(r"^(avg10|avg60|avg300|total)=(\d{1,20}(?:\.\d{1,6})?)$")
# The kernel prints these as unsigned 64-bit (or signed, for a few vmstat gauges): a longer number is a
# broken or hostile file, and one 400-digit value once made every scrape fail converting it to a float.
U64_MAX = 2**64 - 1
I64_MIN = -(2**63)
_MAX_DIGITS = 20
_BOOT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo as {key: int}, values exactly as the file gives them (kB; HugePages_* are counts)."""
    out: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _MEMINFO_LINE.match(line)
        if not m:
            raise ValueError(f"meminfo line {lineno}: expected 'Key: value [kB]', got {line[:60]!r}")
        value = int(m.group(2))
        if value > U64_MAX:
            raise ValueError(f"meminfo line {lineno}: {m.group(1)} {m.group(2)} is beyond 64 bits")
        out[sys.intern(m.group(1))] = value  # one copy of each key for every sample held (see parse_vmstat)
    if "MemTotal" not in out:
        raise ValueError("meminfo: no MemTotal line")
    return out


def parse_psi(text: str) -> dict[str, dict[str, float]]:
    """/proc/pressure/* as {"some": {avg10, avg60, avg300, total}, "full": {...}}; total in microseconds."""
    out: dict[str, dict[str, float]] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        kind = parts[0]
        if kind not in ("some", "full"):
            raise ValueError(f"pressure line {lineno}: expected 'some' or 'full', got {parts[0][:20]!r}")
        fields: dict[str, float] = {}
        for part in parts[1:]:
            m = _PSI_FIELD.match(part)
            if not m:
                raise ValueError(f"pressure line {lineno}: bad field {part[:40]!r}")
            key, value = m.group(1), m.group(2)
            if key == "total":
                if "." in value or int(value) > U64_MAX:
                    raise ValueError(f"pressure line {lineno}: total={value[:30]} is not a 64-bit count")
                fields[key] = int(value)
            else:
                fields[key] = float(value)
                if fields[key] > 100.0:  # a share of wall time: over 100 % cannot happen
                    raise ValueError(f"pressure line {lineno}: {key}={value} is over 100")
        missing = {"avg10", "avg60", "avg300", "total"} - fields.keys()
        if missing:
            raise ValueError(f"pressure line {lineno}: missing {', '.join(sorted(missing))}")
        out[kind] = fields
    if "some" not in out:
        raise ValueError("pressure: no 'some' line")
    return out


def parse_vmstat(text: str) -> dict[str, int]:
    """/proc/vmstat as {counter: int} (pgmajfault, pswpin, pswpout, oom_kill, ...)."""
    out: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit() or not parts[1].isascii():
            raise ValueError(f"vmstat line {lineno}: expected 'name value', got {line[:60]!r}")
        if len(parts[1].lstrip("-")) > _MAX_DIGITS or not I64_MIN <= (value := int(parts[1])) <= U64_MAX:
            raise ValueError(f"vmstat line {lineno}: {parts[0][:40]} {parts[1][:30]}... is beyond 64 bits")
        # Interned: the ~190 names are the same every tick, and the capture ring keeps 30 whole samples (at
        # --interval 1 their own copies of the names took ~350 KiB); interned strings die with their last user.
        out[sys.intern(parts[0])] = value
    if not out:
        raise ValueError("vmstat: empty")
    return out


def parse_uptime(text: str) -> float:
    """First field of /proc/uptime: seconds since boot."""
    parts = text.split()
    try:
        value = float(parts[0])
    except (IndexError, ValueError):
        raise ValueError(f"uptime: expected 'seconds idle_seconds', got {text[:60]!r}") from None
    if not 0 <= value < 1e12:  # also refuses nan and inf, which float() accepts
        raise ValueError(f"uptime: impossible value {parts[0][:30]}")
    return value


def parse_boot_id(text: str) -> str:
    """/proc/sys/kernel/random/boot_id: a UUID, new at every boot."""
    value = text.strip()
    if not _BOOT_ID.match(value):
        raise ValueError(f"boot_id: not a UUID: {value[:60]!r}")
    return value


def read_proc(root: str, rel: str) -> str:
    """Text of ROOT/REL; SourceUnavailable naming the path when it cannot be read."""
    path = os.path.join(root, rel)
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError as exc:
        raise SourceUnavailable(f"cannot read {path}: {exc.strerror or exc}") from None


def read_optional(root: str, rel: str) -> str | None:
    """Text of ROOT/REL, or None when the kernel does not provide it (missing, or EOPNOTSUPP)."""
    path = os.path.join(root, rel)
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        # PSI compiled in but disabled (psi=0) answers EOPNOTSUPP on read: not supported, not broken.
        if exc.errno == errno.EOPNOTSUPP:
            return None
        raise SourceUnavailable(f"cannot read {path}: {exc.strerror or exc}") from None


def parsed(parser, text: str, path: str):
    """Run a parser; a ValueError becomes SourceUnavailable naming the file."""
    try:
        return parser(text)
    except ValueError as exc:
        raise SourceUnavailable(f"{path}: {exc}") from None
