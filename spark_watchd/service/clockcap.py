"""The oneshot unit that re-applies the owner's SM clock cap at every boot (`install-service --clock-cap`).

The driver forgets `nvidia-smi -lgc` at every boot, so a cap that keeps a Spark out of G4 must be applied
again each time: after the driver is up (nvidia-persistenced holds it initialised) and before the daemon
starts reading clocks, so the first samples already show the capped clock. Stopping the unit (`--clock-cap
off`) resets the clocks. GB10 accepts no power limit (`nvidia-smi -pl` answers "not supported"): the clock
cap is the one lever.
"""

from __future__ import annotations

import re

UNIT_NAME = "spark-watchd-clock-cap.service"
DEFAULT_NVIDIA_SMI = "/usr/bin/nvidia-smi"
MIN_MHZ, MAX_MHZ = 300, 4000
_CAP_LINE = re.compile(r"^ExecStart=\S+ -lgc 0,(\d+)\s*$", re.M)

TEMPLATE = """# spark-watchd: re-apply the SM clock cap {cap} MHz at every boot (the driver forgets nvidia-smi -lgc).
# Written by `spark-watchd install-service --clock-cap {cap}`; `--clock-cap off` stops it (resetting the
# clocks) and removes it. GB10 accepts no power limit: the clock cap is the lever against G4.
[Unit]
Description=spark-watchd: SM clock cap {cap} MHz (nvidia-smi -lgc 0,{cap})
Documentation=https://github.com/spark-watchd/spark-watchd/blob/main/docs/operator.md
# After the driver is loaded and held initialised; before the daemon samples its first clocks.
After=systemd-modules-load.service nvidia-persistenced.service
Wants=nvidia-persistenced.service
Before=spark-watchd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={nvidia_smi} -lgc 0,{cap}
ExecStop={nvidia_smi} -rgc
# Locking clocks needs root; nothing else does.
NoNewPrivileges=yes
ProtectHome=yes
PrivateTmp=yes
ProtectSystem=full

[Install]
WantedBy=multi-user.target
"""


def parse_cap(text: str) -> int | None:
    """`2100` -> 2100; `off` -> None; ValueError naming the range otherwise."""
    if text.strip().lower() == "off":
        return None
    try:
        cap = int(text)
    except ValueError:
        raise ValueError(f"--clock-cap {text!r}: expected MHz ({MIN_MHZ}-{MAX_MHZ}) or off") from None
    if not MIN_MHZ <= cap <= MAX_MHZ:
        raise ValueError(f"--clock-cap {cap}: expected MHz in {MIN_MHZ}-{MAX_MHZ} (GB10 boosts to ~2418)")
    return cap


def render_unit(cap: int, nvidia_smi: str = DEFAULT_NVIDIA_SMI) -> str:
    """The oneshot unit text for one cap."""
    if not nvidia_smi.startswith("/") or any(c.isspace() or c in "\"'\\$%" for c in nvidia_smi):
        raise ValueError(f"nvidia-smi {nvidia_smi!r} must be an absolute path without spaces or quotes")
    return TEMPLATE.format(cap=int(cap), nvidia_smi=nvidia_smi)


def installed_cap(unit_text: str | None) -> int | None:
    """The cap an installed unit applies (None: no unit, or not one of ours)."""
    m = _CAP_LINE.search(unit_text or "")
    return int(m.group(1)) if m else None
