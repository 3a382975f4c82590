"""The small rough edges a new owner hit (issue 14.11): each says what is wrong without noise or a traceback."""

from __future__ import annotations

import socket

from tests.conftest import run_cli


def test_one_shot_commands_do_not_promise_a_retry_in_0_s():
    out = run_cli("once", env={"SPARK_WATCHD_FAKE_NVML": "fail-init"})
    assert out.returncode == 0, out.stderr
    assert "source nvml down" in out.stdout
    assert "retry in 0 s" not in out.stdout + out.stderr


def test_a_bad_fake_nvml_value_is_a_configuration_error_not_a_traceback():
    for verb in (("once",), ("preflight",), ("thermal-log", "1", "--count", "1")):
        out = run_cli(*verb, env={"SPARK_WATCHD_FAKE_NVML": "bogus"})
        assert out.returncode == 78, (verb, out.stderr)
        assert "Traceback" not in out.stderr
        assert "SPARK_WATCHD_FAKE_NVML: expected gb10, none, fail-init" in out.stderr


def test_thermal_log_without_nvml_leaves_no_empty_file(tmp_path):
    csv = tmp_path / "thermal.csv"
    out = run_cli("thermal-log", "1", str(csv), "--count", "1", env={"SPARK_WATCHD_FAKE_NVML": "fail-init"})
    assert out.returncode == 1 and "NVML unavailable" in out.stderr
    assert not csv.exists()
    csv.write_text("kept\n")  # an existing log is the user's: never removed
    assert (
        run_cli(
            "thermal-log", "1", str(csv), "--count", "1", env={"SPARK_WATCHD_FAKE_NVML": "fail-init"}
        ).returncode
        == 1
    )
    assert csv.read_text() == "kept\n"


def test_demo_on_a_busy_port_says_how_to_pick_another(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = run_cli("demo", "--listen", f"127.0.0.1:{port}", "--state-dir", str(tmp_path), timeout=60)
    assert out.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--listen HOST:PORT" in out.stderr


def test_missing_sensors_are_not_called_missing_while_the_source_is_up(tmp_path, caplog):

    from spark_watchd.commands.run import _log_missing_sources, _missing_sources
    from spark_watchd.config import load_settings

    settings = load_settings(None, {"sources": {"sys_root": str(tmp_path)}}, environ={})
    lines = []

    class Log:
        def warning(self, msg, **kw):
            lines.append(("warning", msg))

        def info(self, msg, **kw):
            lines.append(("info", msg))

        def debug(self, msg, **kw):
            lines.append(("debug", msg))

    missing = _missing_sources(settings, Log())
    _log_missing_sources(missing, Log())
    assert "sensors" in {name for name, _ in missing}  # missing here, yet not expected down (run.py)
    sensors = [(lvl, m) for lvl, m in lines if m.startswith("sensors")]
    assert sensors and all(
        lvl == "info" and "sensors missing" not in m and "stays up" in m for lvl, m in sensors
    )


def test_an_unwritable_record_dir_is_named_without_a_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = run_cli(
        "run",
        "--record",
        str(blocker / "traces"),
        "--state-dir",
        str(tmp_path / "s"),
        "--listen",
        "127.0.0.1:0",
    )
    assert out.returncode == 78 and "Traceback" not in out.stderr
    assert f"key 'daemon.record_dir': cannot write {blocker / 'traces'}" in out.stderr
