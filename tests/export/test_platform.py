"""sparkwatchd_platform_*: the Spark-shaped tree's stack as one info series, the known-bad flags, promtool-clean."""

from __future__ import annotations

import dataclasses
import subprocess
from types import SimpleNamespace

from prometheus_client import generate_latest

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.export.prometheus import build_registry
from spark_watchd.sample.model import Sample
from spark_watchd.snapshot import Snapshot
from spark_watchd.sources.platform import read_platform
from tests.conftest import FIXTURES, require_binary
from tests.daemon_helpers import samples, value

SPARK = FIXTURES / "hosts" / "gb10-platform"


def _text(status) -> str:
    snap = Snapshot(sample=Sample(ts=1.0), diagnosis=None, extras={"platform": status} if status else {})
    return generate_latest(
        build_registry(SimpleNamespace(snapshot=lambda: snap, settings=None, overruns=0))
    ).decode()


def _status(**change):
    p = read_platform(
        str(SPARK / "proc"), str(SPARK / "sys"), str(SPARK / "etc/dgx-release"), "b488217b", "13.0"
    )
    eng = Diagnoser()
    eng.observe(Sample(ts=1.0, boot_id="b", platform=dataclasses.replace(p, **change)))
    return eng.platform.status()


def test_the_spark_tree_renders_one_info_series_with_its_versions():
    m = samples(_text(_status()))
    info = [k for k in m if k[0] == "sparkwatchd_platform_info"]
    assert len(info) == 1 and m[info[0]] == 1
    assert dict(info[0][1]) == {
        "kernel": "6.17.0-1031-nvidia",
        "driver": "580.173.02",
        "driver_flavour": "open",
        "cuda_driver": "13.0",
        "bios": "5.36_0ACUM018",
        "soc_firmware": "43712523",
        "cx7_firmware": "28.45.4028",
        "dgx_ota": "7.5.0",
    }
    assert value(m, "sparkwatchd_platform_problem", check="kernel_7_0_0_1019") == 0
    assert len([k for k in m if k[0] == "sparkwatchd_platform_problem"]) == 4


def test_a_known_bad_kernel_sets_its_flag():
    m = samples(_text(_status(kernel="7.0.0-1019-nvidia")))
    assert value(m, "sparkwatchd_platform_problem", check="kernel_7_0_0_1019") == 1
    assert value(m, "sparkwatchd_platform_problem", check="cma_zero_rdma") == 0


def test_before_the_platform_is_known_the_families_have_no_series():
    text = _text(None)
    assert "# TYPE sparkwatchd_platform_info gauge" in text and "sparkwatchd_platform_info{" not in text


def test_promtool_finds_nothing_wrong_with_the_platform_families():
    promtool = require_binary("promtool")
    text = _text(_status(kernel="7.0.0-1019-nvidia"))
    lines = "\n".join(ln for ln in text.splitlines() if "sparkwatchd_platform_" in ln) + "\n"
    out = subprocess.run([promtool, "check", "metrics"], input=lines, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
