"""The run ledger: throttle seconds, energy, peak temperature, MemAvailable, evictions per run, on disk."""

from __future__ import annotations

import json

import pytest
import structlog

from spark_watchd.sample.findings import Diagnosis, Event
from spark_watchd.sample.model import GpuReading, Sample
from spark_watchd.snapshot import Snapshot
from spark_watchd.throughput.ledger import RunLedger, read_runs
from spark_watchd.throughput.models import ProgressReport
from spark_watchd.throughput.service import Throughput
from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.throughput.tracker import JobTracker
from tests.conftest import cli_env, run_cli
from tests.support.progress import T0


def snap(ts, temp=70.0, energy=0.0, thermal_us=0, cap_us=0, avail_kb=50_000_000, events=(), jobs=None):
    gpu = GpuReading(
        0, "NVIDIA GB10", "GPU-x", temp_c=temp, energy_j=energy,
        clocks_event_counters_us={"sw_power_cap": cap_us, "hw_slowdown": 0, "sw_thermal": thermal_us,
                                  "hw_thermal": 0, "hw_power_brake": 0},
    )  # fmt: skip
    sample = Sample(ts=ts, gpus=(gpu,), mem_available_min_kb=avail_kb)
    diag = Diagnosis(ts, {}, tuple(Event(k, "G6", ts, k) for k in events))
    return Snapshot(sample, diag, extras={} if jobs is None else {"jobs": jobs})


def six_report_run(t: JobTracker, start: float) -> None:
    for i in range(6):
        t.report(
            ProgressReport(
                job="sft", step=10 * i, tokens=40960 * i, ts=start + 20 * i, event="end" if i == 5 else None
            )
        )


def test_finished_run_is_written_with_its_figures(tmp_path, clock):
    clock.t = T0 + 300
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    # Samples every 30 s from T0-30; the run spans T0+30 .. T0+130.
    energy, thermal = 1000.0, 0
    for k in range(-1, 6):
        ts = T0 + 30 * k
        thermal += 15_000_000 if k >= 3 else 0  # 15 s of sw_thermal per 30 s interval from T0+90
        tp.observe(snap(ts, temp=70 + k, energy=energy, thermal_us=thermal, cap_us=30_000_000 * (k + 1),
                        avail_kb=40_000_000 - k * 1_000_000, events=("eviction",) if k == 2 else ()))  # fmt: skip
        energy += 3000.0  # 100 W
    six_report_run(tp.tracker, T0 + 30)
    (run,) = read_runs(tmp_path / "runs.jsonl")[0]
    assert (run["job"], run["end_reason"], run["duration_s"], run["steps"], run["tokens"]) == (
        "sft", "end", 100.0, 50, 204800,
    )  # fmt: skip
    assert run["mean_tokens_per_second"] == 2048.0 and run["mean_step_seconds"] == 2.0
    assert run["start"] == "2025-11-29T08:00:30Z" and run["end"] == "2025-11-29T08:02:10Z"
    # Intervals (30,60],(60,90],(90,120] whole + 1/3 of (120,150]: 100 s at 100 W.
    assert run["energy_j"] == pytest.approx(10_000.0)
    # J per training token and per step over the same intervals: 10 kJ / 204,800 tokens, / 50 steps.
    assert run["joules_per_token"] == pytest.approx(10_000.0 / 204800) and run[
        "joules_per_step"
    ] == pytest.approx(200.0)
    # sw_thermal moved 15 s in each of (60,90], (90,120], (120,150]; the last overlaps the run by 1/3.
    assert run["throttle_seconds"]["sw_thermal"] == pytest.approx(15 + 15 + 5)
    assert run["throttle_seconds"]["power_cap"] == pytest.approx(100.0)
    assert run["throttle_seconds"]["hw_thermal"] == 0
    assert run["peak_temp_c"] == 75.0  # the sample at T0+150 covers the run's last 10 s
    assert run["mem_available_min_bytes"] == 35_000_000 * 1024
    assert run["evictions"] == 1 and run["oom_kills"] == 0


