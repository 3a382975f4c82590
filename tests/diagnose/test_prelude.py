"""The reboot after a wedge names what came before it; collateral victims are called out (issue 31, items 5-6)."""

from __future__ import annotations

from pathlib import Path

from spark_watchd.diagnose.collateral import collateral
from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.postmortem.bundle import is_critical
from spark_watchd.sample.kills import KillReport
from spark_watchd.sample.trace import read_trace

WEDGE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "wedge"


def _run(name):
    return list(Diagnoser().run(read_trace(WEDGE / f"{name}.jsonl")))


def _events(out, kind):
    return [e for d in out for e in d.events if e.kind == kind]


def test_the_reboot_after_an_oom_cascade_names_the_kills_sshd_and_the_usable_memory():
    """domenkogler/homelab incidents 0b and 2: nine kills in 39 s, sshd among them, then the host froze."""
    out = _run("oom_cascade_sshd_30s")
    (reboot,) = _events(out, "reboot")
    assert "the host froze 38 s after the OOM killer took 9 processes including sshd" in reboot.summary
    assert "usable memory 0.4 GiB" in reboot.summary and "no throttle" not in reboot.summary
    before = reboot.details["before_gap"]
    assert before["oom_kills"] == 9 and before["collateral"][:2] == ["sshd", "NetworkManager"]
    assert "VLLM::EngineCor" in before["oom_victims"]
    assert is_critical(reboot)  # a wedge seen at the next boot: the ring's minutes before it are bundled


def test_a_global_kill_of_system_services_is_collateral_with_advice_apart_from_the_workloads_death():
    out = _run("oom_cascade_sshd_30s")
    first, second = _events(out, "oom_kill")
    assert "collateral: sshd, NetworkManager, polkitd, nvidia-persistenc, pipewire" in first.summary
    assert "OOMScoreAdjust" in first.summary and first.details["collateral"][0] == "sshd"
    assert second.details["collateral"] == ["dbus-daemon"]  # the engine's own processes are not collateral
    g3 = next(d.findings["G3"] for d in out if first in d.events)
    assert g3.severity == "critical" and "collateral (sshd" in g3.summary
    assert any("OOMScoreAdjust" in a for a in g3.advice)
    engine_only = _events(_run("psi_blind_kill_30s"), "oom_kill")
    assert engine_only and all("collateral" not in e.details for e in engine_only)


def test_collateral_is_a_global_kill_of_a_system_service_never_a_memcg_one_or_the_engine():
    sshd = KillReport(ts=0, killer="kernel", pid=1, name="sshd", scope="global")
    assert collateral(sshd)
    assert collateral(KillReport(ts=0, killer="kernel", pid=2, name="systemd-journal", scope="global"))
    user = "/user.slice/user-1001.slice/user@1001.service/app.slice/foo.service"
    assert collateral(KillReport(ts=0, killer="kernel", pid=3, name="foo", scope="global", task_memcg=user))
    assert not collateral(KillReport(ts=0, killer="kernel", pid=4, name="sshd", scope="memcg"))
    docker = "/system.slice/docker-0efc.scope"
    assert not collateral(
        KillReport(ts=0, killer="kernel", pid=5, name="python3", scope="global", task_memcg=docker)
    )
    assert not collateral(KillReport(ts=0, killer="systemd-oomd", name="sshd"))


def test_the_reboot_after_an_engine_stall_wedge_names_the_stall():
    (reboot,) = _events(_run("engine_stall_wedge_5s"), "reboot")
    assert (
        "the host froze 1" in reboot.summary
        and "after vllm:8000 stalled with requests running" in reboot.summary
    )
    assert "usable memory 5.4 GiB" in reboot.summary


def test_nv_err_no_memory_with_a_roomy_pool_is_never_the_cause_of_a_deliberate_reboot():
    """7.0.0-1019-nvidia, CmaTotal 0: the lines at NCCL rendezvous with ~90 GiB usable are a driver fault."""
    samples = list(read_trace(WEDGE / "nomem_roomy_deliberate_reboot_30s.jsonl"))
    boot = next(i for i, s in enumerate(samples) if s.boot_id != samples[0].boot_id)
    d = Diagnoser()
    out = [d.observe(s) for s in samples[:boot]]
    # The driver alone would name the lines: they are inside its window before the end of the boot.
    assert "NV_ERR_NO_MEMORY" in d.driver.reboot_cause(samples[boot], samples[boot - 1].ts)
    assert all(x.findings["G3"].severity == "ok" for x in out)
    said = next(x.findings["G3"].summary for x in out if x.events)
    assert "GiB usable on 7.0.0-1019-nvidia (CmaTotal 0, no CMA region): a kernel/driver fault" in said
    assert "not pool pressure (recorded, not paged)" in said
    (reboot,) = _events([d.observe(s) for s in samples[boot:]], "reboot")
    assert "NV_ERR_NO_MEMORY" not in reboot.summary and "driver_cause" not in reboot.details
    assert "before_gap" not in reboot.details and not is_critical(reboot)


def test_a_kill_at_a_containers_own_limit_says_the_limit_is_the_fix():
    runway = WEDGE.parent / "runway" / "container_memcg_kill_30s.jsonl"
    (e,) = [e for d in Diagnoser().run(read_trace(runway)) for e in d.events if e.kind == "oom_kill"]
    assert "at its cgroup's own limit" in e.summary and "raise its memory limit" in e.summary


def test_a_wedge_after_a_thin_pool_without_kills_names_the_driver_fault_and_the_thin_pool():
    runway = WEDGE.parent / "runway" / "wedge_power_cycle_30s.jsonl"
    (reboot,) = [e for d in Diagnoser().run(read_trace(runway)) for e in d.events if e.kind == "reboot"]
    assert "NV_ERR_NO_MEMORY" in reboot.details["driver_cause"]  # the pool was thin: the line stays the cause
    assert reboot.summary.endswith("; it ended with usable memory 3.1 GiB (thin)")
    assert reboot.details["before_gap"]["usable_bytes"] < 4 * 1024**3 and is_critical(reboot)
