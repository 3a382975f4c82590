"""The CLI: one module per verb listed in VERBS, usage errors exit 2, configuration errors never a traceback."""

from __future__ import annotations

import importlib
import os
import pkgutil

import pytest

import spark_watchd.commands
from spark_watchd import __version__, cli
from spark_watchd.errors import ConfigError
from tests.conftest import run_cli


def test_every_command_module_is_a_verb_and_every_verb_has_add_arguments_and_main():
    listed = {modname for _verb, modname, _help in cli.VERBS}
    verbs_modules = {
        m.name for m in pkgutil.iter_modules(spark_watchd.commands.__path__)
        if hasattr(importlib.import_module(f"spark_watchd.commands.{m.name}"), "main")
    }  # fmt: skip
    assert verbs_modules == listed  # no verb hidden, none registered by an import side effect
    parser, modules = cli.build_parser()
    assert set(modules) == {verb for verb, _m, _h in cli.VERBS}
    assert all(callable(m.add_arguments) and callable(m.main) for m in modules.values())


def test_no_verb_prints_help_and_exits_2(capsys):
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert "usage: spark-watchd" in err and all(verb in err for verb, _m, _h in cli.VERBS)


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"spark-watchd {__version__}"


def test_a_configuration_error_deep_in_a_verb_exits_with_its_code_and_one_line(monkeypatch, capsys):
    def boom(args):
        raise ConfigError("SPARK_WATCHD_FAKE_NVML: not a fake")

    _parser, modules = cli.build_parser()
    monkeypatch.setattr(modules["once"], "main", boom)
    assert cli.main(["once"]) == 78
    assert (
        capsys.readouterr().err
        == "spark-watchd once: bad configuration: SPARK_WATCHD_FAKE_NVML: not a fake\n"
    )


def test_an_unknown_verb_is_a_usage_error_from_the_installed_entry_point():
    res = run_cli("frobnicate")
    assert res.returncode == 2 and "unknown verb 'frobnicate'" in res.stderr


def test_a_verb_imports_only_its_own_module_and_nothing_its_features_do_not_use():
    """The daemon's resident memory: `run` loads neither the other verbs nor optional or unused stacks."""
    import subprocess
    import sys

    code = (
        "import sys; from spark_watchd import cli; cli.build_parser('run');"
        "from spark_watchd import app; from spark_watchd.daemon import Runner;"
        "print(' '.join(sorted(sys.modules)))"
    )
    mods = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert "spark_watchd.commands.run" in mods
    others = {f"spark_watchd.commands.{m}" for _v, m, _h in cli.VERBS} - {"spark_watchd.commands.run"}
    assert not others & mods, others & mods
    assert not {"pydantic_settings", "bcrypt", "yaml", "apscheduler"} & mods


# What the default configuration never uses: the web config's TLS/basic-auth stack (bcrypt, yaml), the webhook
# notifier, the rolling recorder, the post-mortem report writer (until a bundle is written), the mistyped-name
# hints (difflib) and the idna codec (only a non-ASCII host name needs it).
UNUSED_BY_DEFAULT = {
    "bcrypt",
    "yaml",
    "difflib",
    "encodings.idna",
    "spark_watchd.web.auth",
    "spark_watchd.web.credentials",
    "spark_watchd.web.yamlguard",
    "spark_watchd.notify.notifier",
    "spark_watchd.snapshot.recorder",
    "spark_watchd.postmortem.html",
}


def test_a_running_daemon_on_the_default_config_has_not_imported_what_that_config_does_not_use(tmp_path):
    """The real `run` verb, started and stopped: sys.modules as it exits (a sitecustomize writes it)."""
    from spark_watchd.config import DEFAULT_CONFIG_PATH
    from tests.daemon_helpers import running_daemon

    site, out = tmp_path / "site", tmp_path / "modules.txt"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write('\\n'.join(sorted(sys.modules))))\n"
    )
    args = ("--state-dir", str(tmp_path / "state"), "--interval", "30")
    with running_daemon(*args, env={"PYTHONPATH": str(site)}) as (proc, _base):
        pass
    assert proc.returncode == 0
    mods = set(out.read_text().split())
    assert "spark_watchd.daemon" in mods and "spark_watchd.web.server" in mods  # it did run
    unused = UNUSED_BY_DEFAULT | ({"tomllib"} if not os.path.exists(DEFAULT_CONFIG_PATH) else set())
    assert not unused & mods, sorted(unused & mods)
    others = {f"spark_watchd.commands.{m}" for _v, m, _h in cli.VERBS} - {"spark_watchd.commands.run"}
    assert not others & mods, sorted(others & mods)


def test_help_for_one_verb_still_lists_every_verb(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    assert "--replay" in out
    _parser, modules = cli.build_parser("status")
    assert list(modules) == ["status"]