def test_run_waits_for_the_sample_that_covers_its_end(tmp_path, clock):
    clock.t = T0 + 200
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    tp.observe(snap(T0, energy=0.0))
    six_report_run(tp.tracker, T0 + 10)  # ends at T0+110, after the latest sample
    assert read_runs(tmp_path / "runs.jsonl")[0] == []
    tp.observe(snap(T0 + 120, energy=12_000.0, temp=88.0))
    (run,) = read_runs(tmp_path / "runs.jsonl")[0]
    assert run["energy_j"] == pytest.approx(10_000.0) and run["peak_temp_c"] == 88.0


def test_close_writes_open_and_pending_runs(tmp_path, clock):
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    tp.tracker.report(ProgressReport(job="a", step=1, ts=T0))
    tp.tracker.report(ProgressReport(job="a", step=9, ts=T0 + 8))
    tp.close()
    (run,) = read_runs(tmp_path / "runs.jsonl")[0]
    assert (run["job"], run["end_reason"], run["steps"], run["energy_j"], run["sample_intervals"]) == (
        "a",
        "shutdown",
        9,
        None,
        0,
    )  # fmt: skip  (steps 1-9 are nine steps)


def test_long_runs_keep_the_intervals_that_left_the_ring(tmp_path, clock):
    t = JobTracker(ProgressSettings(), clock)
    ledger = RunLedger(tmp_path / "runs.jsonl", recent_samples=16)
    t.add_run_listener(ledger.on_run_end)
    clock.t = T0
    t.report(ProgressReport(job="long", step=0, ts=T0))
    for k in range(1, 101):  # 100 samples, 30 s, 100 W; only 16 stay in the ring
        clock.t = T0 + 30 * k
        t.report(ProgressReport(job="long", step=k, ts=clock.t))
        ledger.observe(snap(clock.t, energy=3000.0 * k, jobs=t.stats()))
    t.report(ProgressReport(job="long", step=100, ts=clock.t, event="end"))
    (run,) = read_runs(tmp_path / "runs.jsonl")[0]
    assert run["energy_j"] == pytest.approx(3000.0 * 99)  # first sample has no previous one to diff
    assert run["duration_s"] == 3000.0


def test_counter_reset_is_not_negative_energy(tmp_path, clock):
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    for ts, e in [(T0, 5000.0), (T0 + 30, 8000.0), (T0 + 60, 100.0), (T0 + 90, 3100.0)]:  # driver reload
        tp.observe(snap(ts, energy=e))
    tp.tracker.report(ProgressReport(job="a", step=0, ts=T0))
    tp.tracker.report(ProgressReport(job="a", step=9, ts=T0 + 90, event="end"))
    (run,) = read_runs(tmp_path / "runs.jsonl")[0]
    assert run["energy_j"] == pytest.approx(6000.0)


def test_unwritable_state_dir_is_logged_not_raised(tmp_path, clock):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with structlog.testing.capture_logs() as logs:
        tp = Throughput(ProgressSettings(), blocker / "sub", clock)
        tp.tracker.report(ProgressReport(job="a", step=1, event="end"))
        tp.tracker.report(ProgressReport(job="b", step=1, event="end"))
        tp.close()
    assert sum(e["event"] == "cannot write the run ledger" for e in logs) == 1


