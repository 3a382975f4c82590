"""Kill reports: real kernel OOM reports, systemd-oomd and earlyoom entries, and what is never one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_watchd.sample.kills import KillReport, parse_kernel_oom, parse_killer_entry
from spark_watchd.sample.model import Sample, check_sample
from spark_watchd.sample.validate import FieldError

OOM = Path(__file__).resolve().parents[1] / "fixtures" / "kernel" / "oom"
_PREFIX = re.compile(r"^\[[^\]]*\]\s*")


def kernel_lines(name):
    """(ts, message) per line of a dmesg capture, the `[ts]` prefix stripped as journald stores MESSAGE."""
    return [(float(i), _PREFIX.sub("", ln)) for i, ln in enumerate((OOM / name).read_text().splitlines())]


def test_a_global_kill_on_a_7_0_kernel_names_victim_rss_and_cgroup():
    (k,) = parse_kernel_oom(kernel_lines("global_vllm_7.0_ubuntu.txt"))
    assert (k.killer, k.pid, k.name, k.scope) == ("kernel", 16014, "cicc", "global")
    assert k.constraint == "CONSTRAINT_NONE"
    assert k.task_memcg == "/user.slice/user-1000.slice/session-4.scope"
    assert (k.anon_rss_kb, k.file_rss_kb, k.shmem_rss_kb) == (2111980, 2412, 0)
    assert k.rss_bytes == (2111980 + 2412) * 1024


def test_a_container_killed_by_global_pressure_on_gb10_is_global_not_its_own_limit():
    (k,) = parse_kernel_oom(kernel_lines("gb10_container_global.txt"))
    assert (k.pid, k.name, k.scope, k.constraint) == (3742074, "lmcache", "global", "CONSTRAINT_NONE")
    assert k.task_memcg.startswith("/system.slice/docker-") and k.oom_memcg is None
    assert k.anon_rss_kb == 1058560 and k.shmem_rss_kb == 428


def test_a_memory_cgroup_limit_kill_is_memcg_with_the_cgroup_whose_limit_was_hit():
    (k,) = parse_kernel_oom(kernel_lines("memcg_lkml_5.2.txt"))
    assert (k.pid, k.name, k.scope, k.constraint) == (23793, "leaker", "memcg", "CONSTRAINT_MEMCG")
    assert k.oom_memcg == "/leaker" == k.task_memcg
    assert k.anon_rss_kb == 506500


def test_a_killed_line_without_its_summary_still_counts_and_a_stray_summary_does_not_pair():
    lines = kernel_lines("global_vllm_7.0_ubuntu.txt")
    (k,) = parse_kernel_oom([lines[1]])
    assert k.pid == 16014 and k.constraint is None and k.scope == "global"
    other = (0.0, lines[0][1].replace("pid=16014", "pid=1"))
    (k,) = parse_kernel_oom([other, lines[1]])
    assert k.constraint is None  # a summary for another pid is not this kill's


def _entry(message, unit, comm, transport="journal", ts_us=1_702_924_496_000_000):
    return {
        "MESSAGE": message,
        "_SYSTEMD_UNIT": unit,
        "_COMM": comm,
        "_TRANSPORT": transport,
        "__REALTIME_TIMESTAMP": str(ts_us),
    }


def _messages(name):
    return [ln.split("]: ", 1)[1] for ln in (OOM / name).read_text().splitlines()]


def test_systemd_oomd_kills_in_both_wordings_name_the_cgroup():
    killed, marked = _messages("systemd_oomd_journal.txt")
    k = parse_killer_entry(_entry(killed, "systemd-oomd.service", "systemd-oomd"))
    assert k.killer == "systemd-oomd" and k.pid is None
    assert k.cgroup.endswith("vte-spawn-dbb4a75e-031f-480d-924b-5de5af7579d2.scope")
    assert k.ts == pytest.approx(1_702_924_496.0)
    k = parse_killer_entry(_entry(marked, "systemd-oomd.service", "systemd-oomd"))
    assert k.cgroup == "/system.slice/systemd-journald.service" and k.name == "systemd-journald.service"


def test_earlyoom_kills_name_pid_and_resident_memory():
    first, second = _messages("earlyoom_journal.txt")
    k = parse_killer_entry(_entry(first, "earlyoom.service", "earlyoom"))
    assert (k.killer, k.pid, k.name, k.anon_rss_kb) == ("earlyoom", 29410, "cluster", 23964 * 1024)
    k = parse_killer_entry(_entry(second, "earlyoom.service", "earlyoom"))
    assert (k.pid, k.name) == (906175, "java")


@pytest.mark.parametrize(
    "unit, comm, transport",
    [
        ("user@1000.service", "logger", "syslog"),  # `logger "Killed /x due to ..."` from any user
        ("systemd-oomd.service", "bash", "journal"),  # right unit, wrong process
        ("earlyoom.service", "earlyoom", "kernel"),  # a kernel line is not earlyoom's
        (None, "systemd-oomd", "journal"),
    ],
)
def test_a_message_anyone_could_write_is_never_a_kill(unit, comm, transport):
    killed, _ = _messages("systemd_oomd_journal.txt")
    assert parse_killer_entry(_entry(killed, unit, comm, transport)) is None
    first, _ = _messages("earlyoom_journal.txt")
    assert parse_killer_entry(_entry(first, unit, comm, transport)) is None


def test_reports_round_trip_in_a_trace_sample_and_bad_ones_are_named():
    reports = parse_kernel_oom(kernel_lines("memcg_lkml_5.2.txt"))
    s = Sample(ts=1.0, oom_kills=tuple(reports))
    d = s.to_dict()
    assert Sample.from_dict(d) == s and d["oom_kills"][0]["scope"] == "memcg"
    assert "oom_kills" not in Sample(ts=1.0).to_dict()
    check_sample(d)
    bad = dict(d, oom_kills=[{"ts": 1.0, "killer": "me"}])
    with pytest.raises(FieldError, match=r"oom_kills\[0\]"):
        check_sample(bad)
    with pytest.raises(ValueError, match="killer"):
        Sample.from_dict({"v": 1, "ts": 1.0, "oom_kills": [{"ts": 1.0, "killer": "me"}]})
    with pytest.raises(ValueError, match="pid"):
        KillReport.from_dict({"ts": 1.0, "killer": "kernel", "pid": "12"})


def _journal(text, ts_us, **fields):
    import json

    entry = {
        "MESSAGE": text,
        "__REALTIME_TIMESTAMP": str(ts_us),
        "_TRANSPORT": "kernel",
        "SYSLOG_FACILITY": "0",
    }
    entry.update(fields)
    return json.dumps(entry)


def test_the_kernel_log_feed_reads_real_reports_and_ignores_the_same_text_from_user_space():
    from spark_watchd.sources.driverlog import read_journal

    lines = [
        _journal(t, 1_764_000_000_000_000 + i) for i, (_, t) in enumerate(kernel_lines("memcg_lkml_5.2.txt"))
    ]
    lines += [
        _journal(t, 1_764_000_001_000_000 + i)
        for i, (_, t) in enumerate(kernel_lines("global_vllm_7.0_ubuntu.txt"))
    ]
    # `logger` or a write to /dev/kmsg from user space: the same words, not the kernel's
    forged = "Out of memory: Killed process 4121 (VLLM::EngineCor) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB"
    lines.append(_journal(forged, 1_764_000_002_000_000, _TRANSPORT="syslog", SYSLOG_FACILITY="1"))
    lines.append(_journal(forged, 1_764_000_002_000_001, SYSLOG_IDENTIFIER="evil"))
    got = read_journal(lines, ctx={})
    kills = got.records["oom_kills"]
    assert [(k.pid, k.scope) for k in kills] == [(23793, "memcg"), (16014, "global")]
    assert kills[0].oom_memcg == "/leaker" and kills[1].task_memcg.endswith("session-4.scope")
    assert got.records["driver_events"] == []


def test_cgroup_v2_path_and_memory_events_as_the_kernel_writes_them():
    # Formats of Documentation/admin-guide/cgroup-v2.rst: /proc/PID/cgroup's `0::PATH`; memory.events keys.
    from spark_watchd.sample.kills import cgroup_v2_path, memory_events_oom_kill

    assert cgroup_v2_path("0::/system.slice/docker-3f2a.scope\n") == "/system.slice/docker-3f2a.scope"
    assert cgroup_v2_path("12:memory:/docker/3f2a\n1:name=systemd:/docker/3f2a\n") is None  # v1 only
    assert cgroup_v2_path("1:name=systemd:/x\n0::/user.slice\n") == "/user.slice"
    events = "low 0\nhigh 12\nmax 1284\noom 3\noom_kill 3\noom_group_kill 0\n"
    assert memory_events_oom_kill(events) == 3
    assert memory_events_oom_kill("low 0\nhigh 0\n") is None
    assert memory_events_oom_kill("oom_kill x\n") is None
