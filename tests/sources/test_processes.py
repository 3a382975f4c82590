"""The process scan against real processes: workloads found, GPU pids joined, vanishing ones tolerated."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import psutil
import pytest

from spark_watchd.sources.processes import SETTLE_SCANS, ProcessSource

SLEEPER = "import time\ntime.sleep(120)\n"


@pytest.fixture
def spawn(tmp_path):
    procs: list[subprocess.Popen] = []

    def start(script_name: str, *args: str) -> subprocess.Popen:
        script = tmp_path / script_name
        script.write_text(SLEEPER)
        p = subprocess.Popen([sys.executable, str(script), *args])
        procs.append(p)
        for _ in range(500):  # until the child has exec'd the script
            try:
                if str(script) in psutil.Process(p.pid).cmdline():
                    break
            except psutil.Error:
                pass
            threading.Event().wait(0.01)
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def by_pid(out):
    return {p.pid: p for p in out["processes"]}


def test_finds_workloads_and_gpu_resident_processes(spawn):
    vllm = spawn("vllm", "serve", "Qwen/Qwen3-32B", "--gpu-memory-utilization", "0.5")
    trainer = spawn("train.py", "--config", "qlora.yaml")
    other = spawn("notebook.py")
    src = ProcessSource()
    got = by_pid(src.collect({"_gpu_processes": {trainer.pid: 40 * 2**30, other.pid: None}}))
    v = got[vllm.pid]
    assert v.cmdline[2:] == ("serve", "Qwen/Qwen3-32B", "--gpu-memory-utilization", "0.5")
    assert not v.gpu_resident and v.gpu_mem_bytes is None and v.rss_bytes > 0
    assert v.create_time == psutil.Process(vllm.pid).create_time()
    t = got[trainer.pid]
    assert t.gpu_resident and t.gpu_mem_bytes == 40 * 2**30
    o = got[other.pid]  # any GPU-resident process is reported, workload or not
    assert o.gpu_resident and o.gpu_mem_bytes is None
    assert os.getpid() not in got  # the test runner is neither
    src.close()


def test_records_each_process_parent_so_children_join_their_launcher(tmp_path):
    """A launcher and the child it started: the child's ppid is the launcher's pid (trace-v1 `ppid`)."""
    child = tmp_path / "train_worker.py"
    child.write_text(SLEEPER)
    launcher = tmp_path / "train.py"
    launcher.write_text(
        f"import subprocess, sys, time\np = subprocess.Popen([sys.executable, {str(child)!r}])\ntime.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, str(launcher)])
    try:
        kid = None
        for _ in range(500):
            kids = psutil.Process(parent.pid).children()
            if kids and str(child) in kids[0].cmdline():
                kid = kids[0]
                break
            threading.Event().wait(0.01)
        assert kid is not None
        got = by_pid(ProcessSource().collect({"_gpu_processes": {kid.pid: 8 * 2**30}}))
        assert got[kid.pid].ppid == parent.pid
        assert got[parent.pid].ppid == os.getpid()
        assert got[kid.pid].to_dict()["ppid"] == parent.pid
    finally:
        for p in psutil.Process(parent.pid).children():
            p.kill()
        parent.kill()
        parent.wait()


def test_training_script_is_kept_before_it_holds_gpu_memory(spawn):
    trainer = spawn("train.py")
    got = by_pid(ProcessSource().collect({}))
    assert trainer.pid in got and not got[trainer.pid].gpu_resident


def test_argv_is_read_only_while_a_process_is_new(spawn):
    # A fixed process list: other processes on the machine come and go during the test.
    listed = [psutil.Process(os.getpid())]
    src = ProcessSource(process_iter=lambda: iter(listed))
    for _ in range(SETTLE_SCANS):
        src.collect({})
    assert src.cmdline_reads == SETTLE_SCANS
    src.collect({})
    assert src.cmdline_reads == SETTLE_SCANS  # nothing new: nothing read again
    listed.append(psutil.Process(spawn("vllm", "serve", "m").pid))
    src.collect({})
    assert src.cmdline_reads == SETTLE_SCANS + 1
    src.collect({"_gpu_processes": {os.getpid(): 1}})  # GPU-resident ones are re-read every scan
    assert src.cmdline_reads == SETTLE_SCANS + 3


def _shell_that_execs_a_server(tmp_path) -> subprocess.Popen:
    """A shell that execs `vllm serve m` (same pid and start time, a new argv) once a line reaches its stdin."""
    script = tmp_path / "vllm"
    script.write_text(SLEEPER)
    return subprocess.Popen(
        ["/bin/sh", "-c", f"read x; exec {sys.executable} {script} serve m"], stdin=subprocess.PIPE
    )


def _let_it_exec(p: subprocess.Popen, tmp_path) -> None:
    """Send the shell its line and wait (5 s at most) until its argv is the server's."""
    p.stdin.write(b"go\n")
    p.stdin.flush()
    for _ in range(500):
        if str(tmp_path / "vllm") in psutil.Process(p.pid).cmdline():
            break
        threading.Event().wait(0.01)


