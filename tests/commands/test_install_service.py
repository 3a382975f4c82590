"""`spark-watchd install-service`: the planned actions, a real install into a temp root, uninstall."""

from __future__ import annotations

import argparse
import os

from spark_watchd.commands import install_service
from spark_watchd.service import configdoc, unitfile
from tests.conftest import run_cli


class Recorder:
    """Stands in for useradd/systemctl: records argv, answers rc."""

    def __init__(self, rc=0, fail_on=None):
        self.calls: list[tuple[str, ...]] = []
        self.rc, self.fail_on = rc, fail_on

    def __call__(self, argv):
        self.calls.append(tuple(argv))
        return 1 if self.fail_on and self.fail_on in argv else self.rc


# The interpreter the unit names, unless a test is about that: one any user may reach, outside /tmp and the
# homes. The suite's own (sys.executable) may sit anywhere: CI may clone under /tmp, which PrivateTmp refuses.
PY = "/opt/sw-venv/bin/python"


def _args(*argv):
    p = argparse.ArgumentParser()
    install_service.add_arguments(p)
    return p.parse_args(list(argv) if "--python" in argv else [*argv, "--python", PY])


def _root(tmp_path, users=("root",), groups=("root", "video", "systemd-journal")):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("".join(f"{u}:x:0:0::/:/bin/sh\n" for u in users))
    (root / "etc" / "group").write_text("".join(f"{g}:x:44:\n" for g in groups))
    return root


def test_dry_run_prints_every_file_and_command_and_touches_nothing(tmp_path):
    root = _root(tmp_path)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    proc = run_cli("install-service", "--dry-run", "--root", str(root), "--python", PY)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert (
        "# run: useradd --system --no-create-home --home-dir /var/lib/spark-watchd --shell /usr/sbin/nologin"
        in out
    )
    assert "--groups video" in out
    assert f"# write {root}/etc/spark-watchd/config.toml (mode 0640, group spark-watchd):" in out
    assert f"ExecStart={PY} -m spark_watchd run --config /etc/spark-watchd/config.toml" in out
    assert "WatchdogSec=120" in out
    assert f"# run: systemctl --root={root} enable spark-watchd.service" in out
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_dry_run_on_the_live_system_plans_reload_and_enable_now():
    py = PY
    proc = run_cli(
        "install-service", "--dry-run", "--user", "sparkmon", "--config", "/etc/sw/c.toml", "--python", py
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-2:] == [
        "# run: systemctl daemon-reload",
        "# run: systemctl enable --now spark-watchd.service",
    ]
    assert (
        "User=sparkmon" in lines
        and "ExecStart=" + py + " -m spark_watchd run --config /etc/sw/c.toml" in lines
    )


def test_install_into_a_root_writes_unit_and_config_and_creates_the_user(tmp_path):
    root = _root(tmp_path)
    rec = Recorder()
    assert install_service.main(_args("--root", str(root)), runner=rec) == 0
    unit = (root / "etc/systemd/system/spark-watchd.service").read_text()
    assert unit == unitfile.render_unit(python=PY)
    config = root / "etc/spark-watchd/config.toml"
    assert oct(config.stat().st_mode & 0o777) == "0o640"
    assert config.read_text() == configdoc.render()
    assert rec.calls[0][:2] == ("useradd", "--system") and rec.calls[0][-1] == "spark-watchd"
    assert ("--root", str(root)) == rec.calls[0][-3:-1]
    assert rec.calls[1] == ("systemctl", f"--root={root}", "enable", "spark-watchd.service")
    assert len(rec.calls) == 2


def test_existing_config_is_kept_and_its_interval_sets_the_watchdog(tmp_path):
    root = _root(tmp_path, users=("root", "spark-watchd"), groups=("root",))
    config = root / "etc/spark-watchd/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[daemon]\ninterval = 60\n")
    rec = Recorder()
    assert install_service.main(_args("--root", str(root)), runner=rec) == 0
    assert config.read_text() == "[daemon]\ninterval = 60\n"
    unit = (root / "etc/systemd/system/spark-watchd.service").read_text()
    assert "WatchdogSec=240\n" in unit
    # No video (nor systemd-journal) group on this host: asking for it would stop the unit from starting.
    assert "SupplementaryGroups" not in unit
    assert not any(c[0] == "useradd" for c in rec.calls)


def test_interpreter_under_home_gets_protecthome_read_only(tmp_path):
    root = _root(tmp_path)
    assert (
        install_service.main(_args("--root", str(root), "--python", "/home/ada/venv/bin/python"), Recorder())
        == 0
    )
    unit = (root / "etc/systemd/system/spark-watchd.service").read_text()
    assert "ProtectHome=read-only\n" in unit and "ExecStart=/home/ada/venv/bin/python -m" in unit


