"""Every GPU reading reaches /metrics: a field added to GpuReading without its family fails here."""

from __future__ import annotations

import dataclasses

from prometheus_client.exposition import generate_latest

from spark_watchd.export.prometheus import gpu_families
from spark_watchd.sample.model import GpuReading, Sample
from spark_watchd.sample.schema import specs

# Readings deliberately not exported, and why.
NOT_EXPORTED = {
    "mem_used_bytes": "null on GB10 (unified memory): the pool's figures come from /proc/meminfo",
}
READING = GpuReading(
    index=1,
    name="NVIDIA GB10",
    uuid="GPU-x",
    power_w=91.5,
    temp_c=79.5,
    sm_clock_mhz=2418,
    clocks_event_reasons=0x20,
    clocks_event_counters_us={"sw_thermal": 5_000_000},
    applications_clock_mhz=2418,
    slowdown_temp_c=86.0,
    shutdown_temp_c=90.0,
    energy_j=1234.5,
    util_pct=96.0,
    mem_used_bytes=2**30,
    mem_total_bytes=2**37,
    driver_version="580.95.05",
)


class _Registry:
    def __init__(self, sample: Sample):
        self.sample = sample

    def collect(self):
        return gpu_families(self.sample)


def _metrics(gpu: GpuReading) -> bytes:
    return generate_latest(_Registry(Sample(ts=1.0, gpus=(gpu,))))


def test_every_gpu_reading_changes_the_exposition_or_is_listed_as_not_exported():
    full = _metrics(READING)
    silent = []
    for spec in specs(GpuReading):
        value = getattr(READING, spec.key)
        assert value not in (None, {}, ""), f"give {spec.key} a value in READING"
        other = dataclasses.replace(READING, **{spec.key: spec.default})
        if _metrics(other) == full:
            silent.append(spec.key)
    assert sorted(silent) == sorted(NOT_EXPORTED)
