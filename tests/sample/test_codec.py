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


def _strict(text):
    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


NONFINITE = {
    "a": float("nan"),
    "b": [1.5, float("inf"), (float("-inf"), "x")],
    "c": {"d": {"e": float("nan")}},
}
AS_NULL = {"a": None, "b": [1.5, None, [None, "x"]], "c": {"d": {"e": None}}}


def test_dumps_strict_writes_null_for_nan_and_infinity_and_is_json_dumps_otherwise():
    assert _strict(jsonfast.dumps_strict(NONFINITE)) == AS_NULL
    assert jsonfast.dumps_strict(NONFINITE, indent=2) == json.dumps(AS_NULL, indent=2)
    finite = {"ts": 1764403230.5, "a": [1, 2.25, None, True], "s": "µ", "big": 2**70}
    assert jsonfast.dumps_strict(finite, sort_keys=True) == json.dumps(finite, sort_keys=True)
    with pytest.raises(ValueError, match="Circular reference"):  # other errors are json's own
        loop: list = []
        loop.append(loop)
        jsonfast.dumps_strict(loop)


def test_every_dumps_of_the_codec_is_strict(impl):
    """The standard-library paths (no orjson, or an integer past 64 bits) write null as orjson does."""
    for obj in (NONFINITE, {**NONFINITE, "big": 2**70}):
        want = {**AS_NULL, **({"big": 2**70} if "big" in obj else {})}
        assert _strict(jsonfast.dumps_compact(obj)) == want
        assert _strict(jsonfast.dumps_line(obj)) == want
