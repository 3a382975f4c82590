"""Who killed it: every process that leaves the workload table gets a cause when one can be known.

Pure: the samples' processes, their `oom_kills` reports (kernel OOM killer, systemd-oomd, earlyoom) and
`driver_events`, and the vmstat oom_kill delta. A process gone from the table is matched, within
`exit_grace_s` (a journal line can land a tick after the process is gone), to:
- a kernel OOM report for its pid: global pressure (`CONSTRAINT_NONE`) or its cgroup's own limit (memcg);
- an earlyoom report for its pid, Ray's memory monitor's (its GCS log) for its pid, or a systemd-oomd kill of a cgroup in the same interval;
- the driver out of memory (NV_ERR_NO_MEMORY) just before it went;
- its cgroup v2 `memory.events` `oom_kill` rising as it went (a `memcg` report), once the grace is over;
- the kernel's oom_kill counter rising with no readable report (the kill is known, the victim is not);
- otherwise an exit: a normal exit or a signal from a user (Linux tells a third party neither the exit
  status nor who sent a signal, so the two are not told apart); but Ollama runners ending while
  `ollama serve` stays are a model unloaded (an `unload` event), not an exit.
One event per workload (a launcher and its children go together): members leaving in consecutive samples
join the exit still waiting for its cause, and one leaving within the grace after its workload's exit was
told (vLLM's launcher 30 s after its EngineCore was killed) gives no second event.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from spark_watchd.diagnose.collateral import ADVICE_COLLATERAL, ADVICE_LIMIT, collateral_names
from spark_watchd.sample.driver import event_kind
from spark_watchd.sample.findings import Event
from spark_watchd.sample.kills import KillReport
from spark_watchd.sample.model import ProcessInfo, Sample

GIB = 1024**3
# sparkwatchd_workload_exits_total{kind,cause}: the cause label's values
EXIT_CAUSES = (
    "oom_kill_global",
    "oom_kill_memcg",
    "oom_kill",
    "systemd_oomd",
    "earlyoom",
    "ray_oom",
    "driver",
    "exit",
)
_ALERTING = {"oom_kill_global", "oom_kill_memcg", "oom_kill", "systemd_oomd", "earlyoom", "ray_oom", "driver"}
_BY_PID = {"kernel": None, "earlyoom": "earlyoom", "ray": "ray_oom"}  # killers whose report names a pid


@dataclass
class _Gone:
    """A workload's members that left the table, waiting for their cause."""

    key: tuple
    kind: str
    workload: str
    since: float
    procs: list[ProcessInfo] = field(default_factory=list)
    oom_rose: bool = False
    launcher_alive: bool = False  # the workload's launcher was still in the table as these left


def _who(p: ProcessInfo) -> str:
    gib = max(p.rss_bytes, p.gpu_mem_bytes or 0) / GIB
    return f"{p.name} (pid {p.pid}, {gib:.1f} GiB resident)"


def _words(cause: str, victim: ProcessInfo, report: KillReport | None, g: _Gone) -> str:
    who = _who(victim)
    if report is not None and report.rss_bytes:
        who = f"{victim.name} (pid {victim.pid}, {report.rss_bytes / GIB:.1f} GiB resident)"
    others = [p for p in g.procs if p is not victim]
    tail = f"; {', '.join(f'{p.name} (pid {p.pid})' for p in others)} went with it" if others else ""
    if cause == "oom_kill_global":
        return f"The kernel OOM killer killed {who} under global memory pressure{tail}"
    if cause == "oom_kill_memcg" and report.killer == "memcg":
        return (
            f"{who} went when the kernel OOM killer ran in its cgroup {report.cgroup} at its own memory "
            f"limit, not global pressure (its memory.events oom_kill rose; no kernel report read){tail}"
        )
    if cause == "oom_kill_memcg":
        where = report.oom_memcg or report.task_memcg or "its cgroup"
        return (
            f"The kernel OOM killer killed {who} at its own memory limit ({where}), not global pressure{tail}"
        )
    if cause == "oom_kill":
        return f"{who} was gone when the kernel OOM killer ran (its report was not readable){tail}"
    if cause == "systemd_oomd":
        return f"systemd-oomd killed {who} with its cgroup {report.cgroup} under memory pressure{tail}"
    if cause == "earlyoom":
        return f"earlyoom killed {who} to keep memory free{tail}"
    if cause == "ray_oom":
        used = f", {report.used_gb:.1f} GB" if report.used_gb is not None else ""
        node = (
            f" with the node at {report.node_fraction * 100:.1f}% of memory" if report.node_fraction else ""
        )
        th = f" (threshold {report.threshold * 100:g}%)" if report.threshold else ""
        return f"Ray's memory monitor killed {victim.name} (pid {victim.pid}{used}){node}{th}{tail}"
    if cause == "driver":
        return f"{who} died right after the GPU driver ran out of memory (NV_ERR_NO_MEMORY){tail}"
    return (
        f"{who} exited (no kill report: a normal exit or a signal from a user, which Linux does not tell "
        f"a third party){tail}"
    )