def test_exec_after_fork_is_noticed(tmp_path):
    # A shell that later execs the server keeps its pid and start time: its new argv must still be seen.
    p = _shell_that_execs_a_server(tmp_path)
    try:
        src = ProcessSource()
        assert p.pid not in by_pid(src.collect({}))
        _let_it_exec(p, tmp_path)
        assert by_pid(src.collect({}))[p.pid].cmdline[-2:] == ("serve", "m")
    finally:
        p.kill()
        p.wait()


def _killing_iter(victim: subprocess.Popen, reap: bool):
    def it():
        for proc in psutil.process_iter():
            if proc.pid == victim.pid:
                victim.kill()
                if reap:
                    victim.wait()  # gone entirely
                else:
                    psutil.Process(victim.pid)  # still a zombie until reaped
                    for _ in range(200):
                        if psutil.Process(victim.pid).status() == psutil.STATUS_ZOMBIE:
                            break
                        threading.Event().wait(0.01)
            yield proc

    return it


@pytest.mark.parametrize("reap", [True, False], ids=["vanished", "zombie"])
def test_processes_vanishing_mid_scan_are_skipped(spawn, reap):
    victim = spawn("vllm", "serve", "m")
    keeper = spawn("train.py")
    src = ProcessSource(process_iter=_killing_iter(victim, reap))
    got = by_pid(src.collect({"_gpu_processes": {victim.pid: 1, keeper.pid: 2}}))
    assert victim.pid not in got
    assert got[keeper.pid].gpu_mem_bytes == 2


def test_access_denied_argv_is_tolerated(monkeypatch, spawn):
    p = spawn("train.py")

    real_open = os.open

    def denied(path, *a, **k):  # /proc/PID/cmdline unreadable (hidepid=2, another user's process)
        if str(path).endswith(f"/{p.pid}/cmdline"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *a, **k)

    monkeypatch.setattr("os.open", denied)  # the scan reads /proc files by os.open (procfs.read_bytes)
    got = by_pid(ProcessSource().collect({"_gpu_processes": {p.pid: 5}}))
    assert got[p.pid].cmdline == () and got[p.pid].gpu_resident


def test_no_fd_leak_across_scans(spawn):
    spawn("vllm", "serve", "m")
    src = ProcessSource()
    src.collect({})
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        src.collect({})
    assert len(os.listdir("/proc/self/fd")) == before


def test_names_read_directly_are_psutils(spawn):
    """The scan reads a new process's name straight from /proc/PID/stat: exactly what psutil gives."""
    from spark_watchd.sources.procfs import read_argv, read_name

    spawn("a-process-with-a-long-name.py", "serve", "x y")  # comm truncated to 15 characters
    compared = 0
    for proc in psutil.process_iter():
        try:
            want = proc.name()
            got = read_name("/proc", proc.pid, read_argv("/proc", proc.pid))
        except psutil.Error:
            continue
        assert got == want, proc.pid
        compared += 1
    assert compared > 2


