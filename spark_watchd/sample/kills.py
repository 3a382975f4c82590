"""trace-v1 `oom_kills[]`: who killed a process, as the killer itself reported it, and the pure parsers.

Three killers write a report an owner can trust:
- the kernel OOM killer (kernel log, `_TRANSPORT=kernel` only): the one-line summary
  `oom-kill:constraint=...,global_oom|oom_memcg=...,task_memcg=...,task=NAME,pid=N,uid=N` and the
  `Out of memory: Killed process N (NAME) total-vm:..kB, anon-rss:..kB, file-rss:..kB, shmem-rss:..kB, ...`
  line (`Memory cgroup out of memory: ...` when a container's own limit was hit), formats of mm/oom_kill.c
  as the 6.8-7.0 kernels DGX OS and Ubuntu 24.04 ship print them;
- systemd-oomd (its own unit's journal entries): `Killed CGROUP due to memory pressure for ...` (systemd 255,
  Ubuntu 24.04) or `Marked CGROUP for killing due to ...` (newer);
- earlyoom (its own unit's entries): `sending SIGTERM|SIGKILL to process PID uid UID "NAME": ..., VmRSS N MiB`.
The journal's trusted fields (`_TRANSPORT`, `_SYSTEMD_UNIT`, `_COMM`, set by journald, not by the writer)
decide which killer a line is from; a message any user can log (`logger "Out of memory: ..."`) is never one.
Ray's memory monitor (`ray`): its GCS's `Reporting worker exit, ... exit_type = NODE_OUT_OF_MEMORY` line in
`<ray temp dir>/session_latest/logs/gcs_server.out` with its `Memory on the node ... where the task|lease
(..., name=NAME, pid=N, memory used=X GB) was running was U GB / T GB (F), which exceeds the memory usage
threshold of H` continuation; the file is written by the Ray user, as trustworthy as Ray itself.
A fifth, `memcg`, is no report but the kernel's own counter: a vanished workload's cgroup v2
`memory.events` `oom_kill` rose since the previous reading (sources/memcg.py), a container at its own limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_watchd.sample.validate import FieldError

KILLERS = ("kernel", "systemd-oomd", "earlyoom", "memcg", "ray")
_INT_KEYS = ("pid", "anon_rss_kb", "file_rss_kb", "shmem_rss_kb")
_STR_KEYS = ("name", "scope", "constraint", "oom_memcg", "task_memcg", "cgroup")
_FLOAT_KEYS = ("used_gb", "node_used_gb", "node_total_gb", "node_fraction", "threshold")  # ray


@dataclass(frozen=True, slots=True)
class KillReport:
    """One kill as its killer reported it; None where the report does not say."""

    ts: float
    killer: str  # "kernel", "systemd-oomd", "earlyoom", "memcg" (memory.events oom_kill rose)
    pid: int | None = None
    name: str | None = None
    scope: str | None = None  # kernel: "global" (pool exhausted) or "memcg" (a cgroup's own limit)
    constraint: str | None = None  # CONSTRAINT_NONE, CONSTRAINT_MEMCG, CONSTRAINT_CPUSET...
    oom_memcg: str | None = None  # the cgroup whose limit was hit (memcg kills)
    task_memcg: str | None = None  # the victim's cgroup
    cgroup: str | None = None  # systemd-oomd: the cgroup it killed
    anon_rss_kb: int | None = None
    file_rss_kb: int | None = None
    shmem_rss_kb: int | None = None
    text: str = ""
    used_gb: float | None = None  # ray: the victim's memory used, as Ray printed it (GB)
    node_used_gb: float | None = None  # ray: the node's memory used / total at the kill
    node_total_gb: float | None = None
    node_fraction: float | None = None  # ray: used / total, as Ray computed it
    threshold: float | None = None  # ray: the memory monitor's usage threshold (0.95 by default)

    @property
    def rss_bytes(self) -> int | None:
        """Resident at the kill (anon + file + shmem), bytes."""
        parts = (self.anon_rss_kb, self.file_rss_kb, self.shmem_rss_kb)
        return None if self.anon_rss_kb is None else sum(p or 0 for p in parts) * 1024

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ts": self.ts, "killer": self.killer}
        for key in (*_INT_KEYS, *_STR_KEYS, *_FLOAT_KEYS):
            if (v := getattr(self, key)) is not None:
                d[key] = v
        d["text"] = self.text
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KillReport:
        """Build from a trace object; raises ValueError naming the key that is wrong."""
        killer = d.get("killer")
        if killer not in KILLERS:
            raise ValueError(f"oom_kills: 'killer' must be one of {', '.join(KILLERS)}, got {killer!r}")
        kw: dict[str, Any] = {}
        for key in _INT_KEYS:
            v = d.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise ValueError(f"oom_kills: '{key}' must be an integer or null, got {v!r}")
            kw[key] = v
        for key in _STR_KEYS:
            v = d.get(key)
            kw[key] = None if v is None else str(v)
        for key in _FLOAT_KEYS:
            v = d.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"oom_kills: '{key}' must be a number or null, got {v!r}")
            kw[key] = None if v is None else float(v)
        text = str(d.get("text") or "")[: 1000 if killer == "ray" else 500]
        return cls(float(d["ts"]), killer, text=text, **kw)


def check_kill(item: Any, where: str) -> None:
    """One oom_kills[] entry as trace readers accept it: an object with its ts, and what from_dict refuses."""
    if type(item) is not dict:
        raise FieldError(where, f"must be an object, got {type(item).__name__}")
    if "ts" not in item:
        raise FieldError(f"{where}.ts", "missing")
    try:
        KillReport.from_dict(item)
    except (TypeError, ValueError) as exc:
        raise FieldError(where, str(exc).removeprefix("oom_kills: ")) from None


# --- the kernel OOM killer -------------------------------------------------------------------------------
_SUMMARY = re.compile(r"^oom-kill:constraint=(?P<body>.*)$")
_KILLED = re.compile(
    r"^(?P<why>Out of memory|Memory cgroup out of memory): Killed process (?P<pid>\d+) \((?P<name>.*)\)"
    r"(?P<rest>.*)$"
)
_RSS = re.compile(r"\b(anon|file|shmem)-rss:(\d+)kB")


def _fields(body: str) -> dict[str, str]:
    """`CONSTRAINT_NONE,nodemask=(null),cpuset=/,...,global_oom,task_memcg=/x,task=y,pid=1,uid=0` as a dict
    (bare words such as `global_oom` map to ""); the task name may hold commas, so it is read last."""
    out: dict[str, str] = {}
    head, sep, tail = body.partition(",task=")
    parts = head.split(",")
    out["constraint"] = parts[0]
    for p in parts[1:]:
        k, _, v = p.partition("=")
        out[k] = v
    if sep:
        m = re.match(r"(?P<task>.*),pid=(?P<pid>\d+),uid=(?P<uid>\d+)\s*$", tail)
        if m:
            out.update(task=m["task"], pid=m["pid"], uid=m["uid"])
    return out


def parse_kernel_oom(lines: Iterable[tuple[float, str]]) -> list[KillReport]:
    """Kernel OOM kills in (ts, message) kernel-log lines, oldest first: each `Killed process` line, with
    the `oom-kill:` summary before it for the same pid where there is one. Other lines are skipped."""
    out: list[KillReport] = []
    summary: dict[str, str] | None = None
    for ts, raw in lines:
        text = raw.strip()
        if text.startswith("oom-kill:"):
            m = _SUMMARY.match(text)
            summary = _fields(m["body"]) if m else None
            continue
        if "Killed process" not in text:
            continue
        m = _KILLED.match(text)
        if m is None:
            continue
        pid = int(m["pid"])
        s = summary if summary is not None and summary.get("pid") == str(pid) else {}
        summary = None
        rss = {k: int(v) for k, v in _RSS.findall(m["rest"])}
        memcg = m["why"].startswith("Memory cgroup") or s.get("constraint") == "CONSTRAINT_MEMCG"
        out.append(
            KillReport(
                ts,
                "kernel",
                pid=pid,
                name=m["name"],
                scope="memcg" if memcg else "global",
                constraint=s.get("constraint"),
                oom_memcg=s.get("oom_memcg") or None,
                task_memcg=s.get("task_memcg") or None,
                anon_rss_kb=rss.get("anon"),
                file_rss_kb=rss.get("file"),
                shmem_rss_kb=rss.get("shmem"),
                text=text[:500],
            )
        )
    return out


def kernel_oom_line(ts: float, text: str, ctx: dict) -> KillReport | None:
    """The kernel-log feed's parser (sources/driverlog.KERNEL_LINE_KINDS): one trusted kernel line at a time,
    the `oom-kill:` summary kept in `ctx` until its `Killed process` line arrives (they come together)."""
    if "oom-kill:" not in text and "Killed process" not in text:
        return None
    text = text.strip()
    if text.startswith("oom-kill:"):
        ctx["oom_summary"] = (ts, text)
        return None
    pending = ctx.pop("oom_summary", None)
    lines = [pending] if pending is not None and 0 <= ts - pending[0] <= 5.0 else []
    reports = parse_kernel_oom([*lines, (ts, text)])
    return reports[-1] if reports else None


# --- user-space killers, by their own units' trusted journal fields --------------------------------------
_OOMD = re.compile(r"^(?:Killed (?P<killed>\S+)|Marked (?P<marked>\S+) for killing) due to (?P<why>.*)$")
_EARLYOOM = re.compile(
    r'^sending SIG(?:TERM|KILL) to process (?P<pid>\d+)(?: uid \d+)? "(?P<name>[^"]*)":.*?VmRSS (?P<mib>\d+) MiB'
)
# (trusted _SYSTEMD_UNIT, trusted _COMM) of each user-space killer's own unit
TRUSTED_KILLER_UNITS = {
    "systemd-oomd": ("systemd-oomd.service", "systemd-oomd"),
    "earlyoom": ("earlyoom.service", "earlyoom"),
}


def killer_of(entry: Mapping[str, Any]) -> str | None:
    """Which user-space killer a `journalctl -o json` entry comes from, by its trusted fields only."""
    unit, comm = entry.get("_SYSTEMD_UNIT"), entry.get("_COMM")
    for killer, (u, c) in TRUSTED_KILLER_UNITS.items():
        if unit == u and comm == c and entry.get("_TRANSPORT") in ("journal", "stdout", "syslog"):
            return killer
    return None


def parse_killer_entry(entry: Mapping[str, Any]) -> KillReport | None:
    """The KillReport in one journal entry of systemd-oomd or earlyoom (by trusted fields), else None."""
    killer = killer_of(entry)
    text = entry.get("MESSAGE")
    if killer is None or not isinstance(text, str):
        return None
    try:
        ts = int(entry["__REALTIME_TIMESTAMP"]) / 1e6
    except (KeyError, TypeError, ValueError):
        return None
    text = text.strip()
    if killer == "systemd-oomd":
        m = _OOMD.match(text)
        if m is None:
            return None
        cgroup = m["killed"] or m["marked"]
        return KillReport(ts, killer, name=cgroup.rsplit("/", 1)[-1], cgroup=cgroup, text=text[:500])
    m = _EARLYOOM.match(text)
    if m is None:
        return None
    return KillReport(
        ts, killer, pid=int(m["pid"]), name=m["name"], anon_rss_kb=int(m["mib"]) * 1024, text=text[:500]
    )


# --- a cgroup v2 memory controller's own counter ----------------------------------------------------------
def cgroup_v2_path(text: str) -> str | None:
    """The unified-hierarchy path in /proc/PID/cgroup (`0::/system.slice/docker-ID.scope`), else None."""
    for line in text.splitlines():
        if line.startswith("0::"):
            path = line[3:].strip()
            return path if path.startswith("/") else None
    return None


def memory_events_oom_kill(text: str) -> int | None:
    """`oom_kill N` of a cgroup v2 `memory.events` (flat-keyed: low, high, max, oom, oom_kill,
    oom_group_kill; hierarchical), None when the key is absent or not a count."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            value = value.strip()
            return int(value) if value.isdigit() else None
    return None


