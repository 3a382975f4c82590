"""sparkwatchd_platform_*: the boot's stack as one info series, and the known-bad combinations that apply.

`sparkwatchd_platform_info` is one series (value 1) whose labels are the boot's versions: at most 64 characters
each (sample/platform.py), one value per boot, so a fleet's dashboard groups Sparks by kernel or driver and
an update shows as the series changing. `sparkwatchd_platform_problem{check}` has one series per entry of the
known-bad table (diagnose/platform_known.py), 0 or 1, all present once the platform is known.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from spark_watchd.diagnose.platform_known import KNOWN_BAD
from spark_watchd.export.families import gauge
from spark_watchd.snapshot import Snapshot

# label -> key of the `platform` extra's platform object
INFO_LABELS = {
    "kernel": "kernel",
    "driver": "driver",
    "driver_flavour": "driver_flavour",
    "cuda_driver": "cuda_driver",
    "bios": "bios_version",
    "soc_firmware": "soc_firmware",
    "cx7_firmware": "cx7_firmware",
    "dgx_ota": "ota",
}


def families(snapshot: Snapshot) -> Iterator[Metric]:
    """The info series and the known-bad flags; families without series before the platform is known."""
    info = gauge(
        "platform_info",
        "The boot's kernel release, NVIDIA driver version and module flavour, CUDA driver version, BIOS, SOC "
        "and ConnectX-7 firmware and DGX OTA level (labels; empty where not exposed); always 1.",
        list(INFO_LABELS),
    )
    problem = gauge(
        "platform_problem",
        "1 while a known-bad combination applies to this boot (the check names its entry: CmaTotal 0 with "
        "RDMA ports, proprietary modules on GB10, kernels owners report panicking or wedging); 0 otherwise.",
        ["check"],
    )
    status = snapshot.extras.get("platform") if snapshot.extras else None
    if isinstance(status, dict) and isinstance(p := status.get("platform"), dict):
        info.add_metric([str(p.get(k) or "") for k in INFO_LABELS.values()], 1.0)
        applying = {x.get("check") for x in status.get("problems") or ()}
        for entry in KNOWN_BAD:
            problem.add_metric([entry.key], 1.0 if entry.key in applying else 0.0)
    yield from (info, problem)
