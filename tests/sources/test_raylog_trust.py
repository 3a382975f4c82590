"""Whose word a Ray log is (issue 29 §2): another user's log cannot report a kill of root's process.

The attack as it was done: an unprivileged user created the Ray temp dir before Ray did and appended a
forged "memory monitor killed" line about root's process: the daemon recorded the kill and wrote a critical
post-mortem bundle. Real `spark-watchd run` on loopback, a real user made with useradd (as root, as CI runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_watchd.sources.filetrust import file_trust
from spark_watchd.sources.raylog import RayOomSource
from tests.conftest import REPO, cli_env, free_port
from tests.daemon_helpers import http_get
from tests.sample.ray_log import TASK_EXIT, TASK_MEMORY

ATTACKER = "swd-ray-forger"


def _attacker() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("needs root: the attack is another user's log about root's process (CI runs as root)")
    try:
        return pwd.getpwnam(ATTACKER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ATTACKER],
                       check=False, capture_output=True)  # fmt: skip
        return pwd.getpwnam(ATTACKER)  # made by us, or by a test running beside us


def _as(user: pwd.struct_passwd, *argv: str) -> None:
    subprocess.run(argv, check=True, user=user.pw_uid, group=user.pw_gid, extra_groups=[], timeout=30)


def _forged(pid: int) -> str:
    return f"{TASK_EXIT}\n{TASK_MEMORY.replace('pid=115205', f'pid={pid}')}\n"


@pytest.fixture
def shared_tmp():
    """A stand-in for /tmp: root-owned, world-writable and sticky, inside a directory everyone can enter."""
    base = Path(tempfile.mkdtemp(prefix="swd-h29-", dir="/tmp"))
    try:
        base.chmod(0o755)
        (base / "tmp").mkdir()
        (base / "tmp").chmod(0o1777)
        yield base / "tmp"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _daemon(state: Path, ray_dir: Path, log: Path) -> subprocess.Popen:
    port = free_port()
    env = cli_env({"SPARK_WATCHD_FAKE_NVML": "gb10", "SPARK_WATCHD_SOURCES__RAY_LOG_DIR": str(ray_dir)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}", "--interval", "1",
         "--state-dir", str(state)],
        stdout=subprocess.DEVNULL, stderr=open(log, "wb"), env=env, cwd=str(REPO),  # noqa: SIM115
    )  # fmt: skip
    proc.base = f"http://127.0.0.1:{port}"
    return proc


def _until(fn, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (got := fn()) is not None:
            return got
        time.sleep(0.2)
    raise AssertionError("timed out")


def _status(base: str) -> dict | None:
    try:
        code, body = http_get(base + "/api/v1/status", timeout=2)
    except OSError:
        return None
    return json.loads(body) if code == 200 else None


def _kill_a_victim_and_report_it(
    tmp: Path, ray_logs: Path, append, expect_kill: bool
) -> tuple[dict, list, str]:
    """Run the daemon on ray_logs, start root's trainer, kill it as its Ray log says (via append); return
    the daemon's status after, its bundles and its log."""
    state, log = tmp / "state", tmp / "daemon.log"
    script = tmp / "vllm"  # `python vllm serve` is a workload from its first sample
    script.write_text("import time\ntime.sleep(600)\n")
    daemon = _daemon(state, ray_logs, log)
    victim = subprocess.Popen([sys.executable, str(script), "serve", "victim-model"])
    try:
        _until(lambda: _status(daemon.base))
        _until(lambda: True if any(w.get("pid") == victim.pid for w in _workloads(daemon.base)) else None)
        time.sleep(1.5)  # the log is read from its end at start: the kill comes after
        victim.kill()
        victim.wait()
        append(_forged(victim.pid))
        # Several ticks for the exit and the report to meet; a recorded kill ends the wait at once.
        deadline, st = time.monotonic() + (20 if expect_kill else 6), None
        while time.monotonic() < deadline:
            st = _status(daemon.base) or st
            if st is not None and _ray_exits(st):
                break
            time.sleep(0.3)
        time.sleep(1.5)  # a bundle follows the event at once; let it land
    finally:
        victim.kill()
        daemon.terminate()
        daemon.wait(timeout=20)
    bundles = sorted(p.name for p in (state / "bundles").iterdir()) if (state / "bundles").is_dir() else []
    return st, bundles, log.read_text()


def _workloads(base: str) -> list:
    code, body = http_get(base + "/api/v1/workloads", timeout=2)
    doc = json.loads(body) if code == 200 else []
    return doc.get("workloads", []) if isinstance(doc, dict) else doc


def _ray_exits(st: dict) -> list:
    events = st.get("recent_events") or st.get("events") or []
    return [
        e
        for e in events
        if e.get("kind") == "workload_exit" and e.get("details", {}).get("cause") == "ray_oom"
    ]