# What a sample's processes and workloads are compared by, read in C (attrgetter over map): most samples
# bring the same processes in the same workloads, and two tuple comparisons tell it without a Python loop.
_PROC_KEY = attrgetter("pid", "create_time")  # ProcessInfo.key
_WL_SIG = attrgetter("pid", "create_time", "kind", "name", "members")  # all the member map is built from


class ExitTracker:
    """Incremental exit attribution: feed each sample (oldest first) with its workload table."""

    def __init__(self, th):
        self.th = th
        # The last sample's workload members, kept as that sample's processes and member map (replaced, never
        # changed) and resolved into a table (proc key -> proc) only on a sample where someone may have left.
        self._procs: tuple[ProcessInfo, ...] = ()
        self._procs_of: dict[int, tuple[tuple, str, str]] = {}
        self._keys: tuple = ()  # _PROC_KEY of each of those processes
        self.pending: list[_Gone] = []
        self.reports: deque[KillReport] = deque(maxlen=200)
        self.driver_oom_ts: float | None = None
        self.settled: dict[tuple, float] = {}  # workload key -> when its last workload_exit was told
        self._sig: tuple = ()  # _WL_SIG of each workload of the table _of was built from
        self._of: dict[int, tuple[tuple, str, str]] = {}  # pid -> (wl key, kind, name) in that table

    def set_thresholds(self, th) -> None:
        """Judge with reloaded thresholds from the next sample on."""
        self.th = th

    def forget(self) -> None:
        """A reboot or a clock step back: the table is not this boot's (the reboot event says why)."""
        self._procs, self._keys = (), ()
        self.pending.clear()
        self.settled.clear()
        self.driver_oom_ts = None

    def update(self, sample: Sample, oom_delta: int | None, workloads: tuple[Any, ...]) -> list[Event]:
        """The exit events this sample settles.

        Hot path (every sample): most samples bring no kill report, no driver event, no departure and
        nothing pending, so each of those steps is skipped on a cheap test of its input.
        """
        ts = sample.ts
        reports = self.reports
        if sample.oom_kills:
            reports.extend(sample.oom_kills)
        if reports:
            horizon = ts - 2 * self.th.exit_grace_s - 600
            while reports and reports[0].ts < horizon:
                reports.popleft()
        if sample.driver_events and any(event_kind(e) == "driver_oom" for e in sample.driver_events):
            self.driver_oom_ts = ts
        sig = tuple(map(_WL_SIG, workloads))
        if sig != self._sig:  # the membership moved (the table's memory moves every sample: not compared)
            self._sig = sig
            self._of = of = {}
            for pid, create_time, kind, name, members in sig:
                hit = ((pid, create_time), kind, name)
                for member in members:
                    of[member] = hit
        of = self._of
        procs = sample.processes
        keys = tuple(map(_PROC_KEY, procs))
        if keys != self._keys or of is not self._procs_of:  # someone may have left
            self._depart(procs, of, ts, oom_delta)
        self._procs, self._procs_of, self._keys = procs, of, keys
        if not self.pending:
            return []
        grace = self.th.exit_grace_s
        events = []
        keep = []
        for g in self.pending:
            ev = self._settle(g, ts, grace)
            if ev is None:
                keep.append(g)
            else:
                events.append(ev)
        self.pending = keep
        return events

    def _depart(self, procs: tuple[ProcessInfo, ...], of: dict, ts: float, oom_delta: int | None) -> None:
        """Each workload's members that were in the last sample's table and are not in this one's: pending."""
        last_of = self._procs_of
        table = {_PROC_KEY(p): p for p in self._procs if p.pid in last_of}
        cur = {_PROC_KEY(p) for p in procs if p.pid in of}
        groups: dict[tuple, _Gone] = {}
        for key, p in table.items():
            if key not in cur:
                wk, kind, name = last_of[p.pid]
                g = groups.get(wk) or groups.setdefault(wk, _Gone(wk, kind, name, ts))
                g.procs.append(p)
        grace = self.th.exit_grace_s
        pending = {p.key: p for p in self.pending}
        for g in groups.values():
            g.oom_rose = bool(oom_delta)
            g.launcher_alive = g.key in cur
            if (same := pending.get(g.key)) is not None:  # the rest of a workload leaving a tick later
                same.procs.extend(g.procs)
                same.oom_rose = same.oom_rose or g.oom_rose
            elif ts - self.settled.get(g.key, float("-inf")) > grace:
                self.pending.append(g)
            # else: its workload's exit was already told within the grace (vLLM's launcher 30 s after its
            # EngineCore was killed): one workload_exit per workload

    def _match(self, g: _Gone, final: bool) -> tuple[str, ProcessInfo, KillReport | None] | None:
        """`final`: the grace is over, so a cgroup's counter (no report) may settle it too."""
        pids = {p.pid: p for p in g.procs}
        for r in reversed(self.reports):
            if r.pid in pids and (r.killer in _BY_PID or (final and r.killer == "memcg")):
                cause = _BY_PID.get(r.killer) or f"oom_kill_{r.scope or 'global'}"
                if r.killer == "memcg" and any(x.killer == "kernel" and x.pid in pids for x in self.reports):
                    continue  # the kernel's own report names it better
                return cause, pids[r.pid], r
        for r in reversed(self.reports):
            if (
                r.killer == "systemd-oomd"
                and g.since - self.th.exit_grace_s <= r.ts <= g.since + self.th.exit_grace_s
            ):
                return "systemd_oomd", _biggest(g), r
        return None

    def _settle(self, g: _Gone, ts: float, grace: float) -> Event | None:
        found = self._match(g, False)
        if found is None:
            if ts - g.since < grace:
                return None  # a report may still land
            found = self._match(g, True)
        if found is None:
            victim = _biggest(g)
            d = self.driver_oom_ts
            if d is not None and g.since - self.th.driver_oom_hold_s <= d <= g.since:
                found = ("driver", victim, None)
            elif g.oom_rose:
                found = ("oom_kill", victim, None)
            else:
                found = ("exit", victim, None)
        cause, victim, report = found
        if cause == "exit" and _unload(g):
            return _unload_event(g, victim, ts)
        settled = self.settled
        if len(settled) > 64:  # bounded: only the last grace's exits are read
            for k in [k for k, t in settled.items() if ts - t > grace]:
                del settled[k]
        settled[g.key] = ts
        details = _details(cause, g, victim)
        if report is not None:
            details["report"] = report.to_dict()
        summary = _words(cause, victim, report, g)
        return Event("workload_exit", "G3" if cause in _ALERTING else "", ts, summary, details=details)


