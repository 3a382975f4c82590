"""The memory view of one sample: bytes from /proc/meminfo KiB, the budget against the reserve, None where absent."""

from __future__ import annotations

from spark_watchd.sample.memory import KIB, memory_view
from spark_watchd.sample.model import ProcessInfo, Sample

MEMINFO = {
    "MemTotal": 128_000_000,
    "MemAvailable": 40_000_000,
    "SwapTotal": 16_000_000,
    "SwapFree": 15_000_000,
    "Cached": 9_000_000,
    "AnonPages": 70_000_000,
}


def _proc(pid: int, gpu: int | None) -> ProcessInfo:
    return ProcessInfo(pid, 1.0, "python", ("python",), 1 << 20, gpu_mem_bytes=gpu)


def test_meminfo_kib_become_bytes():
    v = memory_view(Sample(ts=1.0, meminfo=MEMINFO))
    assert v.total_bytes == 128_000_000 * KIB
    assert v.available_bytes == 40_000_000 * KIB
    assert v.cached_bytes == 9_000_000 * KIB
    assert v.anon_bytes == 70_000_000 * KIB


def test_swap_used_is_total_minus_free():
    assert memory_view(Sample(ts=1.0, meminfo=MEMINFO)).swap_used_bytes == 1_000_000 * KIB


def test_swap_used_is_none_when_either_swap_line_is_missing():
    for missing in ("SwapTotal", "SwapFree"):
        mi = {k: v for k, v in MEMINFO.items() if k != missing}
        assert memory_view(Sample(ts=1.0, meminfo=mi)).swap_used_bytes is None


def test_budget_is_available_minus_the_reserve_and_goes_negative_unclamped():
    reserve = 50_000_000 * KIB  # more than is available: into the reserve
    v = memory_view(Sample(ts=1.0, meminfo=MEMINFO), os_reserve_bytes=reserve)
    assert v.os_reserve_bytes == reserve
    assert v.budget_bytes == (40_000_000 - 50_000_000) * KIB
    assert v.budget_bytes < 0


def test_budget_without_a_reserve_is_what_is_available():
    v = memory_view(Sample(ts=1.0, meminfo=MEMINFO))
    assert v.budget_bytes == v.available_bytes and v.os_reserve_bytes == 0


def test_available_min_is_the_fast_watch_low_when_there_is_one():
    v = memory_view(Sample(ts=1.0, meminfo=MEMINFO, mem_available_min_kb=35_000_000))
    assert v.available_min_bytes == 35_000_000 * KIB
    assert v.available_bytes == 40_000_000 * KIB  # the headline figure stays the tick's own


def test_available_min_falls_back_to_available_without_a_fast_watch():
    v = memory_view(Sample(ts=1.0, meminfo=MEMINFO))
    assert v.available_min_bytes == v.available_bytes


def test_an_empty_meminfo_gives_none_not_zero():
    v = memory_view(Sample(ts=1.0), os_reserve_bytes=4 << 30)
    assert (v.total_bytes, v.available_bytes, v.available_min_bytes, v.budget_bytes) == (None,) * 4
    assert (v.swap_used_bytes, v.cached_bytes, v.anon_bytes) == (None, None, None)
    assert v.os_reserve_bytes == 4 << 30


def test_gpu_attributed_sums_only_processes_that_report_gpu_memory():
    procs = (_proc(1, 3 << 30), _proc(2, None), _proc(3, 0), _proc(4, 1 << 30))
    v = memory_view(Sample(ts=1.0, meminfo=MEMINFO, processes=procs))
    assert v.gpu_attributed_bytes == 4 << 30


def test_gpu_attributed_is_zero_without_processes():
    assert memory_view(Sample(ts=1.0, meminfo=MEMINFO)).gpu_attributed_bytes == 0


def test_to_dict_carries_every_field_by_name():
    v = memory_view(Sample(ts=1.0, meminfo=MEMINFO), os_reserve_bytes=KIB)
    d = v.to_dict()
    assert d["budget_bytes"] == 40_000_000 * KIB - KIB
    assert d["swap_used_bytes"] == 1_000_000 * KIB
    assert set(d) == set(v.__dataclass_fields__)
