"""The one-pass reader (trace.sample_from, Sample.fast) accepts only what the exact path accepts and builds the same Sample."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_watchd.sample.codec import loads
from spark_watchd.sample.model import Sample, Sensor
from spark_watchd.sample.trace import TraceError, parse_line, read_trace, sample_from
from tests.support.jsonpaths import json_paths

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted(
    p
    for p in [
        *(ROOT / "tests/fixtures/traces").rglob("*.jsonl"),
        *(ROOT / "spark_watchd/scenarios").glob("*.jsonl"),
    ]
    if not p.name.endswith(".truth.jsonl")
)


def _exact(obj) -> Sample:
    return Sample.from_dict(parse_line(json.dumps(obj)))


def _same(a: Sample, b: Sample) -> bool:
    """Equal, and equal in every type too (70 == 70.0 and 0.0 == -0.0 for ==, not in the trace they write)."""
    return a == b and json.dumps(a.to_dict()) == json.dumps(b.to_dict())


def test_every_fixture_line_takes_the_one_pass_and_gives_the_exact_sample():
    n = 0
    for path in TRACES:
        for line in path.read_text().splitlines():
            obj = loads(line)
            fast = sample_from(copy.deepcopy(obj))
            assert fast is not None, f"{path.name}: off the one-pass shape"
            assert _same(fast, _exact(obj)), path.name
            n += 1
    assert n > 10_000


def _line_with(*keys: str) -> dict:
    for path in TRACES:
        for line in path.read_text().splitlines():
            obj = loads(line)
            if all(obj.get(k) for k in keys):
                return obj
    raise AssertionError(keys)


# Bases with every record kind and every optional key somewhere, for the fuzzer to mutate.
BASES = [
    _line_with("gpus", "sensors", "processes", "throughput"),
    _line_with("board"),
    _line_with("driver_events"),
    _line_with("serving"),
    _line_with("link"),
    _line_with("oom_kills"),
]
PATHS = [(b, p) for b in range(len(BASES)) for p in json_paths(BASES[b]) if p]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=6,
)


def _set(obj: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(obj)
    cur = out
    for key in path[:-1]:
        cur = cur[key]
    if value is _DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return out


_DELETE = object()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(PATHS), value=_JSON | st.just(_DELETE))
def test_a_changed_value_anywhere_is_accepted_only_as_the_exact_path_accepts_it(where, value):
    base, path = where
    obj = _set(BASES[base], path, value)
    # The one pass reads what the codec decoded from a line (an integer past 64 bits comes back a float), as
    # read_trace hands it over; the exact path reads the same line.
    fast = sample_from(loads(json.dumps(obj)))
    try:
        exact = _exact(obj)
    except (TraceError, TypeError, ValueError, KeyError, AttributeError):
        assert fast is None  # refused by the exact path: never accepted by the one pass
        return
    assert fast is None or _same(fast, exact)


def test_sensor_readings_keep_their_types_and_the_sign_of_zero():
    def sensor(temp):
        obj = copy.deepcopy(BASES[0])
        obj["sensors"] = [{"chip": "acpitz", "label": "t9", "temp_c": temp, "crit_c": None}]
        return sample_from(obj).sensors[0]

    assert sensor(70.5) is sensor(70.5)  # one object for a repeated reading
    for temp in (70.0, 70, 70.0, 0.0, -0.0, 0.0, 0, -0.0):
        got = sensor(temp).temp_c
        assert type(got) is type(temp) and json.dumps(got) == json.dumps(temp)


def test_the_sensor_memo_is_bounded():
    obj = copy.deepcopy(BASES[0])
    for i in range(5000):
        obj["sensors"] = [{"chip": "acpitz", "label": "t1", "temp_c": 20 + i / 1000, "crit_c": 104.8}]
        sample_from(obj)
    assert 0 < len(Sensor.__trace_memo__) <= 4096


def test_read_trace_takes_the_one_pass_path(tmp_path, monkeypatch):
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(BASES[0]) + "\n")
    monkeypatch.setattr(Sample, "from_dict", None)  # the exact builder is not called on the common shape
    assert [s.ts for s in read_trace(trace)] == [BASES[0]["ts"]]


@pytest.mark.parametrize(
    ("value", "ok"),
    [(0, True), (2**64 - 1, True), (2**64, False), (-1, False), (True, False), (1.0, False), (None, False)],
)
def test_meminfo_counters_at_their_bounds(value, ok):
    obj = copy.deepcopy(BASES[0])
    obj["meminfo"]["MemFree"] = value
    assert (sample_from(copy.deepcopy(obj)) is not None) is ok
    if ok:
        assert _exact(obj).meminfo["MemFree"] == value
    else:
        with pytest.raises(TraceError, match="meminfo.MemFree"):
            parse_line(json.dumps(obj))


def test_the_fast_constructor_builds_the_same_frozen_record_as_the_dataclass():
    import dataclasses

    from spark_watchd.sample.model import GpuReading
    from spark_watchd.sample.schema import traced

    values = {"index": 0, "name": "NVIDIA GB10", "uuid": "GPU-x", "power_w": 92.5, "temp_c": 79.0}
    values |= {"sm_clock_mhz": 2418, "clocks_event_reasons": 4, "applications_clock_mhz": 2418}
    values |= {"slowdown_temp_c": 86.0, "energy_j": 1.5, "util_pct": 99.0, "driver_version": "580.95"}
    built = GpuReading(**values)
    made = GpuReading._make(**{f.name: getattr(built, f.name) for f in dataclasses.fields(GpuReading)})
    assert (
        type(made) is GpuReading and made == built and hash(made) == hash(built) and repr(made) == repr(built)
    )
    assert dataclasses.asdict(made) == dataclasses.asdict(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.power_w = 1.0

    class Special:
        def __post_init__(self):
            pass

    with pytest.raises(TypeError, match="not a frozen slots dataclass"):
        traced(Special)
