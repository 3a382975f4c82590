"""README's by-hand service install, run as written in a scratch root, agrees with the shipped unit.

The block's own commands run under bash from the checkout (so `systemd/spark-watchd.service` is the
shipped unit). Only what would change this machine is stood in for: absolute paths live under a scratch
root, `sudo` runs its command, `useradd`, `chgrp` and `systemctl` record their argv, and `python3 -m venv`
makes a venv whose `bin/python` is this checkout's interpreter (no network for `pip install`). What the
unit then runs, as whom and on which config, must be exactly what the block made (issue 19 §3).
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys

from spark_watchd.config import load_settings
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
OPERATOR = (REPO / "docs" / "operator.md").read_text(encoding="utf-8")
UNIT = REPO / "systemd" / "spark-watchd.service"


def _readme_block() -> list[str]:
    start = README.index("```sh\n", README.index("**By hand**")) + 6
    body = README[start : README.index("\n```", start)]
    return [" ".join(ln.split()) for ln in body.replace("\\\n", " ").splitlines() if ln.strip()]


def _operator_block() -> list[str]:
    start = OPERATOR.index("```console\n", OPERATOR.index("### By hand")) + 11
    body = OPERATOR[start : OPERATOR.index("\n```", start)]
    cmds = []
    for ln in body.replace("\\\n", " ").splitlines():
        if ln.startswith("$ "):
            cmds.append(" ".join(ln[2:].split()))
    return [c for c in cmds if not c.startswith("systemctl status")]


def _directives(text: str) -> dict[str, str]:
    out = {}
    for ln in text.splitlines():
        if "=" in ln and not ln.startswith("#"):
            k, v = ln.split("=", 1)
            out.setdefault(k.strip(), v.strip())
    return out


SHIM = """#!/bin/sh
printf '%s\\0' "$(basename "$0")" "$@" >> "$SHIM_LOG"; printf '\\n' >> "$SHIM_LOG"
"""
SUDO = """#!/bin/sh
exec "$@"
"""
# `python3 -m venv DIR`: a venv whose python is this checkout's interpreter; any other python3 call is real.
PYTHON3 = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin"
  printf '#!/bin/sh\\nPYTHONPATH=%s exec %s "$@"\\n' "$REPO" "$REAL_PYTHON" > "$3/bin/python"
  printf '#!/bin/sh\\nprintf "pip %%s\\\\n" "$*" >> "$SHIM_LOG"\\n' > "$3/bin/pip"
  chmod +x "$3/bin/python" "$3/bin/pip"
  exit 0
fi
exec "$REAL_PYTHON" "$@"
"""


def _run_block(tmp_path):
    root, shims = tmp_path / "root", tmp_path / "shims"
    root.mkdir()
    shims.mkdir()
    for name, text in [("sudo", SUDO), ("python3", PYTHON3)] + [
        (n, SHIM) for n in ("useradd", "chgrp", "systemctl")
    ]:
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    script = "\n".join(_readme_block())
    # The block's absolute paths, inside the scratch root (which has what any systemd host has).
    script = re.sub(r"(?<![\w./-])/(opt|etc|var)/", lambda m: f"{root}/{m.group(1)}/", script)
    (root / "etc" / "systemd" / "system").mkdir(parents=True)
    log = tmp_path / "shim.log"
    env = {
        **os.environ,
        "PATH": f"{shims}:{os.environ['PATH']}",
        "SHIM_LOG": str(log),
        "REPO": str(REPO),
        "REAL_PYTHON": sys.executable,
    }
    env.pop("SPARK_WATCHD_CONFIG", None)
    proc = subprocess.run(
        ["bash", "-e", "-c", script], cwd=str(REPO), env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [
        [a for a in ln.split("\0") if a]
        for ln in log.read_text().split("\n")
        if ln and not ln.startswith("pip ")
    ]
    return root, calls


def test_the_readme_and_the_operator_guide_give_the_same_manual_steps():
    assert len(_readme_block()) >= 6
    assert _readme_block() == _operator_block()


def test_the_manual_block_as_written_installs_what_the_shipped_unit_runs(tmp_path):
    root, calls = _run_block(tmp_path)
    unit = (root / "etc" / "systemd" / "system" / "spark-watchd.service").read_text()
    assert unit == UNIT.read_text()  # the shipped unit, unedited
    d = _directives(unit)
    python, _, _, verb, _, config = shlex.split(d["ExecStart"])
    # The interpreter the unit runs is the venv the block made, and it has spark_watchd.
    installed = root / python.lstrip("/")
    assert installed.exists(), f"the unit runs {python}, which the manual steps never create"
    assert (
        subprocess.run(
            [str(installed), "-m", "spark_watchd", verb, "--help"], capture_output=True, timeout=60
        ).returncode
        == 0
    )
    # The config it reads is the one the block wrote: valid, readable by the service's group only.
    cfg = root / config.lstrip("/")
    assert cfg.exists(), f"the unit reads {config}, which the manual steps never write"
    load_settings(str(cfg), environ={})
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640
    user = d["User"]
    assert ["chgrp", d["Group"], str(cfg)] in calls
    # The user the unit runs as is the one the block creates, with its own group and the device group.
    (useradd,) = [c for c in calls if c[0] == "useradd"]
    assert useradd[-1] == user and "--user-group" in useradd and "--system" in useradd
    assert "video" in useradd[useradd.index("--groups") + 1].split(",")
    assert ["systemctl", "daemon-reload"] in calls
    assert ["systemctl", "enable", "--now", "spark-watchd"] in calls