def test_runs_verb_lists_the_ledger_as_json_and_table(tmp_path, clock):
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    tp.observe(snap(T0 + 200))
    six_report_run(tp.tracker, T0 + 30)
    with open(tmp_path / "runs.jsonl", "a") as fh:
        fh.write('{"job": "torn", "dur')  # a torn last line (killed mid-write) is skipped with a warning
    out = run_cli("runs", "--json", "--state-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    (run,) = json.loads(out.stdout)
    assert (run["job"], run["mean_tokens_per_second"], run["steps"]) == ("sft", 2048.0, 50)
    assert "skipped 1 unreadable line" in out.stderr
    out = run_cli("runs", "--state-dir", str(tmp_path), env=cli_env({"COLUMNS": "80"}))
    header, row, *hidden = out.stdout.splitlines()
    assert header.split()[:3] == ["START", "(UTC)", "JOB"]
    assert "sft" in row.split() and "2,048" in row.split() and "1m40s" in row.split()
    assert max(len(ln) for ln in out.stdout.splitlines()) <= 80
    assert hidden and "not shown at this width" in " ".join(hidden) and "J/TOKEN" in " ".join(hidden)
    wide = run_cli("runs", "--state-dir", str(tmp_path), env=cli_env({"COLUMNS": "220"}))
    header, row = wide.stdout.splitlines()  # wide enough: every column, nothing left out
    assert "J/TOKEN" in header and "MIN AVAIL" in header and "STEPS" in header
    empty = run_cli("runs", "--state-dir", str(tmp_path / "none"))
    assert empty.returncode == 0 and "no finished runs" in empty.stderr


def test_steps_one_to_eighty_are_eighty_steps_and_a_resumed_run_counts_from_its_pick_up(tmp_path, clock):
    from spark_watchd.throughput.ledger import _Totals, run_record

    t = JobTracker(ProgressSettings(), clock)
    for step in range(1, 81):
        t.report(ProgressReport(job="loop", step=step, ts=T0 + 2 * step))
    run = run_record(
        t.report(ProgressReport(job="loop", step=80, ts=T0 + 160, event="end")), "end", _Totals()
    )
    assert (run["steps"], run["mean_step_seconds"]) == (80, 2.0)  # 79 intervals of 2 s between the reports
    t.report(ProgressReport(job="resumed", step=1000, ts=T0, event="start"))
    run = run_record(
        t.report(ProgressReport(job="resumed", step=1080, ts=T0 + 160, event="end")), "end", _Totals()
    )
    assert (run["steps"], run["mean_step_seconds"]) == (80, 2.0)


def test_restarts_with_future_timestamps_do_not_pile_up_waiting_runs(tmp_path, clock):
    from spark_watchd.throughput.ledger import FUTURE_S, MAX_CLOSING

    clock.t = T0
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    tp.observe(snap(T0))
    # A client whose clock is a day ahead restarts its job 400 times (step 5 -> 0): each ends a run at that ts.
    for i in range(800):
        tp.tracker.report(ProgressReport(job="flood", step=0 if i % 2 else 5, ts=T0 + 86400 + i))
    assert len(tp.ledger._closing) == MAX_CLOSING
    runs, _ = read_runs(tmp_path / "runs.jsonl")
    assert len(runs) == 400 - MAX_CLOSING  # the oldest waiting runs were written, not kept
    tp.observe(snap(T0 + 30))  # a sample: runs ending more than FUTURE_S ahead are not waited for
    assert all(ev.stats.ts <= T0 + 30 + FUTURE_S for ev in tp.ledger._closing)


def test_ledger_rotates_past_its_size_and_runs_reads_both_files(tmp_path, clock):
    clock.t = T0 + 10_000
    led = RunLedger(tmp_path / "runs.jsonl", max_bytes=4096)
    t = JobTracker(ProgressSettings(), clock)
    t.add_run_listener(led.on_run_end)
    led.observe(snap(T0 + 10_000))
    for i in range(200):  # each run about 800 bytes: many rotations
        t.report(ProgressReport(job="j", step=1, ts=T0 + 10 * i, event="end"))
    assert (tmp_path / "runs.jsonl").stat().st_size <= 4096
    assert (tmp_path / "runs.jsonl.1").stat().st_size <= 4096
    runs, bad = read_runs(tmp_path / "runs.jsonl")
    assert bad == 0 and 0 < len(runs) < 200 and runs[-1]["end"] == "2025-11-29T08:33:10Z"
    assert [r["end"] for r in runs] == sorted(r["end"] for r in runs)  # the rotated file's runs first


def test_the_ledger_reports_the_memory_view_the_tick_published(tmp_path, clock):
    """The run's lowest MemAvailable is the published Snapshot.memory's figure, not one recomputed."""
    from dataclasses import replace

    from spark_watchd.sample.memory import memory_view

    clock.t = T0 + 300
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    for k in range(-1, 6):
        s = snap(T0 + 30 * k, avail_kb=40_000_000)
        published = replace(memory_view(s.sample, 4 << 30), available_min_bytes=(30_000_000 - k) * 1024)
        tp.observe(replace(s, memory=published))
    six_report_run(tp.tracker, T0 + 30)
    (run,) = read_runs(tmp_path / "runs.jsonl")[0]
    # Intervals (30,60] .. (120,150] overlap the run: k = 1..5, the lowest published figure is k = 5's.
    assert run["mem_available_min_bytes"] == (30_000_000 - 5) * 1024


def test_a_running_job_has_its_energy_per_token_and_per_step_so_far(tmp_path, clock):
    from types import SimpleNamespace

    from prometheus_client import generate_latest

    from spark_watchd.export.prometheus import build_registry
    from tests.daemon_helpers import samples, value

    clock.t = T0 + 300
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    for i in range(4):  # reports at T0+30 .. T0+90: 30 steps, 122,880 tokens
        tp.tracker.report(ProgressReport(job="sft", step=10 * i, tokens=40960 * i, ts=T0 + 30 + 20 * i))
    jobs = tp.tracker.stats()
    energy = 1000.0
    for k in range(0, 5):  # samples every 30 s from T0 at 100 W
        tp.observe(snap(T0 + 30 * k, energy=energy, jobs=jobs))
        energy += 3000.0
    got = tp.ledger.running_energy()["sft"]
    # The run spans T0+30 .. T0+90: 60 s at 100 W over its intervals.
    assert got["energy_j"] == pytest.approx(6000.0)
    assert got["tokens"] == 122880 and got["steps"] == 30
    assert got["joules_per_token"] == pytest.approx(6000.0 / 122880) and got[
        "joules_per_step"
    ] == pytest.approx(200.0)
    s = snap(T0 + 150, energy=energy, jobs=jobs)
    s = Snapshot(s.sample, s.diagnosis, extras={"jobs": jobs, "job_energy": tp.ledger.running_energy()})
    m = samples(
        generate_latest(
            build_registry(SimpleNamespace(snapshot=lambda: s, settings=None, overruns=0))
        ).decode()
    )
    assert value(m, "sparkwatchd_training_joules_per_step", job="sft") == pytest.approx(200.0)
    assert value(m, "sparkwatchd_training_energy_joules", job="sft") == pytest.approx(6000.0)


def _hour_at_one_second(tmp_path, clock, n: int = 2880) -> Throughput:
    """A full ring (ledger_recent_samples) at --interval 1 on a GB10 (throttle counters moving)."""
    clock.t = T0 + n
    tp = Throughput(ProgressSettings(), tmp_path, clock)
    for k in range(n):
        tp.observe(snap(T0 + k, energy=1000.0 + 100.0 * k, thermal_us=1000 * k, cap_us=500 * k))
    return tp


def test_the_ring_of_an_hour_at_one_second_stays_small(tmp_path, clock):
    """2,880 intervals at --interval 1 on a GB10: the throttle seconds one array, not a dict of floats
    (with a dict of five reasons an interval took ~415 bytes, ~330 now)."""
    import tracemalloc

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tp = _hour_at_one_second(tmp_path, clock)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(tp.ledger._recent) == 2880
    assert used / 2880 < 370, f"{used / 2880:.0f} bytes an interval"


def test_a_running_job_reads_only_the_intervals_since_its_start(tmp_path, clock, monkeypatch):
    """running_energy runs every tick: a run begun 10 s ago reads the ring's last intervals, not all 2,880."""
    from spark_watchd.throughput import ledger

    tp = _hour_at_one_second(tmp_path, clock)
    for i in range(3):
        tp.tracker.report(ProgressReport(job="sft", step=10 * i, tokens=4096 * i, ts=T0 + 2870 + 5 * i))
    jobs = tp.tracker.stats()
    tp.observe(snap(T0 + 2880, energy=1000.0 + 100.0 * 2880, jobs=jobs))
    calls = []
    real = ledger._Interval.overlap
    monkeypatch.setattr(ledger._Interval, "overlap", lambda self, a, b: calls.append(1) or real(self, a, b))
    got = tp.ledger.running_energy()["sft"]
    assert got["energy_j"] == pytest.approx(1000.0)  # 10 s at 100 W, T0+2870 .. T0+2880
    assert len(calls) <= 12
