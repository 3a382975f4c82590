"""`thermal-log` on the real binding over the shim: the community script's CSV, byte for byte."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from spark_watchd.commands.thermal_log import HEADER
from tests.conftest import run_cli

pytestmark = pytest.mark.e2e
# `nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw --format=csv,noheader -l 1` under the header:
# "2025/11/24 14:08:55.751, 38, 11.17 W" (local time, milliseconds; [N/A] where NVML cannot answer).
LINE = re.compile(r"(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}), (\d+|\[N/A\]), (\d+\.\d\d W|\[N/A\])")


def test_thermal_log_is_the_community_csv_through_a_lost_gpu(shim_gpu, tmp_path):
    # Lost from 0.9 s to 2.1 s after NVML is first called; the log writes [N/A] and picks up again.
    shim_gpu.write("@0.9 fault=GPU_IS_LOST\n@2.1 fault=\n@2.1 temp=45\n@2.1 power_mw=16004\n")
    out = tmp_path / "thermal.csv"
    start = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    r = run_cli("thermal-log", "0.3", str(out), "--count", "12", env=shim_gpu.env(TZ="UTC"))
    assert r.returncode == 0, r.stderr
    raw = out.read_bytes()
    assert raw.startswith(HEADER.encode() + b"\n") and raw.endswith(b"\n") and b"\r" not in raw
    rows = []
    for line in raw.decode("ascii").splitlines()[1:]:
        m = LINE.fullmatch(line)
        assert m, line
        ts = dt.datetime.strptime(m[1], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
        assert start <= ts <= start + dt.timedelta(seconds=60)
        rows.append(line.split(", ", 1)[1])
    assert len(rows) == 12
    assert rows[0] == "38, 11.17 W" and rows[-1] == "45, 16.00 W"
    assert "[N/A], [N/A]" in rows
    # Nothing else appears: each row is before, during or after the loss.
    assert set(rows) <= {"38, 11.17 W", "[N/A], [N/A]", "45, 16.00 W"}


def test_thermal_log_writes_one_line_per_gpu_in_index_order(shim_gpu):
    shim_gpu.write("gpus=2\ngpu1.temp=55\ngpu1.power_mw=NOT_SUPPORTED\n")
    r = run_cli("thermal-log", "--count", "1", "--no-header", env=shim_gpu.env(TZ="UTC"))
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert LINE.fullmatch(first) and LINE.fullmatch(second)
    assert first.split(", ", 1) == [second.split(", ", 1)[0], "38, 11.17 W"]  # one timestamp per sample
    assert second.endswith(", 55, [N/A]")
