"""The source tuple: order, fallback choice, a whole tick on a fixture root, no CUDA, no leaks."""

from __future__ import annotations

import stat
import subprocess
import sys

import pytest

from spark_watchd.sample.model import Sample
from spark_watchd.sources import build_sources, missing_sources, nvml_library_problem
from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.settings import SourcesSettings
from spark_watchd.testing import FakeNvml
from tests.conftest import FIXTURES, REPO
from tests.support.resources import Baseline

GB10 = FIXTURES / "hosts" / "gb10-eviction"
ORDER = [
    "nvml",
    "meminfo",
    "psi",
    "vmstat",
    "boot",
    "processes",
    "sensors",
    "board",
    "link",
    "platform",
    "driver_events",
    "oom_killers",
    "ray_oom",
    "memcg",
]


def tick(sources):
    """What the daemon does each tick, reduced: collect each source alone, merge, build a Sample."""
    partial: dict = {}
    status = {}
    for src in sources:
        try:
            partial.update(src.collect(partial))
            status[src.name] = None
        except Exception as exc:  # noqa: BLE001 - every source fails alone
            status[src.name] = str(exc)
    fields = {k: v for k, v in partial.items() if not k.startswith("_")}
    return Sample(ts=1764407940.0, **fields), status


def test_tick_on_gb10_fixture_with_fake_nvml_fills_every_trace_v1_key():
    settings = SourcesSettings(
        proc_root=str(GB10 / "proc"), sys_root=str(GB10 / "sys"), fast_watch_interval_s=0
    )
    sources = build_sources(settings, nvml=FakeNvml.gb10())
    assert [s.name for s in sources] == ORDER
    sample, status = tick(sources)
    assert all(v is None for v in status.values()), status
    d = sample.to_dict()
    assert d["meminfo"]["MemAvailable"] == 2919641 and d["mem_available_min_kb"] == 2919641
    assert d["psi_memory"]["some"]["avg10"] == 35.63 and d["vmstat"]["pswpout"] == 1429410
    assert d["boot_id"] == "b8a1abcd-1a69-16c7-4da4-f9fc3c6da5d7" and d["host"] == "spark-01"
    assert d["gpus"][0]["slowdown_temp_c"] == 86.0 and d["gpus"][0]["mem_total_bytes"] is None
    assert len(d["sensors"]) == 10  # 7 acpitz, 2 nvme, 1 mlx5
    for s in sources:
        s.close()


def test_root_settings_are_accepted_too():
    from spark_watchd.config import Settings

    sources = build_sources(Settings(), nvml=FakeNvml.gb10())
    assert [s.name for s in sources] == [*ORDER, "serving"]  # [serving] lives in the root settings
    off = build_sources(Settings(serving={"enabled": False}), nvml=FakeNvml.gb10())
    assert [s.name for s in off] == ORDER
    for s in (*sources, *off):
        s.close()


@pytest.mark.skipif(nvml_library_problem() is None, reason="this machine has NVML")
def test_machine_without_gpu_lists_nvml_down_with_the_reason(tmp_path):
    settings = SourcesSettings(nvidia_smi_path=str(tmp_path / "nvidia-smi"), fast_watch_interval_s=0)
    sources = build_sources(settings)
    assert sources[0].name == "nvml"
    with pytest.raises(SourceUnavailable, match="libnvidia-ml.so.1 not found|nvidia-ml-py"):
        sources[0].collect({})
    sample, status = tick(sources)
    assert status["meminfo"] is None and status["nvml"] and sample.gpus == ()
    reasons = dict(missing_sources(settings))
    assert "libnvidia-ml.so.1 not found" in reasons["nvml"] and "no " in reasons["nvml"]
    for s in sources:
        s.close()


@pytest.mark.skipif(nvml_library_problem() is None, reason="this machine has NVML")
def test_nvidia_smi_fallback_is_chosen_when_nvml_cannot_load(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    settings = SourcesSettings(nvidia_smi_path=str(smi), fast_watch_interval_s=0)
    assert build_sources(settings)[0].name == "nvidia_smi"
    assert "instead" in dict(missing_sources(settings))["nvml"]


def test_missing_psi_is_reported():
    settings = SourcesSettings(proc_root=str(FIXTURES / "hosts" / "no-psi" / "proc"))
    assert "psi" in dict(missing_sources(settings, nvml=FakeNvml.gb10()))


def test_building_and_collecting_never_imports_cuda_or_torch():
    code = (
        "import sys\n"
        "from spark_watchd.sources import build_sources\n"
        "from spark_watchd.testing import FakeNvml\n"
        "for s in build_sources(None, nvml=FakeNvml.gb10()):\n"
        "    s.collect({}); s.close()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'cuda', 'pycuda', 'cupy', 'numba')]\n"
        "assert not bad, bad\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=str(REPO), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr


def test_ticks_with_the_fast_watch_leak_no_threads_or_fds():
    base = Baseline()
    settings = SourcesSettings(
        proc_root=str(GB10 / "proc"), sys_root=str(GB10 / "sys"), fast_watch_interval_s=0.1
    )
    for _ in range(3):
        sources = build_sources(settings, nvml=FakeNvml.gb10())
        for _ in range(3):
            tick(sources)
        for s in sources:
            s.close()
    base.assert_no_leak()  # compared by what each descriptor points at, once closing ones are gone


def test_without_the_nvml_library_or_nvidia_smi_the_nvml_error_says_both(monkeypatch, tmp_path):
    # What the page and `status` show for such a machine: not only "NVML missing" (issue 19 §10).
    import spark_watchd.sources as sources

    monkeypatch.setattr(sources, "nvml_library_problem", lambda: "libnvidia-ml.so.1 not found")
    settings = SourcesSettings(nvidia_smi_path=str(tmp_path / "nvidia-smi"))
    (gpu, *rest) = sources.build_sources(settings)
    try:
        assert gpu.name == "nvml"
        with pytest.raises(SourceUnavailable) as exc:
            gpu.collect({})
        text = str(exc.value)
        assert f"; no {tmp_path / 'nvidia-smi'} either (next retry on the next tick)" in text, text
        assert "in 0 s" not in text
    finally:
        for src in (gpu, *rest):
            src.close()
