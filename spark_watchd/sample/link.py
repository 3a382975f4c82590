"""The ConnectX-7 link between two Sparks, as sysfs shows it: the trace-v1 `link` field.

One entry per RDMA port (`/sys/class/infiniband/<device>/ports/<port>/`) with the Ethernet netdev
the port rides on. A GB10 shows each of its two QSFP ports twice (the NIC hangs off two PCIe Gen5 x4
links, "Socket Direct"): four RDMA devices rocep1s0f0, rocep1s0f1, roceP2p1s0f0, roceP2p1s0f1, each
with port 1. Only the counters listed here are kept, so every metric label set stays bounded whatever
a later driver adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# Port counters (Documentation/ABI/stable/sysfs-class-infiniband, ports/<p>/counters/): the link and
# error ones. port_{xmit,rcv}_data count octets divided by 4 (lanes).
IB_COUNTERS = (
    "link_downed",
    "link_error_recovery",
    "symbol_error",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
    "port_xmit_data",
    "port_rcv_data",
)
# mlx5 hw_counters (ports/<p>/hw_counters/): RoCE retransmission and congestion signs.
HW_COUNTERS = (
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "implied_nak_seq_err",
    "duplicate_request",
    "out_of_buffer",
    "np_cnp_sent",
    "rp_cnp_handled",
)
# /sys/class/net/<netdev>/statistics/ and the netdev's own carrier_changes.
NET_COUNTERS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped", "rx_crc_errors", "carrier_changes")
COUNTERS = IB_COUNTERS + HW_COUNTERS + NET_COUNTERS

# The counters whose rise means the wire or the peer misbehaves (not traffic, not congestion control).
ERROR_COUNTERS = (
    "link_downed",
    "link_error_recovery",
    "symbol_error",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "packet_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "rx_errors",
    "tx_errors",
    "rx_crc_errors",
    "carrier_changes",
)
# RoCE retransmissions: a requester that timed out or saw a sequence error resent.
RETRANSMIT_COUNTERS = ("local_ack_timeout_err", "packet_seq_err", "out_of_sequence", "implied_nak_seq_err")


def _str(v: Any, key: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise TypeError(f"'link.ports[].{key}' must be a string, got {type(v).__name__}")
    return v


def _num(v: Any, key: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"'link.ports[].{key}' must be a number, got {type(v).__name__}")
    return v


@dataclass(frozen=True, slots=True)
class LinkPort:
    """One RDMA port and its netdev; None where the file is absent or unreadable."""

    device: str  # RDMA device, e.g. rocep1s0f1
    port: int
    netdev: str | None = None  # e.g. enp1s0f1np1
    state: str | None = None  # ports/<p>/state without its number: ACTIVE, DOWN, INIT, ARMED
    phys_state: str | None = None  # LinkUp, Disabled, Polling, ...
    rate_gbps: float | None = None  # ports/<p>/rate: active width x active speed
    link_layer: str | None = None  # Ethernet on a Spark (RoCE): the CX-7 has no InfiniBand mode there
    operstate: str | None = None  # /sys/class/net/<netdev>/operstate: up, down, lowerlayerdown
    speed_mbps: int | None = None  # /sys/class/net/<netdev>/speed (-1 when down: kept as None)
    counters: Mapping[str, int] = field(default_factory=dict)

    @property
    def up(self) -> bool:
        """ACTIVE on the RDMA side and, where a netdev is known, up on the Ethernet side."""
        return self.state == "ACTIVE" and (self.operstate in (None, "up", "unknown"))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"counters": dict(self.counters)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LinkPort:
        if not isinstance(d, Mapping):
            raise TypeError(f"'link.ports[]' must be an object, got {type(d).__name__}")
        c = d.get("counters") or {}
        if not isinstance(c, Mapping):
            raise TypeError(f"'link.ports[].counters' must be an object, got {type(c).__name__}")
        port = _num(d.get("port"), "port")
        speed = _num(d.get("speed_mbps"), "speed_mbps")
        return cls(
            device=str(d.get("device") or ""),
            port=int(port or 0),
            **{k: _str(d.get(k), k) for k in ("netdev", "state", "phys_state", "link_layer", "operstate")},
            rate_gbps=_num(d.get("rate_gbps"), "rate_gbps"),
            speed_mbps=None if speed is None else int(speed),
            counters={
                k: int(_num(v, f"counters.{k}") or 0) for k, v in c.items() if k in COUNTERS and v is not None
            },
        )


@dataclass(frozen=True, slots=True)
class LinkReading:
    """Every RDMA port of the host at one instant (an empty tuple: the driver is loaded, no port)."""

    ports: tuple[LinkPort, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The trace-v1 `link` object."""
        return {"ports": [p.to_dict() for p in self.ports]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LinkReading:
        """Build from a trace-v1 `link` object; unknown counters are dropped, a wrong shape names its key."""
        if not isinstance(d, Mapping):
            raise TypeError(f"'link' must be an object, got {type(d).__name__}")
        ports = d.get("ports")
        ports = [] if ports is None else ports
        if not isinstance(ports, list):
            raise TypeError(f"'link.ports' must be a list, got {type(ports).__name__}")
        return cls(tuple(LinkPort.from_dict(p) for p in ports))
