"""G6's per-process levels: what each process held over eviction_window_s, to judge a loss against.

One `Level` per sample per process (at short intervals, per few seconds: see `LEVELS`), oldest first in a
deque that `G6Tracker._evictions` appends to and trims; a `Reference` is the level a process is judged
against in one pressure episode.
"""

from __future__ import annotations

from typing import NamedTuple


class Level(NamedTuple):
    """One process's level at one sample (or, at short intervals, over a few seconds), kept over eviction_window_s."""

    ts: float  # the (first) sample's time
    rss: int  # the lowest RSS of the span
    gpu: int  # NVML memory, the lowest of the span (0 when not reported)
    held: int | None  # the RSS level held for eviction_level_hold_s up to ts (the lowest over that span)
    avail: int | None  # MemAvailable at the sample that held that level


# A process keeps at most this many levels (+1) over eviction_window_s: a sample closer than window / LEVELS
# (10 s at the default 600 s) to the latest level folds into it, so `--interval 1` keeps 60 levels a
# process instead of 600 (50 server processes for an hour). At 30-60 s sampling nothing folds. What a
# fold changes errs towards no eviction: the lowest RSS of a span counts, so a held level is the lowest
# over up to window / LEVELS longer than eviction_level_hold_s, and a reference dates from its span's start.
LEVELS = 60


class Reference:
    """The level a process is judged against in a pressure episode (at most one eviction per episode)."""

    __slots__ = ("level", "ts", "gpu", "avail", "fired")

    def __init__(self, level: int, ts: float, gpu: int, avail: int | None):
        self.level, self.ts, self.gpu, self.avail, self.fired = level, ts, gpu, avail, False


def window_reference(hist) -> Reference | None:
    """The highest held level in the window (the latest such) as a reference, or None."""
    best = None
    for e in hist:
        h = e.held
        if h is not None and (best is None or h >= best.held):
            best = e
    return None if best is None else Reference(best.held, best.ts, best.gpu, best.avail)


def folded(e: Level, rss: int, gpu: int, held: int | None, avail: int | None) -> Level:
    """A level with one more sample folded in: its lowest RSS and GPU memory, its highest held level."""
    if held is not None and (e.held is None or held >= e.held):
        e_held, e_avail = held, avail
    else:
        e_held, e_avail = e.held, e.avail
    return tuple.__new__(Level, (e.ts, min(e.rss, rss), min(e.gpu, gpu), e_held, e_avail))
