"""`link`: the ConnectX-7 (mlx5) ports between Sparks, from sysfs; nothing without an RDMA device.

Layout (Documentation/ABI/stable/sysfs-class-infiniband, drivers/infiniband/core/sysfs.c):
/sys/class/infiniband/<dev>/ports/<p>/{state "4: ACTIVE", phys_state "5: LinkUp", rate "200 Gb/sec (4X HDR)",
link_layer, counters/<name>, hw_counters/<name>}; the netdev a port rides on is listed under
/sys/class/infiniband/<dev>/device/net/ and read from /sys/class/net/<netdev>/{operstate, speed,
carrier_changes, statistics/<name>}. A host without the driver returns nothing and stays up (like `board`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from spark_watchd.sample.link import HW_COUNTERS, IB_COUNTERS, NET_COUNTERS
from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.sensors import _read, read_int

_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*Gb/sec")
_NUMBERED_STATE = re.compile(r"^\d+:\s*(.+)$")
MAX_PORTS = 16  # a GB10 shows 4 RDMA devices of 1 port each; a bounded label set whatever else is plugged in


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def parse_state(text: str | None) -> str | None:
    """`4: ACTIVE` -> `ACTIVE`; `5: LinkUp` -> `LinkUp`; None when absent."""
    if not text:
        return None
    m = _NUMBERED_STATE.match(text)
    return (m.group(1) if m else text).strip()


def parse_rate(text: str | None) -> float | None:
    """`200 Gb/sec (4X HDR)` -> 200.0; `2.5 Gb/sec (1X SDR)` -> 2.5; None when absent or unparsable."""
    m = _RATE.match(text or "")
    return float(m.group(1)) if m else None


def _counters(d: str, names: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        if (v := read_int(os.path.join(d, name))) is not None and v >= 0:
            out[name] = v
    return out


def read_netdev(sys_root: str, name: str) -> dict[str, Any]:
    """operstate, speed (None while down: the kernel reports -1) and the error/drop counters of one netdev."""
    d = os.path.join(sys_root, "class", "net", name)
    speed = read_int(os.path.join(d, "speed"))
    counters = _counters(os.path.join(d, "statistics"), NET_COUNTERS[:-1])
    if (cc := read_int(os.path.join(d, "carrier_changes"))) is not None:
        counters["carrier_changes"] = cc
    return {
        "operstate": _read(os.path.join(d, "operstate")),
        "speed_mbps": speed if speed is not None and speed > 0 else None,
        "counters": counters,
    }


def read_ports(sys_root: str) -> list[dict[str, Any]] | None:
    """Every RDMA port with its netdev; None when /sys/class/infiniband is absent (no RDMA driver)."""
    base = os.path.join(sys_root, "class", "infiniband")
    if not os.path.isdir(base):
        return None
    out: list[dict[str, Any]] = []
    for dev in _listdir(base):
        nets = _listdir(os.path.join(base, dev, "device", "net"))
        for p in _listdir(os.path.join(base, dev, "ports")):
            if not p.isdigit() or len(out) >= MAX_PORTS:
                continue
            pd = os.path.join(base, dev, "ports", p)
            state = parse_state(_read(os.path.join(pd, "state")))
            counters: dict[str, int] = {}
            if (
                state == "ACTIVE"
            ):  # a port that is not up moves no counter: half the reads on a one-cable Spark
                counters = _counters(os.path.join(pd, "counters"), IB_COUNTERS)
                counters.update(_counters(os.path.join(pd, "hw_counters"), HW_COUNTERS))
            port: dict[str, Any] = {
                "device": dev,
                "port": int(p),
                "netdev": nets[0] if nets else None,
                "state": state,
                "phys_state": parse_state(_read(os.path.join(pd, "phys_state"))),
                "rate_gbps": parse_rate(_read(os.path.join(pd, "rate"))),
                "link_layer": _read(os.path.join(pd, "link_layer")),
                "operstate": None,
                "speed_mbps": None,
            }
            if nets:
                net = read_netdev(sys_root, nets[0])
                counters.update(net.pop("counters"))
                port.update(net)
            port["counters"] = counters
            out.append(port)
    return out


class LinkSource:
    """`link`: the RDMA ports and their netdevs, read fresh each tick (sysfs reads, no subprocess)."""

    name = "link"

    def __init__(self, sys_root: str = "/sys"):
        self.sys_root = sys_root

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        ports = read_ports(self.sys_root)
        if ports is None:
            return {}  # no RDMA driver: not an error
        if any(_listdir(os.path.join(self.sys_root, "class", "infiniband"))) and not ports:
            raise SourceUnavailable(f"{self.sys_root}/class/infiniband: devices without a readable port")
        if ports and all(p["state"] is None for p in ports):
            raise SourceUnavailable(f"{self.sys_root}/class/infiniband: no port state readable")
        return {"link": {"ports": ports}}

    def close(self) -> None:
        pass
