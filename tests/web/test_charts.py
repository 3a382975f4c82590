"""The bounded history: compact records, rates, bounds, since/limit reads, resets, thread safety."""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
import tracemalloc
from pathlib import Path

import pytest

import spark_watchd
from spark_watchd.sample.findings import Diagnosis, Event, Finding
from spark_watchd.sample.memory import memory_view
from spark_watchd.sample.model import GpuReading, Sample, ThroughputReading
from spark_watchd.sample.trace import read_trace
from spark_watchd.snapshot import Snapshot
from spark_watchd.web.charts import History
from spark_watchd.web.settings import WebSettings

GIB = 2**30
SCENARIOS = Path(spark_watchd.__file__).parent / "scenarios"


def _gpu(**kw) -> GpuReading:
    base = dict(
        index=0,
        name="NVIDIA GB10",
        uuid="GPU-x",
        power_w=92.0,
        temp_c=79.0,
        sm_clock_mhz=2418,
        clocks_event_reasons=0,
        applications_clock_mhz=2418,
        slowdown_temp_c=86.0,
        util_pct=96.0,
    )
    base.update(kw)
    return GpuReading(**base)


def _sample(ts: float, *, boot="b1", pswpout=0, pgmajfault=0, gpu=None, **kw) -> Sample:
    meminfo = {
        "MemTotal": 127_600_748,
        "MemAvailable": 50_000_000,
        "Cached": 10_000_000,
        "AnonPages": 18_000_000,
        "SwapTotal": 16_000_000,
        "SwapFree": 15_000_000,
    }
    return Sample(
        ts=ts,
        boot_id=boot,
        gpus=(gpu or _gpu(),),
        meminfo=meminfo,
        psi_memory={"some": {"avg60": 1.5}, "full": {"avg60": 0.25}},
        vmstat={"pswpout": pswpout, "pgmajfault": pgmajfault},
        mem_available_min_kb=40_000_000,
        **kw,
    )


def _diag(ts: float, g3="ok", g4="ok", g6="ok", events=(), g3_evidence=None, g4_anomaly=None) -> Diagnosis:
    return Diagnosis(
        ts,
        {
            "G3": Finding("G3", g3, "g3", g3_evidence or {}),
            "G4": Finding("G4", g4, "g4", anomaly=g4_anomaly),
            "G6": Finding("G6", g6, "g6"),
        },
        events,
    )


def _snap(sample: Sample, diag: Diagnosis | None = None, reserve: int = 0) -> Snapshot:
    return Snapshot(
        sample, diag if diag is not None else _diag(sample.ts), memory=memory_view(sample, reserve)
    )


def test_record_holds_chart_fields_in_base_units_and_severities():
    h = History(WebSettings())
    ev = Event("eviction", "G6", 100.0, "trainer lost half its RSS")
    tp = (ThroughputReading("job-a", 99.0, 10, 1.5, 11000.0),)
    diag = _diag(100.0, g3="critical", g6="critical", events=(ev,))
    h(_snap(_sample(100.0, throughput=tp), diag, reserve=4 * GIB))
    (rec,), truncated = h.records()
    assert not truncated
    assert rec["ts"] == 100.0 and rec["power_w"] == 92.0 and rec["sm_clock_mhz"] == 2418
    assert rec["mem_available_bytes"] == 50_000_000 * 1024
    assert rec["mem_available_min_bytes"] == 40_000_000 * 1024
    assert rec["mem_budget_bytes"] == 50_000_000 * 1024 - 4 * GIB
    assert rec["mem_cached_bytes"] == 10_000_000 * 1024 and rec["mem_anon_bytes"] == 18_000_000 * 1024
    assert rec["swap_used_bytes"] == 1_000_000 * 1024
    assert rec["psi_some_avg60"] == 1.5 and rec["psi_full_avg60"] == 0.25
    assert rec["findings"] == {"G3": "critical", "G4": "ok", "G6": "critical"}
    assert rec["events"] == [
        {"kind": "eviction", "gotcha": "G6", "ts": 100.0, "summary": "trainer lost half its RSS"}
    ]
    assert rec["jobs"] == [{"job": "job-a", "step_seconds": 1.5, "tokens_per_second": 11000.0}]
    # First sample: no previous counters, so no rates yet.
    assert rec["swap_out_pages_per_s"] is None and rec["major_faults_per_s"] is None


