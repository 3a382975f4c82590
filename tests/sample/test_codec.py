"""spark_watchd.sample.codec: orjson when installed, the standard library otherwise, with the same results."""

from __future__ import annotations

import json

import pytest

from spark_watchd.sample import codec as jsonfast

LINE = '{"v":1,"ts":1764403230.5,"meminfo":{"MemAvailable":61234567},"gpus":[{"temp_c":79.5,"power_w":null}]}'


@pytest.fixture(params=["orjson", "stdlib"])
def impl(request, monkeypatch):
    if request.param == "orjson":
        pytest.importorskip("orjson")
    else:
        monkeypatch.setattr(jsonfast, "orjson", None)
    return request.param


def test_loads_matches_json(impl):
    assert jsonfast.loads(LINE) == json.loads(LINE)
    assert (
        jsonfast.loads('{"t": NaN, "n": 123456789012345678901234567890}')["n"]
        == 123456789012345678901234567890
    )


def test_loads_error_is_the_json_error(impl):
    with pytest.raises(json.JSONDecodeError) as exc:
        jsonfast.loads('{"v": 1, ')
    assert exc.value.msg.startswith("Expecting property name")


def test_dumps_compact_matches_json(impl):
    obj = {"ts": 1764403230.5, "a": [1, 2.25, None, True], "t": ("x", "y"), "big": 2**70, "s": "µ"}
    want = json.dumps(obj, separators=(",", ":"), default=str)
    assert json.loads(jsonfast.dumps_compact(obj)) == json.loads(want)
    assert jsonfast.dumps_compact({"x": object}) == json.dumps({"x": str(object)}, separators=(",", ":"))


def test_dumps_line_is_the_compact_text_and_a_newline_in_utf8(impl):
    for obj in ({"ts": 1.5, "s": "µ 86 °C", "t": ("x",), "big": 2**70}, {"x": object}, [1, None, True]):
        assert jsonfast.dumps_line(obj) == (jsonfast.dumps_compact(obj) + "\n").encode()
