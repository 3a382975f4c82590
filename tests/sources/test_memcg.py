"""A container at its own limit from its cgroup v2 `memory.events`, on fake /proc and /sys/fs/cgroup trees.

The files are as the kernel writes them (Documentation/admin-guide/cgroup-v2.rst): `/proc/PID/cgroup`'s
unified line `0::PATH`, `memory.events` flat-keyed `low`, `high`, `max`, `oom`, `oom_kill`, `oom_group_kill`.
"""

from __future__ import annotations

from spark_watchd.sample.model import Sample
from spark_watchd.sources.memcg import MemcgKillsSource
from tests.diagnose.diag_builders import proc

DOCKER = "/system.slice/docker-3f2a9c1e7b.scope"
TRAINER = ["python3", "train.py", "--config", "qlora.yaml"]


def _events(oom_kill, oom=None):
    oom = oom_kill if oom is None else oom
    return f"low 0\nhigh 0\nmax 1284\noom {oom}\noom_kill {oom_kill}\noom_group_kill 0\n"


def _tree(tmp_path, procs):
    """procs: {pid: cgroup path}; returns (proc root, sys root)."""
    proc_root, sys_root = tmp_path / "proc", tmp_path / "sys"
    for pid, cg in procs.items():
        (proc_root / str(pid)).mkdir(parents=True)
        (proc_root / str(pid) / "cgroup").write_text(f"0::{cg}\n")
    return proc_root, sys_root


def _set(sys_root, cg, text):
    d = sys_root / "fs" / "cgroup" / cg.lstrip("/")
    d.mkdir(parents=True, exist_ok=True)
    (d / "memory.events").write_text(text)


def test_a_vanished_workload_whose_cgroup_counted_an_oom_kill_is_a_memcg_kill(tmp_path):
    proc_root, sys_root = _tree(tmp_path, {5200: DOCKER, 4100: "/user.slice/user-1000.slice/session-4.scope"})
    _set(sys_root, DOCKER, _events(2))
    _set(sys_root, "/user.slice/user-1000.slice/session-4.scope", _events(0))
    trainer = proc(5200, TRAINER, 30.0, 20.0)
    other = proc(4100, ["vllm", "serve", "x"], 2.0, 40.0)
    src = MemcgKillsSource(str(proc_root), str(sys_root), clock=lambda: 1000.0)
    assert src.collect({"processes": [trainer, other]}) == {}
    _set(sys_root, DOCKER, _events(3))  # the kernel killed inside the container at its own limit
    (proc_root / "5200" / "cgroup").unlink()  # gone from /proc with the process
    kernel = object()
    out = src.collect({"processes": [other], "oom_kills": [kernel]})
    first, k = out["oom_kills"]
    assert first is kernel  # appended after the kernel's own reports
    assert (k.killer, k.pid, k.name, k.scope, k.cgroup) == ("memcg", 5200, "python3", "memcg", DOCKER)
    assert k.text == f"{DOCKER}/memory.events oom_kill 2 -> 3"
    s = Sample(ts=1000.0, oom_kills=(k,))
    assert Sample.from_dict(s.to_dict()).oom_kills == (k,)  # trace-v1 round trip


def test_a_normal_exit_a_rise_while_alive_or_a_removed_cgroup_is_no_report(tmp_path):
    proc_root, sys_root = _tree(tmp_path, {5200: DOCKER, 5300: "/", 5400: "/system.slice/docker-b.scope"})
    _set(sys_root, DOCKER, _events(0))
    _set(sys_root, "/system.slice/docker-b.scope", _events(0))
    a, b, c = proc(5200, TRAINER, 3.0), proc(5300, TRAINER, 3.0), proc(5400, TRAINER, 3.0)
    src = MemcgKillsSource(str(proc_root), str(sys_root))
    assert src.collect({"processes": [a, b, c]}) == {}
    _set(sys_root, DOCKER, _events(1))  # a sibling killed; the workload lives on
    assert src.collect({"processes": [a, b, c]}) == {}
    assert src.collect({"processes": [b, c]}) == {}  # exits after: the counter did not rise since
    (sys_root / "fs" / "cgroup" / "system.slice" / "docker-b.scope" / "memory.events").unlink()
    assert src.collect({"processes": []}) == {}  # root cgroup: no memory.events; removed cgroup: unknown


def test_no_cgroup_v2_is_silence_and_reads_stay_bounded(tmp_path):
    src = MemcgKillsSource(str(tmp_path / "none"), str(tmp_path / "none"))
    assert src.collect({"processes": [proc(1, TRAINER, 1.0)]}) == {}
    assert src.collect({"processes": []}) == {}
    proc_root, sys_root = _tree(tmp_path, {p: f"/c{p}.scope" for p in range(100, 140)})
    src = MemcgKillsSource(str(proc_root), str(sys_root))
    reads = []
    orig = src._read
    src._read = lambda path: reads.append(path) or orig(path)
    procs = [proc(p, TRAINER, 1.0) for p in range(100, 140)]
    src.collect({"processes": procs})
    reads.clear()
    src.collect({"processes": procs})
    assert len(reads) == 16  # a cgroup read once per process, then MAX_CGROUPS counters a tick
