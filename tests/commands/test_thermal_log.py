"""`spark-watchd thermal-log`: byte-for-byte the CSV nvidia-smi writes, from the fake NVML."""

from __future__ import annotations

import datetime as dt
import io
import re

from spark_watchd.commands.thermal_log import HEADER, format_line, log
from spark_watchd.testing import FakeGpu, FakeNvml
from tests.conftest import run_cli

UTC = dt.timezone.utc
# 2025/11/24 14:08:55.751 UTC, the first line of the GB10 capture.
T0 = dt.datetime(2025, 11, 24, 14, 8, 55, 751000, tzinfo=UTC).timestamp()


class FakeTime:
    """Wall clock and monotonic clock advanced by sleep(); a little jitter like a real loop."""

    def __init__(self, start: float):
        self.wall = start
        self.mono = 0.0

    def sleep(self, s: float) -> None:
        self.wall += s + 0.005
        self.mono += s + 0.005


def test_lines_match_nvidia_smi_byte_for_byte():
    nvml = FakeNvml.gb10(temp_c=38, power_mw=11170)
    t = FakeTime(T0)
    out = io.StringIO()
    n = log(
        nvml,
        out,
        1.0,
        count=3,
        clock=lambda: t.wall,
        monotonic=lambda: t.mono,
        sleep=t.sleep,
        tz=UTC,
        header=HEADER,
    )
    assert n == 3
    assert out.getvalue() == (
        "timestamp,temperature.gpu,power.draw\n"
        "2025/11/24 14:08:55.751, 38, 11.17 W\n"
        "2025/11/24 14:08:56.756, 38, 11.17 W\n"
        "2025/11/24 14:08:57.756, 38, 11.17 W\n"
    )
    assert not nvml.initialized  # shut down at the end


def test_format_line_rounding_and_not_available():
    # Milliseconds are truncated, as nvidia-smi prints them; power always has two decimals.
    assert format_line(T0 + 0.0009, 86, 92.4, UTC) == "2025/11/24 14:08:55.751, 86, 92.40 W"
    assert format_line(T0, None, None, UTC) == "2025/11/24 14:08:55.751, [N/A], [N/A]"
    assert format_line(T0, 45, 3.0, UTC) == "2025/11/24 14:08:55.751, 45, 3.00 W"


def test_one_line_per_gpu_and_na_where_not_supported():
    nvml = FakeNvml([FakeGpu(index=0, temp_c=67, power_mw=16000), FakeGpu(index=1, temp_c=45, power_mw=None)])
    t = FakeTime(T0)
    out = io.StringIO()
    log(nvml, out, 1.0, count=1, clock=lambda: t.wall, monotonic=lambda: t.mono, sleep=t.sleep, tz=UTC)
    assert out.getvalue() == "2025/11/24 14:08:55.751, 67, 16.00 W\n2025/11/24 14:08:55.751, 45, [N/A]\n"


def test_gpu_lost_mid_log_writes_na_then_recovers():
    nvml = FakeNvml.gb10()
    t = FakeTime(T0)
    out = io.StringIO()
    seen = []

    def sleep(s):
        t.sleep(s)
        seen.append(1)
        if len(seen) == 1:
            nvml.lose_gpu_after(0)
        if len(seen) == 3:
            nvml.recover()

    log(nvml, out, 1.0, count=5, clock=lambda: t.wall, monotonic=lambda: t.mono, sleep=sleep, tz=UTC)
    values = [line.split(", ", 1)[1] for line in out.getvalue().splitlines()]
    assert values[0] == "38, 11.17 W"
    assert "[N/A], [N/A]" in values[1:3]
    assert values[-1] == "38, 11.17 W"


def test_duration_stops_the_log():
    t = FakeTime(T0)
    out = io.StringIO()
    n = log(
        FakeNvml.gb10(), out, 0.5, duration=2.0, clock=lambda: t.wall, monotonic=lambda: t.mono, sleep=t.sleep
    )
    assert n == 4


def test_cli_writes_header_once_and_appends(tmp_path):
    f = tmp_path / "thermal.csv"
    env = {"SPARK_WATCHD_FAKE_NVML": '{"temp_c": 81, "power_mw": 91234}', "TZ": "UTC"}
    for _ in range(2):
        r = run_cli("thermal-log", "0.05", str(f), "--count", "2", env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout == ""
    lines = f.read_text().splitlines()
    assert lines[0] == HEADER and lines.count(HEADER) == 1
    assert len(lines) == 5
    for line in lines[1:]:
        assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}, 81, 91\.23 W", line), line


def test_cli_stdout_and_errors():
    r = run_cli("thermal-log", "--count", "1", env={"SPARK_WATCHD_FAKE_NVML": "gb10"})
    assert r.returncode == 0 and r.stdout.splitlines()[0] == HEADER and r.stdout.endswith(" W\n")
    r = run_cli("thermal-log", "--count", "1", env={"SPARK_WATCHD_FAKE_NVML": "fail-init"})
    assert r.returncode == 1 and "NVML unavailable: Driver Not Loaded" in r.stderr and r.stdout == ""
    r = run_cli("thermal-log", "0", env={"SPARK_WATCHD_FAKE_NVML": "gb10"})
    assert r.returncode == 2 and "must be > 0" in r.stderr
