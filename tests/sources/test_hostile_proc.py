"""A hostile /proc (400-digit values, NaN uptime, malformed /proc/PID entries): sources go down, never scrapes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.sources import build_sources
from spark_watchd.sources.collect import Collector
from spark_watchd.sources.memwatch import scan_mem_available_kb, scan_psi_some_avg10
from spark_watchd.sources.processes import ProcessSource
from spark_watchd.sources.procfs import parse_stat
from spark_watchd.testing import FakeNvml
from spark_watchd.web.http import Request
from tests.conftest import FIXTURES
from tests.daemon_helpers import samples, value

HOSTILE = FIXTURES / "hosts" / "hostile" / "proc"
VM = FIXTURES / "hosts" / "daemon-vm" / "proc"


def _settings(root):
    return load_settings(
        None,
        environ={
            "SPARK_WATCHD_SOURCES__PROC_ROOT": str(root),
            "SPARK_WATCHD_SOURCES__FAST_WATCH_INTERVAL_S": "0",
        },
    )


def test_impossible_proc_values_mark_each_source_down_and_every_page_still_answers():
    s = _settings(HOSTILE)
    daemon = build(s, sources=build_sources(s, nvml=FakeNvml()), state_dir=None)
    table = {r.path: r for r in daemon.routes if r.method == "GET"}
    try:
        daemon.tick()
        reply = table["/metrics"].handler(Request("GET", "/metrics", {}, {}, b"", "127.0.0.1"))
        assert reply.status == 200
        parsed = samples(reply.body.decode())
        for source in ("meminfo", "vmstat", "psi", "boot"):
            assert value(parsed, "sparkwatchd_source_up", source=source) == 0, source
        assert value(parsed, "sparkwatchd_source_up", source="processes") == 1
        status = table["/api/v1/status"].handler(Request("GET", "/api/v1/status", {}, {}, b"", "127.0.0.1"))
        assert status.status == 200
        errors = {k: v.get("error") for k, v in json.loads(status.body)["sources"].items()}
        assert "beyond 64 bits" in errors["vmstat"] and "over 100" in errors["psi"]
        assert "impossible value" in errors["boot"] and "meminfo" in errors["meminfo"]
    finally:
        daemon.close()


def test_process_scan_reads_the_configured_root_and_skips_only_the_malformed_entries():
    src = ProcessSource(proc_root=str(HOSTILE))
    out = {p.pid: p for p in src.collect({})["processes"]}
    # 100 train.py and 200 vllm (comm holding ') ('); 300 (no '(comm)') and 400 (400-digit rss) skipped;
    # 500 bash is not a workload; 600 has no files (exited mid-scan).
    assert sorted(out) == [100, 200]
    assert src.malformed == 2
    assert out[200].name == "vllm) (x)" and out[200].cmdline[-1] == "0.5"
    assert out[100].create_time == 1764400000 + 71380 / 100 and out[100].rss_bytes > 0
    assert build_sources(_settings(HOSTILE), nvml=FakeNvml())[5].collect({})["processes"] != ()


def test_mem_watch_scanners_drop_impossible_readings():
    assert scan_mem_available_kb(b"MemAvailable: " + b"9" * 400 + b" kB\n") is None
    assert scan_psi_some_avg10(b"some avg10=nan avg60=0") is None
    assert scan_psi_some_avg10(b"some avg10=250.0 avg60=0") is None
    assert scan_mem_available_kb(b"MemAvailable: 1234 kB\n") == 1234


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=300) | st.lists(st.sampled_from(["(", ")", " ", "1", "-", "9" * 25, "S"])).map("".join)
)
def test_parse_stat_answers_a_tuple_or_a_value_error(text):
    try:
        comm, ppid, start, rss = parse_stat(text)
    except ValueError:
        return
    assert isinstance(comm, str) and ppid >= 0 and 0 <= start < 2**64 and rss >= 0


def test_collector_keeps_healthy_sources_up_beside_the_hostile_ones():
    col = Collector(build_sources(_settings(VM), nvml=FakeNvml()))
    sample, st_ = col.collect()
    assert st_["meminfo"].up and st_["vmstat"].up and sample.meminfo["MemTotal"] > 0
    col.close()


_BIG = st.integers(min_value=-(10**30), max_value=10**400).map(str) | st.sampled_from(
    ["nan", "inf", "1e400", "-0"]
)


@settings(max_examples=200, deadline=None)
@given(mem=_BIG, vm=_BIG, avg=_BIG, total=_BIG)
def test_proc_parsers_return_only_64_bit_values_or_refuse(mem, vm, avg, total):
    from spark_watchd.sources.parsers import parse_meminfo, parse_psi, parse_uptime, parse_vmstat

    for parse, text in (
        (parse_meminfo, f"MemTotal: {mem} kB\n"),
        (parse_vmstat, f"pgmajfault {vm}\n"),
        (parse_psi, f"some avg10={avg} avg60=0.00 avg300=0.00 total={total}\n"),
        (parse_uptime, f"{avg} 1.0\n"),
    ):
        try:
            out = parse(text)
        except ValueError:
            continue
        flat = [out] if isinstance(out, float) else [v for d in [out] for v in d.values()]
        flat = [x for v in flat for x in (v.values() if isinstance(v, dict) else [v])]
        assert all(-(2**63) <= x <= 2**64 - 1 and x == x for x in flat), (parse.__name__, out)
