"""One glibc malloc arena for the daemon's threads (spark_watchd.service.malloc), in real processes."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import textwrap

import pytest

from spark_watchd.service.malloc import limit_arenas
from tests.conftest import cli_env

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc malloc arenas"
)


def thread_heaps(pid: int | str = "self") -> int:
    """glibc's per-thread arena heaps in a process: anonymous reservations ending on a 64 MiB boundary."""
    n = 0
    with open(f"/proc/{pid}/maps") as fh:
        for line in fh:
            m = re.match(r"[0-9a-f]+-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(\S*)", line)
            if m and m.group(2) == "---p" and not m.group(3) and int(m.group(1), 16) % (64 << 20) == 0:
                n += 1
    return n


# Six threads alive at once, each allocating past pymalloc's 512-byte objects (glibc malloc serves those).
SIX_THREADS = textwrap.dedent(
    """
    import sys, threading
    from tests.service.test_malloc import thread_heaps
    if sys.argv[1] == "cap":
        from spark_watchd.service.malloc import limit_arenas
        assert limit_arenas()
    keep, barrier = [], threading.Barrier(7)
    def work():
        keep.append([bytes(1000 + i) for i in range(200)])
        barrier.wait()
    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    print(thread_heaps())
    barrier.wait()
    """
)


def _heaps_with(mode: str, env: dict | None = None) -> int:
    res = subprocess.run(
        [sys.executable, "-c", SIX_THREADS, mode],
        capture_output=True,
        text=True,
        env=cli_env(env),
        check=True,
    )
    return int(res.stdout)


def test_capped_threads_share_the_main_arena_and_uncapped_ones_each_get_a_heap():
    assert _heaps_with("plain") >= 2  # glibc's default: a heap per concurrently allocating thread
    assert _heaps_with("cap") == 0


def test_the_users_malloc_arena_max_or_tunable_wins():
    assert limit_arenas(environ={"MALLOC_ARENA_MAX": "4"}) is False
    assert limit_arenas(environ={"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}) is False


def test_the_running_daemon_keeps_one_arena_for_all_its_threads(tmp_path):
    from tests.daemon_helpers import running_daemon

    with running_daemon("--state-dir", str(tmp_path), "--interval", "30") as (proc, base):
        with open(f"/proc/{proc.pid}/status") as fh:
            threads = int(re.search(r"^Threads:\s+(\d+)", fh.read(), re.M).group(1))
        assert threads >= 5  # scheduler, HTTP accept/writer/worker, source workers
        assert thread_heaps(proc.pid) == 0
