"""The persisted ring: bounded, the last minutes readable after a kill -9 or a torn write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from spark_watchd.postmortem.ring import SEGMENTS, SampleRing
from tests.conftest import REPO
from tests.diagnose.diag_builders import Host


def test_the_ring_keeps_the_last_span_and_its_files_stay_bounded(tmp_path):
    ring = SampleRing(tmp_path, span_s=1800)
    h = Host(interval=30.0)
    for _ in range(600):  # five hours
        ring.append(h.sample())
    got = ring.samples()
    assert got[-1].ts == h.ts and got[-1].ts - got[0].ts <= 1800
    assert got[-1].ts - got[0].ts >= 1800 - 30
    lines = sum(len((tmp_path / n).read_text().splitlines()) for n in SEGMENTS)
    assert lines <= 2 * 1800 / 30 + 1  # at most two spans on disk
    ring.close()


def test_a_reopened_ring_carries_on_and_cuts_a_torn_tail(tmp_path):
    h = Host()
    ring = SampleRing(tmp_path, span_s=600)
    for _ in range(5):
        ring.append(h.sample())
    ring.close()
    with open(ring.path, "ab") as fh:
        fh.write(b'{"v":1,"ts":17644')  # the line in flight when the power went
    again = SampleRing(tmp_path, span_s=600)
    assert len(again.samples()) == 5
    again.append(h.sample())
    assert [s.ts for s in again.samples()][-1] == h.ts and len(again.samples()) == 6


def test_samples_written_before_a_kill_9_are_all_there(tmp_path):
    child = textwrap.dedent(
        f"""
        import os, sys, time
        sys.path.insert(0, {str(REPO)!r})
        from spark_watchd.postmortem.ring import SampleRing
        from tests.diagnose.diag_builders import Host
        ring, h = SampleRing({str(tmp_path)!r}, span_s=1800), Host()
        for i in range(20):
            ring.append(h.sample())
        print("written", flush=True)
        time.sleep(60)
        """
    )
    p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert p.stdout.readline().strip() == "written"
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(timeout=10)
    assert p.returncode == -signal.SIGKILL
    assert len(SampleRing(tmp_path).samples()) == 20
