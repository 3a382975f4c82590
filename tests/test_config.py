"""Configuration: file < SPARK_WATCHD_* environment < flags; bad values exit 78 naming file, key and reason."""

from __future__ import annotations

import pytest

from spark_watchd import cli
from spark_watchd.config import load_settings
from spark_watchd.errors import ConfigError
from tests.conftest import run_cli


def _write(tmp_path, text: str):
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_file_env_and_flags_compose_in_that_order(tmp_path):
    cfg = _write(tmp_path, '[daemon]\ninterval = 10\nlisten = "127.0.0.1:1111"\nstate_dir = "/x"\n')
    env = {"SPARK_WATCHD_DAEMON__INTERVAL": "20", "SPARK_WATCHD_DAEMON__LISTEN": "127.0.0.1:2222"}
    s = load_settings(str(cfg), {"daemon": {"interval": 30}}, environ=env)
    assert s.daemon.interval == 30  # flag beats env
    assert s.daemon.listen == "127.0.0.1:2222"  # env beats file
    assert s.daemon.state_dir == "/x"  # file beats default


def test_config_path_from_environment(tmp_path):
    cfg = _write(tmp_path, "[daemon]\ninterval = 42\n")
    s = load_settings(None, environ={"SPARK_WATCHD_CONFIG": str(cfg)})
    assert s.daemon.interval == 42


def test_nested_env_reaches_other_sections(tmp_path):
    s = load_settings(None, environ={"SPARK_WATCHD_SOURCES__PROC_ROOT": "/host/proc"})
    assert s.sources.proc_root == "/host/proc"


def test_out_of_range_value_names_file_key_and_reason(tmp_path):
    cfg = _write(tmp_path, "[daemon]\ninterval = 5000\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(str(cfg), environ={})
    msg = str(exc.value)
    assert msg.startswith(f"{cfg}: key 'daemon.interval': Input should be less than or equal to 3600")
    assert "5000" in msg


def test_unknown_key_is_refused(tmp_path):
    cfg = _write(tmp_path, "[daemon]\nintervall = 5\n")
    with pytest.raises(ConfigError, match=r"key 'daemon.intervall': unknown key"):
        load_settings(str(cfg), environ={})


def test_bad_environment_value_names_the_variable():
    with pytest.raises(ConfigError) as exc:
        load_settings(None, environ={"SPARK_WATCHD_DAEMON__INTERVAL": "soon"})
    assert str(exc.value).startswith("environment SPARK_WATCHD_DAEMON__INTERVAL: key 'daemon.interval':")


def test_cli_exits_78_naming_file_and_key(tmp_path):
    cfg = _write(tmp_path, "[daemon]\ninterval = 0\n")
    res = run_cli("run", "--config", str(cfg), timeout=30)
    assert res.returncode == 78
    assert f"{cfg}: key 'daemon.interval': Input should be greater than or equal to 1" in res.stderr


@pytest.mark.parametrize("verb", ["run", "once", "demo"])
def test_bad_toml_syntax_exits_78_with_line(tmp_path, capsys, verb):
    cfg = _write(tmp_path, '[daemon]\nlisten = "127.0.0.1:1"\ninterval = \n')
    assert cli.main([verb, "--config", str(cfg)]) == 78
    err = capsys.readouterr().err
    assert f"{cfg}: invalid TOML" in err and "line 3" in err


def test_missing_config_file_exits_78(tmp_path, capsys):
    assert cli.main(["record", str(tmp_path / "t.jsonl"), "--config", str(tmp_path / "absent.toml")]) == 78
    assert "absent.toml: file not found" in capsys.readouterr().err
    assert not (tmp_path / "t.jsonl").exists()


def test_bad_flag_value_exits_78(capsys):
    assert cli.main(["run", "--interval", "0.5"]) == 78
    assert "command line: key 'daemon.interval'" in capsys.readouterr().err


def test_listen_must_be_host_port():
    with pytest.raises(ConfigError, match=r"key 'daemon.listen': .*'localhost' is not HOST:PORT"):
        load_settings(None, environ={"SPARK_WATCHD_DAEMON__LISTEN": "localhost"})


def test_unwritable_default_state_dir_falls_back_per_user_but_an_explicit_one_is_an_error(
    tmp_path, monkeypatch
):
    from spark_watchd.commands.run import usable_state_dir

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    s = load_settings(None, {"daemon": {"state_dir": "/dev/null/cannot"}}, environ={})
    assert usable_state_dir(s, explicit=False) == str(tmp_path / "xdg" / "spark-watchd")
    with pytest.raises(
        ConfigError, match=r"key 'daemon.state_dir': /dev/null/cannot is not a writable directory"
    ):
        usable_state_dir(s, explicit=True)
    assert "state_dir" in s.daemon.model_fields_set  # how run tells a configured dir from the default
    assert "state_dir" not in load_settings(None, environ={}).daemon.model_fields_set


def test_environment_lists_tables_and_whole_sections_are_json_and_keys_win_over_the_section():
    env = {
        "SPARK_WATCHD_DAEMON__ALLOWED_HOSTS": '["spark.example", "10.0.0.7"]',
        "SPARK_WATCHD_NOTIFY__HEADERS": '{"X-A": "1"}',
        "SPARK_WATCHD_NOTIFY__HEADERS__X_TOKEN": "abc",
        "SPARK_WATCHD_PROGRESS": '{"job_expiry_s": 120}',
        "spark_watchd_sources__proc_root": "/host/proc",  # names are case-insensitive
        "SPARK_WATCHD_DAEMON": '{"interval": 7, "log_level": "debug"}',
        "SPARK_WATCHD_DAEMON__INTERVAL": "9",
    }
    s = load_settings(None, environ=env)
    assert s.daemon.allowed_hosts == ["spark.example", "10.0.0.7"]
    assert s.notify.headers == {"X-A": "1", "x_token": "abc"}
    assert s.progress.job_expiry_s == 120 and s.sources.proc_root == "/host/proc"
    assert s.daemon.interval == 9 and s.daemon.log_level == "debug"


def test_a_list_in_the_environment_that_is_not_json_names_the_variable():
    with pytest.raises(ConfigError) as exc:
        load_settings(None, environ={"SPARK_WATCHD_DAEMON__ALLOWED_HOSTS": "a,b"})
    assert str(exc.value) == (
        "environment SPARK_WATCHD_DAEMON__ALLOWED_HOSTS: not valid JSON (a list or table is written as JSON)"
    )
