"""nvidia-smi fallback: used when the NVML library cannot be loaded but an nvidia-smi binary exists.

Runs nvidia-smi as an argv list (never a shell) in its own process group,
killed at the timeout: a wedged driver leaves nvidia-smi hanging, and the
tick must not hang with it. Parsers are pure: `parse_smi_csv` for
`--query-* --format=csv` (with `[N/A]`, `Not Supported` and units) and
`parse_smi_performance` for the counters of `-q -d PERFORMANCE`.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spark_watchd.sample.model import GpuReading
from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.command import run_argv

_NA = {
    "[n/a]",
    "n/a",
    "not supported",
    "[not supported]",
    "[unknown error]",
    "unknown error",
    "[insufficient permissions]",
}
_HEADER = re.compile(r"^(.*?)\s*\[([^\]]+)\]$")
_NUMBER_UNIT = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(%|W|MHz|MiB|C|J|mW)?$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")

# -q -d PERFORMANCE "Clocks Event Reasons Counters" label -> trace-v1 counter key.
_PERF_COUNTERS = {
    "sw power capping": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "sw thermal slowdown": "sw_thermal",
    "hw thermal slowdown": "hw_thermal",
    "hw power braking": "hw_power_brake",
}
COUNTER_KEYS = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")

QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "driver_version",
    "power.draw",
    "temperature.gpu",
    "clocks.current.sm",
    "clocks.applications.graphics",
    "utilization.gpu",
    "clocks_event_reasons.active",
    "memory.used",
    "memory.total",
)
_OLD_REASONS_FIELD = "clocks_throttle_reasons.active"  # drivers before 535
# Kept as text even when they look numeric (a driver "580.95" is not a float).
TEXT_FIELDS = frozenset(
    {"name", "uuid", "driver_version", "timestamp", "pci.bus_id", "serial", "vbios_version"}
)


def parse_value(text: str) -> Any:
    """One CSV cell: None for N/A and Not Supported, int/float for numbers (units dropped), else text."""
    t = text.strip()
    if t.lower() in _NA:
        return None
    if _HEX.match(t):
        return int(t, 16)
    m = _NUMBER_UNIT.match(t)
    if m:
        num = m.group(1)
        return float(num) if "." in num else int(num)
    return t


def _text(cell: str) -> str | None:
    t = cell.strip()
    return None if t.lower() in _NA else t


def parse_smi_csv(text: str, fields: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows of `nvidia-smi --query-...` CSV as dicts keyed by field name (units stripped from the header).

    With `fields` the text has no header line (`--format=csv,noheader`).
    """
    rows = [
        r for r in csv.reader(text.splitlines(), skipinitialspace=True) if r and any(c.strip() for c in r)
    ]
    if fields is None:
        if not rows:
            raise ValueError("nvidia-smi CSV: no header line")
        header, rows = rows[0], rows[1:]
        keys = []
        for h in header:
            m = _HEADER.match(h.strip())
            keys.append(m.group(1) if m else h.strip())
    else:
        keys = list(fields)
    out = []
    for lineno, row in enumerate(rows, 1 if fields is not None else 2):
        if len(row) != len(keys):
            raise ValueError(f"nvidia-smi CSV line {lineno}: {len(row)} values for {len(keys)} fields")
        out.append(
            {k: (_text(v) if k in TEXT_FIELDS else parse_value(v)) for k, v in zip(keys, row, strict=True)}
        )
    return out


def parse_smi_performance(text: str) -> list[dict[str, int | None]]:
    """Per GPU (in output order), the cumulative "Clocks Event Reasons Counters" of `-q -d PERFORMANCE`, in us."""
    gpus: list[dict[str, int | None]] = []
    current: dict[str, int | None] | None = None
    in_counters = False
    counters_indent = 0
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if line.startswith("GPU "):
            current = dict.fromkeys(COUNTER_KEYS)
            gpus.append(current)
            in_counters = False
            continue
        if stripped.startswith("Clocks Event Reasons Counters") or stripped.startswith(
            "Clocks Throttle Reasons Counters"
        ):
            if current is None:  # output without a "GPU ..." line: one GPU
                current = dict.fromkeys(COUNTER_KEYS)
                gpus.append(current)
            in_counters, counters_indent = True, indent
            continue
        if in_counters:
            if indent <= counters_indent:
                in_counters = False
                continue
            label, _, value = stripped.partition(":")
            key = _PERF_COUNTERS.get(label.strip().lower())
            if key and current is not None:
                v = value.strip()
                if v.endswith("us") and v[:-2].strip().isdigit():
                    current[key] = int(v[:-2])
    return gpus


