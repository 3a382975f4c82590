"""Who killed it: each vanished workload gets the cause its killer reported, in words, counted by kind."""

from __future__ import annotations

import dataclasses

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.runtime import DiagnosisRuntime
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sample.kills import KillReport, parse_kernel_oom
from tests.diagnose.diag_builders import Host, proc
from tests.sample.test_kills import kernel_lines

VLLM = ["vllm", "serve", "Qwen/Qwen3-32B"]
TRAINER = ["python3", "train.py", "--config", "qlora.yaml"]


def _run(steps, th=None):
    """steps: list of (processes, extra Sample fields, oom delta); the events of every sample."""
    h = Host()
    d = Diagnoser(th or Thresholds())
    out = []
    for procs, extra, oom in steps:
        s = h.sample(processes=procs, oom=oom, avail_gib=40.0)
        if extra:
            s = dataclasses.replace(s, **{k: (v(s.ts) if callable(v) else v) for k, v in extra.items()})
        out.append(d.observe(s))
    return [e for x in out for e in x.events if e.kind in ("workload_exit", "oom_kill")]


def _vllm():
    return [
        proc(4100, VLLM, 1.8, 0.0, resident=False, create_time=900.0, ppid=1),
        proc(4121, ["VLLM::EngineCore"], 1.2, 61.0, create_time=901.0, ppid=4100),
    ]


def _kernel(pid, name, scope="global", memcg=None):
    return lambda ts: (
        KillReport(
            ts, "kernel", pid, name, scope, "CONSTRAINT_MEMCG" if scope == "memcg" else "CONSTRAINT_NONE",
            memcg, memcg, None, 64_172_032, 1234, 0, "Out of memory: Killed process ...",
        ),
    )  # fmt: skip


def test_a_global_kill_names_the_victim_its_resident_memory_and_global_pressure():
    events = _run([(_vllm(), None, 0)] * 3 + [([], {"oom_kills": _kernel(4121, "VLLM::EngineCor")}, 1)])
    oom, exit_ = events
    assert oom.kind == "oom_kill"
    assert oom.summary.startswith(
        "The kernel OOM killer killed VLLM::EngineCor (pid 4121, 61.2 GiB resident)"
    )
    assert exit_.kind == "workload_exit" and exit_.gotcha == "G3"
    assert exit_.details["cause"] == "oom_kill_global" and exit_.details["workload_kind"] == "vllm"
    assert exit_.summary == (
        "The kernel OOM killer killed VLLM::EngineCore (pid 4121, 61.2 GiB resident) under global memory "
        "pressure; vllm (pid 4100) went with it"
    )


def test_a_container_at_its_own_limit_is_a_memcg_kill_not_global_pressure():
    cg = "/system.slice/docker-3f2a.scope"
    trainer = [proc(5200, TRAINER, 30.0, 20.0, create_time=800.0, ppid=1)]
    events = _run([(trainer, None, 0)] * 3 + [([], {"oom_kills": _kernel(5200, "python3", "memcg", cg)}, 1)])
    (exit_,) = [e for e in events if e.kind == "workload_exit"]
    assert exit_.details["cause"] == "oom_kill_memcg"
    assert f"at its own memory limit ({cg}), not global pressure" in exit_.summary


def test_a_report_that_lands_a_tick_late_still_names_the_killer():
    late = {"oom_kills": _kernel(4121, "VLLM::EngineCor")}
    events = _run([(_vllm(), None, 0)] * 3 + [([], None, 1), ([], late, 0)])
    (exit_,) = [e for e in events if e.kind == "workload_exit"]
    assert exit_.details["cause"] == "oom_kill_global"


def test_systemd_oomd_and_earlyoom_are_named_from_their_reports():
    trainer = [proc(5200, TRAINER, 30.0, 20.0, create_time=800.0, ppid=1)]
    oomd = {
        "oom_kills": lambda ts: (
            KillReport(ts, "systemd-oomd", name="trainer.service", cgroup="/system.slice/trainer.service"),
        )
    }
    (e,) = [x for x in _run([(trainer, None, 0)] * 3 + [([], oomd, 0)]) if x.kind == "workload_exit"]
    assert e.details["cause"] == "systemd_oomd" and "cgroup /system.slice/trainer.service" in e.summary
    early = {"oom_kills": lambda ts: (KillReport(ts, "earlyoom", 5200, "python3", anon_rss_kb=30 << 20),)}
    (e,) = [x for x in _run([(trainer, None, 0)] * 3 + [([], early, 0)]) if x.kind == "workload_exit"]
    assert e.details["cause"] == "earlyoom"