# --- Ray's memory monitor, from its GCS's log --------------------------------------------------------------
_NUM = r"\d+(?:\.\d+)?"
RAY_EXIT_MARK = "exit_type = NODE_OUT_OF_MEMORY"
RAY_MEMORY_MARK = "Memory on the node ("
_RAY_MEMORY = re.compile(
    r"Memory on the node \(IP: [^,()]*, ID: [^()]*\) where the (?:task|lease) \((?:task|lease) ID: [^,]*, "
    rf"name=(?P<name>.{{1,300}}?), pid=(?P<pid>\d{{1,10}}), memory used=(?P<used>{_NUM})GB\) was running was "
    rf"(?P<nused>{_NUM})GB / (?P<ntotal>{_NUM})GB \((?P<frac>{_NUM})\), which exceeds the memory usage "
    rf"threshold of (?P<th>{_NUM})\."
)


def parse_ray_oom(ts: float, text: str) -> KillReport | None:
    """The kill in Ray's GCS `exit_type = NODE_OUT_OF_MEMORY` line and its `Memory on the node ...`
    continuation (joined by a newline, both wordings: `task (task ID:` and newer `lease (lease ID:`), else
    None: another exit type, a continuation missing or cut short, or garbage."""
    head, _, rest = text.partition(RAY_EXIT_MARK)
    if not _ or "Reporting worker exit" not in head:
        return None
    m = _RAY_MEMORY.search(rest)
    if m is None:
        return None
    f = {k: float(m[k]) for k in ("used", "nused", "ntotal", "frac", "th")}
    return KillReport(
        ts,
        "ray",
        pid=int(m["pid"]),
        name=m["name"],
        text=" ".join(text.split())[:1000],
        used_gb=f["used"],
        node_used_gb=f["nused"],
        node_total_gb=f["ntotal"],
        node_fraction=f["frac"],
        threshold=f["th"],
    )
