"""sparkwatchd_link_*: the ConnectX-7 ports (RDMA side and netdev); families without series when absent.

Labels are `device` and `port` only (at most sources/link.py MAX_PORTS series per family): the netdev
name and the counters' names are folded into the family, never into a label.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from spark_watchd.export.families import counter, gauge
from spark_watchd.sample.link import RETRANSMIT_COUNTERS
from spark_watchd.snapshot import Snapshot

LABELS = ["device", "port"]
# family name (without _total) -> (help, counters summed; a multiplier for octets/4)
_COUNTERS = {
    "link_downed": (
        "Times the port training state machine failed link error recovery and downed the link.",
        ("link_downed",),
        1,
    ),
    "link_symbol_errors": (
        "Minor link errors on one or more physical lanes (counters/symbol_error).",
        ("symbol_error",),
        1,
    ),
    "link_receive_errors": (
        "Packets with an error received on the port (counters/port_rcv_errors).",
        ("port_rcv_errors",),
        1,
    ),
    "link_retransmits": (
        "RoCE retransmission signs: local ACK timeouts, packet sequence errors, out-of-sequence "
        "and implied-NAK sequence errors (mlx5 hw_counters), summed.",
        RETRANSMIT_COUNTERS,
        1,
    ),
    "link_carrier_changes": (
        "Carrier changes of the port's netdev (/sys/class/net/*/carrier_changes).",
        ("carrier_changes",),
        1,
    ),
    "link_netdev_errors": (
        "Receive and transmit errors of the port's netdev (statistics/rx_errors + tx_errors).",
        ("rx_errors", "tx_errors"),
        1,
    ),
    "link_netdev_drops": (
        "Receive and transmit drops of the port's netdev (statistics/rx_dropped + tx_dropped).",
        ("rx_dropped", "tx_dropped"),
        1,
    ),
    "link_transmit_bytes": (
        "Data transmitted on the port (counters/port_xmit_data, octets/4, times 4).",
        ("port_xmit_data",),
        4,
    ),
    "link_receive_bytes": (
        "Data received on the port (counters/port_rcv_data, octets/4, times 4).",
        ("port_rcv_data",),
        4,
    ),
}


def families(snapshot: Snapshot) -> Iterator[Metric]:
    """Port up, rate, the daemon's verdict and the error/traffic counters, per RDMA device and port."""
    link = snapshot.sample.link if snapshot.sample is not None else None
    up = gauge("link_up", "1 while the ConnectX-7 port is ACTIVE and its netdev up.", LABELS)
    rate = gauge(
        "link_rate_bytes_per_second",
        "Negotiated rate of the port (ports/*/rate: active width x speed; 200 Gb/s is 25e9).",
        LABELS,
    )
    problem = gauge(
        "link_problem",
        "1 while the daemon judges the port down (after being up this boot), slow (below link_min_rate_gbps), "
        "counting errors, capped far below its rate under sustained traffic, or the one loaded half of its "
        "cable; 0 otherwise.",
        LABELS,
    )
    counters = {name: counter(name, doc, LABELS) for name, (doc, _, _) in _COUNTERS.items()}
    verdicts = {}
    status = snapshot.extras.get("link") if snapshot.extras else None
    if isinstance(status, dict):
        verdicts = {(p["device"], str(p["port"])): p.get("problem") for p in status.get("ports") or ()}
    if link is not None:
        for p in link.ports:
            key = [p.device, str(p.port)]
            up.add_metric(key, 1.0 if p.up else 0.0)
            if p.rate_gbps is not None and p.up:
                rate.add_metric(key, p.rate_gbps * 1e9 / 8)
            if (p.device, str(p.port)) in verdicts:
                problem.add_metric(key, 1.0 if verdicts[(p.device, str(p.port))] else 0.0)
            for name, (_, names, mult) in _COUNTERS.items():
                vals = [p.counters[n] for n in names if n in p.counters]
                if vals:
                    counters[name].add_metric(key, float(sum(vals) * mult))
    yield from (up, rate, problem, *counters.values())
