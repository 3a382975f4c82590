"""Round 3's small rough edges (issue 19 §10): each says what is wrong, once, and where to look."""

from __future__ import annotations

import json
import re

import pytest

from spark_watchd.cli import VERBS
from spark_watchd.config import load_settings
from spark_watchd.errors import ConfigError
from tests.conftest import run_cli
from tests.support.fakes import CaptureServer, Reply


def _error(tmp_path, text: str, environ=None) -> str:
    cfg = tmp_path / "config.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_settings(str(cfg), environ=environ or {})
    return str(exc.value)


def test_status_accepts_host_port_without_a_scheme():
    body = json.dumps({"findings": {}, "fresh": True, "age_seconds": 1.0, "version": "x", "mode": "live"})
    with CaptureServer(lambda req: Reply(200, body.encode(), {"Content-Type": "application/json"})) as srv:
        hostport = srv.url.removeprefix("http://").rstrip("/")
        out = run_cli("status", "--url", hostport)
    assert "unknown url type" not in out.stderr and out.returncode == 3, out.stderr  # answered: no findings
    assert out.stdout.startswith("spark-watchd x on ")


def test_a_top_level_key_is_told_its_section(tmp_path):
    msg = _error(tmp_path, "interval = 5\n")
    assert "key 'interval': unknown key: 'interval' belongs under [daemon]" in msg


def test_log_level_in_any_case(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[daemon]\nlog_level = "DEBUG"\n')
    assert load_settings(str(cfg), environ={}).daemon.log_level == "debug"


def test_an_unknown_variable_gets_only_close_suggestions():
    with pytest.raises(ConfigError) as exc:
        load_settings(None, environ={"SPARK_WATCHD_BOGUS": "1"})
    assert str(exc.value) == "environment SPARK_WATCHD_BOGUS: maps to no setting"
    with pytest.raises(ConfigError) as exc:
        load_settings(None, environ={"SPARK_WATCHD_DAEMON__INTERVL": "5"})
    assert "(did you mean SPARK_WATCHD_DAEMON__INTERVAL?)" in str(exc.value)


def test_a_bad_listen_value_is_printed_once(tmp_path):
    msg = _error(tmp_path, '[daemon]\nlisten = "nohost"\n')
    assert msg.count("nohost") == 1, msg


@pytest.mark.parametrize("verb", [v for v, _m, _h in VERBS])
def test_every_help_lists_exit_codes(verb):
    out = run_cli(verb, "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert re.search(r"Exit status[^:]*: 0 ", text), text[-400:]


def test_status_help_shows_the_default_url_and_what_color_does():
    text = " ".join(run_cli("status", "--help", env={"SPARK_WATCHD_URL": ""}).stdout.split())
    assert "(default: http://127.0.0.1:9761)" in text
    assert "--color {auto,always,never} colour the severities" in text
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "Exit status (monitoring-plugin convention, for scripts): 0 ok, 1 warning, 2 critical" in text


def test_a_misspelt_verb_is_told_the_closest_one():
    out = run_cli("stauts")
    assert out.returncode == 2
    assert "unknown verb 'stauts' (did you mean 'status'?)" in out.stderr
