"""The engine-stall watch: requests running and neither token counter moving across scrapes >= 10 s apart."""

from __future__ import annotations

from spark_watchd.diagnose.stall import StallWatch
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.serving import ServingReading


def _r(ts, prompt, gen, running=1.0, kind="vllm", up=True, server="vllm:8000", kv=0.04):
    return ServingReading(
        server=server,
        kind=kind,
        up=up,
        ts=ts,
        requests_running=running,
        kv_usage=kv,
        prompt_tokens_total=prompt,
        generation_tokens_total=gen,
    )


def _feed(readings):
    w = StallWatch(Thresholds())
    return [w.observe([r], r.ts) for r in readings]


def test_a_request_running_without_progress_for_two_scrapes_10_s_apart_is_one_stall():
    out = _feed([_r(0, 100, 10), _r(5, 200, 10), _r(10, 200, 10), _r(15, 200, 10), _r(20, 200, 10)])
    assert [len(now) for now, _ in out] == [0, 0, 0, 1, 1]
    assert [len(new) for _, new in out] == [0, 0, 0, 1, 0]  # one event per stall
    st = out[3][0][0]
    assert st.since == 5 and st.ts == 15 and "no prompt or generation progress for 10 s" in st.words()
    assert "KV cache 4 %" in st.words()


def test_progress_or_an_idle_server_is_no_stall_and_progress_rearms_the_event():
    idle = _feed([_r(0, 100, 10, running=0), _r(30, 100, 10, running=0), _r(60, 100, 10, running=0)])
    assert all(not now for now, _ in idle)
    decoding = _feed([_r(0, 100, 10), _r(30, 100, 40), _r(60, 100, 90)])  # generation moves
    assert all(not now for now, _ in decoding)
    again = _feed([_r(0, 1, 1), _r(30, 1, 1), _r(60, 9, 1), _r(90, 9, 1)])
    assert [len(new) for _, new in again] == [0, 1, 0, 1]


def test_a_repeated_scrape_a_counter_reset_an_ollama_or_a_down_server_is_not_a_new_interval():
    same = _feed([_r(0, 100, 10), _r(0, 100, 10), _r(0, 100, 10)])
    assert all(not now for now, _ in same)
    reset = _feed([_r(0, 5000, 10), _r(30, 10, 0)])  # the server restarted
    assert all(not now for now, _ in reset)
    ollama = _feed([_r(0, None, None, kind="ollama"), _r(30, None, None, kind="ollama")])
    assert all(not now for now, _ in ollama)
    down = _feed([_r(0, 100, 10), _r(30, 100, 10, up=False), _r(60, 100, 10)])
    assert all(not now for now, _ in down)
