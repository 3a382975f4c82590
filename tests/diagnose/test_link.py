"""The link verdict: an unused port is no fault, a port that was up and is not is down, slow, errors rising."""

from __future__ import annotations

import dataclasses

from spark_watchd.diagnose.link import ERRORS_HOLD_S, LinkWatch
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.link import LinkPort, LinkReading
from spark_watchd.sample.model import Sample
from spark_watchd.sources.collect import Collector
from spark_watchd.sources.link import LinkSource
from tests.conftest import FIXTURES

CX7 = Collector([LinkSource(str(FIXTURES / "hosts" / "gb10-cx7" / "sys"))]).collect()[0].link


def _with(reading: LinkReading, device: str, **changes) -> LinkReading:
    ports = []
    for p in reading.ports:
        if p.device == device:
            counters = {**p.counters, **changes.pop("counters", {})}
            p = dataclasses.replace(p, counters=counters, **changes)
        ports.append(p)
    return LinkReading(tuple(ports))


def _watch():
    return LinkWatch(Thresholds())


def test_the_fixture_spark_is_up_at_200_with_its_unused_ports_no_fault():
    st = _watch().observe(Sample(ts=0.0, link=CX7))
    assert st.problem is None
    assert st.summary == "link up: roceP2p1s0f0 200 Gb/s, rocep1s0f0 200 Gb/s"
    assert [(p.device, p.used) for p in st.ports if not p.up] == [
        ("roceP2p1s0f1", False),
        ("rocep1s0f1", False),
    ]


def test_a_port_that_was_up_and_goes_down_is_down_until_it_comes_back():
    w = _watch()
    w.observe(Sample(ts=0.0, link=CX7))
    down = _with(CX7, "rocep1s0f0", state="DOWN", phys_state="Polling", operstate="down")
    st = w.observe(Sample(ts=30.0, link=down))
    assert st.problem == "down"
    assert st.summary == "link down: rocep1s0f0/1 (enp1s0f0np0) was up this boot and is down now"
    assert w.observe(Sample(ts=60.0, link=CX7)).problem is None


def test_a_netdev_down_under_an_active_rdma_port_is_down():
    w = _watch()
    w.observe(Sample(ts=0.0, link=CX7))
    assert w.observe(Sample(ts=30.0, link=_with(CX7, "rocep1s0f0", operstate="down"))).problem == "down"


def test_a_port_never_up_this_boot_is_not_down_and_a_reboot_forgets_the_ports():
    w = _watch()
    w.observe(Sample(ts=0.0, link=CX7))
    w.reboot()
    down = _with(CX7, "rocep1s0f0", state="DOWN", operstate="down")
    assert w.observe(Sample(ts=30.0, link=down)).problem is None


def test_a_port_trained_at_100_is_slow_with_the_threshold_in_the_sentence():
    st = _watch().observe(Sample(ts=0.0, link=_with(CX7, "roceP2p1s0f0", rate_gbps=100.0)))
    assert st.problem == "slow"
    assert "roceP2p1s0f0/1 (enP2p1s0f0np0) at 100 Gb/s, below the 200 Gb/s" in st.summary


def test_rising_error_counters_are_reported_then_held_then_cleared():
    w = _watch()
    w.observe(Sample(ts=0.0, link=CX7))
    bad = _with(CX7, "rocep1s0f0", counters={"symbol_error": 12, "local_ack_timeout_err": 9})
    st = w.observe(Sample(ts=30.0, link=bad))
    assert st.problem == "errors"
    assert (
        st.summary
        == "link errors rising on rocep1s0f0/1 (enp1s0f0np0): local_ack_timeout_err +7, symbol_error +12"
    )
    p = next(p for p in st.ports if p.device == "rocep1s0f0")
    assert p.retransmits == 7
    assert w.observe(Sample(ts=60.0, link=bad)).problem == "errors"  # held: one burst, one episode
    assert w.observe(Sample(ts=30.0 + ERRORS_HOLD_S + 1, link=bad)).problem is None


def test_traffic_and_congestion_counters_rising_are_no_error():
    w = _watch()
    w.observe(Sample(ts=0.0, link=CX7))
    busy = _with(
        CX7, "rocep1s0f0", counters={"port_xmit_data": 10**12, "np_cnp_sent": 5000, "rx_dropped": 99}
    )
    assert w.observe(Sample(ts=30.0, link=busy)).problem is None


def test_a_counter_reset_is_not_a_rise_and_no_link_is_no_verdict():
    w = _watch()
    w.observe(Sample(ts=0.0, link=_with(CX7, "rocep1s0f0", counters={"symbol_error": 50})))
    assert w.observe(Sample(ts=30.0, link=CX7)).problem is None
    assert w.observe(Sample(ts=60.0)) is None and w.status is None
    assert (
        LinkWatch(Thresholds()).observe(Sample(ts=0.0, link=LinkReading((LinkPort("mlx5_0", 1),)))).problem
        is None
    )


def test_a_link_going_down_under_a_ddp_job_is_down_for_its_window_and_nothing_else():
    from spark_watchd.diagnose.engine import Diagnoser
    from spark_watchd.sample.trace import read_trace
    from tests.diagnose.test_scenarios import OWN

    d = Diagnoser()
    seen = []
    for s in read_trace(OWN / "pair" / "link_down_ddp_60s.jsonl"):
        diag = d.observe(s)
        seen.append((d.link.status.problem, {g: f.severity for g, f in diag.findings.items()}))
    problems = [p for p, _ in seen]
    assert problems[:60] == [None] * 60 and problems[60:80] == ["down"] * 20
    assert set(problems[81:]) == {None} or set(problems[81:]) <= {None, "errors"}
    assert all(sev == {"G3": "ok", "G4": "ok", "G6": "ok"} for _, sev in seen)