def test_settling_scans_keep_the_answer_while_argv_is_unchanged(spawn):
    """A settling re-read reads argv alone; the name and kind stand while argv does."""
    p = spawn("vllm", "serve", "m")
    src = ProcessSource()
    first = by_pid(src.collect({}))[p.pid]
    for _ in range(SETTLE_SCANS):
        again = by_pid(src.collect({}))[p.pid]
    assert (again.name, again.cmdline) == (first.name, first.cmdline)
    assert src._cache[(p.pid, first.create_time)][3] == SETTLE_SCANS


def test_ray_runtime_processes_are_kept_so_a_ray_executor_chains_to_its_launcher(spawn):
    # Issue 18: the scan dropped raylet, so ray::RayWorkerWrapper's memory lost its vLLM launcher.
    raylet = spawn("raylet", "--node_manager_port=0")
    gcs = spawn("gcs_server", "--gcs_server_port=6379")
    plain = spawn("helper.py")
    got = by_pid(ProcessSource().collect({"_gpu_processes": {}}))
    assert raylet.pid in got and gcs.pid in got and plain.pid not in got
    assert not got[raylet.pid].gpu_resident and got[raylet.pid].ppid == os.getpid()


def test_the_live_table_reads_what_psutil_reads(spawn):
    """create_time, rss and ppid of the live /proc walk are psutil's, for every process it lists."""
    from spark_watchd.sources.procfs import LiveTable

    p = spawn("vllm", "serve", "m")
    table = LiveTable()
    entries = {e.pid: e for e in table()}
    assert p.pid in entries and entries.keys() >= {os.getpid()}
    for pid in (p.pid, os.getppid()):
        e, ref = entries[pid], psutil.Process(pid)
        assert e.create_time() == ref.create_time()
        assert e.is_running() and e.ppid() == ref.ppid()
        # rss moves while a process starts up: compare only when psutil reads it the same on either side.
        for _ in range(50):
            before, rss, after = ref.memory_info().rss, e.memory_info().rss, ref.memory_info().rss
            if before == after:
                assert rss == before
                break
        else:
            pytest.fail(f"rss of {pid} never held still for three reads")
    again = {e.pid: e for e in table()}
    assert again[p.pid] is entries[p.pid]  # a pid seen before costs no read


def test_a_zombie_in_the_live_table_says_so(tmp_path):
    from spark_watchd.sources.procfs import LiveTable

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    for _ in range(200):
        if psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE:
            break
        threading.Event().wait(0.01)
    try:
        e = next(e for e in LiveTable()() if e.pid == child.pid)
        assert e.status() == psutil.STATUS_ZOMBIE
        assert child.pid not in by_pid(ProcessSource().collect({}))
    finally:
        child.wait()


def _kernel_threads() -> list[int]:
    from spark_watchd.sources.procfs import stat_state

    found = []
    for n in os.listdir("/proc"):
        try:
            with open(f"/proc/{n}/stat", "rb") as f:
                if n.isdigit() and stat_state(f.read())[1]:
                    found.append(int(n))
        except (OSError, ValueError):
            continue
    return found


