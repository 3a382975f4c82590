"""The exporter: families rendered from a snapshot, a golden /metrics for a replayed scenario, promtool-clean."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest

from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.export.prometheus import SnapshotCollector, build_registry
from spark_watchd.sample.groups import group_workloads
from spark_watchd.sample.memory import memory_view
from spark_watchd.sample.model import GpuReading, ProcessInfo, Sample
from spark_watchd.snapshot import Snapshot, SourceStatus
from spark_watchd.sources.replay import ReplayFeed
from tests.conftest import REPO, require_binary
from tests.daemon_helpers import samples, value

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SCENARIOS = REPO / "spark_watchd" / "scenarios"
UPDATE = os.environ.get("SPARK_WATCHD_UPDATE_GOLDEN") == "1"


def _render(snap: Snapshot, settings=None) -> dict:
    reg = build_registry(SimpleNamespace(snapshot=lambda: snap, settings=settings, overruns=0))
    return samples(generate_latest(reg).decode())


def _gb10(**kw) -> GpuReading:
    base = dict(index=0, name="NVIDIA GB10", uuid="GPU-x", power_w=95.5, temp_c=84.0, sm_clock_mhz=2100,
                clocks_event_reasons=0x24, clocks_event_counters_us={"sw_power_cap": 3_000_000, "hw_slowdown": 0,
                "sw_thermal": 1_500_000, "hw_thermal": 0, "hw_power_brake": 0}, applications_clock_mhz=2418,
                slowdown_temp_c=86.0, shutdown_temp_c=90.0, energy_j=1234.5, util_pct=97.0, driver_version="580.95.05")  # fmt: skip
    base.update(kw)
    return GpuReading(**base)


def test_gpu_families_convert_units_and_decode_reason_bits():
    s = Sample(ts=100.0, gpus=(_gb10(),))
    m = _render(Snapshot(sample=s, diagnosis=None))
    assert value(m, "sparkwatchd_gpu_sm_clock_hertz", gpu="0") == 2.1e9
    assert value(m, "sparkwatchd_gpu_applications_clock_hertz", gpu="0") == 2.418e9
    assert value(m, "sparkwatchd_gpu_utilization_ratio", gpu="0") == pytest.approx(0.97)
    assert value(m, "sparkwatchd_gpu_clock_event_active", gpu="0", reason="power_cap") == 1
    assert value(m, "sparkwatchd_gpu_clock_event_active", gpu="0", reason="sw_thermal") == 1
    assert value(m, "sparkwatchd_gpu_clock_event_active", gpu="0", reason="hw_slowdown") == 0
    assert value(m, "sparkwatchd_gpu_clock_event_seconds_total", gpu="0", reason="power_cap") == 3.0
    assert value(m, "sparkwatchd_gpu_clock_event_seconds_total", gpu="0", reason="sw_thermal") == 1.5
    assert value(m, "sparkwatchd_gpu_energy_joules_total", gpu="0") == 1234.5
    assert value(m, "sparkwatchd_gpu_memory_info_supported", gpu="0") == 0
    assert (
        value(
            m, "sparkwatchd_gpu_info", gpu="0", uuid="GPU-x", name="NVIDIA GB10", driver_version="580.95.05"
        )
        == 1
    )


def test_not_supported_readings_are_absent_not_zero():
    s = Sample(ts=1.0, gpus=(_gb10(power_w=None, temp_c=None, clocks_event_reasons=None, mem_total_bytes=8),))
    m = _render(Snapshot(sample=s, diagnosis=None))
    assert value(m, "sparkwatchd_gpu_power_watts", gpu="0") is None
    assert value(m, "sparkwatchd_gpu_temperature_celsius", gpu="0") is None
    assert not any(k[0] == "sparkwatchd_gpu_clock_event_active" for k in m)
    assert value(m, "sparkwatchd_gpu_memory_info_supported", gpu="0") == 1


def test_memory_families_from_proc_with_reserve_from_thresholds():
    s = Sample(
        ts=1.0,
        meminfo={
            "MemTotal": 1000,
            "MemAvailable": 600,
            "Cached": 100,
            "AnonPages": 50,
            "SwapTotal": 80,
            "SwapFree": 30,
        },
        mem_available_min_kb=200,
        psi_memory={"some": {"total": 2_500_000}, "full": {"total": 500_000}},
        vmstat={"pgmajfault": 7, "pswpout": 3, "oom_kill": 1},
        processes=(
            ProcessInfo(1, 1.0, "vllm", (), 10, gpu_mem_bytes=4096, gpu_resident=True),
            ProcessInfo(2, 1.0, "x", (), 10, gpu_mem_bytes=None),
        ),
    )
    m = _render(Snapshot(sample=s, diagnosis=None, memory=memory_view(s, os_reserve_bytes=100 * 1024)))
    assert value(m, "sparkwatchd_memory_total_bytes") == 1000 * 1024
    assert value(m, "sparkwatchd_memory_available_min_bytes") == 200 * 1024
    assert value(m, "sparkwatchd_memory_budget_bytes") == 500 * 1024
    assert value(m, "sparkwatchd_memory_swap_used_bytes") == 50 * 1024
    assert value(m, "sparkwatchd_memory_gpu_attributed_bytes") == 4096
    assert value(m, "sparkwatchd_pressure_memory_waiting_seconds_total") == 2.5
    assert value(m, "sparkwatchd_pressure_memory_stalled_seconds_total") == 0.5
    assert value(m, "sparkwatchd_major_faults_total") == 7
    assert value(m, "sparkwatchd_swap_out_pages_total") == 3
    assert value(m, "sparkwatchd_oom_kills_total") == 1


def test_source_health_families():
    snap = Snapshot(
        sample=None,
        diagnosis=None,
        sources={
            "nvml": SourceStatus("nvml", False, 0.01, 4, "NVML library not found"),
            "meminfo": SourceStatus("meminfo", True, 0.002),
        },
    )
    m = _render(snap)
    assert value(m, "sparkwatchd_source_up", source="nvml") == 0
    assert value(m, "sparkwatchd_source_errors_total", source="nvml") == 4
    assert value(m, "sparkwatchd_source_duration_seconds", source="meminfo") == 0.002


def test_a_failing_renderer_never_breaks_the_scrape():
    snap = Snapshot(sample=Sample(ts=5.0, meminfo={"MemAvailable": 1}), diagnosis=None)
    col = SnapshotCollector(lambda: snap)

    def boom(_snap):
        raise RuntimeError("renderer bug")
        yield  # pragma: no cover

    col.renderers = (("boom", boom), *col.renderers)
    names = {f.name for f in col.collect()}
    assert "sparkwatchd_memory_available_bytes" in names and "sparkwatchd_build_info" in names


def _replayed_metrics(name: str, tmp_path) -> str:
    feed = ReplayFeed(str(SCENARIOS / f"{name}.jsonl"), speed=1e9, rebase=False)
    daemon = build(load_settings(None, environ={}), replay=feed, state_dir=str(tmp_path), serve=False)
    try:
        while daemon.tick() is not None:
            pass
        text = generate_latest(build_registry(daemon)).decode()
    finally:
        daemon.close()
    # A replay is dated by the wall clock (one replay clock): the newest sample is when it was published.
    last = re.search(r"^sparkwatchd_last_sample_timestamp_seconds (\S+)$", text, re.M)
    assert last and abs(float(last.group(1)) - time.time()) < 60, "a replay's sample time runs off the clock"
    # Times relative to it, so the golden file holds what does not vary: 0 for the sample, -0.05 s for a report.
    now = float(last.group(1))
    text = re.sub(
        r"^(sparkwatchd_\w*timestamp_seconds(?:\{[^}]*\})?) (\S+)$",
        lambda m: f"{m.group(1)} {round(float(m.group(2)) - now, 3)}",
        text,
        flags=re.M,
    )
    # Timing is the only thing that varies between runs.
    return re.sub(r"^(sparkwatchd_source_duration_seconds\{[^}]*\}) .*$", r"\1 0.0", text, flags=re.M)


@pytest.mark.parametrize("scenario", ["eviction", "throttle"])
def test_golden_metrics_for_replayed_scenario(scenario, tmp_path):
    text = _replayed_metrics(scenario, tmp_path)
    golden = GOLDEN / f"{scenario}.prom"
    if UPDATE:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), "run with SPARK_WATCHD_UPDATE_GOLDEN=1 to create it"
    assert text == golden.read_text(), (
        "exposition changed; if intended: SPARK_WATCHD_UPDATE_GOLDEN=1 pytest tests/export/test_prometheus.py"
    )


@pytest.mark.parametrize("scenario", ["eviction", "throttle"])
def test_golden_metrics_pass_promtool(scenario):
    promtool = require_binary("promtool")
    res = subprocess.run(
        [promtool, "check", "metrics"],
        input=(GOLDEN / f"{scenario}.prom").read_text(),
        capture_output=True,
        text=True,
    )
    # promtool exits non-zero for any nit; judge only lines about our own metrics.
    ours = [ln for ln in (res.stdout + res.stderr).splitlines() if "sparkwatchd_" in ln]
    assert ours == []
    assert res.returncode in (0, 3), res.stderr


def test_workloads_group_engines_with_their_launcher_and_read_caps():
    gib = 1024**3
    procs = (
        ProcessInfo(10, 1.0, "python3", ("vllm", "serve", "m", "--gpu-memory-utilization", "0.5"), 2 * gib),
        ProcessInfo(  # no ppid (an old trace): paired with the vLLM launcher that started before it
            11,
            2.0,
            "VLLM::EngineCore",
            ("VLLM::EngineCore",),
            1 * gib,
            gpu_mem_bytes=50 * gib,
            gpu_resident=True,
        ),
        ProcessInfo(
            20,
            1.0,
            "ollama",
            ("/usr/bin/ollama", "serve"),
            3 * gib,
            gpu_mem_bytes=20 * gib,
            gpu_resident=True,
        ),
        ProcessInfo(
            30, 1.0, "python", ("python", "train.py"), 9 * gib, gpu_mem_bytes=8 * gib, gpu_resident=True
        ),
        ProcessInfo(40, 1.0, "bash", ("bash",), gib),  # scanned but no workload
        ProcessInfo(
            50, 5.0, "python3", ("vllm", "serve", "--kv-cache-memory-bytes", "²"), gib
        ),  # garbage cap
    )
    snap = Snapshot(sample=Sample(ts=1.0, processes=procs), diagnosis=None, workloads=group_workloads(procs))
    m = _render(snap)
    assert value(m, "sparkwatchd_workloads", kind="vllm", capped="true") == 1
    assert value(m, "sparkwatchd_workload_memory_bytes", kind="vllm", capped="true") == 52 * gib
    assert value(m, "sparkwatchd_workloads", kind="vllm", capped="false") == 1  # the garbage one
    assert value(m, "sparkwatchd_workloads", kind="ollama", capped="false") == 1
    assert value(m, "sparkwatchd_workloads", kind="trainer", capped="false") == 1
    assert value(m, "sparkwatchd_workload_memory_bytes", kind="trainer", capped="false") == 9 * gib
    assert value(m, "sparkwatchd_workloads", kind="other", capped="false") == 0
    # The exporter only formats the table the diagnosis published: none published, no workloads.
    empty = _render(Snapshot(sample=Sample(ts=1.0, processes=procs), diagnosis=None))
    assert value(empty, "sparkwatchd_workloads", kind="vllm", capped="true") == 0
    assert value(m, "sparkwatchd_memory_gpu_attributed_bytes") == 78 * gib


# Every family interfaces.md fixes (counters by their sample name).
INTERFACE_METRICS = [
    "build_info",
    "source_up",
    "source_duration_seconds",
    "source_errors_total",
    "last_sample_timestamp_seconds",
    "gpu_info",
    "gpu_power_watts",
    "gpu_energy_joules_total",
    "gpu_temperature_celsius",
    "gpu_slowdown_temperature_celsius",
    "gpu_sm_clock_hertz",
    "gpu_utilization_ratio",
    "gpu_clock_event_active",
    "gpu_clock_event_seconds_total",
    "gpu_memory_info_supported",
    "memory_total_bytes",
    "memory_available_bytes",
    "memory_available_min_bytes",
    "memory_budget_bytes",
    "memory_cached_bytes",
    "memory_anon_bytes",
    "memory_gpu_attributed_bytes",
    "memory_swap_used_bytes",
    "pressure_memory_waiting_seconds_total",
    "pressure_memory_stalled_seconds_total",
    "major_faults_total",
    "swap_out_pages_total",
    "oom_kills_total",
    "workloads",
    "workload_memory_bytes",
    "finding_level",
    "events_total",
    "training_step_seconds",
    "training_tokens_per_second",
    "training_slowdown_ratio",
    "training_last_report_timestamp_seconds",
]


def test_every_interface_metric_is_described_on_a_machine_without_gpu_or_trainer():
    s = Sample(ts=100.0, meminfo={"MemTotal": 1000, "MemAvailable": 500, "Cached": 10, "AnonPages": 20})
    snap = Snapshot(
        sample=s, diagnosis=None, sources={"nvml": SourceStatus("nvml", False, error="no driver")}
    )
    reg = build_registry(SimpleNamespace(snapshot=lambda: snap, settings=None, overruns=0))
    text = generate_latest(reg).decode()
    described = set(re.findall(r"^# HELP (sparkwatchd_\w+)", text, re.M))
    missing = [
        n
        for n in INTERFACE_METRICS
        if f"sparkwatchd_{n}" not in described and f"sparkwatchd_{n.removesuffix('_total')}" not in described
    ]
    assert not missing
    # No GPU: the gpu families carry no series (absent, never a false zero).
    assert not re.search(r"^sparkwatchd_gpu_power_watts\{", text, re.M)
