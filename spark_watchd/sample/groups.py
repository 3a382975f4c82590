"""Processes grouped into workloads: a server's launcher and its renamed GPU-resident children are one workload.

Today's servers split into a launcher that carries the flags (`vllm serve M --gpu-memory-utilization 0.35`,
`python -m sglang.launch_server ...`, `ollama serve`, `torchrun train.py`) and children that hold the memory
under a title that shows no flag (`VLLM::EngineCore`, `VLLM::Worker_TP1_DP0`, `sglang::scheduler_TP0`,
`ollama runner --model ...`, torchrun's `python -u train.py` workers). A workload is the group: its cap is read
from the launcher's flags, its footprint is the sum of its members' memory.

Parents come from `ProcessInfo.ppid` (trace-v1 `processes[].ppid`). Traces recorded before ppid existed are
paired by kind and start time: a renamed child joins the latest launcher of its kind that started before it.
Pure functions of a sample's processes; `Grouper` only caches each process's classification.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from spark_watchd.sample.model import ProcessInfo
from spark_watchd.sample.workloads import (
    SERVER_KINDS,
    cap_flag,
    classify,
    is_capped,
    is_member_title,
    is_ray_runtime,
    read_caps,
    script_of,
    uses_ray,
)

# A child can be seen a moment before its launcher's create_time is rounded (jiffies): tolerance, s.
_START_SLACK_S = 1.0
_TRAINER_LAUNCHERS = (
    "torchrun",
    "accelerate",
    "deepspeed",
    "torch.distributed.run",
    "torch.distributed.launch",
)


class Workload(NamedTuple):
    """One workload: the launcher's identity and argv, its cap, its members and their summed memory.

    A NamedTuple rather than a frozen dataclass: one is built per workload per tick, and a tuple is
    built several times faster (the table is immutable either way).
    """

    pid: int  # the launcher's (the group root's) pid
    create_time: float
    kind: str
    name: str
    cmdline: tuple[str, ...]
    members: tuple[int, ...]  # pids, the launcher first
    footprint_bytes: int  # sum over members of the larger of NVML memory and RSS
    gpu_mem_bytes: int | None  # sum of members' NVML memory, None when no member reports any
    rss_bytes: int
    gpu_resident: bool
    capped: bool | None  # None: not a server (caps are a server notion)
    cap: str | None  # the flag that caps it, as written: "--gpu-memory-utilization 0.35"
    cap_value: float | int | None = None
    caps: Mapping[str, Any] = MappingProxyType({})

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.create_time)

    def to_dict(self) -> dict[str, Any]:
        """The row the API, page, CLI and exporter show."""
        return {
            "pid": self.pid,
            "kind": self.kind,
            "name": self.name,
            "cmdline": " ".join(self.cmdline)[:300],
            "members": list(self.members),
            "footprint_bytes": self.footprint_bytes,
            "gpu_mem_bytes": self.gpu_mem_bytes,
            "rss_bytes": self.rss_bytes,
            "gpu_resident": self.gpu_resident,
            "capped": self.capped,
            "cap": self.cap,
        }


def who_and_memory(processes: Sequence[ProcessInfo]) -> tuple[list[tuple], list[tuple]]:
    """(who each process is, its memory), as grouping reads them: a workload table's rows change only when
    the first list does (someone came, went, was renamed, reparented or became GPU-resident), and only
    their figures when the second does. Whoever caches what follows from the grouping compares the first."""
    who, mem = [], []  # one loop, not two comprehensions: this runs every sample
    for p in processes:
        who.append((p.pid, p.create_time, p.ppid, p.cmdline, p.name, p.gpu_resident))
        mem.append((p.rss_bytes, p.gpu_mem_bytes))
    return who, mem


def _is_trainer_launcher(argv: Sequence[str]) -> bool:
    return any(a.endswith(name) for a in argv[:4] for name in _TRAINER_LAUNCHERS)


class Grouper:
    """Groups a sample's processes into workloads, reusing what stands between samples.

    Cached, because a steady machine's samples mostly repeat the previous one's layout: each process's
    (kind, member?) per (pid, create_time); the plan (who groups with whom, what each launcher's flags
    say) while no process comes, goes, is renamed, reparented or changes GPU residency; each workload row
    while its members' memory holds; and the whole table while nothing moved.
    """

    def __init__(self, capped_max: float = 0.5):
        self.capped_max = capped_max
        self._kinds: dict[tuple[int, float], tuple[str, bool]] = {}
        self._layout: tuple = ()
        self._plan: tuple = ()
        self._who: list | None = None  # the previous sample's (pid, create_time, ppid, argv, name, resident)
        self._mem: list | None = None  # its (rss, gpu) per process
        self._idx: list[tuple[int, ...]] = []  # per workload (a planned group that is one), its members
        self._rows: list[Workload] = []  # and its row, as of the previous sample
        self._last: tuple[Workload, ...] = ()

    def _kind(self, p: ProcessInfo) -> tuple[str, bool]:
        hit = self._kinds.get(p.key)
        if hit is None or (p.gpu_resident and hit[0] == "other"):
            try:
                kind = classify(p.cmdline, p.name, p.gpu_resident)
            except ValueError:
                kind = "other"
            hit = self._kinds[p.key] = (kind, is_member_title(p.cmdline, p.name))
        return hit

    def group(self, processes: Sequence[ProcessInfo]) -> tuple[Workload, ...]:
        """One Workload per group, in the order their first member appears in the sample.

        A group with no GPU-resident member and no workload kind (a `python train.py` the scan keeps
        in case it starts loading a model) is not a workload yet and is left out. The same tuple is
        handed back while nothing moved.
        """
        who, mem = who_and_memory(processes)
        if who != self._who:  # someone came, went or changed: every row is built afresh
            self._replan(processes)
            rows = [self._workload([processes[i] for i in idx], static) for idx, static in self._plan]
            live = [g for g, w in enumerate(rows) if w.gpu_resident or w.kind != "other"]
            self._idx = [self._plan[g][0] for g in live]
            self._rows = [rows[g] for g in live]
            self._who, self._mem = who, mem
            self._last = tuple(self._rows)
        elif mem != self._mem:  # only memory moved: only a row whose members' memory moved is summed afresh
            old, rows = self._mem, self._rows
            for j, idx in enumerate(self._idx):
                for i in idx:
                    if mem[i] != old[i]:
                        rows[j] = _resummed(rows[j], idx, mem)
                        break
            self._mem = mem
            self._last = tuple(rows)
        return self._last  # nothing moved (half the samples of a steady machine): the same tuple

    def _replan(self, processes: Sequence[ProcessInfo]) -> None:
        """Someone came, went or changed: read their kinds (cached) and regroup if the layout moved."""
        kinds = {}
        known = self._kinds.get
        keys = []
        for p in processes:  # _kind's cache read inline: a call per process only for a new or changed one
            key = (p.pid, p.create_time)
            keys.append(key)
            hit = known(key)
            kinds[key] = self._kind(p) if hit is None or (p.gpu_resident and hit[0] == "other") else hit
        if len(self._kinds) > 4 * len(processes) + 64:  # forget processes long gone (bounded memory)
            self._kinds = {k: v for k, v in self._kinds.items() if k in kinds}
        # Who belongs with whom changes only when a process comes, goes, is renamed or reparented: the
        # grouping is reused while the layout stands.
        layout = tuple((k, p.ppid, p.cmdline, kinds[k]) for k, p in zip(keys, processes, strict=True))
        if layout != self._layout:
            self._layout, self._plan = layout, self._plan_groups(processes, kinds)

    def _plan_groups(
        self, processes: Sequence[ProcessInfo], kinds
    ) -> tuple[tuple[tuple[int, ...], tuple], ...]:
        """Each group as (member indices into `processes`, launcher first; what its launcher says)."""
        parent = _parents(processes, kinds)
        index = {p.key: i for i, p in enumerate(processes)}
        groups: dict[tuple[int, float], list[int]] = {}
        for i, p in enumerate(processes):
            root = p
            seen = {p.key}
            while root.key in parent and parent[root.key].key not in seen:
                root = parent[root.key]
                seen.add(root.key)
            groups.setdefault(root.key, [index[root.key]] if root is not p else [])
            groups[root.key].append(i)
        return tuple(
            (tuple(idx), self._launcher([processes[i] for i in idx], kinds)) for idx in groups.values()
        )

    def _launcher(self, members: list[ProcessInfo], kinds) -> tuple:
        """(kind, caps, capped, cap flag, cap value) of a group, read from its launcher's argv."""
        root = members[0]
        kind = kinds[root.key][0]
        if kind == "other":  # a plain parent (a notebook) of a server or trainer: the group is what it runs
            kind = next((kinds[m.key][0] for m in members if kinds[m.key][0] != "other"), "other")
        if kind not in SERVER_KINDS:
            return kind, {}, None, None, None
        if kinds[root.key][1]:  # an orphan engine: its launcher (and cap) is not known
            return kind, {}, False, None, None
        caps = read_caps(root.cmdline)
        flag, value = cap_flag(kind, caps)
        return kind, caps, is_capped(kind, caps, self.capped_max), flag, value

    @staticmethod
    def _workload(members: list[ProcessInfo], static: tuple) -> Workload:
        root = members[0]
        kind, caps, capped, flag, value = static
        if len(members) == 1:  # most workloads are one process: its own figures, the sums below of one term
            rss, gpu = root.rss_bytes, root.gpu_mem_bytes
            pids, resident = (root.pid,), bool(root.gpu_resident)
            foot = 0 + max(rss or 0, gpu or 0)
            gpus = None if gpu is None else 0 + gpu
            rss_sum = 0 + (rss or 0)
        else:
            gpu_known = [m.gpu_mem_bytes for m in members if m.gpu_mem_bytes is not None]
            pids, resident = tuple(m.pid for m in members), any(m.gpu_resident for m in members)
            foot = sum(max(m.rss_bytes or 0, m.gpu_mem_bytes or 0) for m in members)
            gpus = sum(gpu_known) if gpu_known else None
            rss_sum = sum(m.rss_bytes or 0 for m in members)
        # tuple.__new__: the row without NamedTuple's Python-level __new__ (field order as declared).
        row = (root.pid, root.create_time, kind, root.name, tuple(root.cmdline), pids, foot, gpus, rss_sum)
        return tuple.__new__(Workload, row + (resident, capped, flag, value, caps))