def _unload(g: _Gone) -> bool:
    """Ollama runners leaving with no kill while `ollama serve` stays: a model unloaded (keep-alive), not an
    exit (each loaded model is a runner process that ends when Ollama unloads it)."""
    return g.kind == "ollama" and g.launcher_alive and all("runner" in p.cmdline for p in g.procs)


def _unload_event(g: _Gone, victim: ProcessInfo, ts: float) -> Event:
    who = ", ".join(
        f"{p.name} runner (pid {p.pid}, {max(p.rss_bytes, p.gpu_mem_bytes or 0) / GIB:.1f} GiB)"
        for p in g.procs
    )
    summary = (
        f"Ollama unloaded a model: {who} ended with its server still running (keep-alive or a new model)"
    )
    return Event("unload", "", ts, summary, details=_details("unload", g, victim))


def _details(cause: str, g: _Gone, victim: ProcessInfo) -> dict[str, Any]:
    """An exit or unload event's details: the cause, the workload and the process it is told by."""
    return {
        "cause": cause,
        "workload_kind": g.kind,
        "workload": g.workload,
        "pid": victim.pid,
        "name": victim.name,
        "pids": [p.pid for p in g.procs],
        "resident_bytes": max(victim.rss_bytes, victim.gpu_mem_bytes or 0),
    }


def _biggest(g: _Gone) -> ProcessInfo:
    return max(g.procs, key=lambda p: max(p.rss_bytes, p.gpu_mem_bytes or 0))


def name_oom_event(event: Event, reports: tuple[KillReport, ...]) -> Event:
    """G3's oom_kill event with the victims the kernel named in this sample's reports."""
    named = [r for r in reports if r.killer == "kernel" and r.pid is not None]
    if not named:
        return event
    parts = []
    for r in named:
        rss = f", {r.rss_bytes / GIB:.1f} GiB resident" if r.rss_bytes else ""
        where = (
            f"at its cgroup's own limit ({r.oom_memcg or r.task_memcg})"
            if r.scope == "memcg"
            else "under global memory pressure"
        )
        parts.append(f"{r.name} (pid {r.pid}{rss}) {where}")
    details = dict(event.details)
    details["victims"] = [r.to_dict() for r in named]
    summary = f"The kernel OOM killer killed {'; '.join(parts)}"
    if any(r.scope == "memcg" for r in named):
        summary += f". {ADVICE_LIMIT[0]}"
    if names := collateral_names(named):
        details["collateral"] = list(names)
        summary += (
            f"; collateral: {', '.join(names)} (system service{'s' if len(names) > 1 else ''}, not a workload). "
            + ADVICE_COLLATERAL[0]
        )
    return replace(event, summary=summary, details=details)
