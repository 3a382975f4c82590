"""glibc malloc for the daemon: one arena shared by every thread (mallopt M_ARENA_MAX, as MALLOC_ARENA_MAX).

glibc gives each thread that allocates an arena of its own (up to eight per core), and each keeps a partly
used heap resident. The daemon's dozen threads (scheduler, HTTP accept/writer/workers, the source workers)
allocate little and almost always under the GIL, so one arena costs no contention and saves the per-thread
heaps (about 0.3 MiB resident after start with the default config, measured on x86_64; README "Performance").
MALLOC_ARENA_MAX or a glibc.malloc.arena_max tunable in the environment wins; without glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8  # <malloc.h>


def limit_arenas(arenas: int = 1, environ: dict[str, str] | None = None) -> bool:
    """Cap glibc's malloc arenas before the daemon starts its threads; True when applied."""
    env = os.environ if environ is None else environ
    if "MALLOC_ARENA_MAX" in env or "arena_max" in env.get("GLIBC_TUNABLES", ""):
        return False  # the user's setting (glibc read it at start)
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (or no mallopt): nothing to cap
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
