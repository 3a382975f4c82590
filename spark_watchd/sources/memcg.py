"""A container at its own memory limit, from its cgroup v2 `memory.events` `oom_kill` counter.

For each workload process of the sample (`processes`: GPU-resident or workload-pattern ones, a few), its
cgroup is read once from `PROC/PID/cgroup` (`0::/system.slice/docker-ID.scope`), and each distinct cgroup's
`SYSFS/fs/cgroup/PATH/memory.events` `oom_kill` counter every tick (bounded: MAX_CGROUPS reads). When a
process leaves the table, its cgroup's counter is read again: if it rose since the last reading, the
kernel killed inside that cgroup at its own limit, and one `memcg` report (no pid claimed beyond the
largest process that went) is appended to the sample's `oom_kills`. No cgroup v2, the root cgroup, or a
cgroup removed with its container (nothing left to read) is silence, never an error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_watchd.sample.kills import KillReport, cgroup_v2_path, memory_events_oom_kill

MAX_CGROUPS = 16  # distinct workload cgroups read per tick
MAX_PROCS = 64  # workload processes whose cgroup is remembered


class MemcgKillsSource:
    """`oom_kills` (killer `memcg`) from the workload cgroups' `memory.events`; never down."""

    name = "memcg"

    def __init__(
        self, proc_root: str = "/proc", sys_root: str = "/sys", clock: Callable[[], float] = time.time
    ):
        self.proc_root = proc_root
        self.cgroup_root = os.path.join(sys_root, "fs", "cgroup")
        self.clock = clock
        self._procs: dict[tuple, tuple[str | None, Any]] = {}  # proc key -> (cgroup, ProcessInfo)
        self._last: dict[str, int] = {}  # cgroup -> oom_kill at the last reading

    def _read(self, path: str) -> str | None:
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                return f.read(4096)
        except OSError:
            return None

    def _oom_kill(self, cgroup: str) -> int | None:
        text = self._read(os.path.join(self.cgroup_root, cgroup.lstrip("/"), "memory.events"))
        return None if text is None else memory_events_oom_kill(text)

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        procs = list(partial.get("processes") or ())[:MAX_PROCS]
        cur: dict[tuple, tuple[str | None, Any]] = {}
        for p in procs:
            hit = self._procs.get(p.key)
            if hit is None:
                text = self._read(os.path.join(self.proc_root, str(p.pid), "cgroup"))
                cg = cgroup_v2_path(text) if text is not None else None
                hit = (cg if cg not in (None, "/") else None, p)
            cur[p.key] = (hit[0], p)
        gone: dict[str, list[Any]] = {}
        for key, (cg, p) in self._procs.items():
            if key not in cur and cg is not None:
                gone.setdefault(cg, []).append(p)
        self._procs = cur
        reports = []
        now = self.clock()
        for cg, went in gone.items():
            before, after = self._last.get(cg), self._oom_kill(cg)
            if before is not None and after is not None and after > before:
                victim = max(went, key=lambda p: max(p.rss_bytes, p.gpu_mem_bytes or 0))
                text = f"{cg}/memory.events oom_kill {before} -> {after}"
                reports.append(
                    KillReport(
                        now,
                        "memcg",
                        pid=victim.pid,
                        name=victim.name,
                        scope="memcg",
                        oom_memcg=cg,
                        task_memcg=cg,
                        cgroup=cg,
                        text=text,
                    )
                )
        live = {cg for cg, _ in cur.values() if cg is not None}
        last: dict[str, int] = {}
        for cg in sorted(live)[:MAX_CGROUPS]:
            if (n := self._oom_kill(cg)) is not None:
                last[cg] = n
        self._last = last
        if not reports:
            return {}
        return {"oom_kills": [*(partial.get("oom_kills") or ()), *reports]}

    def close(self) -> None:
        """Nothing held between ticks."""
