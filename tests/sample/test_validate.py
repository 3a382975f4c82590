"""Every trace-v1 field is checked where a line is parsed: exit 65 naming file, line and field, or skipped.

Each case below ended in a traceback (replay) or a 500 (run --replay) before the checks existed.
"""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_watchd import cli
from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.sample.model import Sample
from spark_watchd.sample.trace import TraceError, parse_line, read_trace
from spark_watchd.sources.replay import ReplayFeed
from spark_watchd.web.http import Request
from tests.conftest import REPO
from tests.support.jsonpaths import json_paths

EVICTION = REPO / "spark_watchd" / "scenarios" / "eviction.jsonl"
LINES = EVICTION.read_text().splitlines()[:6]
BASE = json.loads(LINES[0])
GET_PATHS = ("/metrics", "/api/v1/status", "/api/v1/workloads", "/")


def _set(obj: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(obj)
    cur = out
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value
    return out


# (path into the first sample, bad value, field the error must name)
BAD = [
    (("vmstat", "pgmajfault"), 1.5, "vmstat.pgmajfault"),  # a float where a counter is an int
    (("meminfo", "MemAvailable"), "12", "meminfo.MemAvailable"),  # a string where a number is
    (("meminfo", "MemTotal"), 10**400, "meminfo.MemTotal"),  # 400 digits
    (("gpus", 0, "power_w"), "high", "gpus[0].power_w"),
    (("gpus", 0, "temp_c"), math.inf, "gpus[0].temp_c"),  # what 1e400 decodes to
    (("gpus", 0, "clocks_event_counters_us"), [1, 2], "gpus[0].clocks_event_counters_us"),
    (("gpus", 0, "clocks_event_reasons"), -4, "gpus[0].clocks_event_reasons"),
    (
        ("gpus", 0, "clocks_event_counters_us", "sw_thermal"),
        -1,
        "gpus[0].clocks_event_counters_us.sw_thermal",
    ),
    (("gpus", 0), [1, 2], "gpus[0]"),  # a list where an object is
    (("gpus",), {"index": 0}, "gpus"),
    (("psi_memory", "some", "avg10"), "x", "psi_memory.some.avg10"),
    (("psi_memory",), [], "psi_memory"),
    (("sensors", 0, "temp_c"), {"c": 1}, "sensors[0].temp_c"),
    (("processes", 0, "cmdline"), "vllm serve", "processes[0].cmdline"),
    (("processes", 0, "pid"), 1.5, "processes[0].pid"),
    (("processes", 0, "rss_bytes"), "big", "processes[0].rss_bytes"),
    (("processes", 0, "gpu_resident"), "yes", "processes[0].gpu_resident"),
    (("processes", 0, "ppid"), -1, "processes[0].ppid"),
    (("throughput",), [{"ts": 1.0, "step": 3}], "throughput[0].job"),
    (("throughput",), [{"job": "j", "step": "3"}], "throughput[0].step"),
    (("uptime_s",), True, "uptime_s"),
    (("mem_available_min_kb",), 2.5, "mem_available_min_kb"),
    (("host",), 7, "host"),
    (("driver_events",), [{"ts": 1.0, "gpu": 0, "xid": 79, "source": "dmesg", "text": "x"}], "source"),
    (("driver_events",), [{"ts": 1.0, "gpu": "0", "xid": None, "source": "nvml", "text": "x"}], "gpu"),
    (("driver_events",), [{"ts": 1.0, "xid": 79, "source": "journal", "text": "x", "count": 0}], "count"),
    (("driver_events",), [{"ts": 1.0, "xid": 79, "source": "journal", "text": "x", "pci": 1}], "pci"),
    (
        ("driver_events",),
        [{"ts": 1.0, "xid": 79, "source": "journal", "text": "x", "boot_end_ts": "x"}],
        "boot_end_ts",
    ),
    (("board",), [1], "board"),
    (("board",), {"power_w": {"dc_input": "135"}}, "board.power_w.dc_input"),
    (("board",), {"temps_c": {"tj_max": math.inf}}, "board.temps_c.tj_max"),
    (("board",), {"energy_j": [1]}, "board.energy_j"),
    (("board",), {"prochot": 1.5}, "board.prochot"),
]


def _trace(tmp_path, bad_line: str):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([LINES[0], LINES[1], bad_line, *LINES[2:]]) + "\n")
    return path


