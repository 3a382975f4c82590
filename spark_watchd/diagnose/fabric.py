"""The fabric's real throughput against its negotiated rate, from the port counters the link source reads.

Pure: the ports of each sample in (`port_xmit_data` / `port_rcv_data`: octets divided by 4), a verdict per
port out; no I/O, no clock. Two faults the link-state checks cannot see:

- **capped**: under sustained traffic a port's throughput plateaus far below its negotiated rate with clean
  counters (NVIDIA/dgx-spark-playbooks PR 108: a 200 Gb/s ConnectX-7 carrying 12.86 Gb/s TCP, 13.23 Gb/s
  ib_write_bw, on four Sparks with DGX OS 7.5.0 and firmware 28.45.4028).
- **one half**: a QSFP cable is two PCIe Gen5 x4 endpoints (rocep1s0f0 and roceP2p1s0f0, ~100 Gb/s each);
  NCCL aggregates them only when NCCL_IB_HCA names both (dgx-spark-playbooks #102 and PR 103: ~3 GB/s bus
  bandwidth before, 23.74 GB/s after), so one half carrying nearly all of the cable's bytes is that fault.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any

from spark_watchd.sample.link import LinkPort
from spark_watchd.sample.model import Sample

# rocep1s0f0 / roceP2p1s0f0: the same cable's two halves differ only in the PCI domain (P2) of their name.
_HALF = re.compile(r"^(?P<prefix>[a-z]+?)(?:P\d+)?(?P<rest>p\d+s\d+f\d+)$")
NCCL_FIX = "NCCL_IB_HCA={a},{b}"


def cable_of(device: str) -> str | None:
    """The cable a Socket-Direct half belongs to: its RDMA device name without the PCI domain."""
    m = _HALF.match(device)
    return f"{m.group('prefix')}{m.group('rest')}" if m else None


@dataclass(frozen=True, slots=True)
class Throughput:
    """One port's traffic over the judged window."""

    device: str
    mean_gbps: float  # the busier direction's mean over the window
    peak_gbps: float
    low_gbps: float
    span_s: float
    total_bytes: float  # both directions, over the window


def _rates(h: deque) -> list[tuple[float, float, float]]:
    """(dt, tx Gb/s, rx Gb/s) between consecutive readings; a counter reset drops the interval."""
    out = []
    for (t0, tx0, rx0), (t1, tx1, rx1) in zip(h, list(h)[1:], strict=False):
        dt = t1 - t0
        if dt <= 0 or tx1 < tx0 or rx1 < rx0:
            continue
        out.append((dt, (tx1 - tx0) * 8 / dt / 1e9, (rx1 - rx0) * 8 / dt / 1e9))
    return out


class FabricWatch:
    """Keeps each up port's counter readings over fabric_sustained_s; judges capped ports and loaded halves."""

    def __init__(self, th):
        self.th = th
        self._hist: dict[str, deque] = {}

    def set_thresholds(self, th) -> None:
        self.th = th

    def reset(self) -> None:
        """A new boot or a clock step: counters and windows start again."""
        self._hist.clear()

    def _throughput(self, device: str, ts: float) -> Throughput | None:
        """The port's traffic when its readings cover the sustained window and every interval was busy."""
        th = self.th
        h = self._hist.get(device)
        if not h or ts - h[0][0] < th.fabric_sustained_s:
            return None
        rates = _rates(h)
        if not rates:
            return None
        busy = [max(tx, rx) for _, tx, rx in rates]
        span = sum(dt for dt, _, _ in rates)
        mean = sum(dt * max(tx, rx) for dt, tx, rx in rates) / span
        total = (h[-1][1] - h[0][1]) + (h[-1][2] - h[0][2])
        return Throughput(device, mean, max(busy), min(busy), span, total)

    def observe(self, sample: Sample) -> dict[str, dict[str, Any]]:
        """{device: verdict} for the ports judged at this sample: `capped` or `one_half`, with the figures."""
        link = sample.link
        if link is None:
            return {}
        th, ts = self.th, sample.ts
        keep = th.fabric_sustained_s + th.max_gap_s
        up: dict[str, LinkPort] = {}
        for p in link.ports:
            tx, rx = p.counters.get("port_xmit_data"), p.counters.get("port_rcv_data")
            if not p.up or tx is None or rx is None:
                self._hist.pop(p.device, None)
                continue
            up[p.device] = p
            h = self._hist.setdefault(p.device, deque())
            if h and (ts - h[-1][0] > th.max_gap_s or ts < h[-1][0]):
                h.clear()  # a gap or a clock step: no rate across it
            h.append((ts, tx * 4.0, rx * 4.0))
            while len(h) > 2 and ts - h[1][0] >= th.fabric_sustained_s:
                h.popleft()
            while h and ts - h[0][0] > keep:
                h.popleft()
        for gone in set(self._hist) - set(up):
            del self._hist[gone]
        seen = {d: self._throughput(d, ts) for d in up}
        out: dict[str, dict[str, Any]] = {}
        for d, t in seen.items():
            rate = up[d].rate_gbps
            if t is None or not rate or t.low_gbps < th.fabric_busy_min_gbps:
                continue
            if t.peak_gbps <= th.fabric_capped_share * rate and (t.peak_gbps - t.low_gbps) <= (
                2 * th.fabric_flat_share * t.mean_gbps
            ):
                out[d] = {
                    "problem": "capped",
                    "gbps": round(t.mean_gbps, 2),
                    "peak_gbps": round(t.peak_gbps, 2),
                    "rate_gbps": rate,
                    "span_s": round(t.span_s),
                }
        self._halves(seen, up, out)
        return out

    def _halves(self, seen: dict, up: dict, out: dict) -> None:
        """One half of a cable carrying fabric_half_share of its bytes while the pair of them is busy."""
        th = self.th
        cables: dict[str, list[str]] = {}
        for d in sorted(up, key=lambda d: (d != cable_of(d), d)):  # rocep1s0f0 before roceP2p1s0f0
            if (c := cable_of(d)) is not None:
                cables.setdefault(c, []).append(d)
        for devices in cables.values():
            if len(devices) != 2 or any(seen.get(d) is None for d in devices):
                continue
            a, b = (seen[d] for d in devices)
            total = a.total_bytes + b.total_bytes
            h_a, h_b = _rates(self._hist[a.device]), _rates(self._hist[b.device])
            n = min(len(h_a), len(h_b))
            together = [max(x[1], x[2]) + max(y[1], y[2]) for x, y in zip(h_a[-n:], h_b[-n:], strict=True)]
            if total <= 0 or not together or min(together) < th.fabric_busy_min_gbps:
                continue
            loaded, idle = (a, b) if a.total_bytes >= b.total_bytes else (b, a)
            share = loaded.total_bytes / total
            if share < th.fabric_half_share:
                continue
            # A loaded half on a low plateau is both faults' picture (#102's ~3 GB/s bus bandwidth, PR 108's
            # 13 Gb/s rail): the cheap fix first, the cap named beside it.
            capped = out.get(loaded.device, {}).get("problem") == "capped"
            out[loaded.device] = {
                "problem": "one_half",
                "gbps": round(loaded.mean_gbps, 2),
                "share": round(share, 3),
                "idle_half": idle.device,
                "fix": NCCL_FIX.format(a=devices[0], b=devices[1]),
                "span_s": round(loaded.span_s),
                "capped_too": capped,
            }
