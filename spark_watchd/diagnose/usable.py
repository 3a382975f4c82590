"""Usable memory: what an allocation can still get on GB10, and when it is nearly gone (docs/diagnosis.md,
"Usable memory nearly gone").

Usable = MemAvailable - CmaFree. MemAvailable counts free CMA pages, which only movable allocations may
use; the GPU driver's pinned pages are not movable, and on kernels whose GPU path hands pages back to a CMA
region CmaFree grows as pressure rises (0.13 GiB idle, 4 GiB at a 20 GB KV shape, 8.8 GiB at the kills),
inflating MemAvailable exactly when it matters. A kernel built without a CMA region (`CmaTotal: 0 kB`, as
7.0.0-1019-nvidia) has nothing to take off. Swap and HugePages add nothing: pinned pages cannot be swapped,
and a hugetlb pool is outside MemAvailable already.

`ThinSpell` follows one boot's thin spells: consecutive samples whose usable memory (or its 1 s minimum)
is under usable_critical_bytes. Usable memory is nearly gone once a spell has lasted usable_critical_samples and, within it, usable memory is still falling (usable_fall_bytes over usable_fall_window_s, or
usable_spell_fall_bytes since the spell began) or is at or under usable_gone_bytes in each of those samples.
As a spell begins a creep is also caught by its steps: usable memory down by usable_creep_step_bytes (but
less than a load's step, avail_fall_min_bytes) in each of the last usable_critical_samples intervals. A model load
that settles inside the thin zone arrives in one large step and is flat there, and a roomy pool dipping for
one second is one sample: neither is nearly gone.
"""

from __future__ import annotations

from collections import deque

GIB = 1024**3


def basis(cma_total_b: int | None) -> str:
    """What usable memory is on this boot's kernel, from what /proc/meminfo shows."""
    if cma_total_b is None:
        return "MemAvailable (no CMA lines)"
    if cma_total_b == 0:
        return "MemAvailable (CmaTotal 0: no CMA region on this kernel)"
    return f"MemAvailable - CmaFree (CMA region {cma_total_b / GIB:.1f} GiB)"


class ThinSpell:
    """One boot's thin spells of usable memory; `step` takes each sample's reading, oldest first."""

    __slots__ = ("n", "recent", "peak", "gone", "last")

    def __init__(self) -> None:
        self.last: deque = deque(maxlen=4)  # the last samples' usable memory, in a spell or not
        self.n = 0  # samples in the current spell (0: none)
        self.recent: deque = deque()  # (ts, usable, low) of the spell's samples within the fall window
        self.peak = 0  # the spell's highest sample
        self.gone = False

    def forget(self) -> None:
        self.last.clear()
        self._end()

    def _end(self) -> None:
        self.n = 0
        self.recent.clear()
        self.peak = 0
        self.gone = False

    def step(self, ts: float, usable: int, low: int, th) -> bool:
        """Take one sample (usable memory and its 1 s minimum); True while usable memory is nearly gone."""
        self.last.append(usable)
        if self.n == 0 and low > th.usable_critical_bytes or self.n and low > th.usable_critical_leave_bytes:
            self._end()
            return False
        self.n += 1
        self.peak = max(self.peak, usable) if self.n > 1 else usable
        rc = self.recent
        rc.append((ts, usable, low))
        while ts - rc[0][0] > th.usable_fall_window_s:
            rc.popleft()
        k = th.usable_critical_samples
        if self.n < k:
            self.gone = self._creep(th)
            return self.gone
        last = list(rc)[-k:]
        nothing = len(last) == k and all(lw <= th.usable_gone_bytes for _, _, lw in last)
        fall = max(u for _, u, _ in rc) - usable
        falling = fall >= th.usable_fall_bytes or self.peak - usable >= th.usable_spell_fall_bytes
        self.gone = nothing or falling or self._creep(th)
        return self.gone

    def _creep(self, th) -> bool:
        """Early in a spell: usable memory fell by a creep's step (not a load's) in each of the last
        usable_critical_samples intervals, so a creep is caught as it enters the spell, as the owners' gauge was."""
        k = th.usable_critical_samples
        if self.n > k + 1 or len(self.last) < k + 1:
            return False
        seq = list(self.last)[-(k + 1) :]
        lo, hi = th.usable_creep_step_bytes, th.avail_fall_min_bytes
        return all(lo <= a - b < hi for a, b in zip(seq, seq[1:], strict=False))