def run_command(argv: Sequence[str], timeout: float) -> str:
    """stdout of argv; SourceUnavailable on timeout (process group killed), failure or missing binary."""
    try:
        proc = run_argv(argv, timeout)
    except OSError as exc:
        raise SourceUnavailable(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise SourceUnavailable(
            f"{os.path.basename(argv[0])} timed out after {round(timeout, 1):g} s (killed)"
        ) from None
    out, err = proc.stdout, proc.stderr
    if proc.returncode != 0:
        detail = (err.strip() or out.strip()).splitlines()
        raise SourceUnavailable(
            f"{os.path.basename(argv[0])} exited {proc.returncode}: {detail[0] if detail else 'no output'}"
        )
    return out


class SmiSource:
    """`gpus` and `_gpu_processes` from nvidia-smi when NVML cannot be loaded. Source name `nvidia_smi`."""

    name = "nvidia_smi"

    def __init__(
        self,
        path: str = "nvidia-smi",
        timeout_s: float = 10.0,
        run: Callable[[Sequence[str], float], str] = run_command,
    ):
        self.path = path
        self.timeout_s = timeout_s
        self._run = run
        self._fields = list(QUERY_FIELDS)

    def _query(self, budget: Callable[[], float]) -> list[dict[str, Any]]:
        # noheader, matched by position: the header may spell a field by another alias.
        argv = [self.path, "--query-gpu=" + ",".join(self._fields), "--format=csv,noheader"]
        try:
            text = self._run(argv, budget())
        except SourceUnavailable as exc:
            if "not a valid field" not in str(exc) or _OLD_REASONS_FIELD in self._fields:
                raise
            # Drivers before 535 only know the old name of the reasons field.
            self._fields[self._fields.index("clocks_event_reasons.active")] = _OLD_REASONS_FIELD
            argv = [self.path, "--query-gpu=" + ",".join(self._fields), "--format=csv,noheader"]
            text = self._run(argv, budget())
        try:
            return parse_smi_csv(text, self._fields)
        except ValueError as exc:
            raise SourceUnavailable(str(exc)) from None

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        # One budget for the whole tick: three runs must not cost three timeouts.
        deadline = time.monotonic() + self.timeout_s

        def budget() -> float:
            return max(0.0, deadline - time.monotonic())

        rows = self._query(budget)
        perf: list[dict[str, int | None]] = []
        procs: dict[int, int | None] = {}
        try:
            # The counters and processes are a bonus: the readings above stand without them.
            if budget() > 0:
                perf = parse_smi_performance(self._run([self.path, "-q", "-d", "PERFORMANCE"], budget()))
            if budget() > 0:
                apps = self._run(
                    [self.path, "--query-compute-apps=pid,used_memory", "--format=csv,noheader"], budget()
                )
                for row in parse_smi_csv(apps, ("pid", "used_memory")):
                    if isinstance(row["pid"], int):
                        mib = row["used_memory"]
                        procs[row["pid"]] = int(mib * 2**20) if isinstance(mib, (int, float)) else None
        except (SourceUnavailable, ValueError):
            pass
        gpus = []
        for i, r in enumerate(rows):
            counters = perf[i] if i < len(perf) else None
            if counters is not None and all(v is None for v in counters.values()):
                counters = None
            gpus.append(_reading(r, counters))
        return {"gpus": tuple(gpus), "_gpu_processes": procs}

    def close(self) -> None:
        pass


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) else None


def _reading(r: Mapping[str, Any], counters: Mapping[str, int | None] | None) -> GpuReading:
    reasons = r.get("clocks_event_reasons.active", r.get(_OLD_REASONS_FIELD))
    used, total = _int(r.get("memory.used")), _int(r.get("memory.total"))
    return GpuReading(
        index=_int(r.get("index")) or 0,
        name=str(r.get("name") or ""),
        uuid=str(r.get("uuid") or ""),
        power_w=_num(r.get("power.draw")),
        temp_c=_num(r.get("temperature.gpu")),
        sm_clock_mhz=_int(r.get("clocks.current.sm")),
        clocks_event_reasons=_int(reasons),
        clocks_event_counters_us=dict(counters) if counters is not None else None,
        applications_clock_mhz=_int(r.get("clocks.applications.graphics")),
        # nvidia-smi prints N/A for the thresholds on GB10; only NVML has them.
        slowdown_temp_c=None,
        shutdown_temp_c=None,
        energy_j=None,
        util_pct=_num(r.get("utilization.gpu")),
        # GB10 answers [N/A] for memory here too; MemAvailable is the truth.
        mem_used_bytes=used * 2**20 if used is not None else None,
        mem_total_bytes=total * 2**20 if total is not None else None,
        driver_version=str(r["driver_version"]) if r.get("driver_version") is not None else None,
    )