def test_each_history_column_carries_its_own_reading_not_a_neighbours():
    """A distinct value in every charted reading: a column one slot off (issue 30: `reasons: 55` and a fan
    speed of 32) reads its neighbour's value here, in the numbers, the jobs and the servers."""
    from spark_watchd.sample.serving import ServingReading

    gpu = _gpu(power_w=11.5, temp_c=22.5, slowdown_temp_c=33.5, sm_clock_mhz=44, applications_clock_mhz=55)
    gpu = dataclasses.replace(gpu, util_pct=66.5, clocks_event_reasons=0x20)
    tp = (ThroughputReading("job-a", 99.0, 10, step_seconds=1.25, tokens_per_second=11000.0),)
    server = ServingReading("vllm:8000", "vllm", True, generation_tokens_per_s=101.0, requests_running=2.0)
    server = dataclasses.replace(server, requests_waiting=3.0, kv_usage=0.5, ttft_p95_s=0.75)
    server = dataclasses.replace(server, joules_per_token=0.125)
    h = History(WebSettings())
    h(_snap(_sample(100.0, gpu=gpu, throughput=tp, serving=(server,)), reserve=4 * GIB))
    (rec,), _ = h.records()
    expected = {
        "power_w": 11.5,
        "temp_c": 22.5,
        "slowdown_temp_c": 33.5,
        "sm_clock_mhz": 44,
        "app_clock_mhz": 55,
        "util_pct": 66.5,
        "reasons": 0x20,
        "mem_total_bytes": 127_600_748 * 1024,
        "mem_available_bytes": 50_000_000 * 1024,
        "mem_available_min_bytes": 40_000_000 * 1024,
        "mem_budget_bytes": 50_000_000 * 1024 - 4 * GIB,
        "mem_cached_bytes": 10_000_000 * 1024,
        "mem_anon_bytes": 18_000_000 * 1024,
        "swap_used_bytes": 1_000_000 * 1024,
        "psi_some_avg60": 1.5,
        "psi_full_avg60": 0.25,
    }
    assert len(set(expected.values())) == len(expected)  # distinct, so that any two swapped show
    assert {k: rec[k] for k in expected} == expected
    assert rec["jobs"] == [{"job": "job-a", "step_seconds": 1.25, "tokens_per_second": 11000.0}]
    assert rec["serving"] == [
        {
            "server": "vllm:8000",
            "kind": "vllm",
            "up": True,
            "generation_tokens_per_s": 101.0,
            "requests_running": 2.0,
            "requests_waiting": 3.0,
            "kv_usage": 0.5,
            "ttft_p95_s": 0.75,
            "joules_per_token": 0.125,
        }
    ]