def test_the_driver_out_of_memory_before_a_death_is_its_cause_and_a_plain_exit_is_an_exit():
    trainer = [proc(5200, TRAINER, 30.0, 20.0, create_time=800.0, ppid=1)]
    nv = {
        "driver_events": lambda ts: (
            DriverEvent(
                ts,
                None,
                None,
                "journal",
                "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051)",
            ),
        )
    }
    steps = [(trainer, None, 0)] * 2 + [(trainer, nv, 0)] + [([], None, 0)] * 4
    (e,) = [x for x in _run(steps) if x.kind == "workload_exit"]
    assert e.details["cause"] == "driver" and "NV_ERR_NO_MEMORY" in e.summary
    (e,) = [x for x in _run([(trainer, None, 0)] * 3 + [([], None, 0)] * 4) if x.kind == "workload_exit"]
    assert e.details["cause"] == "exit" and e.gotcha == "" and "exited" in e.summary


def test_a_launcher_following_its_killed_engine_is_counted_once(tmp_path):
    engine_only = [_vllm()[0]]
    steps = [(_vllm(), None, 0)] * 3 + [(engine_only, {"oom_kills": _kernel(4121, "VLLM::EngineCor")}, 1)]
    steps += [([], None, 0)] * 4
    rt = DiagnosisRuntime(Thresholds(), tmp_path)
    h = Host()
    exits = []
    for procs, extra, oom in steps:
        s = h.sample(processes=procs, oom=oom, avail_gib=40.0)
        if extra:
            s = dataclasses.replace(s, **{k: v(s.ts) for k, v in extra.items()})
        exits += [e for e in rt.observe(s).events if e.kind == "workload_exit"]
    (e,) = exits  # one workload_exit per workload: the launcher leaving a tick later gives no second one
    assert e.details["cause"] == "oom_kill_global"
    assert rt.workload_exit_counts() == {"vllm:oom_kill_global": 1}
    rt.close()
    assert DiagnosisRuntime(Thresholds(), tmp_path).workload_exit_counts() == {"vllm:oom_kill_global": 1}


def test_real_reports_flow_through_the_engine():
    (r,) = parse_kernel_oom(kernel_lines("memcg_lkml_5.2.txt"))
    leaker = [proc(23793, ["python3", "train.py"], 0.5, 0.0, create_time=800.0, ppid=1)]
    steps = [(leaker, None, 0)] * 3 + [([], {"oom_kills": lambda ts: (dataclasses.replace(r, ts=ts),)}, 1)]
    oom, e = _run(steps)
    assert "leaker (pid 23793, 0.5 GiB resident) at its cgroup's own limit (/leaker)" in oom.summary
    assert e.details["cause"] == "oom_kill_memcg" and e.details["report"]["oom_memcg"] == "/leaker"


def _memcg(pid, name, cg="/system.slice/docker-3f2a.scope"):
    text = f"{cg}/memory.events oom_kill 2 -> 3"
    return lambda ts: (KillReport(ts, "memcg", pid, name, "memcg", None, cg, cg, cg, text=text),)


def test_a_cgroup_counter_without_a_kernel_report_is_a_memcg_kill_after_the_grace():
    trainer = [proc(5200, TRAINER, 30.0, 20.0, create_time=800.0, ppid=1)]
    steps = [(trainer, None, 0)] * 3 + [([], {"oom_kills": _memcg(5200, "python3")}, 1)]
    steps += [([], None, 0)] * 2  # 30 s ticks: the 60 s grace for a kernel report passes
    (e,) = [x for x in _run(steps) if x.kind == "workload_exit"]
    assert e.details["cause"] == "oom_kill_memcg" and e.gotcha == "G3"
    assert e.details["report"]["killer"] == "memcg"
    assert "in its cgroup /system.slice/docker-3f2a.scope at its own memory limit, not global" in e.summary
    assert "memory.events oom_kill rose; no kernel report read" in e.summary


