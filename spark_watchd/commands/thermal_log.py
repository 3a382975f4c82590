"""Log GPU temperature and power as the community's thermal CSV, read from NVML (no nvidia-smi spawned).

Byte-compatible with `nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw
--format=csv,noheader -l INTERVAL` under the header `timestamp,temperature.gpu,power.draw`:

    timestamp,temperature.gpu,power.draw
    2025/11/24 14:08:55.751, 38, 11.17 W

one line per GPU per interval, local time to the millisecond, `[N/A]` where
NVML cannot answer. FILE is appended to (the header only when it is empty);
without FILE, or with `-`, lines go to stdout. Each line is flushed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from spark_watchd.sources.nvml import read_temperature

HEADER = "timestamp,temperature.gpu,power.draw"
NA = "[N/A]"
_FATAL = frozenset({1, 9, 15, 16, 18, 28, 999})  # as sources.nvml.FATAL_ERRORS


def format_timestamp(ts: float, tz: _dt.tzinfo | None = None) -> str:
    """nvidia-smi's timestamp: `2025/11/24 14:08:55.751` (local time unless tz, milliseconds truncated)."""
    d = _dt.datetime.fromtimestamp(ts, tz)
    return d.strftime("%Y/%m/%d %H:%M:%S.") + f"{d.microsecond // 1000:03d}"


def format_line(ts: float, temp_c: int | None, power_w: float | None, tz: _dt.tzinfo | None = None) -> str:
    """One CSV line as nvidia-smi writes it (without the newline)."""
    temp = str(int(temp_c)) if temp_c is not None else NA
    power = f"{power_w:.2f} W" if power_w is not None else NA
    return f"{format_timestamp(ts, tz)}, {temp}, {power}"


class _Reader:
    """Temperature and power per GPU; re-initialises NVML after a fatal error."""

    def __init__(self, nvml: Any):
        self.nv = nvml
        self.handles: list[Any] | None = None
        self.count = 1

    def open(self) -> None:
        self.nv.nvmlInit()
        self.count = int(self.nv.nvmlDeviceGetCount())
        self.handles = [self.nv.nvmlDeviceGetHandleByIndex(i) for i in range(self.count)]

    def _get(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nv.NVMLError as exc:
            if getattr(exc, "value", None) in _FATAL:
                self.close()
            return None

    def read(self) -> list[tuple[int | None, float | None]]:
        if self.handles is None:
            try:
                self.open()
            except self.nv.NVMLError:
                self.close()
                return [(None, None)] * self.count
        out = []
        for h in list(self.handles or ()):
            temp = self._get(read_temperature, self.nv, h)
            mw = self._get(self.nv.nvmlDeviceGetPowerUsage, h)
            out.append((temp, mw / 1000.0 if mw is not None else None))
        return out or [(None, None)] * self.count

    def close(self) -> None:
        if self.handles is not None:
            self.handles = None
            try:
                self.nv.nvmlShutdown()
            except self.nv.NVMLError:
                pass


def log(
    nvml: Any,
    out: IO[str],
    interval: float,
    count: int | None = None,
    duration: float | None = None,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    tz: _dt.tzinfo | None = None,
    header: str | None = None,
) -> int:
    """Write lines every `interval` s until `count` samples or `duration` s; returns samples written."""
    reader = _Reader(nvml)
    reader.open()  # the first failure is the user's to see, before any output
    if header is not None:
        out.write(header + "\n")
        out.flush()
    start = monotonic()
    n = 0
    try:
        while True:
            ts = clock()
            for temp, power in reader.read():
                out.write(format_line(ts, temp, power, tz) + "\n")
            out.flush()
            n += 1
            if count is not None and n >= count:
                return n
            # Fixed deadlines: no drift over a long log, as `nvidia-smi -l` drifts.
            deadline = start + n * interval
            if duration is not None and deadline - start >= duration:
                return n
            wait = deadline - monotonic()
            if wait > 0:
                sleep(wait)
    finally:
        reader.close()


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return v


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "interval", nargs="?", type=_positive, default=1.0, help="seconds between samples (1)"
    )
    parser.add_argument("file", nargs="?", default="-", help="CSV file to append to (default: stdout)")
    parser.add_argument("--count", type=int, help="stop after N samples")
    parser.add_argument("--duration", type=_positive, help="stop after this many seconds")
    parser.add_argument("--no-header", action="store_true", help="omit the header line")


def main(args: argparse.Namespace, nvml: Any = None) -> int:
    if args.count is not None and args.count < 1:
        print("spark-watchd thermal-log: --count must be at least 1", file=sys.stderr)
        return 2
    if nvml is None:
        from spark_watchd.app import nvml_from_env

        nvml = nvml_from_env()
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            print("spark-watchd thermal-log: nvidia-ml-py is not installed", file=sys.stderr)
            return 1
    out: IO[str]
    if args.file == "-":
        out, close = sys.stdout, False
    else:
        created = not os.path.exists(args.file)
        try:
            out, close = open(args.file, "a", encoding="ascii"), True  # noqa: SIM115
        except OSError as exc:
            print(f"spark-watchd thermal-log: cannot open {args.file}: {exc.strerror}", file=sys.stderr)
            return 1
    try:
        header = None if args.no_header or (close and out.tell() > 0) else HEADER
        try:
            log(nvml, out, args.interval, count=args.count, duration=args.duration, header=header)
        except nvml.NVMLError as exc:
            from spark_watchd.sources.nvml import describe_nvml_error

            print(f"spark-watchd thermal-log: NVML unavailable: {describe_nvml_error(exc)}", file=sys.stderr)
            if close and created and out.tell() == 0:
                out.close()
                os.unlink(args.file)  # NVML failed before the first line: leave no empty CSV behind
            return 1
        return 0
    finally:
        if close:
            out.close()
