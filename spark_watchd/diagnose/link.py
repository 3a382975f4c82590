"""What the ConnectX-7 ports say: a link that went down, trained below 200 Gb/s, or counts errors.

Pure: samples in (with their trace-v1 `link`), a LinkStatus out; no I/O, no clock. A port that has
never been up this boot is an unused port (a Spark has four RDMA devices and often one cable), not a
fault; a port that was up and is not any more is down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_watchd.diagnose.fabric import FabricWatch
from spark_watchd.sample.link import ERROR_COUNTERS, RETRANSMIT_COUNTERS, LinkPort
from spark_watchd.sample.model import Sample

# Rising error counters stay reported this long after the last rise (sample time), so one burst
# reads as one episode on the page instead of blinking on the samples between bursts.
ERRORS_HOLD_S = 300.0


@dataclass(frozen=True, slots=True)
class PortVerdict:
    """One port's state and what is wrong with it (None: nothing, or an unused port)."""

    device: str
    port: int
    netdev: str | None
    up: bool
    used: bool  # up at some point this boot
    rate_gbps: float | None
    problem: str | None = None  # "down", "slow", "capped", "errors", "one_half"
    rising: dict[str, int] = field(default_factory=dict)  # error counter -> increase since the last sample
    retransmits: int = 0  # RoCE retransmission counters' increase since the last sample
    fabric: dict | None = None  # capped / one_half: the throughput figures (diagnose/fabric.py)

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}" + (f" ({self.netdev})" if self.netdev else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "port": self.port,
            "netdev": self.netdev,
            "up": self.up,
            "used": self.used,
            "rate_gbps": self.rate_gbps,
            "problem": self.problem,
            "rising": dict(self.rising),
            "retransmits": self.retransmits,
            "fabric": self.fabric,
        }


@dataclass(frozen=True, slots=True)
class LinkStatus:
    """The link at one sample: every port's verdict and the worst problem with its sentence."""

    ts: float
    ports: tuple[PortVerdict, ...]
    problem: str | None  # worst of the ports': down > slow > errors
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "problem": self.problem,
            "summary": self.summary,
            "ports": [p.to_dict() for p in self.ports],
        }


_RANK = {"down": 5, "slow": 4, "capped": 3, "errors": 2, "one_half": 1}


def _rises(cur: LinkPort, prev: dict[str, int] | None) -> tuple[dict[str, int], int]:
    if prev is None:
        return {}, 0
    rising, retrans = {}, 0
    for k, v in cur.counters.items():
        before = prev.get(k)
        if before is None or v < before:  # new counter, or reset (driver reload)
            continue
        if k in ERROR_COUNTERS and v > before:
            rising[k] = v - before
        if k in RETRANSMIT_COUNTERS:
            retrans += v - before
    return rising, retrans


def _sentence(worst: PortVerdict | None, ports: tuple[PortVerdict, ...], min_rate: float) -> str:
    if worst is None:
        used = [p for p in ports if p.up]
        if not used:
            return "no ConnectX-7 port is up (no cable, or the peer is off)"
        rate = ", ".join(f"{p.device} {p.rate_gbps:g} Gb/s" if p.rate_gbps else p.device for p in used)
        return f"link up: {rate}"
    if worst.problem == "down":
        return f"link down: {worst.name} was up this boot and is down now"
    if worst.problem == "slow":
        return f"link slow: {worst.name} at {worst.rate_gbps:g} Gb/s, below the {min_rate:g} Gb/s it should train to"
    f = worst.fabric or {}
    if worst.problem == "capped":
        return (
            f"link capped: {worst.name} carried {f['gbps']:g} Gb/s (peak {f['peak_gbps']:g}) through "
            f"{f['span_s'] / 60:.0f} min of sustained traffic against the {f['rate_gbps']:g} Gb/s it negotiated, "
            "with clean counters (a degraded ConnectX-7 initialisation: measure it, then power-cycle both Sparks)"
        )
    if worst.problem == "one_half":
        also = (
            f"; at {f['gbps']:g} Gb/s it is also far below what one half carries: if that setting is in place, "
            "measure the fabric (a capped port)"
            if f.get("capped_too")
            else ""
        )
        return (
            f"link half used: {worst.name} carried {f['share']:.0%} of its cable's traffic and {f['idle_half']} "
            f"the rest: NCCL uses one PCIe half of the cable (~100 Gb/s); set {f['fix']} to use both{also}"
        )
    what = ", ".join(f"{k} +{v}" for k, v in sorted(worst.rising.items()))
    return f"link errors rising on {worst.name}: {what}" if what else f"link errors rising on {worst.name}"


class LinkWatch:
    """Judges each sample's `link` against the previous one; remembers which ports were up this boot."""

    def __init__(self, th):
        self.th = th
        self._prev: dict[tuple[str, int], dict[str, int]] = {}
        self._used: set[tuple[str, int]] = set()
        self._errors_until: dict[tuple[str, int], tuple[float, dict[str, int]]] = {}
        self.status: LinkStatus | None = None
        self.fabric = FabricWatch(th)  # throughput against the negotiated rate; the cable's two halves

    def set_thresholds(self, th) -> None:
        self.th = th
        self.fabric.set_thresholds(th)

    def reboot(self) -> None:
        """A new boot: ports come up afresh and counters restart."""
        self._prev.clear()
        self._used.clear()
        self._errors_until.clear()
        self.fabric.reset()

    def observe(self, sample: Sample) -> LinkStatus | None:
        """The verdict on this sample's link; None (and nothing remembered) without link readings."""
        link = sample.link
        if link is None:
            self.status = None
            return None
        min_rate = float(self.th.link_min_rate_gbps)
        fabric = self.fabric.observe(sample)
        verdicts = []
        for p in link.ports:
            key = (p.device, p.port)
            if p.up:
                self._used.add(key)
            rising, retrans = _rises(p, self._prev.get(key))
            self._prev[key] = dict(p.counters)
            if rising:
                self._errors_until[key] = (sample.ts + ERRORS_HOLD_S, rising)
            held = self._errors_until.get(key)
            if held is not None and sample.ts > held[0]:
                del self._errors_until[key]
                held = None
            used = key in self._used
            problem = None
            if used and not p.up:
                problem = "down"
            elif p.up and p.rate_gbps is not None and p.rate_gbps < min_rate:
                problem = "slow"
            elif used and held is not None:
                problem = "errors"
            elif (fab := fabric.get(p.device)) is not None:
                problem = fab["problem"]  # clean counters, busy for the sustained window
            verdicts.append(
                PortVerdict(
                    p.device,
                    p.port,
                    p.netdev,
                    p.up,
                    used,
                    p.rate_gbps,
                    problem,
                    rising or (held or (0, {}))[1],
                    retrans,
                    fabric.get(p.device) if problem in ("capped", "one_half") else None,
                )
            )
        ports = tuple(verdicts)
        worst = max((v for v in ports if v.problem), key=lambda v: _RANK[v.problem], default=None)
        self.status = LinkStatus(
            sample.ts, ports, worst.problem if worst else None, _sentence(worst, ports, min_rate)
        )
        return self.status
