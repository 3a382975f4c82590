"""Descriptor and thread accounting for leak tests: what is open, by what it points at, not just how many."""

from __future__ import annotations

import os
import threading
from collections import Counter

from tests.support.poll import wait_until

# The capture ring keeps at most one trace file open, named by the sample's time: counted as one kind.
CAPTURE = "capture file"


def open_fds(pid: int | str = "self") -> Counter[str]:
    """Open descriptors of a process counted by target: 'socket', 'pipe:[..]', a path, CAPTURE."""
    base = f"/proc/{pid}/fd"
    out: Counter[str] = Counter()
    for fd in os.listdir(base):
        try:
            target = os.readlink(f"{base}/{fd}")
        except OSError:  # closed between listdir and readlink (listdir's own descriptor is one)
            continue
        if target.startswith("socket:"):
            target = "socket"
        elif os.path.basename(target).startswith("capture-") and target.endswith(".jsonl"):
            target = CAPTURE
        out[target] += 1
    return out


def thread_count(pid: int | str = "self") -> int:
    """OS threads of a process (Python's and native ones), from /proc."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads line")


class Baseline:
    """What this process holds at a quiet moment; leaks() lists what is held beyond it."""

    def __init__(self) -> None:
        self.fds = open_fds()
        self.threads = thread_count()
        self.names = Counter(t.name for t in threading.enumerate())
        self.idents = {t.ident for t in threading.enumerate()}

    def leaks(self) -> list[str]:
        """Descriptors and threads held now beyond the baseline (one open capture file is not a leak)."""
        fds = open_fds()
        extra = fds - self.fds
        if fds[CAPTURE] <= 1:
            extra.pop(CAPTURE, None)
        out = [f"{n} x fd {target}" for target, n in sorted(extra.items())]
        # A Python thread started since the baseline and still alive is held, whatever else ended meanwhile
        # (an earlier test's thread finishing here once hid a leak from the count); native ones by the count.
        new = Counter(t.name for t in threading.enumerate() if t.ident not in self.idents)
        if new:
            out.append(f"{sum(new.values())} thread(s) started and still alive: {dict(new)}")
        elif thread_count() > self.threads:
            names = Counter(t.name for t in threading.enumerate()) - self.names
            out.append(f"{thread_count() - self.threads} thread(s) more: {dict(names)}")
        return out

    def assert_no_leak(self, timeout: float = 5.0) -> None:
        """Wait for closing sockets and finishing threads to go; fail listing whatever stays past timeout."""
        try:
            wait_until(lambda: not self.leaks(), timeout, what="descriptors and threads back to the baseline")
        except AssertionError:
            raise AssertionError(f"leaked: {self.leaks()}") from None


def quiet_sockets(count: int, timeout: float = 5.0) -> None:
    """Wait until at most `count` sockets are open (the finished HTTP exchanges have closed)."""
    wait_until(lambda: open_fds()["socket"] <= count, timeout, what=f"at most {count} open sockets")