def test_an_overdrawn_budget_is_the_same_negative_figure_on_the_card_the_chart_and_the_metric():
    from prometheus_client import generate_latest

    from spark_watchd.diagnose.engine import Diagnoser
    from spark_watchd.diagnose.thresholds import Thresholds
    from spark_watchd.export.prometheus import build_registry
    from tests.daemon_helpers import samples, value

    th = Thresholds()
    # MemAvailable 2 GiB under the OS reserve: the pool is into the reserve.
    s = dataclasses.replace(
        _sample(1.0),
        meminfo={**_sample(1.0).meminfo, "MemAvailable": (th.os_reserve_bytes - 2 * GIB) // 1024},
    )
    diag = Diagnoser(th).observe(s)
    snap = Snapshot(s, diag, memory=memory_view(s, th.os_reserve_bytes))
    card = diag.findings["G3"].evidence["budget_bytes"]
    h = History()
    h(snap)
    reg = build_registry(type("D", (), {"snapshot": lambda self: snap, "settings": None, "overruns": 0})())
    metric = value(samples(generate_latest(reg).decode()), "sparkwatchd_memory_budget_bytes")
    assert card == -2 * GIB
    assert h.records()[0][0]["mem_budget_bytes"] == card == snap.memory.budget_bytes == metric


def _judged(samples) -> list[Snapshot]:
    """Snapshots of samples judged by the real classifiers, as the daemon publishes them."""
    from spark_watchd.diagnose.engine import Diagnoser

    eng = Diagnoser()
    return [_snap(s, eng.observe(s)) for s in samples]


def test_rates_are_the_classifiers_and_stop_at_a_reboot_or_a_gap():
    h = History()
    snaps = _judged(
        [
            _sample(0.0, pswpout=1000, pgmajfault=500),
            _sample(30.0, pswpout=4000, pgmajfault=2000),
            _sample(60.0, boot="b2", pswpout=10, pgmajfault=5),  # counters restarted
            _sample(90.0, boot="b2", pswpout=10, pgmajfault=65),
            _sample(90.0 + 900, boot="b2", pswpout=910, pgmajfault=965),  # past max_gap_s: no rate
        ]
    )
    for snap in snaps:
        h(snap)
    recs, _ = h.records()
    assert [r["swap_out_pages_per_s"] for r in recs] == [None, 100.0, None, 0.0, None]
    assert [r["major_faults_per_s"] for r in recs] == [None, 50.0, None, 2.0, None]
    # The chart's figures are the ones G3 judged, not a second computation with its own gap rule.
    g3 = [snap.diagnosis.findings["G3"].state for snap in snaps]
    assert [r["swap_out_pages_per_s"] for r in recs] == [x.swapout_per_s for x in g3]
    assert [r["major_faults_per_s"] for r in recs] == [x.majfault_per_s for x in g3]


def test_no_gpu_and_missing_psi_serialise_as_null():
    h = History()
    s = dataclasses.replace(_sample(5.0), gpus=(), psi_memory=None, meminfo={})
    h(Snapshot(s, None))
    body = json.dumps(h.to_json(), allow_nan=False)  # raises on NaN
    rec = json.loads(body)["records"][0]
    assert rec["power_w"] is None and rec["psi_full_avg60"] is None and rec["mem_available_bytes"] is None
    assert rec["findings"] == {"G3": None, "G4": None, "G6": None}


@pytest.mark.parametrize(
    ("reasons", "counters", "expected"),
    [
        (0x04, None, 0),  # SW power cap alone is GB10's normal state
        (0x40, None, 1),  # HW thermal slowdown
        (0x00, {"sw_thermal": 5_000_000}, 1),  # mask 0 between samples, counter moved
        (0x80, {"hw_power_brake": 5_000_000}, 0),  # the power brake is not heat: G4 says no throttle
    ],
)
def test_throttle_flag_is_the_g4_verdict(reasons, counters, expected):
    from prometheus_client import generate_latest

    from spark_watchd.export.prometheus import build_registry
    from tests.daemon_helpers import samples, value

    h = History()
    base = {"sw_power_cap": 0, "hw_slowdown": 0, "sw_thermal": 0, "hw_thermal": 0, "hw_power_brake": 0}
    moved = {**base, **(counters or {})}
    hot = _gpu(clocks_event_reasons=reasons, clocks_event_counters_us=moved)
    snaps = _judged([_sample(0.0, gpu=_gpu(clocks_event_counters_us=base)), _sample(30.0, gpu=hot)])
    for snap in snaps:
        h(snap)
    snap = snaps[-1]
    assert h.records()[0][-1]["throttle"] == expected
    assert snap.diagnosis.findings["G4"].state.throttling == bool(expected)
    reg = build_registry(type("D", (), {"snapshot": lambda self: snap, "settings": None, "overruns": 0})())
    assert value(samples(generate_latest(reg).decode()), "sparkwatchd_thermal_throttle_active") == expected


def test_no_throttle_shaded_without_a_verdict():
    h = History()
    h(_snap(_sample(0.0, gpu=_gpu(clocks_event_reasons=0x40))))  # a hand-made finding carries no state
    assert h.records()[0][-1]["throttle"] == 0


def test_bounded_by_count_and_by_age():
    h = History(WebSettings(history_max_records=50, history_hours=1.0))
    for i in range(80):
        h(_snap(_sample(i * 30.0)))
    recs, _ = h.records()
    assert len(recs) == 50 and recs[-1]["ts"] == 79 * 30.0
    h(_snap(_sample(79 * 30.0 + 3600 + 45)))  # 1 h 45 s later: all but the newest are too old
    recs, _ = h.records()
    assert [r["ts"] for r in recs] == [79 * 30.0 + 3600 + 45]


def test_since_and_limit_return_the_newest_in_time_order():
    h = History(WebSettings(history_api_max_records=3))
    for i in range(10):
        h(_snap(_sample(float(i))))
    recs, truncated = h.records(since=5.0, limit=10)
    assert [r["ts"] for r in recs] == [6.0, 7.0, 8.0, 9.0] and not truncated
    recs, truncated = h.records()  # default limit from settings
    assert [r["ts"] for r in recs] == [7.0, 8.0, 9.0] and truncated
    assert h.records(since=9.0)[0] == []
    body = h.to_json(since=8.0)
    assert body["count"] == 1 and body["held"] == 10 and body["first_ts"] == 0.0 and body["last_ts"] == 9.0


def test_repeated_tick_is_ignored_and_time_going_back_starts_over():
    h = History()
    assert h.observe(Snapshot(None, None)) is False
    for ts in (10.0, 20.0, 20.0):
        h(_snap(_sample(ts)))
    assert len(h) == 2 and h.generation == 0
    h(_snap(_sample(5.0)))  # a looping replay restarted
    assert len(h) == 1 and h.generation == 1
    assert h.to_json()["generation"] == 1


def test_concurrent_reads_during_writes_see_consistent_ordered_windows():
    h = History(WebSettings(history_max_records=200))
    errors = []

    def reader():
        try:
            for _ in range(300):
                ts = [r["ts"] for r in h.records()[0]]
                assert ts == sorted(ts) and len(ts) <= 200
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(1000):
        h(_snap(_sample(float(i))))
    for t in threads:
        t.join()
    assert not errors
    assert len(h) == 200


def test_twelve_hours_of_real_samples_stay_small():
    """1440 compact records of the eviction trace (12 h at 30 s) must take well under a megabyte."""
    samples = list(read_trace(SCENARIOS / "eviction.jsonl"))
    tracemalloc.start()
    h = History()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(1440):
        s = samples[i % len(samples)]
        h(_snap(dataclasses.replace(s, ts=1.0e9 + 30.0 * i)))
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(h) == 1440
    assert used < 1_000_000, f"{used} bytes for 1440 records"


def _hour_record_bytes(n: int = 2000) -> float:
    """Bytes held per record at --interval 1 with two training jobs and one inference server down."""
    from spark_watchd.sample.serving import ServingReading

    down = ServingReading(server="vllm:8000", kind="vllm", up=False, error="connection refused")
    tracemalloc.start()
    h = History()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        ts = 1.0e9 + i
        jobs = tuple(
            ThroughputReading(
                job=job, ts=ts, step=i, step_seconds=0.5 + i % 7 / 100, tokens_per_second=16384.0 + i
            )
            for job in (f"train-a-{i // 150}", f"train-b-{i // 150}")
        )
        h(_snap(_sample(ts, throughput=jobs, serving=(down,))))
    gc.collect()  # what the window holds, not the test's own samples waiting for a collection
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(h) == n
    return used / n


def test_an_hour_at_one_second_keeps_job_and_server_rows_compact():
    """At --interval 1 the window fills to history_max_records (20,000, 5.5 h) instead of a day's 2,880: the
    records' numbers are rows of one array, the jobs' and servers' rows one array of numbers each, names
    shared with the record before, a server that is down shared whole (an object and an array per record
    with lists of tuples of floats took ~870 bytes a record, 17 MB at the bound; ~410 now)."""
    per = _hour_record_bytes()
    assert per < 450, f"{per:.0f} bytes a record"


def test_compact_rows_read_back_as_they_went_in():
    from spark_watchd.sample.serving import ServingReading

    h = History()
    up = ServingReading(server="vllm:8000", kind="vllm", up=True, requests_running=3, kv_usage=0.25)
    down = ServingReading(server="vllm:8000", kind="vllm", up=False, error="refused")
    jobs = (ThroughputReading(job="a", ts=1.0, step=1, step_seconds=None, tokens_per_second=float("inf")),)
    for ts, serving in ((1.0e9, (up,)), (1.0e9 + 1, (down,)), (1.0e9 + 2, (down,))):
        h(_snap(_sample(ts, throughput=jobs, serving=serving)))
    recs = h.to_json()["records"]
    assert recs[0]["jobs"] == [{"job": "a", "step_seconds": None, "tokens_per_second": None}]
    assert recs[0]["serving"][0]["requests_running"] == 3.0 and recs[0]["serving"][0]["kv_usage"] == 0.25
    assert recs[0]["serving"][0]["up"] is True and recs[0]["serving"][0]["ttft_p95_s"] is None
    assert recs[1]["serving"] == recs[2]["serving"] == [
        dict.fromkeys(("generation_tokens_per_s", "requests_running", "requests_waiting", "kv_usage",
                       "ttft_p95_s", "joules_per_token")) | {"server": "vllm:8000", "kind": "vllm", "up": False}
    ]  # fmt: skip
    assert h._serving[1] is h._serving[2]  # a server down, tick after tick: held once


def test_the_window_keeps_its_bounds_across_cut_offs_of_dropped_rows():
    """Count bound and time window hold while dropped rows are cut off the array in batches."""
    h = History(WebSettings(history_max_records=100, history_hours=1.0))
    for i in range(1000):
        h(_snap(_sample(1.0e9 + i * 7.0)))
        assert len(h) == min(i + 1, 100)
        body = h.to_json()
        assert body["last_ts"] == 1.0e9 + i * 7.0 and body["first_ts"] == 1.0e9 + max(0, i - 99) * 7.0
    assert [r["ts"] for r in h.to_json(limit=3)["records"]] == [1.0e9 + 7.0 * k for k in (997, 998, 999)]
    h(_snap(_sample(1.0e9 + 999 * 7.0 + 3601.0)))  # over an hour on: everything else is past the window
    assert len(h) == 1 and h.to_json()["first_ts"] == 1.0e9 + 999 * 7.0 + 3601.0


def test_the_history_body_is_to_json_encoded_byte_for_byte_a_record_at_a_time():
    from spark_watchd.sample.serving import ServingReading

    h = History(WebSettings(history_api_max_records=5000))
    dumps = lambda o: json.dumps(o, separators=(",", ":"), allow_nan=False).encode()  # noqa: E731
    assert h.json_body() == dumps(h.to_json())  # empty
    up = ServingReading(server="vllm:8000", kind="vllm", up=True, requests_running=3, kv_usage=0.25)
    ev = Event("eviction", "G6", 1.0e9 + 5, "trainer lost half its RSS")
    for i in range(5000):
        ts = 1.0e9 + i
        jobs = (ThroughputReading(job="a", ts=ts, step=i, step_seconds=0.5, tokens_per_second=1000.0 + i),)
        diag = _diag(ts) if i != 5 else Diagnosis(ts, _diag(ts).findings, (ev,))
        h(_snap(_sample(ts, throughput=jobs, serving=(up,) if i % 2 else ()), diag))
    for since, limit in ((None, None), (1.0e9 + 4990, None), (None, 3), (1.0e9 + 2, 0), (2.0e9, None)):
        assert h.json_body(since, limit) == dumps(h.to_json(since, limit))
    tracemalloc.start()
    dumps(h.to_json())  # what the route did before: every record a dict, then the text, then its bytes
    whole = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    body = h.json_body()
    streamed = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert streamed < 0.6 * whole and streamed < 3 * len(body), (streamed, whole, len(body))
