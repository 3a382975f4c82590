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


def test_at_one_second_the_stall_is_found_10_s_after_the_counters_stop_not_a_tick_later():
    """The 1 s progress reads (the armed fast ring's) fed in order: the same rule, seconds after the stop."""
    w = StallWatch(Thresholds())
    reads = [_r(t, 1000 + 500 * min(t, 20), 50) for t in range(0, 40)]  # prompt moves until t=20
    found = [(r.ts, new) for r in reads for _, new in [w.follow([r])] if new]
    assert [(ts, st.since) for ts, (st,) in found] == [(30, 20)]


def test_a_long_prefill_moving_its_prompt_counter_or_an_idle_server_is_never_stalled_at_one_second():
    w = StallWatch(Thresholds())
    prefill = [_r(t, 8192 * (t // 2), 0) for t in range(120)]  # a chunk every 2 s, nothing generated yet
    idle = [_r(t, 5000, 700, running=0, server="vllm:8001") for t in range(120)]
    assert not any(w.follow([a, b])[0] for a, b in zip(prefill, idle, strict=True))


def test_an_older_scrape_after_the_one_second_reads_neither_resets_nor_extends_the_stall():
    """A sample carries each scraper's latest reading, older than the 1 s reads before it (or down since)."""
    w = StallWatch(Thresholds())
    w.follow([_r(t, 900 if t >= 5 else 100 * t, 50) for t in range(0, 20)])
    for late in (_r(3, 300, 50), _r(4, None, None, up=False)):
        now, new = w.observe([late], 20.0)
        assert [(st.since, st.ts) for st in now] == [(5, 19)] and not new


def _ll(ts, total, in_flight, running=1.0):
    return ServingReading(
        server="llamacpp:8080",
        kind="llamacpp",
        up=True,
        ts=ts,
        requests_running=running,
        prompt_tokens_total=0.0,
        generation_tokens_total=total,
        generation_tokens_in_flight=in_flight,
    )


def test_llamacpp_is_judged_on_its_in_flight_tokens_and_never_while_a_request_prefills():
    """llama-server adds tokens to its counters only when a request ends (docs/serving.md): a 16,000-token
    request generating moves only /slots' n_decoded; a prefill moves nothing it shows."""
    generating = _feed([_ll(t, 0.0, 1.0 + 900 * t) for t in range(0, 40, 5)])
    assert not any(now for now, _ in generating)
    prefill = _feed([_ll(t, 0.0, 0.0) for t in range(0, 40, 5)])
    assert not any(now for now, _ in prefill)
    no_slots = _feed([_ll(t, 0.0, None) for t in range(0, 40, 5)])
    assert not any(now for now, _ in no_slots)
    stuck = _feed([_ll(t, 0.0, 4500.0) for t in range(0, 40, 5)])  # decoding began, then nothing for 35 s
    assert [len(new) for _, new in stuck] == [0, 0, 1, 0, 0, 0, 0, 0]


def test_a_server_read_at_one_second_but_not_yet_scraped_by_the_sample_is_still_watched():
    w = StallWatch(Thresholds())
    w.follow([_r(t, 900, 50) for t in range(0, 8)])
    w.observe([], 8.0, also=["vllm:8000"])  # its scraper's first scrape not in yet
    now, new = w.follow([_r(t, 900, 50) for t in range(8, 12)])
    assert [(st.since, st.ts) for st in new] == [(0, 10)]
    w.observe([], 12.0)  # gone from both: no longer watched
    assert w.last == {} and w.runs == {}