def _resummed(w: Workload, idx: tuple[int, ...], mem: list) -> Workload:
    """w with its members' memory summed afresh from mem ((rss, gpu) per process), as _workload sums it.

    The rest of the row stands while its members do: fields 0-5 (identity, argv, members) before the
    memory ones (6-8: footprint_bytes, gpu_mem_bytes, rss_bytes), 9-13 (residency, cap) after them.
    """
    if len(idx) == 1:  # most workloads are one process
        rss, gpu = mem[idx[0]]
        rss, known = rss or 0, gpu or 0
        foot, gpus, rss_sum = 0 + (rss if rss >= known else known), None if gpu is None else 0 + gpu, 0 + rss
    else:
        foot = rss_sum = 0
        gpus = None
        for i in idx:
            rss, gpu = mem[i]
            foot += max(rss or 0, gpu or 0)
            rss_sum += rss or 0
            if gpu is not None:
                gpus = gpu if gpus is None else gpus + gpu
    return tuple.__new__(Workload, w[:6] + (foot, gpus, rss_sum) + w[9:])


def _parents(processes: Sequence[ProcessInfo], kinds) -> dict[tuple[int, float], ProcessInfo]:
    """Each process's parent among the sampled processes: by ppid, or for ppid-less traces by kind and start.

    Ray's runtime (raylet, the GCS server, `ray::` workers) belongs to the workload that started it: by ppid
    when the chain is in the sample, else (no ppid, or raylet reparented after `ray start` exited) to the
    latest launcher started before it, one that runs on Ray first.
    """
    by_pid = {p.pid: p for p in processes}
    parent: dict[tuple[int, float], ProcessInfo] = {}
    launchers: dict[str, list[ProcessInfo]] = {}
    for p in processes:
        kind, member = kinds[p.key]
        if p.ppid is None and not member and kind != "other":
            launchers.setdefault(kind, []).append(p)
    ray_hosts = [q for q in processes if kinds[q.key][0] != "other" and not kinds[q.key][1]]
    ray_hosts = [q for q in ray_hosts if uses_ray(q.cmdline)] or ray_hosts
    for p in processes:
        ray = is_ray_runtime(p.cmdline, p.name)
        if p.ppid is not None:
            q = by_pid.get(p.ppid)
            # A parent started after its child is a reused pid, not the parent.
            if q is not None and q is not p and q.create_time <= p.create_time + _START_SLACK_S:
                parent[p.key] = q
                continue
            if not ray:
                continue
        kind, member = kinds[p.key]
        cands: Iterable[ProcessInfo] = ()
        if ray:
            cands = ray_hosts
        elif member:
            cands = launchers.get(kind, ())
        elif kind in ("trainer", "other"):
            # torchrun / accelerate workers run `python -u SCRIPT ARGS`: the script names the launcher.
            script = script_of(p.cmdline)
            if script:
                cands = [
                    q
                    for q in launchers.get("trainer", ())
                    if q is not p and _is_trainer_launcher(q.cmdline) and script in q.cmdline
                ]
        best = None
        for q in cands:
            if q is p or q.create_time > p.create_time + _START_SLACK_S:
                continue
            if kinds[q.key][1]:
                continue
            if best is None or q.create_time > best.create_time:
                best = q  # several launchers: the latest one that started before the child
        if best is not None:
            parent[p.key] = best
    return parent


def group_workloads(processes: Sequence[ProcessInfo], capped_max: float = 0.5) -> tuple[Workload, ...]:
    """The workloads of one sample's processes (no cache)."""
    return Grouper(capped_max).group(processes)
