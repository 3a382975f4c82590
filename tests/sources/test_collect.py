"""The collector: each source guarded, timed and merged into one Sample; a failing source is down alone, logged once per change."""

from __future__ import annotations

import structlog

from spark_watchd.sample.model import GpuReading, Sample
from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.collect import Collector, build_sample
from tests.support.fakes import FakeSource

GPU = {"index": 0, "name": "NVIDIA GB10", "uuid": "GPU-1", "temp_c": 50.0}


class _Mem:
    """Reads what earlier sources returned this tick; its close() fails."""

    name = "meminfo"

    def collect(self, partial):
        return {"meminfo": {"MemAvailable": 10 + len(partial.get("gpus") or ())}}

    def close(self):
        raise OSError("close failure must not propagate")


def test_failing_source_is_isolated_counted_and_logged_once_per_state_change():
    flaky = FakeSource("nvml", {"gpus": [GPU]})
    with structlog.testing.capture_logs() as logs:
        col = Collector((flaky, _Mem()))
        sample, st = col.collect()
        assert st["nvml"].up and sample.gpus[0].temp_c == 50.0 and sample.meminfo["MemAvailable"] == 11
        flaky.fail = "GPU is lost"
        for _ in range(3):
            sample, st = col.collect()
        assert not st["nvml"].up and st["nvml"].errors_total == 3 and st["nvml"].error == "GPU is lost"
        assert st["meminfo"].up and sample.gpus == () and sample.meminfo["MemAvailable"] == 10
        flaky.fail = None
        sample, st = col.collect()
        assert st["nvml"].up and st["nvml"].errors_total == 3
        col.close()
    events = [e["event"] for e in logs if e.get("source") == "nvml"]
    assert events == ["nvml down: GPU is lost", "nvml recovered"]
    assert flaky.closed


def test_a_changed_reason_is_logged_again_but_a_changed_number_is_not():
    src = FakeSource("nvml", {})
    col = Collector((src,))
    with structlog.testing.capture_logs() as logs:
        for reason in (
            "nvmlInit failed: Driver Not Loaded (next retry in 10 s)",
            "nvmlInit failed: Driver Not Loaded (next retry in 20 s)",  # the same state, a new number
            "NVML hung: call did not return in 5 s",  # another state
        ):
            src.fail = reason
            col.collect()
    assert [e["event"].split(":")[0] for e in logs] == ["nvml down", "nvml still down"]


def test_a_source_missing_at_start_up_is_not_news_on_its_first_tick():
    def warnings(expected: bool) -> list[str]:
        src = FakeSource("nvml", {})
        src.fail = "libnvidia-ml.so.1 not found"
        col = Collector((src,))
        if expected:
            col.expected_down.add("nvml")
        with structlog.testing.capture_logs() as logs:
            col.collect()
            col.collect()
        # Debug lines may be filtered out by an earlier configure_logging: judge warnings only.
        return [e["event"] for e in logs if e["log_level"] not in ("debug", "info")]

    assert warnings(expected=False) == ["nvml down: libnvidia-ml.so.1 not found"]
    assert warnings(expected=True) == []  # already said once at start-up


def test_an_exception_without_a_message_is_named_by_its_type_and_the_time_comes_from_the_clock():
    class _Broken:
        name = "sensors"

        def collect(self, partial):
            raise SourceUnavailable()

        def close(self):
            pass

    sample, st = Collector((_Broken(),), clock=lambda: 1234.5).collect()
    assert st["sensors"].error == "SourceUnavailable" and st["sensors"].duration_s >= 0
    assert sample.ts == 1234.5


def test_build_sample_turns_dicts_into_readings_and_skips_absent_lists():
    s = build_sample(10.0, {"host": "spark-01", "gpus": [GPU], "processes": None, "_private": 1})
    assert isinstance(s, Sample) and s.host == "spark-01" and s.ts == 10.0
    assert s.gpus == (GpuReading.from_dict(GPU),) and s.processes == ()
    assert build_sample(0.0, {}).host  # the machine's name when no source said it


def test_every_sample_field_is_built_from_the_samples_own_declaration():
    import dataclasses

    from spark_watchd.sample.board import BoardReading
    from spark_watchd.sample.driver import DriverEvent
    from spark_watchd.sample.kills import KillReport
    from spark_watchd.sample.link import LinkPort, LinkReading
    from spark_watchd.sample.model import ServingProgress
    from spark_watchd.sample.platform import PlatformReading
    from spark_watchd.sample.serving import ServingReading
    from spark_watchd.sample.trace import read_trace
    from spark_watchd.sources.collect import FIELDS
    from tests.conftest import SCENARIOS

    assert set(FIELDS) == {f.name for f in dataclasses.fields(Sample)} - {"ts"}  # no list kept apart
    rich = list(read_trace(SCENARIOS / "eviction.jsonl"))[150]
    port = LinkPort(device="rocep1s0f0", port=1, state="ACTIVE")
    rich = dataclasses.replace(
        rich,
        board=BoardReading(power_w={"sys_total": 120.0}),
        serving=(ServingReading("vllm:8000", "vllm", True, rich.ts),),
        serving_progress=(ServingProgress("vllm:8000", rich.ts - 1, prompt_tokens_total=9.0),),
        link=LinkReading(ports=(port,)),
        driver_events=(DriverEvent(rich.ts - 1, 0, 79, "nvml", "Xid 79"),),
        oom_kills=(KillReport(rich.ts - 1, "kernel", 4121, "python3", "global", anon_rss_kb=1024),),
        platform=PlatformReading(kernel="6.17.0-1031-nvidia", nic_firmware={"rocep1s0f0": "28.45.4028"}),
        kernel="7.0.0-1019-nvidia",
    )
    # What the sources hand the collector is each field's trace-v1 form: every one reaches the Sample.
    parts = {k: v for k, v in rich.to_dict().items() if k not in ("v", "ts")}
    assert set(parts) == set(FIELDS)
    assert build_sample(rich.ts, parts) == rich


def test_a_source_whose_key_no_sample_field_takes_is_down_naming_it_and_the_rest_go_on():
    class _NewSource:
        name = "fans"

        def collect(self, partial):
            return {"fans": [{"rpm": 1200}], "_fans_raw": "x"}

        def close(self):
            pass

    class _Host:
        name = "boot"

        def collect(self, partial):
            return {"host": "spark-01"}

        def close(self):
            pass

    sample, st = Collector((_NewSource(), _Host()), clock=lambda: 5.0).collect()
    assert not st["fans"].up
    assert "returned fans, which no Sample field takes" in st["fans"].error
    assert st["boot"].up and sample.host == "spark-01"
