"""The bounded worker: a blocking driver call gets a time bound; one stuck call at most, refused until it returns."""

from __future__ import annotations

import threading

import pytest

from spark_watchd.sources.worker import BoundedWorker, CallTimeout
from tests.support.poll import wait_until


def _threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"spark-watchd-{name}"]


def test_results_and_exceptions_come_back_from_one_lazily_started_thread():
    w = BoundedWorker("t-basic")
    assert _threads("t-basic") == []  # nothing started until the first call
    assert w.call(lambda a, b: a + b, 2, 3, timeout=5) == 5
    with pytest.raises(KeyError, match="gone"):
        w.call(lambda: {}["gone"], timeout=5)
    assert w.call(threading.current_thread, timeout=5).name == "spark-watchd-t-basic"
    assert len(_threads("t-basic")) == 1
    w.close()
    assert _threads("t-basic") == []


def test_a_hung_call_times_out_later_calls_are_refused_at_once_and_it_recovers_when_it_returns():
    w = BoundedWorker("t-hung")
    release = threading.Event()
    with pytest.raises(CallTimeout, match="did not return within 0.05 s"):
        w.call(release.wait, 30, timeout=0.05)
    assert w.stuck
    ran = []
    with pytest.raises(CallTimeout, match="an earlier call is still blocked"):
        w.call(ran.append, 1, timeout=5)
    assert ran == []  # refused, not queued behind the stuck call
    assert len(_threads("t-hung")) == 1  # at most one thread is ever stuck
    release.set()
    wait_until(lambda: not w.stuck, what="the stuck call to return")
    assert w.call(lambda: "back", timeout=5) == "back"
    w.close()


def test_close_with_a_stuck_call_does_not_wait_for_it():
    w = BoundedWorker("t-close")
    release = threading.Event()
    with pytest.raises(CallTimeout):
        w.call(release.wait, 30, timeout=0.05)
    w.close(timeout=30)  # returns at once: joining a thread stuck in a driver would hang the daemon
    release.set()
    wait_until(lambda: not _threads("t-close"), what="the abandoned worker to finish")


def test_a_closed_worker_starts_a_fresh_thread_on_the_next_call():
    w = BoundedWorker("t-again")
    w.call(int, timeout=5)
    w.close()
    assert w.call(lambda: 7, timeout=5) == 7
    w.close()
