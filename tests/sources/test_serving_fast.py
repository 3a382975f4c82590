"""The servers' 1 s progress reads (sources/serving_fast.py): the scraper's own read, one at a time per server,
bounded by the caller's wait, the scraper's interval figures untouched, each read carried once into the next
sample (`serving_progress`). Real HTTP servers speaking vLLM's real /metrics."""

from __future__ import annotations

import time

from spark_watchd.sources.serving import ServingSource
from spark_watchd.sources.serving_settings import ServingSettings
from tests.support.poll import wait_until
from tests.support.serving_fakes import FakeEngine, FakeServer


def _source(*servers, timeout_s=2.0):
    endpoints = [{"kind": "vllm", "url": s.url} for s in servers]
    return ServingSource(
        ServingSettings(endpoints=endpoints, timeout_s=timeout_s), interval_s=30.0, own_addresses=frozenset()
    )


def test_each_read_is_fresh_with_one_second_rates_and_goes_once_into_the_next_sample():
    eng = FakeEngine("vllm")
    with FakeServer(eng) as srv:
        src = _source(srv)
        try:
            eng.step(1)
            (tick,) = src.collect({})["serving"]
            reads = []
            for _ in range(3):
                eng.step(1)  # 120 tokens a second
                (r,) = src.progress(1.0)
                reads.append(r)
                time.sleep(0.3)
            assert [r.generation_tokens_total for r in reads] == [240, 360, 480]
            assert reads[1].generation_tokens_per_s > 120 and reads[1].requests_running == 4
            out = src.collect({})
            (again,) = out["serving"]
            assert again == tick  # the scraper's own reading and interval figures: untouched
            assert out["serving_progress"] == tuple(reads)
            assert "serving_progress" not in src.collect({})  # each read once
        finally:
            src.close()


def test_a_server_still_answering_is_not_read_again_and_the_caller_waits_no_longer_than_it_asked():
    hung, ok = FakeEngine("vllm"), FakeEngine("vllm")
    hung.hang_s = 3.0
    hung.step(1)
    with FakeServer(hung) as h, FakeServer(ok) as o:
        src = _source(h, o, timeout_s=10.0)
        try:
            src.collect({})
            costs, got = [], []
            for _ in range(4):
                t0 = time.perf_counter()
                got.append({r.server for r in src.progress(0.2)})
                costs.append(time.perf_counter() - t0)
            assert max(costs) < 0.5 and src.fast.skipped == 3  # one read of the hung server at a time
            assert all(s == {f"vllm:{o.port}"} for s in got)
            r = wait_until(lambda: {r.server: r for r in src.progress(0.2)}.get(f"vllm:{h.port}"), timeout=8)
            assert r.up and r.requests_running == 4  # slow, not down: its answer came in its own time
        finally:
            src.close()


def test_a_flooding_server_is_refused_at_one_second_by_the_scrapers_own_bounds():
    from tests.sources.test_serving_hostile import _serving
    from tests.support.serving_fakes import series_flood

    with _serving(series_flood(40_000)) as url:
        for bound, why in (
            ({"max_response_bytes": 20_000}, "max_response_bytes"),
            ({"max_series": 100}, "max_series"),
        ):
            settings = ServingSettings(endpoints=[{"kind": "vllm", "url": url}], **bound)
            src = ServingSource(settings, interval_s=30.0, own_addresses=frozenset())
            try:
                src.collect({})
                (r,) = src.progress(2.0)
                assert not r.up and why in r.error
            finally:
                src.close()


def test_ollama_is_not_read_at_one_second_and_reads_before_a_disarm_reach_the_next_sample_then_stop():
    vllm, ollama = FakeEngine("vllm"), FakeEngine("ollama")
    with FakeServer(vllm) as v, FakeServer(ollama) as o:
        settings = ServingSettings(
            endpoints=[{"kind": "vllm", "url": v.url}, {"kind": "ollama", "url": o.url}]
        )
        src = ServingSource(settings, interval_s=30.0, own_addresses=frozenset())
        try:
            assert len(src.collect({})["serving"]) == 2
            assert [r.server for r in src.progress(1.0)] == [f"vllm:{v.port}"]
            src.progress(1.0)
            src.progress_stop()  # the ring disarmed between samples
            assert len(src.collect({})["serving_progress"]) == 2
            assert src.fast is None and "serving_progress" not in src.collect({})
        finally:
            src.close()