def _replay(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(["replay", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize(("path", "value", "field"), BAD, ids=[b[2] for b in BAD])
def test_bad_field_exits_65_naming_file_line_and_field_or_is_skipped(tmp_path, capsys, path, value, field):
    trace = _trace(tmp_path, json.dumps(_set(BASE, path, value)))
    rc, out, err = _replay(capsys, str(trace), "--format", "jsonl")
    assert rc == 65, err
    assert f"{trace}:3: field '" in err and field in err and "Traceback" not in err
    assert len(out.splitlines()) == 2  # the samples before the bad line were judged and written
    rc, out, err = _replay(capsys, str(trace), "--format", "jsonl", "--skip-bad")
    assert rc == 0, err
    assert len(out.splitlines()) == len(LINES) and ":3:" in err


def test_optional_new_fields_are_accepted_when_well_formed(tmp_path):
    good = _set(BASE, ("processes", 0, "ppid"), 1)
    good["driver_events"] = [
        {"ts": 1.0, "gpu": None, "xid": None, "source": "journal", "text": "NVRM: Xid 79"}
    ]
    good["board"] = {"chip": "spbm", "power_w": {"gpu": 12.5, "pl1": 100.0}, "prochot": 0, "pl_level": 1}
    assert parse_line(json.dumps(good))["driver_events"][0]["source"] == "journal"
    good["board"] = {
        "chip": "spbm",
        "power_w": {"dc_input": 135.6},
        "temps_c": {"tj_max_c": 0.0},
        "prochot": 1,
    }
    assert Sample.from_dict(parse_line(json.dumps(good))).board.prochot == 1
    old = dict(BASE)
    for key in ("host", "psi_memory", "sensors", "throughput", "mem_available_min_kb"):
        old.pop(key)  # an old or minimal trace: missing optional keys are "not sampled"
    assert Sample.from_dict(parse_line(json.dumps(old))).psi_memory is None


def test_deeply_nested_line_and_directory_exit_65(tmp_path, capsys):
    trace = _trace(tmp_path, '{"v": 1, "ts": 1, "gpus": ' + "[" * 100_000 + "]" * 100_000 + "}")
    rc, _, err = _replay(capsys, str(trace))
    assert rc == 65 and f"{trace}:3:" in err and "nested too deep" in err
    rc, _, err = _replay(capsys, str(tmp_path))
    assert rc == 65 and str(tmp_path) in err and "Traceback" not in err


def test_run_replay_of_a_directory_or_an_unreadable_trace_exits_65(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SPARK_WATCHD_CONFIG", raising=False)
    # In-process runs must not reconfigure structlog for the tests that follow (capture_logs).
    monkeypatch.setattr("spark_watchd.commands.run.configure_logging", lambda *a, **k: None)
    assert cli.main(["run", "--listen", "127.0.0.1:0", "--replay", str(tmp_path)]) == 65
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"v": 1, "ts": "soon"}\n')
    assert cli.main(["run", "--listen", "127.0.0.1:0", "--replay", str(bad)]) == 65
    assert "cannot replay" in capsys.readouterr().err


def _serve_all(trace) -> dict[str, int]:
    """Feed a trace through the daemon as `run --replay` does and answer every GET page once."""
    daemon = build(
        load_settings(None, environ={}), replay=ReplayFeed(str(trace), speed=1000.0), state_dir=None
    )
    table = {r.path: r for r in daemon.routes if r.method == "GET"}
    try:
        for _ in range(len(LINES) + 2):
            daemon.tick()
        codes = {}
        for path in GET_PATHS:
            req = Request("GET", path, {}, {"accept": "text/plain"}, b"", "127.0.0.1")
            codes[path] = table[path].handler(req).status
        return codes
    finally:
        daemon.close()


def test_run_replay_skips_each_bad_line_and_every_page_answers(tmp_path):
    lines = [LINES[0]] + [json.dumps(_set(json.loads(LINES[1]), p, v)) for p, v, _ in BAD] + LINES[1:]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    assert _serve_all(trace) == {p: 200 for p in GET_PATHS}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=6,
)


PATHS = [p for p in json_paths(BASE) if p and p[0] not in ("v",)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=_JSON)
def test_any_value_at_any_field_is_refused_at_the_parser_or_judged_without_error(path, value):
    line = json.dumps(_set(BASE, path, value))
    try:
        obj = parse_line(line, "t.jsonl", 1)
    except TraceError as err:
        assert err.lineno == 1 and "t.jsonl:1:" in str(err)
        return
    Diagnoser().observe(Sample.from_dict(obj))  # nothing past the parser sees a bad type


def test_read_trace_error_after_parse_names_the_line(tmp_path):
    trace = _trace(tmp_path, json.dumps(_set(BASE, ("processes", 0, "pid"), None)))
    with pytest.raises(TraceError) as exc:
        list(read_trace(trace))
    assert exc.value.lineno == 3 and "processes[0].pid" in str(exc.value)


def test_a_clocks_event_counter_the_driver_does_not_give_is_null_and_accepted():
    # NvmlSource writes hw_slowdown null (no NVML field counts it alone): every recorded trace has it.
    good = _set(BASE, ("gpus", 0, "clocks_event_counters_us"), {"sw_thermal": 5, "hw_slowdown": None})
    assert parse_line(json.dumps(good))["gpus"][0]["clocks_event_counters_us"]["hw_slowdown"] is None


def test_the_kernel_key_round_trips_and_a_wrong_type_names_it(tmp_path):
    t = tmp_path / "k.jsonl"
    t.write_text(json.dumps(dict(BASE, kernel="7.0.0-1019-nvidia")) + "\n" + json.dumps(BASE) + "\n")
    with_k, without = read_trace(t)
    assert with_k.kernel == "7.0.0-1019-nvidia" and with_k.to_dict()["kernel"] == "7.0.0-1019-nvidia"
    assert without.kernel is None and "kernel" not in without.to_dict()
    t.write_text(json.dumps(dict(BASE, kernel=7)) + "\n")
    with pytest.raises(TraceError, match="kernel"):
        list(read_trace(t))
