"""Install (or --uninstall) the systemd unit, the spark-watchd user and a commented default config.

Every step is planned first as a list of actions (files to write or remove, argv to run; never a
shell), then printed (--dry-run) or carried out in order. Needs root unless --dry-run.
Exit status: 0 done, 1 a step failed (named), 2 usage, 77 not root.
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spark_watchd.errors import EX_NOPERM
from spark_watchd.service import clockcap, configdoc, unitfile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

UNIT_NAME = "spark-watchd.service"
STATE_DIR = "/var/lib/spark-watchd"

# ProtectHome=yes hides these; an interpreter living there needs ProtectHome=read-only.
HOME_PREFIXES = ("/home/", "/root/", "/run/user/")
# PrivateTmp=yes gives the service its own empty /tmp and /var/tmp: an interpreter there is gone.
TMP_PREFIXES = ("/tmp/", "/var/tmp/")


def interpreter_paths(python: str, root: str = "/") -> tuple[str, ...]:
    """The venv's python and the real interpreter its symlinks lead to (pyenv, uv, conda live in homes)."""
    real = os.path.realpath(_in_root(root, python))
    if os.path.abspath(root) != "/":
        base = os.path.realpath(root)
        real = "/" + os.path.relpath(real, base) if real.startswith(base + os.sep) else real
    return (python,) if real == python else (python, real)


def sandbox_for(python: str, root: str = "/") -> tuple[str, str | None]:
    """(ProtectHome value, note) for this interpreter; ValueError when the unit could never start."""
    paths = interpreter_paths(python, root)
    shown = python if len(paths) == 1 else f"{python} (really {paths[1]})"
    if any(p.startswith(TMP_PREFIXES) for p in paths):
        raise ValueError(
            f"interpreter {shown} lives under /tmp or /var/tmp, which the unit's PrivateTmp=yes hides from "
            "the service, so it would not start: install spark-watchd into a venv outside /tmp (e.g. "
            "python3 -m venv /opt/spark-watchd) and run its install-service"
        )
    closed = _closed_dir(paths[-1], root)
    if closed is not None:
        # A system user cannot pass a 0700 directory (pyenv under /root): the unit would fail with 203/EXEC.
        raise ValueError(
            f"interpreter {shown} is not reachable by the service user: {closed[0]} is mode {closed[1]:04o} "
            "(others may not enter it), so the unit would not start: create the venv from a system Python "
            "(e.g. /usr/bin/python3 -m venv /opt/spark-watchd) and run its install-service"
        )
    if any(p.startswith(HOME_PREFIXES) for p in paths):
        return (
            "read-only",
            f"interpreter {shown} is under a home directory: the unit uses ProtectHome=read-only",
        )
    return "yes", None


def _closed_dir(path: str, root: str = "/") -> tuple[str, int] | None:
    """The first directory on the way to `path` (inside root) that others may not enter, with its mode."""
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        rel = "/" + "/".join(parts[:i])
        try:
            mode = os.stat(_in_root(root, rel)).st_mode & 0o7777
        except OSError:
            return None  # not there (a planned path, a test root): nothing to judge
        if not mode & 0o001:
            return rel, mode
    return None


Runner = Callable[[Sequence[str]], int]


@dataclass(frozen=True)
class Action:
    """One step: write a file, remove a path, or run argv."""

    kind: str  # "write" | "remove" | "run" | "note"
    path: str = ""
    content: str = ""
    mode: int = 0o644
    group: str | None = None  # chgrp after writing (config readable by the service's group)
    argv: tuple[str, ...] = ()
    text: str = ""
    may_fail: bool = False  # e.g. disabling a unit that was never loaded

    def describe(self) -> str:
        """What --dry-run prints for this step."""
        if self.kind == "write":
            owner = f", group {self.group}" if self.group else ""
            body = self.content if self.content.endswith("\n") else self.content + "\n"
            return f"# write {self.path} (mode {self.mode:04o}{owner}):\n{body}# end of {self.path}"
        if self.kind == "remove":
            return f"# remove {self.path}"
        if self.kind == "run":
            return f"# run: {shlex.join(self.argv)}"
        return f"# note: {self.text}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `spark-watchd install-service`."""
    parser.add_argument(
        "--dry-run", action="store_true", help="print every action (files, commands), do nothing"
    )
    parser.add_argument("--user", default=unitfile.DEFAULT_USER, help="system user the daemon runs as")
    parser.add_argument("--config", default=unitfile.DEFAULT_CONFIG, help="config file the unit points at")
    parser.add_argument("--unit-dir", default="/etc/systemd/system")
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter for ExecStart (default: this one)"
    )
    parser.add_argument("--no-start", action="store_true", help="enable but do not start")
    parser.add_argument("--uninstall", action="store_true", help="stop, disable and remove the unit")
    parser.add_argument("--purge", action="store_true", help="with --uninstall: also config, state and user")
    parser.add_argument(
        "--root",
        default="/",
        help="install into this root (image builds; offline systemctl --root, no start)",
    )
    parser.add_argument(
        "--clock-cap",
        metavar="MHZ|off",
        help="also install a oneshot unit applying `nvidia-smi -lgc 0,MHZ` at every boot, after the driver and "
        "before the daemon; `off` stops (resetting the clocks) and removes it",
    )
    parser.add_argument(
        "--nvidia-smi", default=None, help="nvidia-smi the cap unit runs (default: found on PATH)"
    )


