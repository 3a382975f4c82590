"""Fabric throughput against the negotiated rate, from the port counters: a capped port and a loaded half of a
cable flagged with their figures and fix; a healthy busy port, an idle one and a balanced pair not."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.fabric import cable_of
from spark_watchd.diagnose.link import LinkWatch
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.link import LinkPort, LinkReading
from spark_watchd.sample.model import Sample
from spark_watchd.sample.trace import read_trace
from tests.diagnose.test_scenarios import _check, score

T0 = 1_764_400_000.0
HALVES = ("rocep1s0f0", "roceP2p1s0f0")  # one QSFP cable's two PCIe Gen5 x4 halves (ServeTheHome, PR 103)


class Cable:
    """Ports whose port_xmit_data / port_rcv_data (octets / 4) advance at the given Gb/s each interval."""

    def __init__(self, devices=HALVES, rate=200.0):
        self.devices, self.rate = devices, rate
        self.octets = dict.fromkeys(devices, 10**12)
        self.ts = T0

    def sample(self, gbps: dict, dt=30.0, errors=0) -> Sample:
        self.ts += dt
        ports = []
        for d in self.devices:
            self.octets[d] += int(gbps.get(d, 0.0) * 1e9 / 8 * dt)
            words = self.octets[d] // 4
            counters = {"port_xmit_data": words, "port_rcv_data": words, "symbol_error": errors}
            ports.append(
                LinkPort(d, 1, None, "ACTIVE", "LinkUp", self.rate, "Ethernet", "up", 200000, counters)
            )
        return Sample(ts=self.ts, link=LinkReading(tuple(ports)))


def run(cable, n, gbps, watch=None, **kw):
    watch = watch or LinkWatch(Thresholds())
    for _ in range(n):
        st = watch.observe(cable.sample(gbps, **kw))
    return watch, st


def test_the_name_of_a_half_names_its_cable():
    assert cable_of("rocep1s0f0") == cable_of("roceP2p1s0f0") == "rocep1s0f0"
    assert cable_of("rocep1s0f1") != cable_of("rocep1s0f0") and cable_of("mlx5_0") is None


def test_a_200_gbps_port_carrying_13_gbps_sustained_with_clean_counters_is_capped():
    # NVIDIA/dgx-spark-playbooks PR 108: 12.86 Gb/s TCP, 13.23 Gb/s ib_write_bw on a 200 Gb/s link.
    cable = Cable(devices=("rocep1s0f0",))
    watch, early = run(cable, 8, {"rocep1s0f0": 13.2})  # 4 minutes: not sustained yet
    assert early.problem is None
    watch, st = run(cable, 14, {"rocep1s0f0": 13.2}, watch)
    assert st.problem == "capped"
    port = st.ports[0]
    assert port.fabric["gbps"] == 13.2 and port.fabric["rate_gbps"] == 200.0
    assert (
        "rocep1s0f0/1 carried 13.2 Gb/s (peak 13.2)" in st.summary and "200 Gb/s it negotiated" in st.summary
    )
    assert "clean counters" in st.summary


def test_a_healthy_busy_cable_and_an_idle_one_are_not_flagged():
    _, busy = run(Cable(), 30, {"rocep1s0f0": 94.0, "roceP2p1s0f0": 96.0})  # PR 108's healthy 92-97 per half
    assert busy.problem is None and busy.summary.startswith("link up")
    _, idle = run(Cable(), 30, {"rocep1s0f0": 0.001, "roceP2p1s0f0": 0.001})
    assert idle.problem is None


def test_a_light_bursty_job_is_not_a_cap():
    cable, watch = Cable(devices=("rocep1s0f0",)), LinkWatch(Thresholds())
    for i in range(30):
        st = watch.observe(cable.sample({"rocep1s0f0": (2.0, 25.0, 6.0)[i % 3]}))
    assert st.problem is None


def test_one_loaded_half_of_a_cable_is_flagged_with_the_nccl_fix_and_a_balanced_pair_not():
    # dgx-spark-playbooks #102 / PR 103: NCCL on one half (~3 GB/s busbw) until NCCL_IB_HCA names both.
    _, st = run(Cable(), 20, {"rocep1s0f0": 90.0, "roceP2p1s0f0": 0.4})
    assert st.problem == "one_half"
    f = next(p.fabric for p in st.ports if p.device == "rocep1s0f0")
    assert f["share"] > 0.99 and f["idle_half"] == "roceP2p1s0f0"
    assert "NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0" in st.summary and "rocep1s0f0/1 carried 100%" in st.summary
    _, balanced = run(Cable(), 20, {"rocep1s0f0": 46.0, "roceP2p1s0f0": 47.0})
    assert balanced.problem is None


def test_rising_error_counters_are_errors_not_a_cap_and_a_reboot_forgets_the_window():
    cable, watch = Cable(devices=("rocep1s0f0",)), LinkWatch(Thresholds())
    for i in range(20):
        st = watch.observe(cable.sample({"rocep1s0f0": 13.0}, errors=i))
    assert st.problem == "errors"
    watch.reboot()
    st = watch.observe(cable.sample({"rocep1s0f0": 13.0}, errors=20))
    assert st.problem is None


FABRIC = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "fabric"


@pytest.mark.parametrize(
    "name, want",
    [
        ("capped_13g_30s", "capped"),
        ("one_half_30s", "one_half"),
        ("balanced_busy_30s", None),
        ("idle_link_30s", None),
    ],
)
def test_the_fabric_set_replays_to_its_verdict_and_meets_the_bar(name, want):
    trace = FABRIC / f"{name}.jsonl"
    _check(score(trace))  # G3/G4/G6 ok throughout: the fabric's verdict is the link's
    eng, seen = Diagnoser(), set()
    for s in read_trace(trace):
        eng.observe(s)
        seen.add(eng.link.status.problem)
    assert seen == ({None, want} if want else {None})  # nothing before fabric_sustained_s, then the verdict


def test_a_loaded_half_on_a_low_plateau_names_the_fix_first_and_the_cap_beside_it():
    eng = Diagnoser()
    for s in read_trace(FABRIC / "one_half_30s.jsonl"):
        eng.observe(s)
    st = eng.link.status
    assert "set NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0 to use both" in st.summary
    assert "also far below what one half carries" in st.summary
