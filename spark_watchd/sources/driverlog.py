"""Pure readers of the kernel log (`journalctl -k -o json`): which lines the kernel spoke, and what they say.

A journal line counts only with kernel provenance (`trusted()`): `_TRANSPORT=kernel` (journald sets it; no
client can) with facility 0 and the identifier `kernel`, so a user space write to /dev/kmsg (facility user,
its own identifier) never counts. Its MESSAGE then goes through each kernel-line parser in turn.

Adding a kind of kernel line (the OOM killer's report, say): write a pure parser
`parse(ts: float, text: str, ctx: dict) -> record | None` (`ctx` is one dict per feed, kept between lines,
for a report that spans several entries), and add `KernelLineKind("<trace-v1 key>", parse)` to
KERNEL_LINE_KINDS. `read_journal` hands back `{key: [records]}`; the driver-events source returns each key
from collect() (add the key to sample/model.py as a Sample field). Parsers see only trusted, length-capped
lines, must never raise (a raise is counted as a rejected line), and should test a cheap substring first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sample.driverlines import parse_kernel_line
from spark_watchd.sample.kills import kernel_oom_line

# A long previous boot can hold thousands of Xid lines (a looping fault): keep the latest of them.
MAX_EVENTS_PER_READ = 200
# journald caps a kernel message near 8 KiB (LINE_MAX); a JSON entry with its fields stays well under this.
MAX_LINE_CHARS = 64 * 1024
MAX_TEXT_CHARS = 500
# __REALTIME_TIMESTAMP is microseconds since the epoch: 16 digits today, 20 at most in 64 bits.
_MAX_TS_DIGITS = 20
# Identical faults (kind, code, PCI address) within this are one event with a count (a storm).
FOLD_S = 60.0
_FOLD_KEYS_MAX = 256


class KernelLineKind(NamedTuple):
    """A kind of kernel line: the trace-v1 key its records go to and its pure parser."""

    key: str
    parse: Callable[[float, str, dict], Any]


def driver_event(ts: float, text: str, ctx: dict) -> DriverEvent | None:
    """A DriverEvent for an Xid, GPU-lost, NV_ERR_NO_MEMORY or PCIe AER fatal line, else None."""
    if "NVRM" not in text and "Fatal" not in text:
        return None
    k = parse_kernel_line(text, ctx, ts)
    if k is None:
        return None
    return DriverEvent(
        ts=ts, gpu=None, xid=k.xid, source="journal", text=text.strip()[:MAX_TEXT_CHARS], pci=k.pci
    )


KERNEL_LINE_KINDS: tuple[KernelLineKind, ...] = (
    KernelLineKind("driver_events", driver_event),
    KernelLineKind("oom_kills", kernel_oom_line),  # the OOM killer's report: who it killed (sample/kills.py)
)


def message_text(value: object) -> str | None:
    """journald's MESSAGE: a string, or a list of byte values when the line was not valid UTF-8."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def trusted(obj: dict) -> bool:
    """Whether a journal entry is the kernel's own message (not a user space write to /dev/kmsg)."""
    return (
        obj.get("_TRANSPORT") == "kernel"
        and obj.get("SYSLOG_FACILITY", "0") == "0"
        and obj.get("SYSLOG_IDENTIFIER", "kernel") == "kernel"
    )


def entry_ts(obj: dict) -> float | None:
    """__REALTIME_TIMESTAMP in seconds, or None when it is not a plain microsecond count."""
    us = obj.get("__REALTIME_TIMESTAMP")
    if not isinstance(us, str) or not us.isdigit() or len(us) > _MAX_TS_DIGITS:
        return None
    return int(us) / 1e6


@dataclass
class JournalRead:
    """What a batch of journal lines held: records per trace key, and how many lines were rejected."""

    records: dict[str, list] = field(default_factory=dict)
    rejected: int = 0
    untrusted: int = 0  # driver text from outside the kernel (counted apart: it is not a bad line)


def _relevant(line: str) -> bool:
    # Cheap test first: a week's boot is mostly lines that name neither (a byte-list MESSAGE has "[").
    return (
        "NVRM" in line
        or "Fatal" in line
        or "[" in line
        or "Out of memory" in line
        or "oom-kill:" in line
        or "cgroup out of memory" in line
    )


def journal_objects(
    lines: Iterable[str], out: JournalRead, relevant: Callable[[str], bool] | None = None
) -> Iterator[dict]:
    """The entries of `journalctl -o json` output (one object per line): blank lines skipped, an overlong,
    non-object or malformed line counted in out.rejected; a line relevant() says no to is skipped unparsed."""
    for line in lines:
        if len(line) > MAX_LINE_CHARS:
            out.rejected += 1
            continue
        line = line.strip()
        if not line:
            continue
        if not line.startswith("{"):
            out.rejected += 1
            continue
        if relevant is not None and not relevant(line):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            out.rejected += 1
            continue
        if not isinstance(obj, dict):
            out.rejected += 1
            continue
        yield obj


def read_journal(
    lines: Iterable[str],
    kinds: tuple[KernelLineKind, ...] = KERNEL_LINE_KINDS,
    ctx: dict | None = None,
    *,
    relevant: Callable[[str], bool] = _relevant,
) -> JournalRead:
    """Records in `journalctl -k -o json` output (one object per line); bad lines skipped and counted."""
    out = JournalRead({k.key: [] for k in kinds})
    ctx = {} if ctx is None else ctx
    for obj in journal_objects(lines, out, relevant):
        ts, text = entry_ts(obj), message_text(obj.get("MESSAGE"))
        if ts is None or text is None:
            out.rejected += 1
            continue
        if not trusted(obj):
            out.untrusted += "NVRM" in text
            continue
        for kind in kinds:
            try:
                rec = kind.parse(ts, text, ctx)
            except Exception:  # a parser's bug costs one line, never the feed
                out.rejected += 1
                continue
            if rec is not None:
                out.records[kind.key].append(rec)
    return out


