"""The known-bad table: each entry found on the combination its public source reports, and not found beside it."""

from __future__ import annotations

import dataclasses

from spark_watchd.diagnose.platform_known import KNOWN_BAD, Box, known_bad
from spark_watchd.sample.platform import PlatformReading

SPARK = PlatformReading(kernel="6.17.0-1031-nvidia", driver="580.173.02", driver_flavour="open", ota="7.5.0")
GB10 = ("NVIDIA GB10",)


def _checks(box: Box) -> list[str]:
    return [p["check"] for p in known_bad(box)]


def test_every_entry_has_advice_and_a_public_source_and_a_unique_key():
    assert len({e.key for e in KNOWN_BAD}) == len(KNOWN_BAD)
    assert all(e.advice and e.source for e in KNOWN_BAD)


def test_a_healthy_spark_matches_nothing():
    assert _checks(Box(SPARK, {"CmaTotal": 32768, "CmaFree": 30000}, 4, GB10)) == []


def test_cma_zero_on_a_box_with_rdma_ports():
    # MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#259: "CmaTotal: 0 kB / CmaFree: 940604 kB" on
    # 7.0.0-1019-nvidia, ports ACTIVE, every ibv_reg_mr ENOMEM (luxingcom/aicad-nccl-optimization#1).
    bad = Box(SPARK, {"CmaTotal": 0, "CmaFree": 940604}, 4, GB10)
    got = known_bad(bad)
    assert [p["check"] for p in got] == ["cma_zero_rdma"]
    assert "CmaFree 940604 kB" in got[0]["summary"] and "kho=off" in got[0]["advice"]
    assert _checks(dataclasses.replace(bad, rdma_ports=0)) == []  # no RDMA port: nothing to register
    assert _checks(dataclasses.replace(bad, meminfo={"CmaTotal": 65536, "CmaFree": 60000})) == []
    # An x86 server with RDMA and no CMA at all is not a Spark and has nothing in CmaFree: not flagged.
    x86 = Box(PlatformReading(kernel="6.8.0-45-generic"), {"CmaTotal": 0, "CmaFree": 0}, 2, ("NVIDIA H100",))
    assert _checks(x86) == []


def test_proprietary_modules_on_gb10():
    # Start9Labs/start-technologies PR 3693: proprietary 580.173.02 on a DGX Spark, Xid 169 every ~60 s.
    proprietary = dataclasses.replace(SPARK, driver_flavour="proprietary")
    got = known_bad(Box(proprietary, {}, 4, (), frozenset({169})))  # NVML sees no GPU: it never initialised
    assert [p["check"] for p in got] == ["proprietary_modules_blackwell"]
    assert "Xid 169" in got[0]["summary"] and "open kernel modules" in got[0]["advice"]
    assert _checks(Box(SPARK, {}, 4, GB10, frozenset({169}))) == []  # the open modules: something else
    not_spark = PlatformReading(kernel="6.8.0-45-generic", driver="550.54", driver_flavour="proprietary")
    assert _checks(Box(not_spark, {}, 0, ("NVIDIA A100",))) == []  # proprietary is right for older GPUs


def test_kernel_owners_report_panicking():
    got = known_bad(Box(dataclasses.replace(SPARK, kernel="6.17.0-1008-nvidia")))
    assert [p["check"] for p in got] == ["kernel_6_17_0_1008"] and "panicking" in got[0]["summary"]
    assert _checks(Box(dataclasses.replace(SPARK, kernel="6.17.0-1080-nvidia"))) == []


def test_kernel_owners_report_wedging():
    # NVIDIA/open-gpu-kernel-modules#1358: 7 boots in 5 hours wedged on 7.0.0-1019-nvidia; 6.17 worked.
    got = known_bad(Box(dataclasses.replace(SPARK, kernel="7.0.0-1019-nvidia")))
    assert [p["check"] for p in got] == ["kernel_7_0_0_1019"] and "6.17.0-1031" in got[0]["advice"]
    assert _checks(Box(dataclasses.replace(SPARK, kernel="7.0.0-1018-nvidia"))) == []
