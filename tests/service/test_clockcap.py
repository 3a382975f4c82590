"""The clock-cap oneshot unit: rendered, verified by systemd-analyze, installed, removed with --clock-cap off."""

from __future__ import annotations

import subprocess

import pytest

from spark_watchd.commands import install_service
from spark_watchd.service import clockcap
from tests.commands.test_install_service import PY, Recorder, _args, _root
from tests.conftest import require_binary, run_cli


def test_the_unit_applies_the_cap_after_the_driver_and_before_the_daemon():
    text = clockcap.render_unit(2100, "/usr/bin/nvidia-smi")
    assert "Type=oneshot" in text and "RemainAfterExit=yes" in text
    assert "ExecStart=/usr/bin/nvidia-smi -lgc 0,2100" in text and "ExecStop=/usr/bin/nvidia-smi -rgc" in text
    assert "After=systemd-modules-load.service nvidia-persistenced.service" in text
    assert "Before=spark-watchd.service" in text and "WantedBy=multi-user.target" in text
    assert clockcap.installed_cap(text) == 2100 and clockcap.installed_cap("") is None


def test_systemd_analyze_verify_prints_nothing(tmp_path):
    exe = require_binary("systemd-analyze")
    path = tmp_path / clockcap.UNIT_NAME
    path.write_text(clockcap.render_unit(2100, "/usr/bin/true"))  # verify checks ExecStart exists
    proc = subprocess.run([exe, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout + proc.stderr == ""


@pytest.mark.parametrize("text", ["2", "99999", "fast", "-1"])
def test_a_cap_out_of_range_is_a_usage_error_naming_it(text, capsys):
    assert install_service.main(_args("--dry-run", "--clock-cap", text)) == 2
    assert "--clock-cap" in capsys.readouterr().err


def test_install_with_a_cap_writes_and_enables_the_cap_unit_first(tmp_path):
    root = _root(tmp_path)
    rec = Recorder()
    args = _args("--root", str(root), "--clock-cap", "2100", "--nvidia-smi", "/usr/bin/nvidia-smi")
    assert install_service.main(args, runner=rec) == 0
    unit = root / "etc/systemd/system" / clockcap.UNIT_NAME
    assert clockcap.installed_cap(unit.read_text()) == 2100
    assert (root / "etc/systemd/system/spark-watchd.service").exists()
    enables = [c for c in rec.calls if "enable" in c]
    assert enables[0][-1] == clockcap.UNIT_NAME and enables[-1][-1] == "spark-watchd.service"


def test_clock_cap_off_removes_only_the_cap_unit(tmp_path):
    root = _root(tmp_path)
    assert install_service.main(_args("--root", str(root), "--clock-cap", "2100"), runner=Recorder()) == 0
    rec = Recorder()
    assert install_service.main(_args("--root", str(root), "--clock-cap", "off"), runner=rec) == 0
    assert not (root / "etc/systemd/system" / clockcap.UNIT_NAME).exists()
    assert (root / "etc/systemd/system/spark-watchd.service").exists()
    assert rec.calls == [("systemctl", f"--root={root}", "disable", clockcap.UNIT_NAME)]


def test_uninstall_takes_the_cap_unit_with_it(tmp_path):
    root = _root(tmp_path)
    install_service.main(_args("--root", str(root), "--clock-cap", "2000"), runner=Recorder())
    assert install_service.main(_args("--root", str(root), "--uninstall"), runner=Recorder()) == 0
    assert not (root / "etc/systemd/system" / clockcap.UNIT_NAME).exists()


def test_dry_run_on_the_live_system_applies_the_cap_now_and_at_every_boot():
    proc = run_cli("install-service", "--dry-run", "--python", PY, "--clock-cap", "2100", "--nvidia-smi",
                   "/usr/bin/nvidia-smi")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "ExecStart=/usr/bin/nvidia-smi -lgc 0,2100" in proc.stdout
    assert f"# run: systemctl enable --now {clockcap.UNIT_NAME}" in proc.stdout
    off = run_cli("install-service", "--dry-run", "--clock-cap", "off")
    assert off.returncode == 0 and f"# run: systemctl disable --now {clockcap.UNIT_NAME}" in off.stdout
    assert "spark-watchd.service" not in off.stdout.replace(clockcap.UNIT_NAME, "")
