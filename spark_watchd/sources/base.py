"""The one narrow interface every source implements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class SourceUnavailable(Exception):
    """The source cannot be read now (driver missing, GPU lost, file unreadable): mark it down, keep going."""


class Source(Protocol):
    """Samples one part of the machine and returns plain data for the Sample.

    `name` is the `source` label of sparkwatchd_source_* (e.g. "nvml", "meminfo").
    `collect(partial)` returns a mapping of trace-v1 Sample fields it fills
    ("gpus", "meminfo", "processes"...); `partial` holds what sources earlier in
    the tuple returned this tick (the process scan reads the NVML pids from it,
    under the private key "_gpu_processes"). Not Supported readings are None,
    never an error. Raise SourceUnavailable (or anything) when the source is
    down; the collector records it and the other sources go on.
    """

    name: str

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]: ...

    def close(self) -> None: ...
