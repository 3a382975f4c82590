"""sparkwatchd_training_* rendered from the snapshot: tracker jobs, replayed samples, promtool-clean."""

from __future__ import annotations

import subprocess

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from spark_watchd.export.training import families
from spark_watchd.sample.model import Sample, ThroughputReading
from spark_watchd.snapshot import Snapshot
from spark_watchd.throughput.models import ProgressReport
from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.throughput.tracker import JobTracker
from tests.conftest import require_binary
from tests.support.progress import T0


def render(snapshot: Snapshot) -> str:
    class Collector:
        def collect(self):
            return families(snapshot)

    reg = CollectorRegistry()
    reg.register(Collector())
    return generate_latest(reg).decode()


def values(text: str) -> dict[tuple[str, str], float]:
    return {
        (s.name, s.labels.get("job", "")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_tracker_jobs_become_per_job_series(clock):
    t = JobTracker(ProgressSettings(warmup_steps=0, warmup_s=0, baseline_s=40), clock)
    for i in range(6):
        t.report(ProgressReport(job="sft", step=10 * i, tokens=40960 * i, ts=T0 + 20 * i))
    t.report(ProgressReport(job="fresh", step=1))  # one report: no interval yet, only its time
    v = values(render(Snapshot(None, None, extras={"jobs": t.stats()})))
    assert v[("sparkwatchd_training_step_seconds", "sft")] == 2.0
    assert v[("sparkwatchd_training_tokens_per_second", "sft")] == 2048.0
    assert v[("sparkwatchd_training_slowdown_ratio", "sft")] == 1.0
    assert v[("sparkwatchd_training_last_report_timestamp_seconds", "sft")] == T0 + 100
    assert v[("sparkwatchd_training_last_report_timestamp_seconds", "fresh")] == clock.t
    assert ("sparkwatchd_training_step_seconds", "fresh") not in v


def test_replayed_samples_fall_back_to_their_throughput_readings():
    sample = Sample(ts=T0, throughput=(ThroughputReading("llama-8b-sft", T0 - 3, 4699, 1.2362, 6626.9),))
    v = values(render(Snapshot(sample, None)))
    assert v == values(render(Snapshot(sample, None, extras={"jobs": ()})))  # demo: a tracker with no jobs
    assert v[("sparkwatchd_training_step_seconds", "llama-8b-sft")] == 1.2362
    assert v[("sparkwatchd_training_tokens_per_second", "llama-8b-sft")] == 6626.9
    assert ("sparkwatchd_training_slowdown_ratio", "llama-8b-sft") not in v


def test_empty_and_broken_snapshots_render_without_raising():
    assert "sparkwatchd_training_step_seconds" in render(Snapshot(None, None))
    assert values(render(Snapshot(None, None, extras={"jobs": "garbage"}))) == {}


def test_exposition_passes_promtool_check_metrics(clock):
    promtool = require_binary("promtool")
    t = JobTracker(ProgressSettings(warmup_steps=0, warmup_s=0, baseline_s=10), clock)
    for i in range(4):
        t.report(ProgressReport(job="sft/r16@lr2e-4", step=10 * i, tokens=40960 * i, ts=T0 + 20 * i))
    text = render(Snapshot(None, None, extras={"jobs": t.stats()}))
    out = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_an_ended_job_leaves_metrics_at_once(clock):
    t = JobTracker(ProgressSettings(warmup_steps=0, warmup_s=0, baseline_s=40), clock)
    for i in range(3):
        t.report(ProgressReport(job="done", step=10 * i, tokens=100 * i, ts=T0 + 20 * i))
    t.report(ProgressReport(job="live", step=1))
    t.report(ProgressReport(job="done", step=30, tokens=300, ts=T0 + 60, event="end"))
    v = values(render(Snapshot(None, None, extras={"jobs": t.stats()})))
    assert not [k for k in v if k[1] == "done"]
    assert ("sparkwatchd_training_last_report_timestamp_seconds", "live") in v
