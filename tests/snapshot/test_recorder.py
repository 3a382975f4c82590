"""Rolling trace files (`run --record DIR`): one trace-v1 file per UTC day, a torn tail repaired, old days pruned."""

from __future__ import annotations

import os
import time

from spark_watchd.sample.model import Sample
from spark_watchd.sample.trace import read_trace
from spark_watchd.snapshot import Snapshot
from spark_watchd.snapshot.recorder import RollingRecorder

DAY1 = 1795996800.0  # 2026-11-30T00:00:00Z


def _snap(ts: float) -> Snapshot:
    return Snapshot(sample=Sample(ts=ts, host="spark-01", meminfo={"MemAvailable": 1}), diagnosis=None)


def test_each_utc_day_gets_its_own_file_in_sample_order(tmp_path):
    rec = RollingRecorder(str(tmp_path))
    for ts in (DAY1 - 30, DAY1 + 0.0, DAY1 + 30, DAY1 + 86400):
        rec(_snap(ts))
    rec(Snapshot(sample=None, diagnosis=None))  # before the first sample: nothing to write
    rec.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [
        "spark-watchd-2026-11-29.jsonl",
        "spark-watchd-2026-11-30.jsonl",
        "spark-watchd-2026-12-01.jsonl",
    ]
    assert [s.ts for s in read_trace(tmp_path / files[1])] == [DAY1, DAY1 + 30]


def test_a_torn_tail_from_a_killed_daemon_is_repaired_before_appending(tmp_path):
    path = tmp_path / "spark-watchd-2026-11-30.jsonl"
    rec = RollingRecorder(str(tmp_path))
    rec(_snap(DAY1))
    rec.close()
    with open(path, "a") as fh:
        fh.write('{"v":1,"ts":17959968')  # SIGKILL mid-line
    rec = RollingRecorder(str(tmp_path))
    rec(_snap(DAY1 + 30))
    rec.close()
    assert [s.ts for s in read_trace(path)] == [DAY1, DAY1 + 30]


def test_files_older_than_keep_days_are_pruned_when_a_day_starts(tmp_path):
    old = tmp_path / "spark-watchd-2026-11-01.jsonl"
    old.write_text("")
    week_ago = time.time() - 8 * 86400
    os.utime(old, (week_ago, week_ago))
    other = tmp_path / "notes.txt"  # not ours: never touched
    other.write_text("x")
    os.utime(other, (week_ago, week_ago))
    rec = RollingRecorder(str(tmp_path / "."), keep_days=7)
    rec(_snap(DAY1))
    rec.close()
    assert not old.exists() and other.exists()


def test_each_day_file_begins_with_the_boots_platform_once(tmp_path):
    from spark_watchd.sample.platform import PlatformReading

    plat = PlatformReading(kernel="6.17.0-1031-nvidia", driver="580.173.02", driver_flavour="open")
    rec = RollingRecorder(str(tmp_path))
    first = Sample(ts=DAY1 - 30, host="spark-01", boot_id="b1", platform=plat)
    rec(Snapshot(sample=first, diagnosis=None))
    for ts in (DAY1, DAY1 + 30):
        rec(Snapshot(sample=Sample(ts=ts, host="spark-01", boot_id="b1"), diagnosis=None))
    rec(Snapshot(sample=Sample(ts=DAY1 + 86400, host="spark-01", boot_id="b2"), diagnosis=None))  # a new boot
    rec.close()
    day1 = list(read_trace(tmp_path / "spark-watchd-2026-11-30.jsonl"))
    assert [s.platform for s in day1] == [plat, None]  # the day's first sample carries it, the rest do not
    assert [s.platform for s in read_trace(tmp_path / "spark-watchd-2026-12-01.jsonl")] == [None]  # not b1's