def test_a_kernel_thread_is_filed_without_reading_its_cmdline(monkeypatch):
    """Its cmdline reads empty: the scan takes () from the stat flags it already read, as psutil would answer."""
    kthreads = _kernel_threads()
    if not kthreads:
        pytest.skip("no kernel threads visible in this pid namespace")
    want = {pid: psutil.Process(pid).name() for pid in kthreads[:20]}
    real_open, opened = os.open, []

    def counting(path, *a, **k):
        opened.append(str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr("os.open", counting)
    src = ProcessSource()
    src.collect({})
    cached = {key[0]: entry for key, entry in src._cache.items()}
    for pid, name in want.items():
        if pid in cached:  # a kworker may have exited since
            assert cached[pid][:3] == (name, (), "other")
            assert f"/proc/{pid}/cmdline" not in opened
    assert any(pid in cached for pid in want)


def test_stat_state_reads_the_state_and_the_kernel_thread_flag():
    from spark_watchd.sources.procfs import stat_state

    assert stat_state(b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0") == (b"S", True)
    assert stat_state(b"9 (a) (b)) Z 1 9 9 0 -1 4194560 0 0") == (b"Z", False)
    with pytest.raises(ValueError):
        stat_state(b"9 (x) S 1 9")


def test_settling_cmdline_bytes_are_dropped_once_settled_or_gone(spawn):
    """The bytes kept for a settling re-read are a bound on the settling processes, not on the machine."""
    p = spawn("vllm", "serve", "m")
    src = ProcessSource()
    src.collect({})
    key = next(k for k in src._cache if k[0] == p.pid)
    assert key in src._settle_raw
    for _ in range(SETTLE_SCANS):
        src.collect({})
    assert src._cache[key][3] == SETTLE_SCANS and key not in src._settle_raw
    young = spawn("helper.py")
    src.collect({})
    young_key = next(k for k in src._settle_raw if k[0] == young.pid)
    young.kill()
    young.wait()
    src.collect({})
    assert young_key not in src._settle_raw  # other processes may be settling: this machine is shared


def test_a_reused_pid_is_skipped_then_read_afresh(spawn):
    """The table's entry for a pid is of an earlier process (the pid was reused between two scans): the scan
    skips it once and reads the pid afresh on the next."""
    p = spawn("vllm", "serve", "m")
    src = ProcessSource()
    first = by_pid(src.collect({}))[p.pid]
    stale = src._iter.get(p.pid)
    stale._start -= 100  # as if the process the table knew had started a second earlier
    stale._ctime -= 1.0
    assert p.pid not in by_pid(src.collect({}))
    again = by_pid(src.collect({}))[p.pid]
    assert (again.create_time, again.cmdline) == (first.create_time, first.cmdline)
    assert src._iter.get(p.pid) is not stale and (p.pid, stale._ctime) not in src._cache


def test_a_settled_process_that_is_no_workload_is_not_visited_until_gone_or_gpu_resident(spawn):
    """The live scan visits only new, settling and workload processes, and whatever NVML lists."""
    plain = spawn("helper.py")
    server = spawn("vllm", "serve", "m")
    src = ProcessSource()
    for _ in range(SETTLE_SCANS):
        src.collect({})
    assert plain.pid not in src._awake and server.pid in src._awake
    got = by_pid(src.collect({"_gpu_processes": {plain.pid: 7}}))
    assert got[plain.pid].gpu_mem_bytes == 7 and plain.pid not in src._awake
    assert plain.pid not in by_pid(src.collect({}))
    plain.kill()
    plain.wait()
    src.collect({})
    assert not any(k[0] == plain.pid for k in src._cache)


def test_an_exec_seen_while_gpu_resident_keeps_the_workload_visited_after(tmp_path):
    """A settled shell that execs a server is re-read while NVML lists it; after, it is still a workload."""
    p = _shell_that_execs_a_server(tmp_path)
    try:
        src = ProcessSource()
        for _ in range(SETTLE_SCANS + 1):
            assert p.pid not in by_pid(src.collect({}))
        _let_it_exec(p, tmp_path)
        assert by_pid(src.collect({"_gpu_processes": {p.pid: 1}}))[p.pid].gpu_resident
        assert by_pid(src.collect({}))[p.pid].cmdline[-2:] == ("serve", "m")
    finally:
        p.kill()
        p.wait()


def test_the_live_scan_reports_what_a_scan_visiting_every_process_reports(spawn):
    """Visiting only the awake processes changes nothing: the same processes, the same fields, scan by scan."""
    mine = [spawn("vllm", "serve", "m"), spawn("train.py"), spawn("helper.py"), spawn("other.py", "x")]
    pids = {p.pid for p in mine}
    live, every = ProcessSource(), ProcessSource(process_iter=psutil.process_iter)
    plan = [{}, {mine[2].pid: 5}, {}, {}, {mine[3].pid: 9, mine[0].pid: 1}, {}, {mine[2].pid: 5}, {}]
    for gpu in plan:
        got = [
            {p.pid: (p.name, p.cmdline, p.create_time, p.gpu_resident, p.gpu_mem_bytes, p.ppid) for p in
             src.collect({"_gpu_processes": gpu})["processes"] if p.pid in pids}
            for src in (live, every)
        ]  # fmt: skip
        assert got[0] == got[1], gpu
        assert {mine[0].pid, mine[1].pid} <= got[0].keys() and gpu.keys() <= got[0].keys()