def test_a_server_whose_processes_leave_in_consecutive_samples_is_one_exit():
    """A vLLM stopping: its EngineCore leaves, its launcher 30 s later; one workload_exit naming both."""
    engine_only = [_vllm()[0]]
    steps = [(_vllm(), None, 0)] * 3 + [(engine_only, None, 0)] + [([], None, 0)] * 5
    (e,) = [x for x in _run(steps) if x.kind == "workload_exit"]
    assert e.details["cause"] == "exit" and sorted(e.details["pids"]) == [4100, 4121]
    assert "VLLM::EngineCore (pid 4121" in e.summary and "vllm (pid 4100) went with it" in e.summary


def test_an_ollama_runner_ending_while_its_server_stays_is_an_unload_not_an_exit():
    serve = proc(3600, ["/usr/local/bin/ollama", "serve"], 0.5, 0.5, create_time=100.0, ppid=1)
    runner = proc(
        3700, ["/usr/local/bin/ollama", "runner", "--model", "m"], 1.2, 21.0, create_time=900.0, ppid=3600
    )
    steps = [([serve, runner], None, 0)] * 3 + [([serve], None, 0)] * 4
    h, d, events = Host(), Diagnoser(Thresholds()), []
    for procs, _, oom in steps:
        events += d.observe(h.sample(processes=procs, oom=oom, avail_gib=40.0)).events
    assert [e.kind for e in events if e.kind in ("workload_exit", "unload")] == ["unload"]
    (u,) = [e for e in events if e.kind == "unload"]
    assert u.details["pids"] == [3700] and "Ollama unloaded a model" in u.summary
    # The server itself going is an exit.
    steps = [([serve, runner], None, 0)] * 3 + [([], None, 0)] * 4
    assert [e.details["cause"] for e in _run(steps) if e.kind == "workload_exit"] == ["exit"]


def test_the_kernels_report_landing_late_names_it_better_than_the_counter():
    cg = "/system.slice/docker-3f2a.scope"
    trainer = [proc(5200, TRAINER, 30.0, 20.0, create_time=800.0, ppid=1)]
    late = {"oom_kills": _kernel(5200, "python3", "memcg", cg)}
    steps = [(trainer, None, 0)] * 3 + [([], {"oom_kills": _memcg(5200, "python3")}, 1), ([], late, 0)]
    steps += [([], None, 0)] * 2
    (e,) = [x for x in _run(steps) if x.kind == "workload_exit"]
    assert e.details["cause"] == "oom_kill_memcg" and e.details["report"]["killer"] == "kernel"
    assert "61.2 GiB resident) at its own memory limit (/system.slice" in e.summary


def test_a_ray_memory_monitor_kill_of_a_vanished_pid_is_ray_oom_in_words():
    from spark_watchd.sample.kills import parse_ray_oom
    from tests.sample.ray_log import LEASE_EXIT, LEASE_MEMORY

    worker = [proc(3048142, ["ray::WorkerDict"], 49.0, 0.0, create_time=800.0, ppid=1)]
    ray = {"oom_kills": lambda ts: (parse_ray_oom(ts, f"{LEASE_EXIT}\n{LEASE_MEMORY}"),)}
    (e,) = [x for x in _run([(worker, None, 0)] * 3 + [([], ray, 0)]) if x.kind == "workload_exit"]
    assert e.details["cause"] == "ray_oom" and e.gotcha == "G3"
    assert e.summary == (
        "Ray's memory monitor killed ray::WorkerDict (pid 3048142, 49.2 GB) with the node at 95.7% of memory "
        "(threshold 95%)"
    )
    # a report for a pid that is still in the table (or never was) attributes nothing
    other = {"oom_kills": lambda ts: (dataclasses.replace(ray["oom_kills"](ts)[0], pid=1),)}
    (e,) = [
        x
        for x in _run([(worker, None, 0)] * 3 + [([], other, 0)] + [([], None, 0)] * 8)
        if x.kind == "workload_exit"
    ]
    assert e.details["cause"] == "exit"
