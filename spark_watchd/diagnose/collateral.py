"""Collateral victims: a global OOM kill of a system service, not of the workload that filled the pool.

Owners' logs (domenkogler/homelab docs/spark-incidents.md): the kernel's OOM killer took `sshd`,
`NetworkManager`, `polkitd` and `nvidia-persistenced`, and a desktop session's user@ slice (`pipewire`,
`dbus-daemon`, `systemd`, `(sd-pam)`), before the engine; the owner saw "SSH died", not "the model crashed".
Such a kill is called out as collateral, with advice that fits (protect sshd, cap the engine), apart from a
workload's death.
"""

from __future__ import annotations

import re

from spark_watchd.sample.kills import KillReport

# Services whose death takes the host's reachability or its GPU driver state with it (by process name).
_NAMES = re.compile(
    r"^(sshd|sshd-session|NetworkManager|polkitd|nvidia-persistenced|dbus-daemon|dbus-broker|systemd(-.*)?"
    r"|\(sd-pam\)|snapd|containerd|dockerd|rsyslogd|cron|gdm.*|gnome-.*|pipewire.*|wireplumber|Xorg|Xwayland)$"
)
# A user's own service manager and what runs under it (a desktop session), or a system unit that is not a
# container scope: the kernel names the victim's cgroup in task_memcg.
_CGROUPS = re.compile(
    r"/user@\d+\.service(/|$)|^/system\.slice/(?!docker-|libpod-|cri-containerd-)[^/]+\.service$"
)

ADVICE_COLLATERAL = (
    "The OOM killer took system services, not the workload that filled the pool: protect sshd with "
    "OOMScoreAdjust=-900 in a drop-in (sudo systemctl edit ssh), and give the engine a cap "
    "(vLLM --gpu-memory-utilization or --kv-cache-memory-bytes) so the pool never empties.",
)
# A kill at a cgroup's own limit, or with the pool roomy: the limit is the fix, not the pool.
ADVICE_LIMIT = (
    "Find the killed process's container or unit and raise its memory limit (docker run --memory, systemd "
    "MemoryMax=) or shrink what runs in it; the unified pool itself had room.",
)


def collateral(r: KillReport) -> bool:
    """Whether a kernel kill report took a system service under global pressure (not a cgroup's own limit)."""
    if r.killer != "kernel" or r.scope == "memcg":
        return False
    name = r.name or ""
    return bool(_NAMES.match(name)) or bool(r.task_memcg and _CGROUPS.search(r.task_memcg))


def collateral_names(reports) -> tuple[str, ...]:
    """The collateral victims' names in a sample's kill reports, in report order, each once."""
    out: list[str] = []
    for r in reports:
        if collateral(r) and (r.name or "?") not in out:
            out.append(r.name or "?")
    return tuple(out)
