"""Hostile configuration: deep nesting, non-regular files, NUL bytes, uncreatable dirs, misspelled names: exit 78."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_watchd import cli
from spark_watchd.config import load_settings
from spark_watchd.errors import ConfigError


def _run(monkeypatch, capsys, *argv, env=None) -> tuple[int, str]:
    monkeypatch.delenv("SPARK_WATCHD_CONFIG", raising=False)
    # In-process runs must not reconfigure structlog for the tests that follow (capture_logs).
    monkeypatch.setattr("spark_watchd.commands.run.configure_logging", lambda *a, **k: None)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    rc = cli.main(["run", "--listen", "127.0.0.1:0", *argv])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("a" + ".b" * 100_000 + " = 1\n", "line 1: key 'a.b.b.b"),  # dotted keys
        ("[" + "a." * 100_000 + "b]\n", "line 1: key 'a.a.a"),  # a table header
        ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "key 'x': nested too deep"),  # arrays
        ("y = {" + "a = {" * 5_000 + "}" * 5_001 + "\n", "key 'y': nested too deep"),  # inline tables
        ("[notify]\nheaders = {a = {b = {c = {d = {e = {f = 1}}}}}}\n", "key 'notify.headers.a.b.c.d...'"),
    ],
    ids=["dotted", "header", "arrays", "inline", "deep-table"],
)
def test_deeply_nested_toml_exits_78_naming_the_key(tmp_path, monkeypatch, capsys, text, needle):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    t0 = time.monotonic()
    rc, err = _run(monkeypatch, capsys, "--config", str(cfg))
    assert rc == 78 and str(cfg) in err and needle in err and "Traceback" not in err, err
    assert time.monotonic() - t0 < 20  # no quadratic parse of a 100,000-part key


@pytest.mark.parametrize("path", ["/dev/zero", "DIR"])
def test_config_that_is_not_a_regular_file_exits_78_without_reading(tmp_path, monkeypatch, capsys, path):
    path = str(tmp_path) if path == "DIR" else path
    rc, err = _run(monkeypatch, capsys, env={"SPARK_WATCHD_CONFIG": path})
    assert rc == 78 and f"{path}: not a regular file" in err


def test_oversized_config_file_is_refused(tmp_path):
    cfg = tmp_path / "big.toml"
    cfg.write_text("# padding\n" * 200_000)
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_settings(str(cfg), environ={})


@pytest.mark.parametrize("key", ["state_dir", "record_dir"])
def test_nul_byte_in_a_directory_exits_78_naming_the_key(tmp_path, monkeypatch, capsys, key):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[daemon]\n{key} = "{tmp_path}/a\\u0000b"\n')
    rc, err = _run(monkeypatch, capsys, "--config", str(cfg))
    assert rc == 78 and f"key 'daemon.{key}'" in err and "NUL" in err, err


def test_record_dir_that_cannot_be_created_exits_78_naming_the_key(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc, err = _run(monkeypatch, capsys, "--state-dir", str(tmp_path / "s"), "--record", str(blocker / "rec"))
    assert rc == 78 and "key 'daemon.record_dir': cannot write" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("var", "hint"),
    [
        ("SPARK_WATCHD_DAEMON_INTERVAL", "SPARK_WATCHD_DAEMON__INTERVAL"),
        ("SPARK_WATCHD_DEAMON__INTERVAL", "SPARK_WATCHD_DAEMON__INTERVAL"),
        ("SPARK_WATCHD_INTERVAL", "SPARK_WATCHD_DAEMON__INTERVAL"),
        ("SPARK_WATCHD_SOURCES__PROC_ROT", "SPARK_WATCHD_SOURCES__PROC_ROOT"),
    ],
)
def test_misspelled_environment_variable_exits_78_with_a_hint(monkeypatch, capsys, var, hint):
    rc, err = _run(monkeypatch, capsys, env={var: "5"})
    assert rc == 78 and f"environment {var}: maps to no setting (did you mean {hint}?)" in err


def test_documented_variables_that_are_not_settings_are_allowed():
    env = {
        "SPARK_WATCHD_FAKE_NVML": "gb10",
        "SPARK_WATCHD_REQUIRE_E2E": "1",
        "SPARK_WATCHD_URL": "http://127.0.0.1:9761",
        "SPARK_WATCHD_TOKEN": "t",
        "SPARK_WATCHD_NOTIFY__HEADERS": '{"X-A": "b"}',
        "SPARK_WATCHD_DAEMON__INTERVAL": "5",
    }
    assert load_settings(None, environ=env).daemon.interval == 5


def test_misspelled_section_and_key_in_the_file_name_the_file_with_a_hint(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[deamon]\ninterval = 5\n")
    with pytest.raises(ConfigError, match=r"c.toml: key 'deamon': unknown key \(did you mean 'daemon'\?\)"):
        load_settings(str(cfg), environ={})
    cfg.write_text("[daemon]\nintervall = 5\n")
    with pytest.raises(
        ConfigError, match=r"key 'daemon.intervall': unknown key \(did you mean 'interval'\?\)"
    ):
        load_settings(str(cfg), environ={})


_KEY = st.sampled_from(["daemon", "sources", "interval", "a", "b", "x.y", '"q.r"', "notify", "headers"])
_VAL = st.recursive(
    st.integers().map(str)
    | st.floats(allow_nan=False).map(str)
    | st.text(max_size=5).map(repr)
    | st.booleans().map(lambda b: str(b).lower()),
    lambda v: (
        st.lists(v, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), v, max_size=2).map(
            lambda d: "{" + ", ".join(f"{k} = {x}" for k, x in d.items()) + "}"
        )
    ),
    max_leaves=8,
)
_LINE = st.tuples(st.booleans(), _KEY, _VAL).map(lambda t: f"[{t[1]}]" if t[0] else f"{t[1]} = {t[2]}")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_LINE, max_size=6), depth=st.integers(0, 3000))
def test_any_toml_loads_or_raises_config_error(tmp_path, lines, depth):
    cfg = tmp_path / "f.toml"
    cfg.write_text("\n".join(lines) + ("\nz = " + "[" * depth + "]" * depth if depth else "") + "\n")
    try:
        load_settings(str(cfg), environ={})
    except ConfigError as err:
        assert str(err)


def test_every_spark_watchd_variable_the_project_itself_sets_is_accepted():
    """CI and the tests set SPARK_WATCHD_* variables of their own (.ci/run's SPARK_WATCHD_CI_CACHE once made
    every daemon it started exit 78): each one the project names is a setting's variable or a known other."""
    import re
    import subprocess
    from pathlib import Path

    from spark_watchd.config import check_environment

    root = Path(__file__).resolve().parents[1]
    files = subprocess.run(
        ["git", "ls-files", ".ci", "packaging", "tests", "bench", "deploy", "systemd"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    named = set()
    for f in files:
        path = root / f
        if path.is_file() and path.suffix not in {".jsonl", ".gz", ".png", ".h"}:
            named |= set(re.findall(r"\bSPARK_WATCHD_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")))
    assert "SPARK_WATCHD_CI_CACHE" in named and len(named) > 10
    # Names the hostile-config tests make up on purpose to be refused.
    made_up = {v for v in named if re.search(r"DEAMON|PROC_ROT|INTERVL|WINDOW_MAX_SAMPLE\b|BOGUS", v)}
    made_up |= {"SPARK_WATCHD_DAEMON_INTERVAL", "SPARK_WATCHD_INTERVAL"}
    check_environment({v: "1" for v in named - made_up})
