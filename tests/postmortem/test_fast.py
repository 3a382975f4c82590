"""The armed fast ring: memory and PSI every second while G3 is warning or worse, the last two minutes fsynced
on disk as trace-v1 lines that replay reads; nothing while the pool is roomy (issue 31, item 4)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.postmortem.fast import SEGMENTS, FastRing
from spark_watchd.sample.trace import read_trace

HOST = Path(__file__).resolve().parents[1] / "fixtures" / "hosts" / "gb10-eviction" / "proc"


def _snap(severity):
    return SimpleNamespace(diagnosis=SimpleNamespace(findings={"G3": SimpleNamespace(severity=severity)}))


def test_each_reading_is_a_trace_line_replay_reads_and_segments_take_turns(tmp_path):
    clock = iter(float(t) for t in range(1000, 1200))
    ring = FastRing(tmp_path / "fast", proc_root=str(HOST), span_s=120.0, clock=lambda: next(clock))
    for _ in range(150):
        ring.read_once()
    ring.close()
    samples = ring.samples()
    assert 60 <= len(samples) <= 121 and samples[-1].ts == 1149.0  # the last one to two minutes
    assert samples[-1].meminfo["MemAvailable"] > 0 and samples[-1].psi_memory is not None
    for name in SEGMENTS:  # each segment is a trace replay reads
        assert list(read_trace(tmp_path / "fast" / name))


def test_armed_on_a_g3_warning_it_reads_every_second_and_disarmed_on_ok_it_stops(tmp_path):
    proc = tmp_path / "proc"
    shutil.copytree(HOST, proc)
    ring = FastRing(tmp_path / "fast", proc_root=str(proc), interval_s=0.05)
    ring(_snap("ok"))
    time.sleep(0.2)
    assert not ring.armed and ring.readings == 0 and not (tmp_path / "fast").exists()
    ring(_snap("warning"))
    deadline = time.monotonic() + 10
    while ring.readings < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ring.armed and ring.readings >= 3
    ring(_snap("ok"))
    assert not ring.armed
    n = ring.readings
    time.sleep(0.2)
    assert ring.readings == n
    ring.close()


def test_a_torn_last_line_from_a_hard_reset_is_cut_and_the_rest_kept(tmp_path):
    clock = iter(float(t) for t in range(0, 100))
    ring = FastRing(tmp_path / "fast", proc_root=str(HOST), clock=lambda: next(clock))
    for _ in range(5):
        ring.read_once()
    ring.close()
    with open(tmp_path / "fast" / SEGMENTS[0], "ab") as fh:
        fh.write(b'{"v":1,"ts":5,"meminfo":{"MemAvail')  # the power went mid-write
    again = FastRing(tmp_path / "fast", proc_root=str(HOST), clock=lambda: next(clock))
    again.read_once()
    again.close()
    assert [s.ts for s in again.samples()] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_link_planted_as_a_segment_is_never_written_through(tmp_path):
    (tmp_path / "fast").mkdir()
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    (tmp_path / "fast" / SEGMENTS[0]).symlink_to(target)
    ring = FastRing(tmp_path / "fast", proc_root=str(HOST), interval_s=0.01)
    ring.arm()
    deadline = time.monotonic() + 5
    while ring.armed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not ring.armed and ring.readings == 0  # it stopped, saying so once
    assert target.read_text() == "keep\n"
    ring.close()


def test_a_bundle_keeps_the_final_seconds_replayable_and_its_report_draws_them(tmp_path):
    """Issue 31 item 4: after a freeze `report` and `replay` show the final seconds the 30 s ring missed."""
    from spark_watchd.postmortem import PostMortem, list_bundles
    from tests.conftest import run_cli
    from tests.postmortem.helpers import feed, scenario

    samples = scenario("vllm_creep_oom_30s")
    kill = next(s for s in samples if s.oom_kills)
    clock = iter([kill.ts - 90 + i for i in range(200)])
    ring = FastRing(tmp_path / "fast", proc_root=str(HOST), clock=lambda: next(clock))
    for _ in range(90):  # the 90 s before the kill, one reading a second (armed by a G3 warning)
        ring.read_once()
    ring.close()
    feed(tmp_path, samples, postmortem=PostMortem(tmp_path, Thresholds()))
    (b,) = [x for x in list_bundles(tmp_path / "bundles") if x.kind == "oom_kill"]
    fast = (b.path / "fast.jsonl").read_text().splitlines()
    assert len(fast) == 90 and json.loads(fast[-1])["ts"] <= kill.ts
    assert "fast.jsonl" in json.loads((b.path / "manifest.json").read_text())["files"]
    html = (b.path / "report.html").read_text()
    assert "The final seconds (1 s readings, 90 to " in html and "Memory, every second" in html
    res = run_cli("replay", str(b.path / "fast.jsonl"), "--format", "jsonl")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 90, res.stderr