def parse_journal_json(lines: Iterable[str], limit: int = MAX_EVENTS_PER_READ) -> list[DriverEvent]:
    """Driver events in a batch of journal lines (a previous boot): storms folded, the latest `limit` kept."""
    return fold_all(read_journal(lines).records["driver_events"])[-limit:]


def fold_all(events: list[DriverEvent], window_s: float = FOLD_S) -> list[DriverEvent]:
    """A batch with each storm folded: identical faults within window_s of the first are one event, its
    count the lines, its time the last line's (the fault was still going on then), its text the first's."""
    out: list[DriverEvent] = []
    open_: dict[tuple, tuple[int, float]] = {}  # key -> (index in out, the window's first line time)
    for ev in events:
        key = fold_key(ev)
        got = open_.get(key)
        if got is not None and 0 <= ev.ts - got[1] <= window_s:
            i = got[0]
            out[i] = replace(out[i], ts=max(out[i].ts, ev.ts), count=out[i].count + ev.count)
            continue
        open_[key] = (len(out), ev.ts)
        out.append(ev)
    return sorted(out, key=lambda e: e.ts)


def fold_key(ev: DriverEvent) -> tuple:
    return (ev.xid, ev.pci, ev.gpu, "xid" if ev.xid is not None else ev.text[:40])


class StormFolder:
    """Identical faults within FOLD_S of the first are one event with a count: at most two per window.

    `add(ev)` returns the event to record now (the first of its kind in a window) or None (folded; the
    caller may `absorb` it into that first event while it is still queued); `flush(now)` returns one event
    per window that has ended with lines folded and not absorbed (now None: every window), `count` the
    lines it stands for. Keyed on (code, PCI address, GPU): bounded at _FOLD_KEYS_MAX keys. Pure: the clock is
    the lines' own time and `now`.
    """

    def __init__(self, window_s: float = FOLD_S):
        self.window_s = window_s
        # key -> (start, last, n, folded: a line was folded in this window, absorbed or not: log it once)
        self._open: dict[tuple, tuple[float, DriverEvent | None, int, bool]] = {}
        self._pending: list[DriverEvent] = []  # summaries of windows a new line closed
        self.folding_started = False

    def add(self, ev: DriverEvent, at: float | None = None) -> DriverEvent | None:
        """`at`: when the line arrived (the live feed's monotonic clock); default the line's own time."""
        key = fold_key(ev)
        at = ev.ts if at is None else at
        got = self._open.get(key)
        self.folding_started = False
        if got is not None and 0 <= at - got[0] <= self.window_s:
            self.folding_started = not got[3]  # the first line folded: a storm begins (log it once)
            self._open[key] = (got[0], ev, got[2] + ev.count, True)
            return None
        if got is not None and got[1] is not None:
            self._pending.append(self._summary(got))
        if len(self._open) >= _FOLD_KEYS_MAX and key not in self._open:
            self._open.pop(next(iter(self._open)))
        self._open[key] = (at, None, 0, False)
        return ev

    def absorb(self, ev: DriverEvent) -> None:
        """The lines just folded for ev's key went into an event not yet handed over: nothing left to flush."""
        key = fold_key(ev)
        if (got := self._open.get(key)) is not None:
            self._open[key] = (got[0], None, 0, got[3])  # still folding: the storm was logged

    @staticmethod
    def _summary(got: tuple[float, DriverEvent | None, int, bool]) -> DriverEvent:
        _, last, n, _ = got
        assert last is not None
        return replace(last, count=n)

    def flush(self, now: float | None) -> list[DriverEvent]:
        out, self._pending = self._pending, []
        for key, got in list(self._open.items()):
            if now is None or now - got[0] > self.window_s:
                if got[1] is not None:
                    out.append(self._summary(got))
                del self._open[key]
        return out


def last_entry_ts(lines: list[str]) -> float | None:
    """The `__REALTIME_TIMESTAMP` of the last well-formed entry among the last few lines, in seconds."""
    for line in reversed(lines[-8:]):
        if len(line) > MAX_LINE_CHARS:
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and (ts := entry_ts(obj)) is not None:
            return ts
    return None


def no_previous_boot(returncode: int, stderr: str) -> bool:
    """journalctl -b -1 on a journal that holds one boot: "Data from the specified boot (-1) is not
    available: No such boot ID in journal". A first boot (or a volatile journal) is normal, not a fault."""
    return returncode != 0 and (
        "No such boot ID" in stderr or "specified boot (-1) is not available" in stderr
    )


def journal_problem(returncode: int, stderr: str, events_seen: bool) -> str | None:
    """Why the previous boot's kernel log could not be read (None when it was), from journalctl's answer."""
    first = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "")
    if returncode != 0:
        return f"journalctl exited {returncode}: {first or 'no message'}"
    if not events_seen and "not seeing messages from other users and the system" in stderr:
        # Exit 0 with a hint: the user lacks the systemd-journal (or adm) group.
        return "kernel messages not readable: the service user needs group systemd-journal"
    return None
