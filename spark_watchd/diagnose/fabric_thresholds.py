"""The fabric judgements' thresholds (`fabric_*` in `[thresholds]`), each with why it has its value.

Judged on the port counters the link source reads (port_xmit_data / port_rcv_data), against the field
reports of NVIDIA/dgx-spark-playbooks PR 108 (a 200 Gb/s ConnectX-7 carrying ~13 Gb/s with clean counters)
and #102 / PR 103 (one PCIe half of a cable carrying NCCL's traffic: ~3 GB/s bus bandwidth, 23.74 after).
"""

from pydantic import Field

from spark_watchd.diagnose.serving_thresholds import ServingThresholds
from spark_watchd.sample.quantities import Delay, Positive, Share


class FabricThresholds(ServingThresholds):
    """Mixed into Thresholds (flat keys of [thresholds]); alone, the defaults for tests and tools."""

    # "Pair traffic": a port moving at least this much in every interval of the window is working, not idle
    # (a DDP all-reduce on two Sparks moves tens of Gb/s; heartbeats and the bootstrap socket kilobits).
    fabric_busy_min_gbps: Positive = Field(
        5.0,
        description="A port (or a cable's two halves together) moving this much is carrying traffic, Gb/s.",
    )
    # Five minutes of it is sustained: NCCL tests and training steps run for minutes, a burst for seconds.
    fabric_sustained_s: Delay = Field(
        300.0, description="Traffic must hold this long before its throughput is judged, seconds."
    )
    # PR 108's degraded initialisation caps a 200 Gb/s port at 8-25 Gb/s (12.86 Gb/s TCP, 13.23 Gb/s
    # ib_write_bw) while a healthy half carries 92-97 Gb/s: a plateau under 15 % of the rate is that cap.
    fabric_capped_share: Share = Field(
        0.15, description="A busy port whose peak stays under this share of its negotiated rate is capped."
    )
    # A cap is flat: every interval within this share of the window's mean (a light job's traffic is bursty).
    fabric_flat_share: Share = Field(
        0.25, description="Largest deviation from the mean rate, share of it, a plateau may have."
    )
    # One QSFP cable is two PCIe Gen5 x4 halves (~100 Gb/s each); NCCL uses both only when NCCL_IB_HCA names
    # both (dgx-spark-playbooks #102 / PR 103). One half carrying this share of the cable's bytes is unbalanced.
    fabric_half_share: Share = Field(
        0.9, description="Share of a cable's traffic on one PCIe half that says NCCL uses only that half."
    )
