"""Sample.from_dict: the fast path keeps the trace-v1 shape checks and round-trips every public trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_watchd.sample.model import Sample

SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


@pytest.mark.parametrize(
    ("key", "bad", "says"),
    [
        ("gpus", {}, "'gpus' must be a list, got dict"),
        ("meminfo", [], "'meminfo' must be an object, got list"),
        ("processes", "x", "'processes' must be a list, got str"),
        ("boot_id", 5, "'boot_id' must be a string or null, got int"),
        ("uptime_s", "12", "'uptime_s' must be a number or null, got str"),
    ],
)
def test_a_wrong_shape_names_the_key(key, bad, says):
    with pytest.raises(TypeError, match=says):
        Sample.from_dict({"v": 1, "ts": 1.0, key: bad})


def test_values_of_other_types_are_converted_as_before():
    s = Sample.from_dict(
        {
            "v": 1,
            "ts": 5,
            "uptime_s": 7,
            "gpus": [{"index": "0", "name": 3, "uuid": "GPU-x"}],
            "processes": [
                {"pid": "12", "create_time": 3, "name": "python3", "cmdline": ["a", 1], "rss_bytes": None}
            ],
            "sensors": [{"chip": "acpitz", "label": 1, "temp_c": 40.0}],
        }
    )
    assert s.ts == 5.0 and s.uptime_s == 7
    assert (s.gpus[0].index, s.gpus[0].name) == (0, "3")
    p = s.processes[0]
    assert (p.pid, p.create_time, p.cmdline, p.rss_bytes, p.gpu_resident) == (12, 3.0, ("a", "1"), 0, False)
    assert s.sensors[0].label == "1" and s.sensors[0].crit_c is None


def test_every_fixture_trace_round_trips():
    n = 0
    for path in sorted(SHARED.glob("*.jsonl")):
        if path.name.endswith(".truth.jsonl"):
            continue
        for line in path.read_text().splitlines()[:20]:
            obj = json.loads(line)
            s = Sample.from_dict(obj)
            assert Sample.from_dict(s.to_dict()) == s
            n += 1
    assert n > 100


def test_repeated_sensor_readings_share_one_object_but_keep_their_types():
    a = Sample.from_dict({"v": 1, "ts": 1.0, "sensors": [{"chip": "acpitz", "label": "t1", "temp_c": 70.5}]})
    b = Sample.from_dict({"v": 1, "ts": 2.0, "sensors": [{"chip": "acpitz", "label": "t1", "temp_c": 70.5}]})
    assert a.sensors[0] is b.sensors[0]
    i = Sample.from_dict({"v": 1, "ts": 3.0, "sensors": [{"chip": "acpitz", "label": "t1", "temp_c": 70}]})
    assert type(i.sensors[0].temp_c) is int and i.sensors[0].to_dict()["temp_c"] == 70
