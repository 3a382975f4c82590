"""The ring is a state file like the others (issue 29 §8): no link followed, no FIFO waited on, no line read
whole past its cap, a failed append cut back, storage failures said once and counted."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tracemalloc

import pytest
import structlog

from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.postmortem import PostMortem, ring
from spark_watchd.postmortem.ring import MAX_LINE, SEGMENTS, SampleRing
from spark_watchd.sample.files import StateFileError
from spark_watchd.snapshot import Snapshot
from tests.conftest import REPO, cli_env, free_port
from tests.diagnose.diag_builders import Host

ENV = {"SPARK_WATCHD_FAKE_NVML": "gb10"}


def _run(state, timeout: float = 30) -> subprocess.CompletedProcess:
    """`spark-watchd run` on a free loopback port, expected to exit by itself within `timeout`."""
    return subprocess.run(
        [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{free_port()}",
         "--interval", "1", "--state-dir", str(state)],
        capture_output=True, text=True, timeout=timeout, env=cli_env(ENV), cwd=str(REPO),
    )  # fmt: skip


def _victim(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("someone else's file\n")
    return victim


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda seg, victim: os.symlink(victim, seg), "is a symbolic link"),
        (lambda seg, victim: os.mkfifo(seg), "is a FIFO, not a regular file"),
    ],
    ids=["symlink", "fifo"],
)
def test_a_ring_segment_that_is_a_link_or_a_fifo_exits_78_naming_it(tmp_path, make, what):
    """The ring followed a link (its target's last line was cut and samples appended) and hung on a FIFO at
    start-up with no log line."""
    victim = _victim(tmp_path)
    seg = tmp_path / "state" / "ring" / SEGMENTS[1]
    seg.parent.mkdir(parents=True)
    make(seg, victim)
    proc = _run(tmp_path / "state")  # a hang is a failure here (timeout)
    assert proc.returncode == 78, (proc.returncode, proc.stderr)
    assert f"state file {seg} {what}" in proc.stderr, proc.stderr
    assert victim.read_text() == "someone else's file\n"


@pytest.mark.parametrize(
    ("name", "make", "what"),
    [
        ("ring", lambda p, victim: os.symlink(victim.parent / "elsewhere", p), "is a symbolic link"),
        ("ring", lambda p, victim: p.write_text(""), "is not a directory"),
        ("bundles", lambda p, victim: os.symlink(victim.parent / "elsewhere", p), "is a symbolic link"),
    ],
    ids=["ring-symlink", "ring-file", "bundles-symlink"],
)
def test_a_ring_or_bundles_directory_that_is_a_link_or_a_file_exits_78_naming_it(tmp_path, name, make, what):
    victim = _victim(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    state = tmp_path / "state"
    state.mkdir()
    make(state / name, victim)
    proc = _run(state)
    assert proc.returncode == 78, (proc.returncode, proc.stderr)
    assert f"state directory {state / name} {what}" in proc.stderr, proc.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_ring_directory_that_is_a_link_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, tmp_path / "ring")
    with pytest.raises(StateFileError, match="is a symbolic link"):
        SampleRing(tmp_path / "ring")
    assert list(elsewhere.iterdir()) == []


def test_a_segment_swapped_for_a_link_while_running_is_a_storage_failure_not_a_write_through(tmp_path):
    victim = _victim(tmp_path)
    h = Host()
    pm = PostMortem(tmp_path, Thresholds(), span_s=60)
    with structlog.testing.capture_logs() as logs:
        for _ in range(2):
            pm(Snapshot(sample=h.sample(), diagnosis=None))
        other = pm.ring.dir / SEGMENTS[1 - pm.ring.cur]
        other.unlink(missing_ok=True)
        os.symlink(victim, other)
        for _ in range(4):  # the span is over: the ring turns to the planted link, three times refused
            pm(Snapshot(sample=h.sample(), diagnosis=None))
    assert victim.read_text() == "someone else's file\n"
    assert pm.storage_status()["ring"]["errors_total"] >= 2
    failing = [e for e in logs if e["event"] == "post-mortem storage failing"]
    assert len(failing) == 1 and "is a symbolic link" in failing[0]["error"], logs
    pm.close()


def test_an_over_long_line_is_skipped_without_being_read_whole(tmp_path):
    """A 200 MB line was read whole (peak RSS 458 MB): now a line past MAX_LINE is passed over a chunk at a
    time (bench/ring_persistence.py --long-line-mb 200 measures the RSS)."""
    h = Host()
    r = SampleRing(tmp_path, span_s=1800)
    r.append(h.sample())
    r.close()
    with open(tmp_path / SEGMENTS[0], "ab") as fh:
        block = b"x" * (1 << 20)
        for _ in range(8 * MAX_LINE // len(block)):  # 32 MiB on one line
            fh.write(block)
        fh.write(b"\n")
    tracemalloc.start()
    try:
        r = SampleRing(tmp_path, span_s=1800)  # reads both segments' spans
        r.append(h.sample())
        got = r.samples()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(got) == 2 and r.lines_skipped == 1
    assert peak < 2 * MAX_LINE + (2 << 20), peak
    r.close()


def _tmpfs(path, size: str):
    path.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                                           capture_output=True).returncode != 0:  # fmt: skip
        pytest.skip("mounting a small tmpfs needs root and CAP_SYS_ADMIN")
    return path


def test_a_full_disk_mid_line_is_cut_back_on_a_real_filesystem(tmp_path):
    fs = _tmpfs(tmp_path / "fs", "256k")
    pm = None
    try:
        h = Host()
        pm = PostMortem(fs, Thresholds())
        pm(Snapshot(sample=h.sample(), diagnosis=None))
        fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT)
        try:  # fill the disk: the next ring line finds no room part-way
            while os.write(fd, b"f" * 512):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        written = 1
        for _ in range(20):  # the segment's last page still has room for a few lines, then none
            size = pm.ring.path.stat().st_size
            pm(Snapshot(sample=h.sample(), diagnosis=None))
            if pm.storage_status()["ring"]["errors_total"]:
                break
            written += 1
        assert pm.storage_status()["ring"]["errors_total"] == 1
        assert pm.ring.path.stat().st_size == size  # no half line left behind
        (fs / "filler").unlink()
        kept = h.sample()
        pm(Snapshot(sample=kept, diagnosis=None))
        assert [s.ts for s in pm.ring.samples()][-1] == kept.ts and len(pm.ring.samples()) == written + 1
        assert pm.storage_status()["ring"]["error"] is None
    finally:
        if pm is not None:
            pm.close()
        subprocess.run(["umount", str(fs)], check=False)


def test_a_failed_append_is_cut_back_so_the_next_sample_is_whole(tmp_path, monkeypatch):
    """After a full disk, a half-written ring line swallowed the next sample too."""
    h = Host()
    pm = PostMortem(tmp_path, Thresholds())
    pm(Snapshot(sample=h.sample(), diagnosis=None))
    real_write = os.write

    def disk_fills_mid_line(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))  # half the line reaches the disk, then ENOSPC
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with structlog.testing.capture_logs() as logs:
        monkeypatch.setattr(ring.os, "write", disk_fills_mid_line)
        lost = h.sample()
        pm(Snapshot(sample=lost, diagnosis=None))
        pm(Snapshot(sample=h.sample(), diagnosis=None))  # still full: said once, counted twice
        monkeypatch.setattr(ring.os, "write", real_write)
        kept = h.sample()
        pm(Snapshot(sample=kept, diagnosis=None))
    assert [s.ts for s in pm.ring.samples()][-1] == kept.ts and lost.ts not in [
        s.ts for s in pm.ring.samples()
    ]
    assert pm.ring.path.read_bytes().endswith(b"\n") and len(pm.ring.samples()) == 2
    assert pm.storage_status()["ring"] == {"errors_total": 2, "error": None}  # recovered
    events = [(e["event"], e.get("part")) for e in logs if e["event"].startswith("post-mortem storage")]
    assert events == [("post-mortem storage failing", "ring"), ("post-mortem storage recovered", "ring")]
    assert "No space left on device" in next(
        e["error"] for e in logs if e["event"] == "post-mortem storage failing"
    )
    pm.close()


def test_ring_failures_are_counted_on_metrics_promtool_clean(tmp_path, monkeypatch):
    from prometheus_client import CollectorRegistry, generate_latest

    from spark_watchd.export.prometheus import SnapshotCollector
    from tests.conftest import require_binary

    h = Host()
    pm = PostMortem(tmp_path, Thresholds())
    monkeypatch.setattr(ring.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    for _ in range(3):
        pm(Snapshot(sample=h.sample(), diagnosis=None))
    snap = Snapshot(sample=h.sample(), diagnosis=None, extras={"postmortem_storage": pm.storage_status()})
    reg = CollectorRegistry(auto_describe=False)
    reg.register(SnapshotCollector(lambda: snap))
    text = generate_latest(reg).decode()
    assert 'sparkwatchd_postmortem_storage_errors_total{part="ring"} 3.0' in text
    assert 'sparkwatchd_postmortem_storage_errors_total{part="bundles"} 0.0' in text
    assert pm.ring.path.read_bytes() == b""  # each failed line cut back
    res = subprocess.run(
        [require_binary("promtool"), "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert [ln for ln in (res.stdout + res.stderr).splitlines() if "postmortem" in ln] == [], res.stdout
    pm.close()
