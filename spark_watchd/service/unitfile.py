"""The systemd unit, rendered for one installation; `systemd/spark-watchd.service` is its default rendering.

`install-service` renders it with this interpreter, the chosen user and a watchdog derived from the
configured interval. `python -m spark_watchd.service.unitfile > systemd/spark-watchd.service` regenerates the
repository copy; a test keeps the two identical.
"""

from __future__ import annotations

import math
import sys

# The venv the README installs into: the shipped unit runs as written after the by-hand steps there.
DEFAULT_PYTHON = "/opt/spark-watchd/bin/python"
DEFAULT_USER = "spark-watchd"
DEFAULT_CONFIG = "/etc/spark-watchd/config.toml"
DEFAULT_INTERVAL_S = 30.0
# The daemon pings WATCHDOG=1 on each publish; allow this many intervals to pass without one.
WATCHDOG_INTERVALS = 4
WATCHDOG_MIN_S = 60

_DEVICE_GROUP_WHY = (
    "# /dev/nvidia* are root:video (0660) or 0666 depending on the driver's NVreg_DeviceFileMode.\n"
)
# journalctl -k (the previous boot's Xid / NV_ERR_NO_MEMORY lines, the live kernel log) reads the system
# journal, which only root and this group may read; nothing else is granted by it.
_JOURNAL_GROUP_WHY = (
    "# systemd-journal: read-only access to the kernel log (driver faults: Xid, NV_ERR_NO_MEMORY).\n"
)


def _supplementary(device_group: str | None, journal_group: str | None) -> str:
    groups = [g for g in (device_group, journal_group) if g]
    if not groups:
        return ""
    why = (_DEVICE_GROUP_WHY if device_group else "") + (_JOURNAL_GROUP_WHY if journal_group else "")
    return f"{why}SupplementaryGroups={' '.join(groups)}\n"


TEMPLATE = """# spark-watchd: live watch of DGX Spark (GB10) memory pressure, thermal throttling and contention.
# `spark-watchd install-service` writes this unit with this installation's interpreter and a
# WatchdogSec derived from the configured interval; see docs/operator.md for a manual install.
[Unit]
Description=spark-watchd DGX Spark (GB10) monitor: UMA pressure, thermal throttling, contention
Documentation=https://github.com/spark-watchd/spark-watchd/blob/main/docs/operator.md
After=network.target nvidia-persistenced.service
Wants=network.target

[Service]
# Ready (READY=1) only after the first snapshot is published; WATCHDOG=1 on every publish.
Type=notify
NotifyAccess=main
# {watchdog_comment}
WatchdogSec={watchdog_sec}
ExecStart={python} -m spark_watchd run --config {config}
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=5
TimeoutStopSec=20

User={user}
Group={group}
{supplementary}StateDirectory=spark-watchd
StateDirectoryMode=0750
ConfigurationDirectory=spark-watchd
# systemd leaves ConfigurationDirectory owned by root: 0755 so the service user can enter it.
ConfigurationDirectoryMode=0755
UMask=0027

# NVML opens only these character devices; everything else under /dev is hidden.
DevicePolicy=closed
DeviceAllow=/dev/nvidiactl rw
DeviceAllow=/dev/nvidia0 rw
DeviceAllow=/dev/nvidia-uvm rw
DeviceAllow=/dev/nvidia-uvm-tools rw
# Major 195 is "nvidia" in /proc/devices since driver 545 (GB10 ships 580), "nvidia-frontend" before.
DeviceAllow=char-nvidia rw
DeviceAllow=char-nvidia-frontend rw
DeviceAllow=char-nvidia-uvm rw
DeviceAllow=char-nvidia-caps rw

# Sandboxing: the daemon reads /proc (all users' PIDs) and /sys, writes only its StateDirectory.
ProtectSystem=strict
ProtectHome={protect_home}
PrivateTmp=yes
PrivateUsers=no
NoNewPrivileges=yes
CapabilityBoundingSet=
AmbientCapabilities=
# ProcSubset=all and ProtectProc=default: the process scan must see other users' /proc/PID
# (vLLM, Ollama, trainers); a hidepid= mount on /proc hides them anyway (docs/operator.md).
ProcSubset=all
ProtectProc=default
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
# CPython without a JIT never maps W+X pages; NVML via ctypes uses no callbacks (no libffi trampolines).
MemoryDenyWriteExecute=yes
RemoveIPC=yes
PrivateMounts=yes
KeyringMode=private
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged @resources
SystemCallErrorNumber=EPERM
# AF_INET*: Prometheus scrapes from other hosts. AF_NETLINK: glibc getaddrinfo(AI_ADDRCONFIG) asks the
# kernel over netlink which address families are configured (resolving a --listen host name).
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK

[Install]
WantedBy=multi-user.target
"""


def watchdog_seconds(interval_s: float) -> int:
    """WatchdogSec for a sampling interval: WATCHDOG_INTERVALS ticks, at least WATCHDOG_MIN_S."""
    return max(WATCHDOG_MIN_S, math.ceil(WATCHDOG_INTERVALS * float(interval_s)))


def render_unit(
    python: str = DEFAULT_PYTHON,
    user: str = DEFAULT_USER,
    group: str | None = None,
    config: str = DEFAULT_CONFIG,
    interval_s: float = DEFAULT_INTERVAL_S,
    device_group: str | None = "video",
    protect_home: str = "yes",
    journal_group: str | None = "systemd-journal",
) -> str:
    """The unit text for one installation (paths must not contain whitespace or quotes)."""
    for what, value in (("python", python), ("config", config), ("user", user)):
        if not value or any(c.isspace() or c in "\"'\\$%" for c in value):
            raise ValueError(f"{what} {value!r} cannot be written into a unit file unquoted")
    for what, value in (("python", python), ("config", config)):
        if not value.startswith("/"):
            raise ValueError(f"{what} {value!r} must be an absolute path in a unit file")
    wd = watchdog_seconds(interval_s)
    return TEMPLATE.format(
        python=python,
        config=config,
        user=user,
        group=group or user,
        watchdog_sec=wd,
        watchdog_comment=(
            f"{WATCHDOG_INTERVALS} x the {interval_s:g} s interval (at least {WATCHDOG_MIN_S} s): "
            "missed ticks and a slow NVML call never trip it."
        ),
        protect_home=protect_home,
        supplementary=_supplementary(device_group, journal_group),
    )


if __name__ == "__main__":
    sys.stdout.write(render_unit())