def test_uninstall_keeps_config_and_state_unless_purge(tmp_path):
    root = _root(tmp_path, users=("root", "spark-watchd"))
    assert install_service.main(_args("--root", str(root)), Recorder()) == 0
    (root / "var/lib/spark-watchd").mkdir(parents=True)
    rec = Recorder(rc=1)  # disabling a unit systemd never loaded fails; uninstall goes on
    assert install_service.main(_args("--root", str(root), "--uninstall"), rec) == 0
    assert not (root / "etc/systemd/system/spark-watchd.service").exists()
    assert (root / "etc/spark-watchd/config.toml").exists() and (root / "var/lib/spark-watchd").exists()
    rec = Recorder()
    assert install_service.main(_args("--root", str(root), "--uninstall", "--purge"), rec) == 0
    assert not (root / "etc/spark-watchd").exists() and not (root / "var/lib/spark-watchd").exists()
    assert rec.calls[-1] == ("userdel", "--root", str(root), "spark-watchd")


def test_a_failing_step_stops_the_install_and_is_named(tmp_path, capsys):
    root = _root(tmp_path, users=("root", "spark-watchd"))
    assert install_service.main(_args("--root", str(root)), Recorder(fail_on="enable")) == 1
    assert "systemctl --root=" in capsys.readouterr().err


def test_needs_root_on_the_live_system(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    rec = Recorder()
    args = _args("--user", "nobody-here-xyz", "--python", "/opt/sw-venv/bin/python")
    assert install_service.main(args, rec) == install_service.EX_NOPERM
    assert rec.calls == []
    assert "needs root" in capsys.readouterr().err


def test_purge_without_uninstall_is_a_usage_error():
    assert run_cli("install-service", "--purge", "--dry-run").returncode == 2


def test_a_relative_config_path_is_a_usage_error(tmp_path, capsys):
    root = _root(tmp_path)
    assert install_service.main(_args("--root", str(root), "--config", "config.toml"), Recorder()) == 2
    assert "must be an absolute path" in capsys.readouterr().err
    assert not (root / "etc/systemd").exists()


def _venv_linking_to(tmp_path, real_rel: str) -> tuple[str, str]:
    """A root holding /opt/venv/bin/python -> REAL_REL (as a venv's symlink to pyenv / uv / conda)."""
    root = _root(tmp_path)
    real = root / real_rel.lstrip("/")
    real.parent.mkdir(parents=True)
    real.write_text("#!/bin/sh\n")
    link = root / "opt/venv/bin/python"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    return str(root), "/opt/venv/bin/python"


def test_a_venv_linking_into_a_home_gets_protecthome_read_only(tmp_path):
    root, python = _venv_linking_to(tmp_path, "/root/.pyenv/versions/3.12.3/bin/python3.12")
    proc = run_cli("install-service", "--dry-run", "--root", root, "--python", python)
    assert proc.returncode == 0, proc.stderr
    assert "really /root/.pyenv/versions/3.12.3/bin/python3.12" in proc.stdout
    assert "ProtectHome=read-only" in proc.stdout and "ProtectHome=yes" not in proc.stdout
    assert install_service.main(_args("--root", root, "--python", python), Recorder()) == 0
    unit = (tmp_path / "root/etc/systemd/system/spark-watchd.service").read_text()
    assert "ProtectHome=read-only\n" in unit and f"ExecStart={python} -m" in unit


def test_an_interpreter_under_tmp_is_refused_in_dry_run_and_real_run(tmp_path, capsys):
    root, python = _venv_linking_to(tmp_path, "/tmp/uv/python/bin/python3")
    proc = run_cli("install-service", "--dry-run", "--root", root, "--python", python)
    assert proc.returncode == 2
    assert "really /tmp/uv/python/bin/python3" in proc.stderr and "PrivateTmp=yes" in proc.stderr
    assert proc.stdout == ""
    assert (
        install_service.main(_args("--root", root, "--python", "/var/tmp/venv/bin/python"), Recorder()) == 2
    )
    assert "PrivateTmp=yes" in capsys.readouterr().err
    assert not (tmp_path / "root/etc/systemd/system/spark-watchd.service").exists()


def test_without_a_journal_group_the_unit_asks_only_for_video(tmp_path):
    # A host without systemd-journal (no journald): driver faults then come from NVML events only.
    root = _root(tmp_path, groups=("root", "video"))
    assert install_service.main(_args("--root", str(root)), runner=Recorder()) == 0
    unit = (root / "etc/systemd/system/spark-watchd.service").read_text()
    assert "SupplementaryGroups=video\n" in unit and "systemd-journal" not in unit


def test_an_interpreter_the_service_user_cannot_reach_is_refused(tmp_path):
    # pyenv under a 0700 /root: ProtectHome=read-only would not help, the system user cannot enter /root.
    root, python = _venv_linking_to(tmp_path, "/root/.pyenv/versions/3.11.7/bin/python3.11")
    os.chmod(os.path.join(root, "root"), 0o700)
    proc = run_cli("install-service", "--dry-run", "--root", root, "--python", python)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "not reachable by the service user: /root is mode 0700" in proc.stderr
