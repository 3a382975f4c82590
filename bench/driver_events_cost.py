"""What reading a previous boot's kernel log costs, and what the driver_events source costs per tick.

    python bench/driver_events_cost.py [LINES]

Builds a synthetic `journalctl -k -b -1 -o json` output of LINES kernel messages (default 200,000: a
long, chatty boot) with a few hundred driver faults among them, and times `parse_journal_json` on it
(the first tick waits for this plus journalctl itself, bounded by sources.journal_timeout_s). Then times
collect() on the fake NVML with the event thread running (what every tick pays) and the Xid delivery
latency from inject to collect. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from spark_watchd.diagnose.xid import XIDS  # noqa: E402
from spark_watchd.sources.driver_events import DriverEventsSource  # noqa: E402
from spark_watchd.sources.driverlog import parse_journal_json  # noqa: E402
from spark_watchd.testing import FakeNvml  # noqa: E402

NOISE = (
    "mlx5_core 0000:01:00.0 enP2p1s0f0np0: Link up",
    'audit: type=1400 audit(1764400000.123:456): apparmor="DENIED" operation="open" profile="snap.x"',
    "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
    "usb 1-1: new high-speed USB device number 2 using xhci_hcd",
)
FAULTS = (
    "NVRM: Xid (PCI:000f:01:00): 13, pid=48211, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)",
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
    "_memdescAllocInternal(pMemDesc) @ mem_desc.c:1359",
)


def journal(lines: int) -> list[str]:
    """Synthetic journal JSON: one fault every 500 messages."""
    out = []
    for i in range(lines):
        msg = FAULTS[(i // 500) % 2] if i % 500 == 499 else NOISE[i % len(NOISE)]
        rec = {"__REALTIME_TIMESTAMP": str(1764400000000000 + i * 1000), "_BOOT_ID": "b" * 32,
               "PRIORITY": "6", "_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0",
               "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": msg}  # fmt: skip
        out.append(json.dumps(rec))
    return out


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    lines = journal(n)
    size_mb = sum(len(x) + 1 for x in lines) / 1e6
    t0 = time.perf_counter()
    events = parse_journal_json(lines)
    took = time.perf_counter() - t0
    print(
        f"previous boot: {n} lines ({size_mb:.1f} MB) parsed in {took * 1000:.0f} ms, {len(events)} events kept"
    )

    nvml = FakeNvml.gb10()
    src = DriverEventsSource(nvml, journalctl=None, follow=False, wait_ms=500)
    src.collect({})
    deadline = time.monotonic() + 5
    while "watching" not in src.states.get("nvml-events", "") and time.monotonic() < deadline:
        time.sleep(0.01)
    ticks = 2000
    t0 = time.perf_counter()
    for _ in range(ticks):
        src.collect({})
    per_tick = (time.perf_counter() - t0) / ticks
    lat = []
    for code in sorted(XIDS)[:20]:  # distinct codes: identical ones within 60 s fold into one event
        t1 = time.perf_counter()
        nvml.inject_xid(code)
        while not src.collect({})["driver_events"]:
            time.sleep(0.0005)
        lat.append(time.perf_counter() - t1)
    src.close()
    lat.sort()
    print(f"collect() with the event thread running: {per_tick * 1e6:.1f} us per tick")
    print(f"Xid inject -> collect: median {lat[len(lat) // 2] * 1000:.2f} ms, max {lat[-1] * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