def _in_root(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _names_in(root: str, db: str) -> set[str] | None:
    """Names in <root>/etc/passwd or /etc/group for an offline root; None for the live system."""
    if os.path.abspath(root) == "/":
        return None
    try:
        with open(_in_root(root, f"/etc/{db}"), encoding="utf-8") as f:
            return {line.split(":", 1)[0] for line in f if ":" in line}
    except OSError:
        return set()


def _exists(name: str, root: str, db: str, lookup) -> bool:
    names = _names_in(root, db)
    if names is not None:
        return name in names
    try:
        lookup(name)
        return True
    except KeyError:
        return False


def user_exists(name: str, root: str = "/") -> bool:
    """Whether the account exists (in root's /etc/passwd when root is not /)."""
    return _exists(name, root, "passwd", pwd.getpwnam)


def group_exists(name: str, root: str = "/") -> bool:
    """Whether the group exists (in root's /etc/group when root is not /)."""
    return _exists(name, root, "group", grp.getgrnam)


def configured_interval(path: str) -> float:
    """[daemon] interval from an existing config (for WatchdogSec), the default otherwise."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return unitfile.DEFAULT_INTERVAL_S
    value = (data.get("daemon") or {}).get("interval", unitfile.DEFAULT_INTERVAL_S)
    return float(value) if isinstance(value, (int, float)) and value > 0 else unitfile.DEFAULT_INTERVAL_S


def plan_install(args: argparse.Namespace) -> list[Action]:
    """The install steps, in order."""
    root, offline = args.root, os.path.abspath(args.root) != "/"
    actions: list[Action] = []
    video = group_exists("video", root)
    if not user_exists(args.user, root):
        argv = [
            "useradd",
            "--system",
            "--no-create-home",
            "--home-dir",
            STATE_DIR,
            "--shell",
            "/usr/sbin/nologin",
        ]
        argv += ["--user-group"] + (["--groups", "video"] if video else [])
        argv += ["--root", os.path.abspath(root)] if offline else []
        actions.append(Action("run", argv=(*argv, args.user)))
    else:
        actions.append(Action("note", text=f"user {args.user} exists; keeping it"))
    if not video:
        actions.append(Action("note", text="no video group: /dev/nvidia* must be world-accessible (0666)"))

    config_path = _in_root(root, args.config)
    if os.path.exists(config_path):
        actions.append(Action("note", text=f"keeping existing config {args.config}"))
    else:
        actions.append(
            Action("write", path=config_path, content=configdoc.render(), mode=0o640, group=args.user)
        )

    protect_home, note = sandbox_for(args.python, root)
    if note:
        actions.append(Action("note", text=note))
    unit = unitfile.render_unit(
        python=args.python,
        user=args.user,
        config=args.config,
        interval_s=configured_interval(config_path),
        device_group="video" if video else None,
        protect_home=protect_home,
        # systemd refuses a unit naming a missing group; without it driver faults come from NVML only.
        journal_group="systemd-journal" if group_exists("systemd-journal", root) else None,
    )
    actions.append(Action("write", path=_in_root(root, os.path.join(args.unit_dir, UNIT_NAME)), content=unit))
    if offline:
        actions.append(
            Action("run", argv=("systemctl", f"--root={os.path.abspath(root)}", "enable", UNIT_NAME))
        )
    else:
        actions.append(Action("run", argv=("systemctl", "daemon-reload")))
        enable = (
            ("systemctl", "enable", UNIT_NAME)
            if args.no_start
            else ("systemctl", "enable", "--now", UNIT_NAME)
        )
        actions.append(Action("run", argv=enable))
    return actions


def _systemctl(root: str, *argv: str) -> tuple[str, ...]:
    offline = os.path.abspath(root) != "/"
    return ("systemctl", f"--root={os.path.abspath(root)}", *argv) if offline else ("systemctl", *argv)


def plan_clock_cap(args: argparse.Namespace, cap: int | None) -> list[Action]:
    """The cap unit's steps: write and enable it (applied now on a live system), or stop and remove it."""
    root, offline = args.root, os.path.abspath(args.root) != "/"
    path = _in_root(root, os.path.join(args.unit_dir, clockcap.UNIT_NAME))
    if cap is None:
        stop = ("disable",) if offline else ("disable", "--now")
        out = [
            Action("run", argv=_systemctl(root, *stop, clockcap.UNIT_NAME), may_fail=True),
            Action("remove", path=path),
        ]
        if not offline:
            out.append(Action("run", argv=("systemctl", "daemon-reload")))
        out.append(Action("note", text="clock cap off: the unit's stop ran nvidia-smi -rgc (clocks reset)"))
        return out
    smi = args.nvidia_smi or shutil.which("nvidia-smi") or clockcap.DEFAULT_NVIDIA_SMI
    out = [Action("write", path=path, content=clockcap.render_unit(cap, smi))]
    if offline:
        out.append(Action("run", argv=_systemctl(root, "enable", clockcap.UNIT_NAME)))
    else:
        out.append(Action("run", argv=("systemctl", "daemon-reload")))
        out.append(Action("run", argv=("systemctl", "enable", "--now", clockcap.UNIT_NAME)))
    out.append(
        Action(
            "note",
            text=f"clock cap {cap} MHz at every boot; the daemon flags a boot that runs above it "
            f"(set [thresholds] expected_clock_cap_mhz = {cap} to expect it from the first boot on)",
        )
    )
    return out


def plan_uninstall(args: argparse.Namespace) -> list[Action]:
    """The uninstall steps; config, state and user stay unless --purge."""
    root, offline = args.root, os.path.abspath(args.root) != "/"
    actions: list[Action] = []
    if offline:
        argv: tuple[str, ...] = ("systemctl", f"--root={os.path.abspath(root)}", "disable", UNIT_NAME)
    else:
        argv = ("systemctl", "disable", "--now", UNIT_NAME)
    actions.append(Action("run", argv=argv, may_fail=True))
    actions.append(Action("remove", path=_in_root(root, os.path.join(args.unit_dir, UNIT_NAME))))
    if os.path.exists(_in_root(root, os.path.join(args.unit_dir, clockcap.UNIT_NAME))):
        actions += [a for a in plan_clock_cap(args, None) if a.kind != "run" or "daemon-reload" not in a.argv]
    if not offline:
        actions.append(Action("run", argv=("systemctl", "daemon-reload")))
    if args.purge:
        actions.append(Action("remove", path=_in_root(root, os.path.dirname(args.config))))
        actions.append(Action("remove", path=_in_root(root, STATE_DIR)))
        if user_exists(args.user, root):
            argv = ["userdel"] + (["--root", os.path.abspath(root)] if offline else []) + [args.user]
            actions.append(Action("run", argv=tuple(argv)))
    else:
        actions.append(Action("note", text=f"keeping {args.config} and {STATE_DIR} (--purge removes them)"))
    return actions


def run_argv(argv: Sequence[str]) -> int:
    """Run one command (argv list, no shell), inheriting stdout/stderr."""
    try:
        return subprocess.run(list(argv), check=False).returncode
    except OSError as exc:
        print(f"spark-watchd install-service: {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 127


def execute(actions: Sequence[Action], runner: Runner = run_argv, log=print) -> int:
    """Carry the actions out in order; stop at the first failure and name it."""
    for a in actions:
        if a.kind == "note":
            log(f"note: {a.text}")
        elif a.kind == "write":
            os.makedirs(os.path.dirname(a.path), mode=0o755, exist_ok=True)
            tmp = a.path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(a.content)
            os.chmod(tmp, a.mode)
            if a.group:
                try:
                    os.chown(tmp, -1, grp.getgrnam(a.group).gr_gid)
                except (KeyError, PermissionError):
                    log(f"note: could not give {a.path} to group {a.group}; the service may not read it")
            os.replace(tmp, a.path)
            log(f"wrote {a.path}")
        elif a.kind == "remove":
            if os.path.isdir(a.path) and not os.path.islink(a.path):
                shutil.rmtree(a.path)
            elif os.path.lexists(a.path):
                os.unlink(a.path)
            log(f"removed {a.path}")
        elif a.kind == "run":
            rc = runner(a.argv)
            log(f"ran {shlex.join(a.argv)} (exit {rc})")
            if rc != 0 and not a.may_fail:
                print(
                    f"spark-watchd install-service: {shlex.join(a.argv)} failed (exit {rc})", file=sys.stderr
                )
                return 1
    return 0


def main(args: argparse.Namespace, runner: Runner = run_argv) -> int:
    """Plan, then print or carry out."""
    if args.purge and not args.uninstall:
        print("spark-watchd install-service: --purge only goes with --uninstall", file=sys.stderr)
        return 2
    try:
        cap_given = getattr(args, "clock_cap", None) is not None
        cap = clockcap.parse_cap(args.clock_cap) if cap_given else None
        if cap_given and cap is None and not args.uninstall:
            actions = plan_clock_cap(args, None)  # --clock-cap off: only the cap unit goes
        else:
            actions = plan_uninstall(args) if args.uninstall else plan_install(args)
            if cap is not None and not args.uninstall:  # first: the cap is on before the daemon starts
                actions = plan_clock_cap(args, cap) + actions
    except ValueError as exc:  # a path that cannot go into a unit file, a cap out of range
        print(f"spark-watchd install-service: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("PYTHONPATH") and not args.uninstall:
        actions.insert(0, Action("note", text="PYTHONPATH is set here but the service will not inherit it"))
    if args.dry_run:
        for a in actions:
            print(a.describe())
        return 0
    if os.geteuid() != 0 and os.path.abspath(args.root) == "/":
        print(
            "spark-watchd install-service: needs root (run it with sudo, or see --dry-run)", file=sys.stderr
        )
        return EX_NOPERM
    return execute(actions, runner)