def test_another_users_ray_log_cannot_report_a_kill_of_roots_process(shared_tmp):
    user = _attacker()
    logs = shared_tmp / "ray" / "session_latest" / "logs"
    _as(user, "mkdir", "-p", str(logs))  # the attacker made /tmp/ray before Ray did
    _as(user, "touch", str(logs / "gcs_server.out"))
    work = Path(tempfile.mkdtemp(prefix="swd-h29-run-", dir="/tmp"))
    try:

        def forge(text: str) -> None:
            subprocess.run(["sh", "-c", f"cat >> '{logs / 'gcs_server.out'}'"], input=text.encode(),
                           check=True, user=user.pw_uid, group=user.pw_gid, extra_groups=[])  # fmt: skip

        st, bundles, log = _kill_a_victim_and_report_it(work, logs, forge, expect_kill=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert "Ray memory-monitor kills ignored" in log and f"belongs to uid {user.pw_uid}" in log, log[-3000:]
    assert log.count("Ray memory-monitor kills ignored") == 1
    assert _ray_exits(st) == [] and bundles == [], (bundles, _ray_exits(st))


def test_roots_own_ray_log_still_reports_the_kill_and_writes_the_bundle():
    _attacker()  # root only, as the attack test: the same daemon and victim
    work = Path(tempfile.mkdtemp(prefix="swd-h29-run-", dir="/tmp"))
    try:
        logs = work / "ray" / "session_latest" / "logs"
        logs.mkdir(parents=True)
        (logs / "gcs_server.out").write_text("")

        def genuine(text: str) -> None:
            with open(logs / "gcs_server.out", "a") as fh:
                fh.write(text)

        st, bundles, log = _kill_a_victim_and_report_it(work, logs, genuine, expect_kill=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert len(_ray_exits(st)) == 1, (st.get("recent_events"), log[-3000:])
    assert any(b.endswith("workload_exit") for b in bundles), bundles
    assert "Ray memory-monitor kills ignored" not in log


def _report_of(tmp: Path, mode: int | None = None, group_write: bool = False) -> list:
    logs = tmp / "logs"
    logs.mkdir(parents=True)
    path = logs / "gcs_server.out"
    path.write_text("")
    src = RayOomSource(str(logs), proc_root="/proc")
    src.collect({})
    if mode is not None:
        logs.chmod(mode)
    if group_write:  # writable by a group that is not the owner's own
        os.chown(path, 0, 65534)
        path.chmod(0o664)
    with open(path, "a") as fh:
        fh.write(_forged(os.getpid()))
    return [k.pid for k in src.collect({}).get("oom_kills", ())]


def test_a_log_in_a_world_or_group_writable_directory_or_through_links_is_not_trusted(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the chain of a root-run test's tmp_path belongs to root")
    assert _report_of(tmp_path / "a") == [os.getpid()]  # root's own tidy layout
    assert _report_of(tmp_path / "b", mode=0o777) == []  # anyone may swap entries there
    assert _report_of(tmp_path / "c", mode=0o1777) == [os.getpid()]  # root's sticky dir, as /tmp
    assert _report_of(tmp_path / "d", group_write=True) == []  # nogroup's members could write it
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "real.out").write_text("")
    os.symlink(tmp_path / "e" / "real.out", tmp_path / "e" / "gcs_server.out")
    assert "is a symbolic link" in file_trust(str(tmp_path / "e" / "gcs_server.out")).reason
    os.link(tmp_path / "e" / "real.out", tmp_path / "e" / "hard.out")
    assert "hard links" in file_trust(str(tmp_path / "e" / "real.out")).reason
    t = file_trust(str(tmp_path / "a" / "logs" / "gcs_server.out"))
    assert t.uid == 0 and t.reason is None and stat.S_ISDIR(os.lstat(tmp_path).st_mode)


@contextlib.contextmanager
def _users_ray_logs(user: pwd.struct_passwd):
    """A Ray log directory (and its empty gcs_server.out) that belongs to `user` alone, under a tidy /tmp dir."""
    base = Path(tempfile.mkdtemp(prefix="swd-h29-own-", dir="/tmp"))
    try:
        base.chmod(0o755)
        logs = base / "ray" / "logs"
        logs.mkdir(parents=True)
        (logs / "gcs_server.out").write_text("")
        for p in (base / "ray", logs, logs / "gcs_server.out"):
            os.chown(p, user.pw_uid, user.pw_gid)
        yield logs
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_users_own_log_reports_only_that_users_processes_and_a_reused_pid_is_looked_up_again(tmp_path):
    user = _attacker()
    with _users_ray_logs(user) as logs:
        proc = tmp_path / "proc"  # the /proc the source stats for each workload process's owner
        for pid, uid in ((4242, user.pw_uid), (4243, 0)):
            (proc / str(pid)).mkdir(parents=True)
            os.chown(proc / str(pid), uid, 0)
        src = RayOomSource(str(logs), proc_root=str(proc))
        table = [SimpleNamespace(pid=4242, create_time=1.0), SimpleNamespace(pid=4243, create_time=1.0)]
        src.collect({"processes": table})

        def report(pid: int, processes) -> list:
            with open(logs / "gcs_server.out", "a") as fh:
                fh.write(_forged(pid))
            return [k.pid for k in src.collect({"processes": processes}).get("oom_kills", ())]

        assert report(4242, []) == [4242]  # the user's own process, gone since the last tick
        assert report(4243, []) == []  # root's process: not this user's to report
        os.chown(proc / "4242", 0, 0)  # pid 4242 reused by a root process started since
        assert report(4242, [SimpleNamespace(pid=4242, create_time=2.0)]) == []


def test_a_daemon_run_by_the_logs_own_user_reads_its_kills_of_any_process(tmp_path):
    """An owner running the daemon as themselves beside their own Ray: their log is the daemon's own user's,
    so a kill of a process the daemon never saw counts, as root's log does for a root daemon; the same log
    read by a daemon of another user still counts only for the owner's own processes."""
    user = _attacker()
    with _users_ray_logs(user) as logs:
        theirs = RayOomSource(str(logs), proc_root=str(tmp_path), own_uid=user.pw_uid)
        others = RayOomSource(str(logs), proc_root=str(tmp_path), own_uid=user.pw_uid + 1)
        theirs.collect({})
        others.collect({})
        with open(logs / "gcs_server.out", "a") as fh:
            fh.write(_forged(4321))  # a pid neither daemon saw in its workload table
        assert [k.pid for k in theirs.collect({}).get("oom_kills", ())] == [4321]
        assert others.collect({}) == {}
