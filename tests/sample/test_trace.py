"""trace-v1 I/O: round trip, line-numbered errors, torn-tail repair, fuzzed reader."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sample.model import GpuReading, ProcessInfo, Sample, ThroughputReading
from spark_watchd.sample.trace import TraceError, TraceWriter, iter_trace_dicts, read_trace, repair_torn_tail

TRACE_KEYS = {
    "v",
    "ts",
    "host",
    "boot_id",
    "uptime_s",
    "gpus",
    "meminfo",
    "psi_memory",
    "vmstat",
    "mem_available_min_kb",
    "sensors",
    "processes",
    "throughput",
    "driver_events",
}


def _sample(ts: float) -> Sample:
    return Sample(
        ts=ts,
        host="spark-01",
        boot_id="b-1",
        uptime_s=100.0,
        gpus=(GpuReading(index=0, name="NVIDIA GB10", uuid="GPU-x", power_w=92.0, temp_c=79.0),),
        meminfo={"MemTotal": 127600748, "MemAvailable": 50000000},
        vmstat={"pgmajfault": 1, "pswpout": 0, "oom_kill": 0},
        processes=(
            ProcessInfo(
                pid=5, create_time=1.5, name="python3", cmdline=("python3", "train.py"), rss_bytes=10
            ),
        ),
        throughput=(ThroughputReading(job="j", ts=ts, step=3, step_seconds=2.0, tokens_per_second=2048.0),),
        driver_events=(DriverEvent(ts - 0.5, 0, 79, "nvml", "Xid 79 (NVML event)"),),
    )


def test_writer_emits_every_trace_v1_key_and_reads_back_equal(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        w.write(_sample(1.0))
        w.write(_sample(2.0))
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        obj = json.loads(line)
        assert set(obj) == TRACE_KEYS
        assert set(obj["gpus"][0]) >= {
            "index",
            "name",
            "uuid",
            "power_w",
            "mem_used_bytes",
            "mem_total_bytes",
        }
        assert obj["gpus"][0]["mem_total_bytes"] is None
    back = list(read_trace(path))
    assert back == [_sample(1.0), _sample(2.0)]


def test_public_trace_round_trips_line_for_line(traces_dir):
    src = traces_dir / "eviction.jsonl"
    for line in src.read_text().splitlines()[:50]:
        obj = json.loads(line)
        again = Sample.from_dict(obj).to_dict()
        assert again == obj


@pytest.mark.parametrize(
    "line,reason",
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"ts": 1}', "missing key 'v'"),
        ('{"v": 1}', "missing key 'ts'"),
        ('{"v": 2, "ts": 1}', "unsupported trace version"),
        ('{"v": 1, "ts": "x"}', "field 'ts': must be a number"),
    ],
)
def test_bad_line_error_names_the_line_number(tmp_path, line, reason):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_sample(1.0).to_dict()) + "\n\n" + line + "\n")
    with pytest.raises(TraceError) as exc:
        list(read_trace(path))
    assert exc.value.lineno == 3
    assert reason in str(exc.value)
    assert f"{path}:3:" in str(exc.value)


def test_skip_bad_reports_and_continues(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = json.dumps(_sample(1.0).to_dict())
    path.write_text(f"{good}\ngarbage\n{good}\n")
    skipped = []
    out = list(read_trace(path, skip_bad=True, on_skip=skipped.append))
    assert len(out) == 2
    assert [e.lineno for e in skipped] == [2]


def test_torn_last_line_is_cut_and_next_writer_appends_cleanly(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        w.write(_sample(1.0))
    full = json.dumps(_sample(2.0).to_dict())
    with open(path, "a") as fh:
        fh.write(full[: len(full) // 2])  # killed mid-write
    with TraceWriter(path) as w:
        assert w.repaired_bytes == len(full) // 2
        w.write(_sample(3.0))
    assert [s.ts for s in read_trace(path)] == [1.0, 3.0]


def test_complete_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_sample(1.0).to_dict()))
    assert repair_torn_tail(path) == 0
    assert path.read_text().endswith("\n")
    assert [s.ts for s in read_trace(path)] == [1.0]


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    st.lists(
        st.one_of(st.text(max_size=80), st.binary(max_size=80).map(lambda b: b.decode("latin-1"))), max_size=6
    )
)
def test_fuzzed_lines_raise_only_trace_errors(tmp_path, lines):
    path = tmp_path / "fuzz.jsonl"
    path.write_text(
        "\n".join(line.replace("\n", " ") for line in lines) + "\n", encoding="utf-8", errors="replace"
    )
    try:
        list(read_trace(path))
    except TraceError as err:
        assert err.lineno >= 0
    # With skip_bad nothing ever raises.
    list(read_trace(path, skip_bad=True))
    list(iter_trace_dicts(path, skip_bad=True))


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            ["gpus", "meminfo", "processes", "throughput", "sensors", "vmstat", "psi_memory", "host"]
        ),
        st.one_of(
            st.none(),
            st.integers(),
            st.text(max_size=5),
            st.lists(st.integers(), max_size=2),
            st.lists(st.dictionaries(st.text(max_size=4), st.integers(), max_size=2), max_size=2),
        ),
    )
)
def test_fuzzed_sample_fields_give_trace_errors_not_crashes(tmp_path_factory, fields):
    path = tmp_path_factory.mktemp("f") / "f.jsonl"
    path.write_text(json.dumps({"v": 1, "ts": 1.0, **fields}) + "\n")
    try:
        list(read_trace(path))
    except TraceError as err:
        assert f"{path}:1: field '" in str(err)
